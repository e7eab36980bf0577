"""bench/gemmini_calibrate.py's default grid is centred on the fit the model ships with: its first
point is the three fitted latencies in timing_params.h, so rerunning the bench with no arguments
reproduces the chosen point next to its neighbours (and a refit that forgets to update one of the
two is caught here). The DOSA binaries' buffers sit in a cache line per run
(gemmini_dosa_layers.LINE_OFFSET, inferred by bench/gemmini_dosa_offsets.py); calibrate's
--line-offset overrides them and refuses offsets the templates cannot give."""

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


def test_every_run_of_every_binary_has_an_offset_its_template_allows():
    """conv_tilings.c's buffers are 8-byte aligned, matmul_tilings.c's 16-byte aligned."""
    import gemmini_dosa_layers as dosa

    assert set(dosa.LINE_OFFSET) == set(dosa.BINARIES)
    for binary, per_run in dosa.LINE_OFFSET.items():
        assert set(per_run) == set(dosa.RUNS)
        step = 16 if binary.endswith("matmuls") else 8
        assert all(0 <= o < 64 and o % step == 0 for o in per_run.values())


def test_line_offsets_place_each_runs_buffers_into_a_line(monkeypatch):
    """A DOSA layer gets one program per run of every binary that holds it, with X, Y and Z that
    run's offset past a 64-byte line: a layer ResNet's and RetinaNet's binaries both hold gets
    six, and the published median over the six runs is the median over the six programs."""
    import gemmini_dosa_layers as dosa

    shared = ("conv", 1, 512, 256, 28, 1, 1)
    holders = [binary for binary, order in dosa.BINARIES.items() if shared in order]
    assert holders == ["ResNet-50 convolutions", "RetinaNet convolutions"]
    monkeypatch.setitem(dosa.LINE_OFFSET, "ResNet-50 convolutions", {"dnn": 16, "analytical": 0, "both": 16})
    monkeypatch.setitem(dosa.LINE_OFFSET, "RetinaNet convolutions", {"dnn": 0, "analytical": 56, "both": 0})
    sources = dosa.programs(shared)
    assert len(sources) == 6
    offsets = [int(src.split("#define X ((elem_t *)buffer_x + ")[1].split(")")[0]) for src in sources]
    assert offsets == [16, 0, 16, 0, 56, 0]
    assert len(set(sources)) == 4  # two histories, each at two distinct offsets
    shifted = sources[0]
    assert "__attribute__((aligned(64)))" in shifted and "buffer_z + 16" in shifted
    # Two runs at 16, three at 0 (one history) and one at 56: the median is over runs, not programs.
    assert dosa.combine([100, 200, 100, 300, 400, 300]) == 250


def test_calibrate_times_each_distinct_program_once_and_counts_its_runs():
    import gemmini_dosa_layers as dosa

    programs = [p for p in calibrate.programs() if p[4] == "DOSA"]
    assert len({p[1] for p in programs}) == len(programs)
    for layer in dosa.LAYERS[:10]:
        name = dosa.name(*layer[:7])
        assert sum(p[5] for p in programs if p[0] == name) == len(dosa.programs(layer))
    results = calibrate.combined([("DOSA", "a", 100, 100.0, 2), ("DOSA", "a", 400, 100.0, 1), ("pair", "b", 50, 100.0, 1)])
    assert results == [("DOSA", "a", 1.0), ("pair", "b", 0.5)]


def test_offsets_bench_picks_the_offset_that_matches_a_run():
    """bench/gemmini_dosa_offsets.py: the offset whose modelled cycles match a run's FireSim
    figures best, among those the binary's template allows."""
    import gemmini_dosa_offsets as offsets

    assert list(offsets.offsets_of("BERT matmuls")) == [0, 16, 32, 48]
    assert list(offsets.offsets_of("U-Net convolutions")) == [0, 8, 16, 24, 32, 40, 48, 56]
    a, b = ("conv", 1, 64, 64, 56, 1, 1), ("conv", 1, 64, 64, 56, 3, 1)
    model = {("U-Net convolutions", s, o): 100.0 * (1.3 if o % 16 else 1.0) + (5 if s == b else 0)
             for s in (a, b) for o in offsets.offsets_of("U-Net convolutions")}
    best, err = offsets.best_offset(model, "U-Net convolutions", [(a, 130.0), (b, 135.0)])
    assert best == 8 and err < 1e-9
    best, _ = offsets.best_offset(model, "U-Net convolutions", [(a, 101.0), (b, 104.0)])
    assert best == 0


def test_offsets_bench_says_what_to_fetch_without_a_clone(tmp_path, monkeypatch, capsys):
    import asyncio

    import gemmini_dosa_offsets as offsets

    monkeypatch.setattr(sys, "argv", ["gemmini_dosa_offsets.py", "--suite", str(tmp_path / "missing")])
    assert asyncio.run(offsets.main()) == 2
    assert "fetch ucb-bar/gemmini-rocc-tests" in capsys.readouterr().err


def test_line_offset_flag_rejects_impossible_offsets(monkeypatch, capsys):
    """Convolution buffers sit on 8-byte boundaries, matmul buffers on 16-byte ones."""
    import asyncio

    import pytest

    for bad in ("8,8", "4,16", "64,0", "8"):
        monkeypatch.setattr(sys, "argv", ["gemmini_calibrate.py", "--line-offset", bad])
        with pytest.raises(SystemExit):
            asyncio.run(calibrate.main())
        assert "--line-offset takes CONV,MM" in capsys.readouterr().err
