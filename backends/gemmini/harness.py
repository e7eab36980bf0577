"""Generating the C harness that runs one version of a kernel on secret seeded inputs.

The kernel and the harness are separate translation units, by construction:

* ``kernel.c`` is the candidate's file (the user's file with the kernel replaced), compiled
  alone into ``kernel.o``. Its objects are checked (:mod:`.objcheck`), every global symbol
  but the kernel is made local, and the kernel is renamed to ``autocomp_kernel_entry``
  (objcopy), so nothing in it can collide with, inline into, or macro-redefine the harness.
* ``harness.c`` includes ``original.c`` (the user's unmodified file, trusted) for its types
  and ``#define``s, declares the entry with ``__typeof__`` of the original kernel, and keeps
  every function that talks to the model in the harness text section. Candidate code is
  never in that section's address range, and the model checks the section's bytes against
  the ELF file at every command.

Per input set the harness: fills every input with data from that set's secret seed (full
range, extremes, or a small range, by position), poisons every output with seeded garbage,
takes snapshot "pre", calls the kernel, and takes snapshot "post". The first call (no
candidate code has run before it: the object may not have constructors) is the measured one:
MEASURE_BEGIN right before it and MEASURE_END right after it, which takes that call's "post"
snapshot in the same command. The host then checks: inputs before == what the original's run
saw, inputs after == inputs before, and every output byte == the original's.
"""

from __future__ import annotations

from dataclasses import dataclass

from .signature import ArrayParam, Signature

# Names every generated symbol starts with; candidate code may not use them.
RESERVED_PREFIX = "autocomp_"
HARNESS_HEADER = "autocomp_harness.h"
CANDIDATE_FILE = "kernel.c"
HARNESS_FILE = "harness.c"
ORIGINAL_FILE = "original.c"
KERNEL_ENTRY = "autocomp_kernel_entry"  # the kernel's symbol in kernel.o after renaming
SUBSTITUTE_MAIN = "autocomp_user_main"  # the test program's main, renamed by -Dmain=
SUBSTITUTE_KEEP = "autocomp_keep"

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
    candidate_suffix: str = ""  # appended to the candidate TU (substitute mode: keep the compared arrays)


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

/* Store v's low `size` bytes at q (little-endian: the low bytes are the narrow value). */
AUTOCOMP_HARNESS_FN static void autocomp_put(unsigned char *q, int size, uint64_t v) {
  switch (size) {
    case 1: *q = (unsigned char)v; break;
    case 2: { uint16_t x = (uint16_t)v; memcpy(q, &x, 2); break; }
    case 4: { uint32_t x = (uint32_t)v; memcpy(q, &x, 4); break; }
    default: memcpy(q, &v, 8); break;
  }
}

