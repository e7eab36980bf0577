"""Tuning while editing: saving an edited kernel measures it against the version before,
and restarts a running search from the edit with the best plans first."""

from __future__ import annotations

import asyncio

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
            await asyncio.sleep(0.1)
        assert note(), [lens.command.title for lens in lenses]
        assert any(lens.command.title == "2,000 cost units (scripted double)" for lens in lenses)

        # An edit that changes what the kernel computes says so.
        ed.replace(doc, doc.text.replace("result = 42", "result = 7"))
        ed.save(doc)
        for _ in range(100):
            titles = [lens.command.title for lens in await ed.lenses(doc)]
            if "your edit: output differs from before" in titles:
                break
            await asyncio.sleep(0.1)
        assert "your edit: output differs from before" in titles
        hover = await ed.hover(doc, 2)
        assert "output differs" in hover.contents.value
    finally:
        await ed.client.shutdown_session()
        await ed.client.stop()


async def _notes(ed, doc, want, timeout=15.0):
    """Lens titles once one starts with ``want`` (polling, as clients without refresh do)."""
    seen: list[str] = []
    for _ in range(int(timeout / 0.1)):
        titles = [lens.command.title for lens in await ed.lenses(doc)]
        seen += [t for t in titles if t.startswith("your edit")]
        if any(t.startswith(want) for t in titles):
            return titles, seen
        await asyncio.sleep(0.1)
    raise AssertionError(f"no lens {want!r}; saw {seen[-5:]}")


@pytest.mark.parametrize("caps", CLIENTS)
async def test_saves_are_debounced_and_unchanged_kernels_ignored(tmp_path, fake_llm, caps):
    ed = await start_editor(caps, str(tmp_path), fake_llm, server_settings(str(tmp_path)))
    try:
        doc = ed.open("k.kern", KERNEL)
        # A save that leaves the kernel's text unchanged (an edit above it) measures nothing.
        ed.replace(doc, "// a note above\n" + doc.text)
        ed.save(doc)
        await asyncio.sleep(1.0)
        titles = [lens.command.title for lens in await ed.lenses(doc)]
        assert not any(t.startswith("your edit") for t in titles), titles
        # An autosave burst: one measurement, of the last text against the text before the burst.
        for cost in (2000, 3000, 4000):
            ed.replace(doc, doc.text.replace(f"cost = {cost - 1000}", f"cost = {cost}"))
            ed.save(doc)
            await asyncio.sleep(0.05)
        titles, seen = await _notes(ed, doc, "your edit: 0.25x")
        assert not any(t.startswith(("your edit: 0.50x", "your edit: 0.67x", "your edit: 0.75x")) for t in seen), seen
    finally:
        await ed.client.shutdown_session()
        await ed.client.stop()


@pytest.mark.parametrize("caps", CLIENTS)
async def test_save_never_cancels_a_running_search_and_queues_the_measurement(tmp_path, caps):
    with FakeLLMServer(default_rules(), delay=0.3) as slow:
        settings = server_settings(str(tmp_path), search={"iterations": 2, "beam": 2, "plans": 2, "implementations": 1})
        ed = await start_editor(caps, str(tmp_path), slow, settings)
        try:
            doc = ed.open("k.kern", KERNEL)
            first = (await ed.command("autocomp.optimize", {"uri": doc.uri, "line": 2}))["jobId"]
            await ed.wait_for(lambda: any(s["jobId"] == first and s["evaluated"] >= 1 for s in ed.statuses), 30, "a candidate")
            ed.replace(doc, doc.text.replace("cost = 1000", "cost = 900"))
            ed.save(doc)
            await _notes(ed, doc, "your edit: queued")
            jobs = (await ed.custom("autocomp/jobs", {}))["jobs"]
            assert [j["jobId"] for j in jobs] == [first] and jobs[0]["state"] == "running"
            final = await ed.wait_state(first, timeout=60)
            assert final["state"] == "finished"  # not cancelled, not restarted
            assert [j["jobId"] for j in (await ed.custom("autocomp/jobs", {}))["jobs"]] == [first]
            # Measured once the search ended: 1000 -> 900 cost units.
            await _notes(ed, doc, "your edit: 1.11x")
            assert "cost = 900" in doc.text  # the user's edit inside the kernel was never overwritten
        finally:
            await ed.client.shutdown_session()
            await ed.client.stop()
