"""Feature "Tune constants": a tuning job on a kernel's constants, with the progress,
lenses and preview-before-apply of "Optimize kernel", on the real Gemmini evaluator
(Spike with the timing model: a confirming tier, no LLM involved)."""

from __future__ import annotations

import asyncio
import re

import pytest
from lsp_harness import CLIENTS, KERNEL, server_settings, start_editor

GEMM = """\
#include "include/gemmini.h"
#define MAT_DIM_I 64
#define MAT_DIM_J 64
#define MAT_DIM_K 64
#define TI 1  // row tiles per hardware loop
#define TJ 1

void gemm(const elem_t A[MAT_DIM_I][MAT_DIM_K], const elem_t B[MAT_DIM_K][MAT_DIM_J],
          elem_t C[MAT_DIM_I][MAT_DIM_J]) {
  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_config_st(MAT_DIM_J * sizeof(elem_t));
  gemmini_extended3_config_ld(MAT_DIM_K * sizeof(elem_t), MVIN_SCALE_IDENTITY, false, 0);
  gemmini_extended3_config_ld(MAT_DIM_J * sizeof(elem_t), MVIN_SCALE_IDENTITY, false, 1);
  for (int i0 = 0; i0 < MAT_DIM_I / DIM; i0 += TI)
    for (int j0 = 0; j0 < MAT_DIM_J / DIM; j0 += TJ)
      gemmini_loop_ws(TI, TJ, MAT_DIM_K / DIM, 0, 0, 0, &A[i0 * DIM][0], &B[0][j0 * DIM], NULL,
                      &C[i0 * DIM][j0 * DIM], MAT_DIM_K, MAT_DIM_J, MAT_DIM_J, MAT_DIM_J,
                      false, false, false, false, false, NO_ACTIVATION, 0, 0, false);
}
"""
KERNEL_LINE = 9

pytestmark = pytest.mark.slow


def _gemmini_settings(tmp_path, **overrides):
    return server_settings(str(tmp_path), targets=["gemmini"], **overrides)


def _titles(items):
    return [getattr(a, "title", None) or a.command.title for a in items]


async def _lens_titles(ed, doc, want, timeout=30.0):
    titles: list[str] = []
    for _ in range(int(timeout / 0.1)):
        titles = [lens.command.title for lens in await ed.lenses(doc)]
        if any(want(t) for t in titles):
            return titles
        await asyncio.sleep(0.1)
    raise AssertionError(f"no such lens; saw {titles}")


async def test_tune_constants_applies_the_confirmed_best(tmp_path, fake_llm):
    ed = await start_editor("visual-studio-code", str(tmp_path), fake_llm, _gemmini_settings(tmp_path))
    try:
        doc = ed.open("gemm.c", GEMM)
        actions = _titles(await ed.code_actions(doc, KERNEL_LINE))
        assert "Tune constants of gemm: TI, TJ (Autocomp)" in actions, actions
        assert "Optimize kernel gemm (Autocomp)" in actions
        result = await ed.command("autocomp.tune", {"uri": doc.uri, "line": KERNEL_LINE, "strategy": "grid"})
        job = result["jobId"]
        # While it runs: the same progress model as a search (jobStatus, lens, Cancel).
        running = await ed.wait_for(lambda: next((s for s in ed.statuses if s["jobId"] == job and s["state"] == "running"
                                                   and s["evaluated"] > 0), None), 60, "a running tune status")
        assert running["kind"] == "tune" and re.match(r"tuning: \d+/\d+ configurations · best", running["progress"])
        final = await ed.wait_state(job, timeout=120)
        assert final["state"] == "finished" and final["confirmed"] is True, final
        # The apply step follows the final status (as for a search): then it says "applied".
        final = await ed.wait_for(lambda: next((s for s in ed.statuses if s["jobId"] == job and s["applied"]), None),
                                  30, f"the tuned kernel applied; messages: {ed.messages()[-3:]}")
        assert final["bestSpeedup"] > 1.0, final
        # The confirmed best configuration is in the buffer, as one undoable edit.
        assert len(ed.applied_edits) == 1
        assert doc.text != GEMM and "#undef T" in doc.text  # the tuned constants, redefined in the kernel
        titles = await _lens_titles(ed, doc, lambda t: t.startswith("Applied "))
        assert "Revert" in titles and "Diff" in titles
        report = await ed.custom("autocomp/run", {"jobId": job})
        assert len(report["candidates"]) == final["evaluated"] + 1  # the constants as written, then each configuration
        # Revert puts the constants as written back; the configuration is offered again.
        reverted = await ed.command("autocomp.revert", {"jobId": job})
        assert reverted["reverted"] is True and doc.text == GEMM
        await _lens_titles(ed, doc, lambda t: t.startswith("Apply "))
    finally:
        await ed.client.shutdown_session()
        await ed.client.stop()


