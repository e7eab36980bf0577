"""bench/gemmini_calibrate.py's default grid is centred on the fit the model ships with: its first
point is the three fitted latencies in timing_params.h, so rerunning the bench with no arguments
reproduces the chosen point next to its neighbours (and a refit that forgets to update one of the
two is caught here). Its --line-offset places the DOSA binaries' buffers into a cache line, per
binary (gemmini_dosa_layers.LINE_OFFSET), and refuses offsets the templates cannot give."""

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


def test_line_offsets_place_each_binarys_buffers_into_a_line(monkeypatch):
    """A DOSA layer's program puts X, Y and Z that many bytes past a 64-byte line, per binary: a
    layer two binaries hold (ResNet's and RetinaNet's) gets one program per binary's offset."""
    import gemmini_dosa_layers as dosa

    shared = ("conv", 1, 512, 256, 28, 1, 1)
    holders = [binary for binary, order in dosa.BINARIES.items() if shared in order]
    assert holders == ["ResNet-50 convolutions", "RetinaNet convolutions"]
    assert all(o == 0 for o in dosa.LINE_OFFSET.values())
    assert all("#define X ((elem_t *)buffer_x + 0)" in src for src in dosa.programs(shared))
    monkeypatch.setitem(dosa.LINE_OFFSET, "ResNet-50 convolutions", 16)
    sources = dosa.programs(shared)
    assert any("#define X ((elem_t *)buffer_x + 16)" in src for src in sources)
    assert any("#define X ((elem_t *)buffer_x + 0)" in src for src in sources)  # RetinaNet's
    shifted = next(src for src in sources if "buffer_x + 16" in src)
    assert "__attribute__((aligned(64)))" in shifted and "buffer_z + 16" in shifted


def test_line_offset_flag_rejects_impossible_offsets(monkeypatch, capsys):
    """Convolution buffers sit on 8-byte boundaries, matmul buffers on 16-byte ones."""
    import asyncio

    import pytest

    for bad in ("8,8", "4,16", "64,0", "8"):
        monkeypatch.setattr(sys, "argv", ["gemmini_calibrate.py", "--line-offset", bad])
        with pytest.raises(SystemExit):
            asyncio.run(calibrate.main())
        assert "--line-offset takes CONV,MM" in capsys.readouterr().err
