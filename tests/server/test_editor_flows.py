"""Editor flows without dead ends (issue 13, item 6): no key → the recorded session next to
the kernel is replayed, under the search settings it was recorded with."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest
from lsp_harness import CLIENTS, KERNEL, Editor, default_rules, server_settings, start_editor

from autocomp.testing.fake_llm import FakeLLMServer

RECORD_FLAGS = ["--target", "scripted", "--iterations", "1", "--beam", "1", "--plans", "2", "--implementations", "1", "--seed", "5"]


def record_session(tmp_path, fake: FakeLLMServer) -> str:
    kernel = tmp_path / "k.kern"
    kernel.write_text(KERNEL)
    session = tmp_path / "k.session.jsonl"
    env = dict(os.environ, AUTOCOMP_HOME=str(tmp_path / "record-home"), **fake.env())
    done = subprocess.run(
        [sys.executable, "-m", "autocomp", "optimize", str(kernel), "--llm", "openai:fake", *RECORD_FLAGS, "--record", str(session), "--json"],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    header = json.loads(session.read_text().splitlines()[0])
    assert header["search"]["iterations"] == 1 and header["search"]["plans"] == 2 and header["search"]["seed"] == 5
    return json.loads(done.stdout.splitlines()[-1])["speedup"]


@pytest.mark.parametrize("client", CLIENTS)
async def test_no_key_replays_the_session_next_to_the_kernel_with_its_settings(tmp_path, client):
    with FakeLLMServer(default_rules()) as fake:
        recorded_speedup = record_session(tmp_path, fake)
        asked = fake.requests
        # No autocomp.llm, no search settings, no keys: like a new user following the README.
        settings = {"autocomp": {"targets": ["scripted"], "store": str(tmp_path / "store")}}
        no_keys = {"OPENAI_API_KEY": "", "ANTHROPIC_API_KEY": "", "AUTOCOMP_LLM": ""}
        ed = await start_editor(client, str(tmp_path), fake, settings, env=no_keys)
        try:
            doc = ed.open("k.kern", KERNEL)
            assert doc.uri.endswith("/k.kern")
            job = (await ed.command("autocomp.optimize", {"uri": doc.uri, "line": 2}))["jobId"]
            final = await ed.wait_state(job, timeout=60)
            assert final["state"] == "finished" and final["replay"] is True, final
            assert final["iterations"] == 1  # the session's own settings, not the defaults (8)
            assert final["bestSpeedup"] == pytest.approx(recorded_speedup)
            assert not [m for m in ed.messages() if "no reply" in m], ed.messages()
            assert fake.requests == asked  # nothing went to the network
        finally:
            await ed.client.shutdown_session()
            await ed.client.stop()


# -- after an apply: what changed, and the way back (issue 13, item 6) -----------------


def _titles(lenses) -> list[str]:
    return [lens.command.title for lens in lenses]


def _lens(lenses, title: str):
    return next(lens for lens in lenses if lens.command.title == title)


async def _finished(ed: Editor, doc) -> dict:
    job = (await ed.command("autocomp.optimize", {"uri": doc.uri, "line": 2}))["jobId"]
    final = await ed.wait_state(job, timeout=60)
    assert final["state"] == "finished" and final["bestSpeedup"] > 1.02, final
    return final


async def _lenses_with(ed: Editor, doc, title: str, timeout: float = 10.0):
    """Lenses once one titled ``title`` shows (clients without codeLens/refresh re-ask)."""
    found: list = []

    async def ask() -> None:
        found[:] = await ed.lenses(doc)

    for _ in range(int(timeout / 0.1)):
        await ask()
        if title in _titles(found):
            return found
        await asyncio.sleep(0.1)
    raise AssertionError(f"no lens {title!r}: {_titles(found)}")


async def test_auto_apply_shows_applied_lens_diff_and_revert_and_undo_offers_again(editor: Editor):
    ed = editor
    doc = ed.open("k.kern", KERNEL)
    final = await _finished(ed, doc)
    await ed.wait_for(lambda: ed.applied_edits, 10, "auto-apply")
    speed = f"{final['bestSpeedup']:.2f}x"
    rewritten = doc.text
    assert rewritten != KERNEL

    # "Applied 8.61x · Diff · Revert", the figure from the result.
    lenses = await _lenses_with(ed, doc, f"Applied {speed}")
    assert {"Diff", "Revert"} <= set(_titles(lenses)), _titles(lenses)
    assert any(t.startswith("Autocomp: applied") for t in _titles(lenses))
    diff = _lens(lenses, "Diff").command
    shown = await ed.command(diff.command, diff.arguments[0])
    assert "-  cost = 1000" in shown["unifiedDiff"]
    assert "Applied" in (await ed.hover(doc, 2)).contents.value

    # Revert, after an edit elsewhere in the file: re-anchored, the user's line kept.
    ed.replace(doc, "// typed after the apply\n" + doc.text)
    revert = _lens(await ed.lenses(doc), "Revert").command
    result = await ed.command(revert.command, revert.arguments[0])
    assert result["reverted"] is True, result
    assert doc.text == "// typed after the apply\n" + KERNEL
    lenses = await _lenses_with(ed, doc, f"Apply {speed}")
    assert "Diff" in _titles(lenses) and "Revert" not in _titles(lenses)
    assert any(t.startswith("Autocomp: candidate available") for t in _titles(lenses)), _titles(lenses)
    assert "Candidate available" in (await ed.hover(doc, 3)).contents.value
    assert (await ed.command("autocomp.revert", {"jobId": final["jobId"]}))["reverted"] is False

    # Apply it from the lens, then undo in the editor: "candidate available" again.
    apply_lens = _lens(lenses, f"Apply {speed}").command
    assert (await ed.command(apply_lens.command, apply_lens.arguments[0]))["applied"] is True
    assert "cost = 1000" not in doc.text
    await _lenses_with(ed, doc, f"Applied {speed}")
    ed.replace(doc, "// typed after the apply\n" + KERNEL)  # what the editor's undo sends
    lenses = await _lenses_with(ed, doc, f"Apply {speed}")
    assert any(t.startswith("Autocomp: candidate available") for t in _titles(lenses)), _titles(lenses)
    assert "Candidate available" in (await ed.hover(doc, 3)).contents.value
    # The beam is offered again (diagnostics come back once nothing is applied).
    await ed.wait_for(lambda: ed.client.diagnostics.get(doc.uri), 5, "candidate diagnostics back")
    actions = await ed.code_actions(doc, 3)
    assert any(a.title.startswith("Apply this candidate") for a in actions)


@pytest.mark.parametrize("mode", ["preview", "never", False])
@pytest.mark.parametrize("client", CLIENTS)
async def test_preview_offers_apply_lens_and_action_and_changes_nothing(tmp_path, fake_llm, client, mode):
    """``"preview"`` and ``"never"`` (and ``false``, the older spelling of never) leave the
    buffer alone: the lens and the code action offer the result until the user accepts."""
    ed = await start_editor(client, str(tmp_path), fake_llm, server_settings(str(tmp_path), autoApply=mode))
    try:
        doc = ed.open("k.kern", KERNEL)
        final = await _finished(ed, doc)
        speed = f"{final['bestSpeedup']:.2f}x"
        lenses = await _lenses_with(ed, doc, f"Apply {speed}")
        assert "Diff" in _titles(lenses) and not any(t.startswith("Applied") for t in _titles(lenses))
        actions = await ed.code_actions(doc, 2)
        assert any(a.title.startswith(f"Apply this candidate ({speed})") for a in actions)
        await asyncio.sleep(0.5)
        assert not ed.applied_edits and doc.text == KERNEL  # nothing changes until accepted
        shown = "never" if mode is False else mode
        assert any(f"autocomp.autoApply is '{shown}'" in m for m in ed.messages()), ed.messages()
        apply_lens = _lens(lenses, f"Apply {speed}").command
        assert (await ed.command(apply_lens.command, apply_lens.arguments[0]))["applied"] is True
        assert "cost = 1000" not in doc.text
        assert "Revert" in _titles(await _lenses_with(ed, doc, f"Applied {speed}"))
    finally:
        await ed.client.shutdown_session()
        await ed.client.stop()


@pytest.mark.parametrize("client", CLIENTS)
async def test_one_progress_model_status_progress_and_lens_agree(tmp_path, client):
    """The status bar (autocomp/jobStatus), $/progress and the lens show one snapshot."""
    with FakeLLMServer(default_rules(), delay=0.3) as slow:
        settings = server_settings(str(tmp_path), search={"iterations": 4, "beam": 2, "plans": 2, "implementations": 1})
        ed = await start_editor(client, str(tmp_path), slow, settings)
        try:
            doc = ed.open("k.kern", KERNEL)
            job = (await ed.command("autocomp.optimize", {"uri": doc.uri, "line": 2}))["jobId"]
            await ed.wait_for(lambda: any(s["jobId"] == job and s["evaluated"] >= 2 for s in ed.statuses), 30, "candidates")
            agreed = 0
            for _ in range(40):
                lens = next(t for t in _titles(await ed.lenses(doc)) if t.startswith("Autocomp"))
                status = ed.statuses[-1]
                if status["state"] != "running":
                    break
                text = status["progress"]
                assert text == f"iteration {status['iteration']}/{status['iterations']} · {status['evaluated']} candidates · best " + (
                    f"{status['bestSpeedup']:.2f}x" if status["bestSpeedup"] else "—"
                )
                reports = [r for r in ed.client.progress_reports.get(f"autocomp/{job}", []) if getattr(r, "message", None)]
                if lens == f"Autocomp: {text}" and (not ed.client.progress_reports or reports[-1].message == text):
                    agreed += 1
                    if agreed >= 3:
                        break
                await asyncio.sleep(0.1)
            assert agreed >= 1, (lens, ed.statuses[-1])
            if client == "visual-studio-code":
                assert reports, "no $/progress for a client that supports it"
            await ed.command("autocomp.cancel", {"jobId": job})
            await ed.wait_state(job, timeout=15)
        finally:
            await ed.client.shutdown_session()
            await ed.client.stop()


@pytest.mark.parametrize("refusal", ["result", "error"])
async def test_version_mismatch_is_reanchored_and_retried_once(editor: Editor, refusal):
    """The user types between the server's read and the client's apply: a client with
    versioned edits refuses (applied: false, or an error as eglot gives); the server
    re-anchors on the newer text and the retry lands, keeping what was typed."""
    ed = editor
    ed.refuse_with = refusal
    doc = ed.open("k.kern", KERNEL)
    final = await _finished(ed, doc)
    await ed.wait_for(lambda: ed.applied_edits, 10, "auto-apply")
    rewritten = doc.text
    typed = "// typed while the edit was in flight\n"
    ed.type_before_apply = typed
    revert = _lens(await _lenses_with(ed, doc, "Revert"), "Revert").command
    result = await ed.command(revert.command, revert.arguments[0])
    assert result["reverted"] is True, result
    assert doc.text == KERNEL + typed
    if ed.capabilities != "neovim@0.7":  # versioned edits: refused once, then retried
        assert ed.refused_edits == 1
    # A mismatch that does not resolve (every attempt stale) is reported, not looped.
    if ed.capabilities != "neovim@0.7":
        apply_lens = _lens(await _lenses_with(ed, doc, f"Apply {final['bestSpeedup']:.2f}x"), f"Apply {final['bestSpeedup']:.2f}x")
        ed.type_before_apply, ed.always_stale = "x\n", True
        result = await ed.command(apply_lens.command.command, apply_lens.command.arguments[0])
        assert result["applied"] is False and "refused" in result["message"], result
        assert ed.refused_edits == 3 and "cost = 1000" in doc.text
        assert rewritten not in doc.text
