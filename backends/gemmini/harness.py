"""Generating the C harness that runs one version of a kernel on seeded inputs.

The harness and the kernel's file are one translation unit (``harness.c`` includes the
candidate file), so the harness sees the file's ``#define``s, types and the kernel itself.
Every harness function lives in the harness text section; the Spike extension honours the
measure and snapshot commands only from there, so code in the candidate cannot fake timing
or snapshots. The verdict is decided on the host from the snapshots (see
:mod:`.verdicts`); nothing the program prints or returns can make a candidate pass.

Per seed the harness: fills every input with seeded data (full range, extremes, or a small
range, by seed position), poisons every output with seeded garbage, takes snapshot "pre",
calls the kernel (the first seed's call is the measured region, closed by a Gemmini fence),
and takes snapshot "post". The host then checks: inputs after == inputs before == what
the original's run saw, and every output byte == the original's.
"""

from __future__ import annotations

from dataclasses import dataclass

from .signature import ArrayParam, Signature

# Names every generated symbol starts with; candidate code may not use them.
RESERVED_PREFIX = "autocomp_"
HARNESS_HEADER = "autocomp_harness.h"
CANDIDATE_FILE = "kernel.c"
HARNESS_FILE = "harness.c"

# Data modes, chosen by the seed's position in the seed list.
MODES = ("full-range", "extremes", "small-range")


@dataclass(frozen=True)
class HarnessPlan:
    """What one generated harness needs from the host: its C text, the regions to snapshot
    (name -> ELF symbol; lengths come from the ELF) and how many snapshots it takes."""

    source: str
    region_symbols: dict[str, str]
    snapshots_per_run: int
    seeds: tuple[int, ...]


def symbol_for(param: ArrayParam) -> str:
    return f"{RESERVED_PREFIX}arr_{param.name}"


_PRELUDE = r"""
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include "gemmini.h"
#include "autocomp_harness.h"

#ifndef AUTOCOMP_HARNESS_FN
#define AUTOCOMP_HARNESS_FN __attribute__((section(".text.autocomp_harness"), noinline, used))
#endif

static uint64_t autocomp_state;

AUTOCOMP_HARNESS_FN static uint64_t autocomp_next(void) {
  /* splitmix64: small, fast, and good enough to make every element independent. */
  uint64_t z = (autocomp_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Fill n elements of `size` bytes. kind: 0 signed/unsigned int, 1 float (4 or 8 bytes).
   mode: 0 full range, 1 extremes, 2 small range. */
AUTOCOMP_HARNESS_FN static void autocomp_fill(void *dst, size_t n, int size, int kind, int mode) {
  unsigned char *p = (unsigned char *)dst;
  size_t bytes = n * (size_t)size;
  if (kind == 0 && mode == 0) {
    size_t i = 0;
    for (; i + 8 <= bytes; i += 8) { uint64_t w = autocomp_next(); memcpy(p + i, &w, 8); }
    if (i < bytes) { uint64_t w = autocomp_next(); memcpy(p + i, &w, bytes - i); }
    return;
  }
  if (kind == 0 && mode == 2 && size == 1) {
    /* bytes in [-4, 3]: SWAR so that 8 elements cost one random word */
    size_t i = 0;
    for (; i < bytes; i += 8) {
      uint64_t w = autocomp_next() & 0x0707070707070707ull;
      w = ((w | 0x8080808080808080ull) - 0x0404040404040404ull) ^ 0x8080808080808080ull;
      memcpy(p + i, &w, bytes - i < 8 ? bytes - i : 8);
    }
    return;
  }
  for (size_t e = 0; e < n; e++) {
    uint64_t r = autocomp_next();
    unsigned char *q = p + e * (size_t)size;
    if (kind == 0) {
      int64_t v;
      int bits = size * 8;
      int64_t max = bits >= 64 ? INT64_MAX : (((int64_t)1 << (bits - 1)) - 1);
      int64_t min = -max - 1;
      if (mode == 1) {
        static const int pick[8] = {0, 1, 0, 1, 2, 3, 4, 5};
        switch (pick[r & 7]) {
          case 0: v = min; break;
          case 1: v = max; break;
          case 2: v = -1; break;
          case 3: v = 0; break;
          case 4: v = 1; break;
          default: v = (r >> 8) & 1 ? min + 1 : max - 1; break;
        }
      } else {
        v = (int64_t)(r & 7) - 4;
      }
      memcpy(q, &v, (size_t)size); /* little-endian: the low bytes are the narrow value */
    } else {
      double d;
      if (mode == 0) d = ((double)(r >> 11) * (1.0 / 9007199254740992.0)) * 2.0 - 1.0;
      else if (mode == 1) {
        static const double pick[8] = {0.0, -0.0, 1.0, -1.0, 65504.0, -65504.0, 1e-30, -3.0e10};
        d = pick[r & 7];
      } else d = (double)((int)(r & 7) - 4);
      if (size == 4) { float f = (float)d; memcpy(q, &f, 4); } else memcpy(q, &d, 8);
    }
  }
}

AUTOCOMP_HARNESS_FN static void autocomp_poison(void *dst, size_t bytes) {
  unsigned char *p = (unsigned char *)dst;
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) { uint64_t w = autocomp_next(); memcpy(p + i, &w, 8); }
  if (i < bytes) { uint64_t w = autocomp_next(); memcpy(p + i, &w, bytes - i); }
}
"""


