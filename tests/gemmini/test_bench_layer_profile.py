"""bench/gemmini_layer_profile.py: the model's diagnostics (`stats 1`) are read back into per-layer
figures: counters over the measured region only, one record per traced loop_conv_ws call, and a
clear error when the diagnostics are missing or their format has moved."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import gemmini_dosa_layers as dosa  # noqa: E402
import gemmini_layer_profile as prof  # noqa: E402
from simkit import toolchain  # noqa: E402


def _stats(when: str, l2h: int, l2m: int, llch: int, llcm: int, rd: int, wr: int) -> str:
    return (f"gemmini stats ({when}): l2 hits {l2h} misses {l2m} writebacks 0, llc hits {llch} misses {llcm}, "
            f"dma read requests {rd} write requests {wr}, hardware loops 0, mesh tag wait cycles 0, "
            f"host L1 probes 0, dram row hits 0 opens 0 conflicts 0")


def test_counts_cover_the_last_measured_region_and_its_conv_calls():
    stderr = "\n".join([
        _stats("measure_begin", 1, 1, 1, 1, 1, 1),  # an earlier region: ignored
        "TRACE conv i1 b1 or9 oc9 kr1 kc1 kch16 poch16 w1 i1 o1 | t0 0 ld 0..10 done 10 | ex 10..20 E 10 | end 20",
        _stats("measure_begin", 100, 20, 15, 5, 120, 8),
        "TRACE conv i5 b1 or22 oc23 kr1 kc1 kch64 poch16 w1 i1 o0 | t0 1 ld 5..905 done 910 | ex 905..1105 E 200 | end 1105",
        "TRACE conv i9 b1 or6 oc5 kr1 kc1 kch64 poch16 w1 i1 o1 | t0 2 ld 905..1005 done 1010 | ex 1105..1125 E 20 | end 1200",
        _stats("report", 180, 40, 30, 10, 220, 12),
    ])
    p = prof.profile(stderr)
    assert p.counts == {"l2_hits": 80, "l2_misses": 20, "llc_hits": 15, "llc_misses": 5, "dma_reads": 100, "dma_writes": 4}
    assert [(c.orows, c.ocols, c.kchs, c.pochs, c.writes_output) for c in p.calls] == [(22, 23, 64, 16, False), (6, 5, 64, 16, True)]
    assert [(c.load_issue_cycles, c.execute_cycles) for c in p.calls] == [(900, 200), (100, 20)]
    row = prof.summary_row("conv x", 1000, 1250, p)
    assert row["dma_read_bytes_per_cycle"] == pytest.approx(6.4)  # 100 requests of 64 bytes in 1000 cycles
    assert row["l2_hit_share"] == pytest.approx(0.8) and row["tile"] == "22x23 64->16" and row["calls"] == 2
    assert row["error"] == pytest.approx(-0.2)
    assert "-20.0%" in prof.format_row(row)


def test_missing_or_moved_diagnostics_are_named():
    with pytest.raises(ValueError, match="was `stats 1` set"):
        prof.profile("no diagnostics here")
    with pytest.raises(ValueError, match="closing stats line is missing"):
        prof.profile(_stats("measure_begin", 1, 1, 1, 1, 1, 1))
    with pytest.raises(ValueError, match="without 'dma_reads'"):
        prof.counters("gemmini stats (report): l2 hits 1 misses 2 writebacks 0, llc hits 1 misses 1")


def test_a_real_layer_profiles_from_the_model(tmp_path):
    layer = next(la for la in dosa.LAYERS if dosa.name(*la[:7]) == "conv 2x2 256->256 1x1/1")
    src = tmp_path / "prog.c"
    src.write_text(dosa.programs(layer)[0])
    tc = toolchain()

    async def go():
        built = await tc.compile([str(src)], str(tmp_path / "prog.elf"), str(tmp_path))
        assert built.ok, built.tail()
        return await tc.run(str(tmp_path / "prog.elf"), str(tmp_path), {}, timeout=300, max_instructions=500_000_000,
                            host_dcache=True, buffers_kib=dosa.IMAGE_BUFFERS_KIB, stats=True)

    run = asyncio.run(go())
    assert run.cycles, run.error
    p = prof.profile(run.stderr)
    assert p.counts["dma_reads"] > 0 and len(p.calls) >= 1
    row = prof.summary_row("conv 2x2 256->256 1x1/1", run.cycles, layer[7], p)
    assert 0 < row["dma_read_bytes_per_cycle"] <= 16  # the read side never beats the 16-byte bus
