"""The editor side of schedule reuse: with a finished run on a similar kernel in the store,
the code actions offer "Optimize like <kernel>", and choosing it starts a job whose search
first re-implements that run's plans (pytest-lsp client with VS Code's capabilities)."""

from __future__ import annotations

import os

from lsprotocol import types as lsp

from autocomp.events import RunFinished
from autocomp.store import Store
from autocomp.testing.fake_llm import FakeLLMServer

from tests.engine.helpers import collect
from tests.server.lsp_harness import server_settings, start_editor

from .reuse_helpers import BIG, SMALL, rules, search_on, write


async def test_optimize_like_action_starts_a_reusing_job(tmp_path, monkeypatch):
    store_dir = os.path.join(str(tmp_path), "store")
    with FakeLLMServer(rules()) as fake:
        for k, v in fake.env().items():
            monkeypatch.setenv(k, v)
        store = Store.open(store_dir)
        source = search_on(store, SMALL, write(tmp_path, "small.kern", SMALL))
        assert isinstance((await collect(source))[-1], RunFinished)
        store.close()

        editor = await start_editor(
            "visual-studio-code", str(tmp_path), fake, server_settings(str(tmp_path), search={"iterations": 1, "beam": 1, "plans": 1, "implementations": 1}, autoApply=False)
        )
        try:
            doc = editor.open("big.kern", BIG)
            actions = await editor.code_actions(doc, 1)
            titles = [a.title for a in actions]
            like = [a for a in actions if isinstance(a, lsp.CodeAction) and a.title.startswith("Optimize like gemm (small.kern, 8.00x")]
            assert like, titles
            assert "Optimize kernel gemm_big (Autocomp)" in titles
            cmd = like[0].command
            assert cmd.command == "autocomp.optimizeLike" and cmd.arguments[0]["run"] == source.run_id
            result = await editor.command(cmd.command, cmd.arguments[0])
            assert result["reuse"]["source"] == source.run_id and result["reuse"]["plans"] == 3
            final = await editor.wait_state(result["jobId"])
            assert final["state"] == "finished", final
            assert final["bestSpeedup"] >= 8.0  # the reused schedule's three halvings
            assert any(f"reusing run {source.run_id}" in m for m in editor.messages())
            bad = None
            try:
                await editor.command("autocomp.optimizeLike", {"uri": doc.uri, "run": "no-such-run"})
            except Exception as exc:  # InvalidParams, with what to do
                bad = str(exc)
            assert bad is not None and "no run 'no-such-run'" in bad
        finally:
            await editor.client.shutdown_session()
            await editor.client.stop()
    reused = Store.open(store_dir)
    metas = [reused.run_meta(r) for r in reused.run_ids()]
    job_meta = next(m for m in metas if m["kernel"] == "gemm_big")
    assert job_meta["reuse"]["source"] == source.run_id and job_meta["reuse"]["kept"] == 3
