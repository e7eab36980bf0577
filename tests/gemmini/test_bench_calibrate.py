"""bench/gemmini_calibrate.py's default grid is centred on the fit the model ships with: its first
point is the three fitted latencies in timing_params.h, so rerunning the bench with no arguments
reproduces the chosen point next to its neighbours (and a refit that forgets to update one of the
two is caught here)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import gemmini_calibrate as calibrate  # noqa: E402
from simkit import timing_param  # noqa: E402


def test_default_grid_starts_at_the_shipped_fit():
    shipped = (timing_param("DMA_LATENCY"), timing_param("L2_HIT_LATENCY"), timing_param("LLC_HIT_LATENCY"))
    assert calibrate.DEFAULT_GRID[0] == shipped
    assert len(set(calibrate.DEFAULT_GRID)) == len(calibrate.DEFAULT_GRID)


def test_every_grid_point_is_a_possible_memory():
    for dram, l2, llc in calibrate.DEFAULT_GRID:
        assert dram >= 28 and l2 > 0 and llc > 0  # a DRAM round trip is at least tRCD + tCAS
