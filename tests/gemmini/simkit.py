"""Helpers for the Gemmini simulator tests: compile a C program with gemmini.h and run it on
Spike with Autocomp's Gemmini model (the real toolchain; no doubles).

The C programs check their own results on the CPU and exit non-zero on a mismatch, or use
harness markers (measure/snapshot) when a test needs modelled cycles or memory contents.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from autocomp.backends.gemmini.toolchain import GemminiToolchain, SimRun

PRELUDE = """
#include "gemmini.h"
#include "autocomp_harness.h"
static int failures;
#define CHECK(cond, ...) do { if (!(cond)) { failures++; if (failures < 10) { printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\\n"); } } } while (0)
static uint64_t rng_state = 88172645463325252ull;
static uint32_t rnd(void) { rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17; return (uint32_t)rng_state; }
static elem_t rnd_elem(void) { uint32_t r = rnd() % 10; if (r == 0) return 127; if (r == 1) return -128; return (elem_t)(rnd() & 0xff); }
/* Reference scaling, written independently of gemmini.h: float product, ties-to-even, saturate. */
static elem_t ref_scale(int32_t x, float s) { float y = nearbyintf((float)x * s); return y > 127 ? 127 : (y < -128 ? -128 : (elem_t)y); }
"""

_TOOLCHAIN: GemminiToolchain | None = None


def toolchain() -> GemminiToolchain:
    global _TOOLCHAIN
    if _TOOLCHAIN is None:
        _TOOLCHAIN = GemminiToolchain.discover({})
    return _TOOLCHAIN


def run_c(
    tmp_path: Path,
    body: str,
    regions: dict[str, tuple[str, int]] | None = None,
    max_instructions: int = 50_000_000,
    timeout: float = 60,
    prelude: bool = True,
    measure_limit: int = 1,
    memory_latency: tuple[int, int, int] | None = None,
    host_dcache: bool = False,
    buffers_kib: tuple[int, int] | None = None,
    stats: int = 0,
    memory_pipe: tuple[int, int, int] | None = None,
    image: str | None = None,
) -> SimRun:
    """Compile ``PRELUDE + body`` and run it; fails the test if it does not compile.
    ``memory_latency`` (DRAM, L2 hit, LLC hit) overrides the fitted latencies, as
    bench/gemmini_calibrate.py does, for tests that need one resource to be the bottleneck;
    ``host_dcache`` turns on the host's L1 data-cache model (the backend's default);
    ``buffers_kib`` (scratchpad, accumulator) models another image's buffer sizes; ``stats``
    (1, 2) turns on the model's diagnostics on stderr (2: with the command timeline);
    ``memory_pipe`` (latency, reads, writes) puts FireSim's latency pipe in place of the LLC and DRAM;
    ``image`` ("default", "lean") applies that build's functional limits (images.py)."""
    src = tmp_path / "prog.c"
    src.write_text((PRELUDE if prelude else "") + body)
    elf = tmp_path / "prog.elf"
    tc = toolchain()

    async def go() -> SimRun:
        res = await tc.compile([str(src)], str(elf), str(tmp_path))
        assert res.ok, res.tail()
        return await tc.run(str(elf), str(tmp_path), regions or {}, timeout=timeout, max_instructions=max_instructions,
                            measure_limit=measure_limit, memory_latency=memory_latency, host_dcache=host_dcache,
                            buffers_kib=buffers_kib, stats=stats, memory_pipe=memory_pipe, image=image)

    return asyncio.run(go())


def assert_ok(run: SimRun) -> None:
    assert run.error == "", run.error
    assert not run.timed_out, run.stdout
    assert run.exit_code == 0, run.stdout


def tools_present() -> bool:
    return bool(shutil.which("riscv64-unknown-elf-gcc") and shutil.which("dtc"))


def timing_param(name: str) -> int:
    """A constant of the model's timing_params.h (``constexpr uint64_t NAME = value;``), so a
    test states its bound in the model's own units whatever the fitted values are."""
    text = (Path(__file__).resolve().parents[2] / "backends/gemmini/sim/timing_params.h").read_text()
    return int(text.split(f"constexpr uint64_t {name} = ")[1].split(";")[0])


# For programs over N x N int8 matrices A, B, C: library() runs Gemmini's tiled_matmul_auto (WS)
# on them, check() counts the entries of C that differ from a saturating int8 GEMM on the host.
SQUARE_GEMM_LIBRARY_AND_CHECK = r"""
static void library(void) {
  tiled_matmul_auto(N, N, N, (elem_t *)A, (elem_t *)B, NULL, (elem_t *)C, N, N, N, N, 1, 1, 1,
                    NO_ACTIVATION, 1, 0, false, false, false, false, false, 3, WS);
}
static int check(void) {
  int bad = 0;
  for (int i = 0; i < N; i++) for (int j = 0; j < N; j++) {
    int32_t s = 0;
    for (int k = 0; k < N; k++) s += A[i][k] * B[k][j];
    bad += C[i][j] != (s > 127 ? 127 : (s < -128 ? -128 : s));
  }
  return bad;
}
"""
