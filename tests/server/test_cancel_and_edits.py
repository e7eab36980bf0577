"""Cancel (command, lens, work-done progress), edits during a search, restarts, shutdown."""

from __future__ import annotations

import asyncio
import time

import pytest
from lsp_harness import CLIENTS, KERNEL, Editor, default_rules, server_settings, start_editor
from lsprotocol import types as lsp

from autocomp.testing.fake_llm import FakeLLMServer


@pytest.fixture
def slow_llm():
    with FakeLLMServer(default_rules(), delay=0.4) as server:
        yield server


@pytest.fixture(params=CLIENTS)
async def slow_editor(request, tmp_path, slow_llm):
    settings = server_settings(str(tmp_path), search={"iterations": 6, "beam": 2, "plans": 2, "implementations": 1})
    ed = await start_editor(request.param, str(tmp_path), slow_llm, settings)
    try:
        yield ed
    finally:
        await ed.client.shutdown_session()
        await ed.client.stop()


async def _running(editor: Editor, doc) -> str:
    result = await editor.command("autocomp.optimize", {"uri": doc.uri, "line": 2})
    job_id = result["jobId"]
    await editor.wait_for(
        lambda: any(s["jobId"] == job_id and s["evaluated"] >= 1 for s in editor.statuses), 30, "first candidate"
    )
    return job_id


async def test_cancel_keeps_best_and_offers_it(slow_editor: Editor):
    ed = slow_editor
    doc = ed.open("k.kern", KERNEL)
    job_id = await _running(ed, doc)

    titles = [lens.command.title for lens in await ed.lenses(doc)]
    assert any(t.startswith("Autocomp: iteration") for t in titles), titles
    assert "Cancel" in titles
    assert "1,000 cost units (scripted double)" in titles  # the measured starting kernel

    started = time.monotonic()
    assert (await ed.command("autocomp.cancel", {"jobId": job_id})) == {"cancelled": True}
    final = await ed.wait_state(job_id, timeout=10)
    assert time.monotonic() - started < 5
    assert final["state"] == "cancelled"
    assert not ed.applied_edits and "cost = 1000" in doc.text
    # The best so far is offered as diagnostics with code actions.
    await ed.wait_for(lambda: ed.client.diagnostics.get(doc.uri), 5, "beam diagnostics")
    diags = list(ed.client.diagnostics[doc.uri])
    assert all(d.severity == lsp.DiagnosticSeverity.Information and d.source == "autocomp" for d in diags)
    actions = await ed.code_actions(doc, 2, diags[:1])
    apply = [a for a in actions if a.title.startswith("Apply this candidate")]
    assert apply and any(a.title.startswith("Show diff") for a in actions)
    result = await ed.command(apply[0].command.command, apply[0].command.arguments[0])
    assert result["applied"] is True, result
    assert "cost = 1000" not in doc.text
    # Cancelling again: nothing running.
    assert (await ed.command("autocomp.cancel", {"uri": doc.uri})) == {"cancelled": False}


async def test_edits_outside_kernel_are_kept_and_result_reanchored(slow_editor: Editor):
    ed = slow_editor
    doc = ed.open("k.kern", KERNEL)
    job_id = await _running(ed, doc)
    # The user types above and below the kernel while the search runs.
    ed.replace(doc, "// my notes\n// more notes é✓\n" + doc.text + "\n// tail typed during the search\n")
    ed.replace(doc, doc.text.replace("my notes", "my precious notes"))
    await ed.command("autocomp.cancel", {"jobId": job_id})
    await ed.wait_state(job_id, timeout=10)
    # The beam diagnostics follow the kernel to where it moved.
    diags = await ed.wait_for(
        lambda: [d for d in ed.client.diagnostics.get(doc.uri, []) if d.range.start.line == 3], 5, "re-located diagnostics"
    )
    actions = await ed.code_actions(doc, 4, list(diags[:1]))
    apply = next(a for a in actions if a.title.startswith("Apply this candidate"))
    result = await ed.command("autocomp.applyCandidate", apply.command.arguments[0])
    assert result["applied"], result
    assert doc.text.startswith("// my precious notes\n// more notes é✓\n// a scripted kernel (test double target)\nkernel scale {\n")
    assert doc.text.endswith("}\n\n// tail typed during the search\n")
    assert "cost = 1000" not in doc.text