/* Fill n elements of `size` bytes. kind: 0 signed/unsigned int, 1 float (4 or 8 bytes).
   mode: 0 full range, 1 extremes, 2 small range. Modes 1 and 2 pick each element from a
   table of 16 values with 4 random bits, so one random word serves 16 elements: the fill runs
   on the simulated host before every input set, and a draw per element made it cost more
   simulated instructions than the kernel under test. */
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
  /* The element for each 4-bit code, as the bytes to store. */
  uint64_t table[16];
  for (int code = 0; code < 16; code++) {
    if (kind == 0) {
      int bits = size * 8;
      int64_t max = bits >= 64 ? INT64_MAX : (((int64_t)1 << (bits - 1)) - 1);
      int64_t min = -max - 1;
      int64_t v;
      if (mode == 1) {
        /* min and max twice as often as -1, 0, 1 and their neighbours */
        static const int pick[8] = {0, 1, 0, 1, 2, 3, 4, 5};
        switch (pick[code & 7]) {
          case 0: v = min; break;
          case 1: v = max; break;
          case 2: v = -1; break;
          case 3: v = 0; break;
          case 4: v = 1; break;
          default: v = (code >> 3) ? min + 1 : max - 1; break;
        }
      } else {
        v = (int64_t)(code & 7) - 4;
      }
      table[code] = (uint64_t)v;
    } else {
      double d;
      if (mode == 1) {
        static const double pick[8] = {0.0, -0.0, 1.0, -1.0, 65504.0, -65504.0, 1e-30, -3.0e10};
        d = pick[code & 7];
      } else d = (double)((code & 7) - 4);
      if (size == 4) { float f = (float)d; uint32_t x; memcpy(&x, &f, 4); table[code] = x; }
      else memcpy(&table[code], &d, 8);
    }
  }
  if (kind == 1 && mode == 0) {
    for (size_t e = 0; e < n; e++) {
      uint64_t r = autocomp_next();
      double d = ((double)(r >> 11) * (1.0 / 9007199254740992.0)) * 2.0 - 1.0;
      if (size == 4) { float f = (float)d; memcpy(p + e * 4, &f, 4); } else memcpy(p + e * 8, &d, 8);
    }
    return;
  }
  uint64_t r = 0;
  for (size_t e = 0; e < n; e++) {
    if ((e & 15) == 0) r = autocomp_next();
    autocomp_put(p + e * (size_t)size, size, table[r & 15]);
    r >>= 4;
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


def generate_function_harness(sig: Signature, seeds: tuple[int, ...], original_file: str = ORIGINAL_FILE) -> HarnessPlan:
    """Harness for a kernel function described by ``sig``; it includes the ORIGINAL file
    (trusted) and calls the candidate only through ``autocomp_kernel_entry``."""
    if not seeds:
        raise ValueError("at least one seed is needed")
    lines = [
        f"/* Generated by Autocomp: harness for kernel `{sig.name}`. Do not edit. */",
        "#define main autocomp_user_main",
        f'#include "{original_file}"',
        "#undef main",
        _PRELUDE,
        f"extern __typeof__({sig.name}) {KERNEL_ENTRY};",
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
        "  if (index == 0) {",
        "    /* the measured call: nothing of the candidate's has run before it */",
        "    AUTOCOMP_MEASURE_BEGIN();",
        f"    (void){KERNEL_ENTRY}({args});",
        "    gemmini_fence();",
        "    AUTOCOMP_MEASURE_END(); /* also the call's \"post\" snapshot */",
        "  } else {",
        f"    (void){KERNEL_ENTRY}({args});",
        "    gemmini_fence();",
        "    AUTOCOMP_SNAPSHOT();",
        "  }",
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
    """The test program with measure calls put on the marker lines (outside the kernel span,
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
) -> HarnessPlan:
    """Harness for an Autocomp-style test program (compiled alone with ``-Dmain=
    autocomp_user_main``): seed rand(), run the program's main once; the measured region is
    the marked one (or the whole program at file scope), and its MEASURE_END snapshots the
    program's global arrays, also when the program ends with exit()."""
    measure_all = "1" if not inside_function else "0"
    lines = [
        "/* Generated by Autocomp: harness for a `// SUBSTITUTE HERE` test program. Do not edit. */",
        "#include <stdlib.h>",
        _PRELUDE,
        f"extern int {SUBSTITUTE_MAIN}();",
        "static int autocomp_done;",
        "AUTOCOMP_HARNESS_FN void autocomp_measure_begin(void) { AUTOCOMP_MEASURE_BEGIN(); }",
        "AUTOCOMP_HARNESS_FN void autocomp_measure_end(void) { gemmini_fence(); AUTOCOMP_MEASURE_END(); }",
        "AUTOCOMP_HARNESS_FN static void autocomp_final(void) {",
        "  if (autocomp_done) return;",
        "  autocomp_done = 1;",
        "  gemmini_fence();",
        f"  if ({measure_all}) AUTOCOMP_MEASURE_END();",
        "}",
        "AUTOCOMP_HARNESS_FN int main(void) {",
        "  atexit(autocomp_final);",
        f"  srand({seed}u);",
        f"  if ({measure_all}) AUTOCOMP_MEASURE_BEGIN();",
        f"  int rc = {SUBSTITUTE_MAIN}({main_args});",
        "  autocomp_final();",
        "  return rc;",
        "}",
        "",
    ]
    keep = (
        "\n/* Added by Autocomp: keep every compared array in the program. */\n"
        f"static const void *const {SUBSTITUTE_KEEP}[] __attribute__((used)) = {{"
        + ", ".join(f"(const void *){name}" for name in global_arrays)
        + "};\n"
    )
    return HarnessPlan(
        source="\n".join(lines),
        region_symbols={name: name for name in global_arrays},
        snapshots_per_run=1,
        seeds=(seed,),
        candidate_suffix=keep,
    )
