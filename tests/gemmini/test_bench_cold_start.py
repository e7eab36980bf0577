"""bench/gemmini_cold_start.py: a program that mirrors a FireSim run calls start_cold() so that
the buffers it never wrote are in DRAM only, as FireSim's loader leaves them. Our startup zeroes
.bss through the caches, so without it the same move-ins hit the LLC. Checked on the model from
its own cache counters (stats 1) over the measured move-ins; no doubles."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gemmini_cold_start import COLD_START  # noqa: E402
from simkit import assert_ok, run_c  # noqa: E402

_PROGRAM = r"""
#define ROWS 16384  /* 256 KiB: more than the core's L1, less than the L2 */
static elem_t untouched[ROWS][DIM] __attribute__((aligned(64)));  /* never written by the program */
AUTOCOMP_HARNESS_FN int main(void) {
#ifdef COLD
  start_cold();
#endif
  gemmini_config_ld(DIM);
  AUTOCOMP_MEASURE_BEGIN();
  for (int r = 0; r < ROWS; r += DIM) gemmini_mvin(untouched[r], r % 4096);
  gemmini_fence();
  AUTOCOMP_MEASURE_END();
  return 0;
}
"""
_COUNTERS = re.compile(r"gemmini stats \((measure_begin|report)\): .*?llc hits (\d+) misses (\d+)")


def _llc(tmp_path: Path, name: str, cold: bool) -> tuple[int, int]:
    work = tmp_path / name
    work.mkdir()
    source = "#define COLD 1\n" + COLD_START + _PROGRAM if cold else _PROGRAM  # the warm one has no sweep buffer
    # host_dcache: the host's stores (the startup's zeroing) reach the L2 only through its L1 model
    run = run_c(work, source, stats=1, host_dcache=True, max_instructions=200_000_000, timeout=300)
    assert_ok(run)
    found = {m.group(1): (int(m.group(2)), int(m.group(3))) for m in _COUNTERS.finditer(run.stderr)}
    (h0, m0), (h1, m1) = found["measure_begin"], found["report"]
    return h1 - h0, m1 - m0


def test_start_cold_leaves_untouched_buffers_in_dram_only(tmp_path):
    lines = 16384 * 16 // 64
    warm_hits, warm_misses = _llc(tmp_path, "warm", False)
    cold_hits, cold_misses = _llc(tmp_path, "cold", True)
    # Without it the zeroing left the buffer in the caches: the move-ins miss no further than the LLC.
    assert warm_misses <= lines // 20, (warm_hits, warm_misses)
    # With it nearly every line comes from DRAM (an LLC block holds two lines).
    assert cold_misses >= lines // 2 * 9 // 10, (cold_hits, cold_misses)
