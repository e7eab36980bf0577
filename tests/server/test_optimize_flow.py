"""Code action → job → streamed diagnostics/lenses/progress → applyEdit with the faster
kernel, in each client's capabilities."""

from __future__ import annotations

from lsprotocol import types as lsp

from lsp_harness import KERNEL, Editor


async def start_from_action(editor: Editor, doc, line: int = 2) -> str:
    actions = await editor.code_actions(doc, line)
    optimize = [a for a in actions if isinstance(a, lsp.CodeAction) and a.title.startswith("Optimize kernel scale")]
    assert optimize, [a.title for a in actions]
    assert optimize[0].kind == lsp.CodeActionKind.RefactorRewrite
    cmd = optimize[0].command
    assert cmd.command == "autocomp.optimize"
    result = await editor.command(cmd.command, cmd.arguments[0])
    return result["jobId"]


async def test_optimize_applies_faster_kernel(editor: Editor):
    doc = editor.open("k.kern", KERNEL)
    lenses = await editor.lenses(doc)
    assert [lens.command.title for lens in lenses] == ["Optimize kernel"]

    job_id = await start_from_action(editor, doc)
    final = await editor.wait_state(job_id)
    assert final["state"] == "finished", final
    assert final["bestSpeedup"] >= 2.0
    assert final["primaryMetric"] == "cost"

    # The buffer now holds the faster kernel, replacing exactly the kernel's lines.
    await editor.wait_for(lambda: editor.applied_edits, what="applyEdit")
    assert "cost = 1000" not in doc.text
    assert doc.text.startswith("// a scripted kernel (test double target)\nkernel scale {\n  result = 42\n")
    assert doc.text.endswith("}\n")
    assert len(editor.applied_edits) == 1
    await editor.wait_for(
        lambda: any("Undo" in m and "faster" in m and "cost units (scripted double)" in m for m in editor.messages()),
        what="the applied message",
    )

    # Streaming: running statuses came before the end.
    running = [s for s in editor.statuses if s["jobId"] == job_id and s["state"] == "running"]
    assert running and all(s["iterations"] == 2 for s in running)

    caps = editor.client.capabilities
    if caps.window and caps.window.work_done_progress:
        reports = [r for token, rs in editor.client.progress_reports.items() if str(token).endswith(job_id) for r in rs]
        assert reports and isinstance(reports[0], lsp.WorkDoneProgressBegin)
        assert isinstance(reports[-1], lsp.WorkDoneProgressEnd)
    else:
        assert not editor.client.progress_reports

    # Capability gating: lens refreshes only where advertised.
    lens_refresh = bool(caps.workspace and caps.workspace.code_lens and caps.workspace.code_lens.refresh_support)
    if lens_refresh:
        assert editor.lens_refreshes > 0
    else:
        assert editor.lens_refreshes == 0

    # The run report and candidate request follow the contract.
    report = await editor.custom("autocomp/run", {"jobId": job_id})
    assert report["job"]["jobId"] == job_id
    assert len(report["bestSpeedupPerIteration"]) >= 1
    best = report["job"]["bestCandidateId"]
    cand = await editor.custom("autocomp/candidate", {"jobId": job_id, "candidateId": best})
    assert cand["verdict"] == "correct" and cand["code"] in doc.text
    jobs = await editor.custom("autocomp/jobs", {})
    assert [j["jobId"] for j in jobs["jobs"]] == [job_id]

    # Lenses after: "Optimize kernel" again, the status and the new measured metric.
    titles = [lens.command.title for lens in await editor.lenses(doc)]
    assert "Optimize kernel" in titles
    assert any(t.endswith("cost units (scripted double)") for t in titles), titles
