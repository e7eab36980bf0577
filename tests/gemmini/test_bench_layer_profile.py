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
from simkit import run_c, toolchain  # noqa: E402


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


def _timeline_run(tmp_path: Path, body: str, stats: int = 2):
    tmp_path.mkdir(exist_ok=True)
    return run_c(tmp_path, body, prelude=False, max_instructions=50_000_000, timeout=120, host_dcache=True,
                 stats=stats)


_ONE_LOOP = r"""
#include "gemmini.h"
#include "autocomp_harness.h"
static elem_t A[64][64] __attribute__((aligned(64))), B[64][64] __attribute__((aligned(64))), C[64][64];
AUTOCOMP_HARNESS_FN int main(void) {
  gemmini_flush(0);
  AUTOCOMP_MEASURE_BEGIN();
  tiled_matmul_auto(64, 64, 64, &A[0][0], &B[0][0], NULL, &C[0][0], 64, 64, 64, 64, MVIN_SCALE_IDENTITY,
                    MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY, NO_ACTIVATION, ACC_SCALE_IDENTITY, 0, false,
                    false, false, false, false, 0, WS);
  AUTOCOMP_MEASURE_END();
  return 0;
}
"""


def test_the_timeline_holds_every_command_of_the_measured_call_in_its_order(tmp_path):
    """`stats 2`: one line per command of the measured region (64^3 in one loop_ws: 4 + 4 move-ins
    of 16 x 64, 64 preload/compute steps, 4 move-outs), times from the region's start, each
    command done no earlier than it started and started no earlier than it entered its queue;
    no compute starts before the first move-in's data is in, and the call ends after its last
    store."""
    run = _timeline_run(tmp_path, _ONE_LOOP)
    assert run.cycles, run.error
    cmds = [m.groups() for m in map(prof._TIMELINE_CMD.match, run.stderr.splitlines()) if m]
    names = [c[0].split(":")[0] for c in cmds]
    assert names.count("mvin") == 4 and names.count("mvin2") == 4 and names.count("mvout") == 4
    assert sum(n.startswith("compute") for n in names) == 64
    assert all(int(e) <= int(s) <= int(d) for _n, _q, e, s, _b, d in cmds)
    assert all(":r16:c64:a" in c[0] for c in cmds if c[0].startswith(("mvin", "mvout")))
    first_data = min(int(c[5]) for c in cmds if c[0].startswith("mvin"))
    assert min(int(c[3]) for c in cmds if c[0].startswith("compute")) >= first_data
    loops = [line for line in run.stderr.splitlines() if line.startswith("TRACE loop_ws ")]
    assert loops == [loops[0]] and loops[0].startswith("TRACE loop_ws I 4 J 4 K 4 ")
    phases = prof.timeline_phases(run.stderr)
    assert phases["first_command"] < phases["last_load_done"] < phases["last_compute_done"] < phases["last_store_done"]
    assert phases["last_store_done"] <= run.cycles
    assert prof.timeline_text(run.stderr).count("\n") == len(cmds) + 1


def test_the_timeline_stops_at_its_cap_and_says_so(tmp_path):
    """A long call: the timeline ends after 8,000 lines with a line saying it was cut, and the
    run's figures are unaffected."""
    body = _ONE_LOOP.replace("AUTOCOMP_MEASURE_BEGIN();\n", "AUTOCOMP_MEASURE_BEGIN();\n  for (int r = 0; r < 120; r++)\n")
    run = _timeline_run(tmp_path, body)
    assert run.cycles, run.error
    lines = [line for line in run.stderr.splitlines() if line.startswith("TRACE cmd ") or line.startswith("TRACE loop_ws")]
    assert len(lines) == 8000
    assert "TRACE timeline truncated after 8000 lines" in run.stderr
    assert _timeline_run(tmp_path / "plain", body, stats=0).cycles == run.cycles
    with pytest.raises(ValueError, match="was `stats 2` set"):
        prof.timeline_phases("TRACE measure_begin 5")
