"""Tuning while editing: saving an edited kernel measures it against the version before,
and restarts a running search from the edit with the best plans first."""

from __future__ import annotations

import pytest
from lsp_harness import CLIENTS, KERNEL, default_rules, server_settings, start_editor

from autocomp.testing.fake_llm import FakeLLMServer


@pytest.mark.parametrize("caps", CLIENTS)
async def test_save_shows_effect_of_edit(tmp_path, fake_llm, caps):
    ed = await start_editor(caps, str(tmp_path), fake_llm, server_settings(str(tmp_path)))
    try:
        doc = ed.open("k.kern", KERNEL)
        ed.replace(doc, KERNEL.replace("cost = 1000", "cost = 2000"))
        ed.save(doc)

        def note():
            return [lens.command.title for lens in lenses if lens.command.title.startswith("your edit: 0.50x")]

        for _ in range(100):
            lenses = await ed.lenses(doc)
            if note():
                break
            await ed.wait_for(lambda: True, 0.1)
        assert note(), [lens.command.title for lens in lenses]
        assert any(lens.command.title == "2,000 cost units (scripted double)" for lens in lenses)

        # An edit that changes what the kernel computes says so.
        ed.replace(doc, doc.text.replace("result = 42", "result = 7"))
        ed.save(doc)
        for _ in range(100):
            titles = [lens.command.title for lens in await ed.lenses(doc)]
            if "your edit: output differs from before" in titles:
                break
            await ed.wait_for(lambda: True, 0.1)
        assert "your edit: output differs from before" in titles
        hover = await ed.hover(doc, 2)
        assert "output differs" in hover.contents.value
    finally:
        await ed.client.shutdown_session()
        await ed.client.stop()


async def test_save_restarts_running_job_with_best_plans_first(tmp_path):
    with FakeLLMServer(default_rules(), delay=0.3) as slow:
        settings = server_settings(str(tmp_path), search={"iterations": 3, "beam": 2, "plans": 2, "implementations": 1})
        ed = await start_editor("visual-studio-code", str(tmp_path), slow, settings)
        try:
            doc = ed.open("k.kern", KERNEL)
            first = (await ed.command("autocomp.optimize", {"uri": doc.uri, "line": 2}))["jobId"]
            await ed.wait_for(lambda: any(s["jobId"] == first and s["iteration"] >= 2 for s in ed.statuses), 30, "iteration 2")
            ed.replace(doc, doc.text.replace("cost = 1000", "cost = 900"))
            ed.save(doc)
            await ed.wait_state(first, timeout=15)
            jobs = (await ed.custom("autocomp/jobs", {}))["jobs"]
            second = next(j for j in jobs if j["jobId"] != first)
            await ed.wait_for(lambda: any("restarted optimizing scale" in m for m in ed.messages()), 5, "restart message")
            final = await ed.wait_state(second["jobId"], timeout=60)
            assert final["state"] == "finished"
            # The restarted search started from the edited code: its baseline is 900.
            report = await ed.custom("autocomp/run", {"jobId": second["jobId"]})
            baseline = next(c for c in report["candidates"] if c["parent"] is None)
            assert baseline["metric"]["value"] == 900
            # Best plans of the first run were offered to the engine first.
            assert any("Unroll the inner loop" in p or "Tile for" in p for p in slow.prompts[-20:])
            await ed.wait_for(lambda: ed.applied_edits, 10, "applied")
            assert "cost = 900" not in doc.text and "cost = 1000" not in doc.text
        finally:
            await ed.client.shutdown_session()
            await ed.client.stop()