def _kind_code(p: ArrayParam) -> int:
    return 1 if p.kind == "float" else 0


def generate_function_harness(sig: Signature, seeds: tuple[int, ...], candidate_file: str = CANDIDATE_FILE) -> HarnessPlan:
    """Harness for a kernel function described by ``sig``."""
    if not seeds:
        raise ValueError("at least one seed is needed")
    lines = [
        f"/* Generated by Autocomp: harness for kernel `{sig.name}`. Do not edit. */",
        "#define main autocomp_user_main",
        f'#include "{candidate_file}"',
        "#undef main",
        _PRELUDE,
    ]
    for p in sig.params:
        lines.append(f"{p.c_declarator(symbol_for(p))} __attribute__((aligned(64)));")
    lines.append(f"static const uint64_t autocomp_seeds[{len(seeds)}] = {{{', '.join(f'{s}ull' for s in seeds)}}};")
    lines.append("")
    lines.append("AUTOCOMP_HARNESS_FN static void autocomp_run_seed(int index) {")
    lines.append("  int mode = index % 3;")
    lines.append("  autocomp_state = autocomp_seeds[index] * 0x2545F4914F6CDD1Dull + 0x1234567ull;")
    for p in sig.inputs:
        sym = symbol_for(p)
        lines.append(
            f"  autocomp_fill({sym}, sizeof({sym}) / sizeof({p.ctype}), (int)sizeof({p.ctype}), {_kind_code(p)}, mode);"
        )
    for p in sig.outputs:
        sym = symbol_for(p)
        lines.append(f"  autocomp_poison({sym}, sizeof({sym}));")
    args = ", ".join(f"(void *){symbol_for(p)}" for p in sig.params)
    lines += [
        "  AUTOCOMP_SNAPSHOT();",
        "  if (index == 0) AUTOCOMP_MEASURE_BEGIN();",
        f"  (void){sig.name}({args});",
        "  gemmini_fence();",
        "  if (index == 0) AUTOCOMP_MEASURE_END();",
        "  AUTOCOMP_SNAPSHOT();",
        "}",
        "",
        "AUTOCOMP_HARNESS_FN int main(void) {",
        f"  for (int i = 0; i < {len(seeds)}; i++) autocomp_run_seed(i);",
        "  return 0;",
        "}",
        "",
    ]
    return HarnessPlan(
        source="\n".join(lines),
        region_symbols={p.name: symbol_for(p) for p in sig.params},
        snapshots_per_run=2 * len(seeds),
        seeds=tuple(seeds),
    )


MEASURE_BEGIN_CALL = "{ extern void autocomp_measure_begin(void); autocomp_measure_begin(); } "
MEASURE_END_CALL = "{ extern void autocomp_measure_end(void); autocomp_measure_end(); } "


def instrument_substitute_file(file_text: str, begin_line: int, end_line: int, inside_function: bool) -> str:
    """The harness file with measure calls put on the marker lines (outside the kernel span,
    so kernel line numbers stay put). ``begin_line``/``end_line`` are the 0-based marker
    lines. At file scope the whole program is measured instead."""
    if not inside_function:
        return file_text
    lines = file_text.splitlines(keepends=True)
    lines[begin_line] = MEASURE_BEGIN_CALL + lines[begin_line]
    lines[end_line] = MEASURE_END_CALL + lines[end_line]
    return "".join(lines)


def generate_substitute_harness(
    global_arrays: list[str],
    seed: int,
    inside_function: bool,
    main_args: str = "",
    candidate_file: str = CANDIDATE_FILE,
) -> HarnessPlan:
    """Harness for an Autocomp-style test program: run its ``main`` once and snapshot its
    global arrays when it returns or calls ``exit``."""
    measure_all = "0" if inside_function else "1"
    lines = [
        "/* Generated by Autocomp: harness for a `// SUBSTITUTE HERE` test program. Do not edit. */",
        "#define main autocomp_user_main",
        f'#include "{candidate_file}"',
        "#undef main",
        "#include <stdlib.h>",
        _PRELUDE,
        "static int autocomp_done;",
        "/* Keep every compared array in the program even when a candidate stops using one. */",
        "static const void *const autocomp_keep[] __attribute__((used)) = {"
        + ", ".join(f"(const void *){name}" for name in global_arrays)
        + "};",
        "AUTOCOMP_HARNESS_FN void autocomp_measure_begin(void) { AUTOCOMP_MEASURE_BEGIN(); }",
        "AUTOCOMP_HARNESS_FN void autocomp_measure_end(void) { gemmini_fence(); AUTOCOMP_MEASURE_END(); }",
        "AUTOCOMP_HARNESS_FN static void autocomp_final(void) {",
        "  if (autocomp_done) return;",
        "  autocomp_done = 1;",
        "  gemmini_fence();",
        f"  if ({measure_all}) AUTOCOMP_MEASURE_END();",
        "  AUTOCOMP_SNAPSHOT();",
        "}",
        "AUTOCOMP_HARNESS_FN int main(void) {",
        "  atexit(autocomp_final);",
        f"  srand({seed}u);",
        f"  if ({measure_all}) AUTOCOMP_MEASURE_BEGIN();",
        f"  int rc = autocomp_user_main({main_args});",
        "  autocomp_final();",
        "  return rc;",
        "}",
        "",
    ]
    return HarnessPlan(
        source="\n".join(lines),
        region_symbols={name: name for name in global_arrays},
        snapshots_per_run=1,
        seeds=(seed,),
    )