async def test_edit_inside_kernel_is_never_overwritten(tmp_path):
    """An edit inside the kernel during a search blocks auto-apply; "Apply this candidate"
    then merges through the one re-anchoring rule, or says exactly which lines collide."""
    for caps in CLIENTS:
        root = tmp_path / caps.replace("@", "_")
        root.mkdir()
        fake = FakeLLMServer(default_rules(), delay=0.3).start()
        try:
            ed = await start_editor(caps, str(root), fake, server_settings(str(root)))
            try:
                doc = ed.open("k.kern", KERNEL)
                job_id = (await ed.command("autocomp.optimize", {"uri": doc.uri, "kernel": "scale"}))["jobId"]
                await asyncio.sleep(0.2)
                edited = doc.text.replace("  result = 42\n", "  result = 42\n  // my comment inside\n")
                ed.replace(doc, edited)
                final = await ed.wait_state(job_id, timeout=60)
                assert final["state"] == "finished"
                await ed.wait_for(lambda: any("was edited" in m for m in ed.messages()), 10, "not-applied message")
                assert doc.text == edited  # every user character kept
                assert not ed.applied_edits
                # Offered as a code action; applying replaces the kernel only on request.
                actions = await ed.code_actions(doc, 2)
                apply = next(a for a in actions if a.title.startswith("Apply this candidate"))
                # Same lines edited by both: refused, naming the lines that collide.
                clash = edited.replace("cost = 1000", "cost = 999")
                ed.replace(doc, clash)
                refused = await ed.command("autocomp.applyCandidate", apply.command.arguments[0])
                assert refused["applied"] is False and "touch the same lines" in refused["message"], refused
                assert "line" in refused["message"] and doc.text == clash
                # Different lines: the user's line and the candidate's change are merged.
                ed.replace(doc, edited)
                merged = await ed.command("autocomp.applyCandidate", apply.command.arguments[0])
                assert merged["applied"] is True, merged
                assert "  // my comment inside\n" in doc.text and "cost = 1000" not in doc.text
            finally:
                await ed.client.shutdown_session()
                await ed.client.stop()
        finally:
            fake.stop()


async def test_second_optimize_asks_and_restart_replaces(slow_editor: Editor):
    ed = slow_editor
    doc = ed.open("k.kern", KERNEL)
    job_id = await _running(ed, doc)
    again = await ed.command("autocomp.optimize", {"uri": doc.uri, "line": 3})
    assert again == {"jobId": job_id, "alreadyRunning": True}
    restarted = await ed.command("autocomp.optimize", {"uri": doc.uri, "kernel": "scale", "restart": True})
    assert restarted["jobId"] != job_id
    await ed.wait_state(job_id, timeout=10)
    running = [j for j in (await ed.custom("autocomp/jobs", {}))["jobs"] if j["state"] == "running"]
    assert [j["jobId"] for j in running] == [restarted["jobId"]]
    await ed.command("autocomp.cancel", {"uri": doc.uri, "kernel": "scale"})
    await ed.wait_state(restarted["jobId"], timeout=10)
    # The superseded job's result was never applied.
    assert not ed.applied_edits


async def test_work_done_progress_cancel(tmp_path, slow_llm):
    ed = await start_editor("visual-studio-code", str(tmp_path), slow_llm, server_settings(str(tmp_path), search={"iterations": 6}))
    try:
        doc = ed.open("k.kern", KERNEL)
        job_id = await _running(ed, doc)
        token = next(t for t in ed.client.progress_reports if str(t).endswith(job_id))
        ed.client.protocol.notify(lsp.WINDOW_WORK_DONE_PROGRESS_CANCEL, lsp.WorkDoneProgressCancelParams(token=token))
        final = await ed.wait_state(job_id, timeout=10)
        assert final["state"] == "cancelled"
    finally:
        await ed.client.shutdown_session()
        await ed.client.stop()


async def test_shutdown_ends_running_jobs_quickly(tmp_path):
    with FakeLLMServer(default_rules(), hang_after=2, hang_seconds=30) as hanging:
        ed = await start_editor("neovim@0.7", str(tmp_path), hanging, server_settings(str(tmp_path), search={"iterations": 6}))
        doc = ed.open("k.kern", KERNEL)
        await ed.command("autocomp.optimize", {"uri": doc.uri, "line": 2})
        await asyncio.sleep(1.0)
        started = time.monotonic()
        await ed.client.shutdown_session()
        assert time.monotonic() - started < 8
        await ed.client.stop()


async def test_close_document_ends_its_job(slow_editor: Editor):
    ed = slow_editor
    doc = ed.open("k.kern", KERNEL)
    job_id = await _running(ed, doc)
    ed.client.text_document_did_close(lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(doc.uri)))
    final = await ed.wait_state(job_id, timeout=10)
    assert final["state"] == "cancelled"
    assert not ed.applied_edits


async def test_cancel_right_after_start_with_hanging_llm(tmp_path):
    """A stop that the search cannot honour at once (LLM requests hanging) still ends the
    job within the grace period, and the server stays responsive."""
    with FakeLLMServer(default_rules(), hang_after=2, hang_seconds=30) as hanging:
        ed = await start_editor("emacs", str(tmp_path), hanging, server_settings(str(tmp_path), search={"iterations": 6}))
        try:
            doc = ed.open("k.kern", KERNEL)
            job_id = (await ed.command("autocomp.optimize", {"uri": doc.uri, "line": 2}))["jobId"]
            await asyncio.sleep(0.2)
            started = time.monotonic()
            assert (await ed.command("autocomp.cancel", {"jobId": job_id}))["cancelled"] is True
            final = await ed.wait_state(job_id, timeout=15)
            assert final["state"] == "cancelled"
            assert time.monotonic() - started < 8
            assert [lens.command.title for lens in await ed.lenses(doc)][0] == "Optimize kernel"
        finally:
            await ed.client.shutdown_session()
            await ed.client.stop()