@pytest.mark.parametrize("caps", CLIENTS)
async def test_tune_constants_preview_then_apply(tmp_path, fake_llm, caps):
    ed = await start_editor(caps, str(tmp_path), fake_llm, _gemmini_settings(tmp_path, autoApply="preview"))
    try:
        doc = ed.open("gemm.c", GEMM)
        job = (await ed.command("autocomp.tune", {"uri": doc.uri, "kernel": "gemm", "strategy": "grid"}))["jobId"]
        final = await ed.wait_state(job, timeout=120)
        assert final["state"] == "finished" and final["applied"] is False
        assert doc.text == GEMM and not ed.applied_edits  # nothing changes until the user accepts
        titles = await _lens_titles(ed, doc, lambda t: t.startswith("Apply "))
        lens = next(l for l in await ed.lenses(doc) if l.command.title.startswith("Apply "))
        assert "Diff" in titles
        applied = await ed.command(lens.command.command, lens.command.arguments[0])
        assert applied["applied"] is True and doc.text != GEMM
    finally:
        await ed.client.shutdown_session()
        await ed.client.stop()


async def test_tune_offered_only_where_there_are_tunables(tmp_path, fake_llm):
    ed = await start_editor("visual-studio-code", str(tmp_path), fake_llm, server_settings(str(tmp_path)))
    try:
        doc = ed.open("k.kern", KERNEL)  # the scripted double declares no tunables
        actions = _titles(await ed.code_actions(doc, 2))
        assert any(t.startswith("Optimize kernel scale") for t in actions)
        assert not any(t.startswith("Tune constants") for t in actions), actions
        job = (await ed.command("autocomp.tune", {"uri": doc.uri, "kernel": "scale"}))["jobId"]
        final = await ed.wait_state(job, timeout=30)
        assert final["state"] == "failed" and "no tunable constants" in final["message"], final
        with pytest.raises(Exception, match="strategy"):
            await ed.command("autocomp.tune", {"uri": doc.uri, "kernel": "scale", "strategy": "annealing"})
    finally:
        await ed.client.shutdown_session()
        await ed.client.stop()


async def test_tune_restart_keeps_budget_strategy_and_seed(tmp_path, fake_llm):
    """A restart (lens, action or ``restart: true``) starts the tuning over with what it was
    started with; options given with the restart override those."""
    ed = await start_editor("visual-studio-code", str(tmp_path), fake_llm, _gemmini_settings(tmp_path, autoApply="never"))
    try:
        doc = ed.open("gemm.c", GEMM)
        first = (await ed.command("autocomp.tune", {"uri": doc.uri, "kernel": "gemm", "budget": 2, "strategy": "random", "seed": 3}))["jobId"]
        second = (await ed.command("autocomp.tune", {"uri": doc.uri, "kernel": "gemm", "restart": True}))["jobId"]
        assert second != first
        final = await ed.wait_state(second, timeout=120)
        assert final["state"] == "finished" and final["iterations"] == 2, final  # the budget kept
        report = await ed.custom("autocomp/run", {"jobId": second})
        assert len(report["candidates"]) == 3  # the constants as written, then 2 configurations
        third = (await ed.command("autocomp.tune", {"uri": doc.uri, "kernel": "gemm", "budget": 4}))["jobId"]
        fourth = (await ed.command("autocomp.tune", {"uri": doc.uri, "kernel": "gemm", "restart": True, "budget": 1}))["jobId"]
        assert third != fourth
        final = await ed.wait_state(fourth, timeout=120)
        assert final["iterations"] == 1, final  # the restart's own budget wins
    finally:
        await ed.client.shutdown_session()
        await ed.client.stop()
