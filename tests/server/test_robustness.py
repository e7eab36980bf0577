"""Odd input gets no crash and no error spam; missing keys get one clear message; a
crashed job leaves the server healthy; unconfirmed numbers are never auto-applied."""

from __future__ import annotations

import os

from lsp_harness import KERNEL, Editor, default_rules, kernel_reply, server_settings, start_editor
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams

from autocomp.testing.fake_llm import FakeLLMServer


async def test_unknown_language_huge_file_and_bad_positions(editor: Editor):
    py = editor.open("notes.txt", "hello\nworld\n")
    empty = editor.open("empty.kern", "")
    nokernel = editor.open("none.kern", "just text\n")
    huge = editor.open("huge.kern", KERNEL * 1 + ("x = 1\n" * 400_000))
    for doc in (py, empty, nokernel, huge):
        assert await editor.lenses(doc) == []
        for line in (0, 5, 10_000_000):
            assert await editor.code_actions(doc, line) == []
            assert await editor.hover(doc, line) is None
    # A document the server never saw.
    ghost = lsp.TextDocumentIdentifier("file:///nowhere/ghost.kern")
    assert not await editor.client.text_document_code_lens_async(lsp.CodeLensParams(ghost))
    assert not editor.messages()


async def test_malformed_command_arguments_get_clear_errors(editor: Editor):
    doc = editor.open("k.kern", KERNEL)
    bad_calls = [
        ("autocomp.optimize", []),
        ("autocomp.optimize", [{"line": 1}]),
        ("autocomp.optimize", [{"uri": doc.uri, "line": -3}]),
        ("autocomp.optimize", [{"uri": doc.uri, "line": 0}]),  # not inside the kernel
        ("autocomp.optimize", [{"uri": doc.uri, "kernel": "nope"}]),
        ("autocomp.optimize", [{"uri": "file:///not/open.kern"}]),
        ("autocomp.optimize", ["a", "b"]),
        ("autocomp.applyCandidate", [{"jobId": "job-999", "candidateId": "x"}]),
        ("autocomp.showDiff", [{"jobId": 5}]),
    ]
    for name, args in bad_calls:
        try:
            await editor.client.workspace_execute_command_async(lsp.ExecuteCommandParams(command=name, arguments=args))
        except JsonRpcInvalidParams as exc:
            assert name in str(exc) or "kernel" in str(exc) or "open" in str(exc), str(exc)
        else:
            raise AssertionError(f"{name} {args} should have been refused")
    assert (await editor.command("autocomp.cancel", {"jobId": "job-404"})) == {"cancelled": False}
    # No pop-ups for refused requests, and the server still answers.
    assert not editor.messages()
    assert [lens.command.title for lens in await editor.lenses(doc)] == ["Optimize kernel"]


async def test_rapid_edits_then_optimize(editor: Editor):
    doc = editor.open("k.kern", KERNEL)
    for i in range(200):
        editor.replace(doc, KERNEL.replace("// a scripted", f"// edit {i} a scripted"))
    lenses = await editor.lenses(doc)
    assert [lens.range.start.line for lens in lenses] == [1]
    assert not editor.messages()


async def test_missing_llm_key_is_one_clear_message(tmp_path, fake_llm):
    env = {"OPENAI_API_KEY": ""}
    ed = await start_editor("neovim@0.7", str(tmp_path), fake_llm, server_settings(str(tmp_path), llm=["openai:gpt-4o"]), env)
    try:
        doc = ed.open("k.kern", KERNEL)
        for _ in range(3):
            job = (await ed.command("autocomp.optimize", {"uri": doc.uri, "line": 2}))["jobId"]
            final = await ed.wait_state(job, timeout=15)
            assert final["state"] == "failed" and "OPENAI_API_KEY" in final["message"]
        errors = [m for m in ed.messages() if "OPENAI_API_KEY" in m]
        assert len(errors) == 1, ed.messages()
    finally:
        await ed.client.shutdown_session()
        await ed.client.stop()


async def test_no_llm_configured(tmp_path, fake_llm):
    ed = await start_editor("emacs", str(tmp_path), fake_llm, server_settings(str(tmp_path), llm=[]))
    try:
        doc = ed.open("k.kern", KERNEL)
        job = (await ed.command("autocomp.optimize", {"uri": doc.uri, "line": 2}))["jobId"]
        final = await ed.wait_state(job, timeout=15)
        assert final["state"] == "failed" and "autocomp.llm" in final["message"]
    finally:
        await ed.client.shutdown_session()
        await ed.client.stop()


async def test_bad_settings_are_reported_once(tmp_path, fake_llm):
    settings = server_settings(str(tmp_path), search={"beam": "wide", "iterations": 0}, minSpeedup="fast")
    ed = await start_editor("visual-studio-code", str(tmp_path), fake_llm, settings)
    try:
        await ed.wait_for(lambda: len(ed.messages()) >= 3, 5, "setting warnings")
        text = "\n".join(ed.messages())
        assert "autocomp.search.beam" in text and "autocomp.search.iterations" in text and "autocomp.minSpeedup" in text
    finally:
        await ed.client.shutdown_session()
        await ed.client.stop()


