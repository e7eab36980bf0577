"""Pure unit tests: settings parsing, re-anchoring and edits, rendering."""

from __future__ import annotations

from autocomp.server.features.apply import Anchor, edit_for, locate
from autocomp.server.settings import Settings, parse_settings

ORIGINAL = "kernel a {\n  cost = 5\n}\n"


def test_settings_defaults_nested_and_dotted():
    s, problems = parse_settings(None)
    assert problems == [] and s.auto_apply == "always" and s.min_speedup == 1.02 and s.search.iterations == 8
    s, problems = parse_settings({"autocomp": {"llm": "openai:gpt-4o", "search": {"beam": 2, "keep": 0.5}, "autoApply": False}})
    assert problems == [] and s.llm == ["openai:gpt-4o"] and s.search.beam == 2 and s.search.keep == 0.5 and s.auto_apply == "never"
    s, problems = parse_settings({"autocomp.search.iterations": 3, "autocomp.target.gemmini.spike": "/opt/spike"})
    assert problems == [] and s.search.iterations == 3 and s.target_settings("gemmini") == {"spike": "/opt/spike"}
    # Already the section itself (workspace/configuration with section "autocomp").
    s, _ = parse_settings({"minSpeedup": 1.5})
    assert s.min_speedup == 1.5


def test_bad_settings_keep_previous_values():
    base = Settings(llm=["anthropic:m"])
    s, problems = parse_settings({"autocomp": {"llm": [3], "search": {"beam": 0, "plans": True}, "minSpeedup": 0.5}}, base)
    assert s.llm == ["anthropic:m"] and s.search.beam == 4 and s.search.plans == 4 and s.min_speedup == 1.02
    assert len(problems) == 4 and all(p.startswith("autocomp.") for p in problems)


def test_locate_in_place_moved_and_edited():
    text = "x\n" + ORIGINAL + "y\n"
    assert locate(text, ORIGINAL, 1, 4) == Anchor(1, 4)
    moved = "new line\n" * 3 + text
    assert locate(moved, ORIGINAL, 1, 4) == Anchor(4, 7)
    twice = ORIGINAL + "mid\n" + ORIGINAL
    assert locate("top\n" * 3 + twice, ORIGINAL, 6, 9) == Anchor(7, 10)  # nearest to where it was
    assert locate(text.replace("cost = 5", "cost = 6"), ORIGINAL, 1, 4) is None
    assert locate("  " + ORIGINAL, ORIGINAL, 0, 3) is None  # only whole-line matches


def test_edit_for_last_line_without_newline_and_utf16():
    text = "é✓ notes\nkernel a {\n  cost = 5\n}"
    anchor = locate(text, "kernel a {\n  cost = 5\n}", 1, 4)
    edit = edit_for(text, anchor, "kernel a {\n  cost = 1\n}\n")
    assert edit.new_text == "kernel a {\n  cost = 1\n}"
    assert (edit.range.start.line, edit.range.start.character) == (1, 0)
    assert (edit.range.end.line, edit.range.end.character) == (3, 1)
    edit = edit_for(text + "\n", Anchor(1, 4), "kernel a {}")
    assert edit.new_text == "kernel a {}\n" and (edit.range.end.line, edit.range.end.character) == (4, 0)


async def test_run_in_thread_result_error_and_cancel():
    import asyncio
    import threading

    import pytest

    from autocomp.server.jobs.worker import run_in_thread

    main_thread = threading.get_ident()

    async def where() -> int:
        await asyncio.sleep(0)
        return threading.get_ident()

    assert await run_in_thread(where) != main_thread

    async def boom() -> None:
        raise ValueError("bad kernel")

    with pytest.raises(ValueError, match="bad kernel"):
        await run_in_thread(boom)

    cancelled = threading.Event()

    async def slow() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    task = asyncio.ensure_future(run_in_thread(slow))
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cancelled.wait(5)


async def test_search_worker_streams_events_and_stops():
    import asyncio

    from autocomp.server.jobs.worker import SearchWorker

    class FakeSearch:  # the engine's interface: run() yields events, stop() ends it
        def __init__(self) -> None:
            self.stopped = asyncio.Event()

        async def run(self):
            yield "started"
            await self.stopped.wait()
            yield "finished"

        def stop(self) -> None:
            self.stopped.set()

    worker = SearchWorker(FakeSearch)
    seen = []
    async for event in worker.events():
        seen.append(event)
        if event == "started":
            worker.stop()
    assert seen == ["started", "finished"]
    await worker.join()


def test_main_serves_tcp_and_rejects_bad_address():
    import json
    import socket
    import subprocess
    import sys
    import time

    bad = subprocess.run([sys.executable, "-m", "autocomp.server", "--tcp", "nowhere"], capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "HOST:PORT" in bad.stderr

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "autocomp.server", "--tcp", f"127.0.0.1:{port}"], stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                conn = socket.create_connection(("127.0.0.1", port), timeout=5)
                break
            except OSError:
                assert time.monotonic() < deadline, "server never listened"
                time.sleep(0.1)
        with conn:
            body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}, "processId": None, "rootUri": None}})
            conn.sendall(f"Content-Length: {len(body)}\r\n\r\n{body}".encode())
            data = b""
            while b'"codeLensProvider"' not in data:
                chunk = conn.recv(65536)
                assert chunk, data
                data += chunk
        assert b'"autocomp.optimize"' in data or b"executeCommandProvider" in data
    finally:
        proc.kill()
        proc.wait(timeout=10)