async def test_failing_llm_leaves_server_healthy(tmp_path):
    with FakeLLMServer(default_rules(), faults=["500"] * 200) as failing:
        ed = await start_editor("visual-studio-code", str(tmp_path), failing, server_settings(str(tmp_path)))
        try:
            doc = ed.open("k.kern", KERNEL)
            job = (await ed.command("autocomp.optimize", {"uri": doc.uri, "line": 2}))["jobId"]
            final = await ed.wait_state(job, timeout=60)
            assert final["state"] in ("finished", "failed")
            assert not ed.applied_edits and doc.text == KERNEL
            assert [lens.command.title for lens in await ed.lenses(doc)][0] == "Optimize kernel"
            assert (await ed.hover(doc, 2)) is not None
        finally:
            await ed.client.shutdown_session()
            await ed.client.stop()


async def test_unconfirmed_tier_is_never_auto_applied(tmp_path, fake_llm):
    settings = server_settings(str(tmp_path), target={"scripted": {"confirms": False}})
    ed = await start_editor("neovim@0.7", str(tmp_path), fake_llm, settings)
    try:
        doc = ed.open("k.kern", KERNEL)
        job = (await ed.command("autocomp.optimize", {"uri": doc.uri, "line": 2}))["jobId"]
        final = await ed.wait_state(job, timeout=60)
        assert final["state"] == "finished" and final["confirmed"] is False and final["bestSpeedup"] > 1.02
        await ed.wait_for(lambda: any("cannot confirm" in m for m in ed.messages()), 10, "cannot-confirm message")
        assert not ed.applied_edits and doc.text == KERNEL
        diags = ed.client.diagnostics[doc.uri]
        assert diags and all("not confirmed" in d.message for d in diags)
    finally:
        await ed.client.shutdown_session()
        await ed.client.stop()


async def test_accept_unconfirmed_setting_allows_auto_apply(tmp_path, fake_llm):
    """Estimates are applied automatically only when the user said so explicitly."""
    settings = server_settings(str(tmp_path), target={"scripted": {"confirms": False}})
    settings["autocomp"]["acceptUnconfirmed"] = True
    ed = await start_editor("neovim@0.7", str(tmp_path), fake_llm, settings)
    try:
        doc = ed.open("k.kern", KERNEL)
        job = (await ed.command("autocomp.optimize", {"uri": doc.uri, "line": 2}))["jobId"]
        final = await ed.wait_state(job, timeout=60)
        assert final["state"] == "finished" and final["confirmed"] is False
        await ed.wait_for(lambda: bool(ed.applied_edits), 10, "the accepted estimate applied")
        assert doc.text != KERNEL
    finally:
        await ed.client.shutdown_session()
        await ed.client.stop()


async def test_auto_apply_off_and_min_speedup(tmp_path):
    rules = default_rules()
    rules[1] = {"role": "implement", "replies": [kernel_reply(c) for c in (990, 985, 995, 999)]}
    with FakeLLMServer(rules) as small:
        ed = await start_editor("visual-studio-code", str(tmp_path), small, server_settings(str(tmp_path)))
        try:
            doc = ed.open("k.kern", KERNEL)
            job = (await ed.command("autocomp.optimize", {"uri": doc.uri, "line": 2}))["jobId"]
            final = await ed.wait_state(job, timeout=60)
            assert 1.0 < final["bestSpeedup"] < 1.02
            await ed.wait_for(lambda: any("minSpeedup" in m for m in ed.messages()), 10, "below-threshold message")
            assert not ed.applied_edits
        finally:
            await ed.client.shutdown_session()
            await ed.client.stop()


async def test_show_diff(editor: Editor):
    doc = editor.open("k.kern", KERNEL)
    job = (await editor.command("autocomp.optimize", {"uri": doc.uri, "line": 2}))["jobId"]
    await editor.wait_state(job)
    report = await editor.custom("autocomp/run", {"jobId": job})
    best = report["job"]["bestCandidateId"]
    diff = await editor.command("autocomp.showDiff", {"jobId": job, "candidateId": best})
    assert set(diff) == {"title", "original", "candidate", "unifiedDiff"}
    assert "-  cost = 1000" in diff["unifiedDiff"] and diff["original"] == KERNEL.split("\n", 1)[1]
    if editor.capabilities == "visual-studio-code":
        return  # VS Code renders the returned texts in its diff view
    shown = lambda: editor.client.shown_documents or any("-  cost = 1000" in m for m in editor.messages())  # noqa: E731
    await editor.wait_for(shown, 5, "diff shown")
    if editor.client.shown_documents:
        path = editor.client.shown_documents[0].uri[len("file://") :]
        assert os.path.exists(path) and "-  cost = 1000" in open(path).read()


async def test_did_change_configuration_applies_new_settings(tmp_path, fake_llm):
    ed = await start_editor("neovim@0.7", str(tmp_path), fake_llm, server_settings(str(tmp_path)))
    try:
        ed.client.workspace_did_change_configuration(
            lsp.DidChangeConfigurationParams(settings={"autocomp": {"minSpeedup": 100.0}})
        )
        doc = ed.open("k.kern", KERNEL)
        job = (await ed.command("autocomp.optimize", {"uri": doc.uri, "line": 2}))["jobId"]
        final = await ed.wait_state(job, timeout=60)
        assert final["bestSpeedup"] > 1.5
        await ed.wait_for(lambda: any("below autocomp.minSpeedup 100" in m for m in ed.messages()), 10, "threshold message")
        assert not ed.applied_edits
    finally:
        await ed.client.shutdown_session()
        await ed.client.stop()
