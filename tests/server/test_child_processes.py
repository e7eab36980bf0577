"""Cancelling a job and shutting the server down kill the evaluator processes it started
(real NKI backend: each candidate runs in its own process group)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from lsp_harness import server_settings, start_editor

from autocomp.testing.fake_llm import FakeLLMServer

REPO = Path(__file__).resolve().parents[2]


def _children(pid: int) -> list[int]:
    """Live descendants of ``pid`` (by walking /proc)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            parents[int(entry)] = int(fields[1])
    found, frontier = [], [pid]
    while frontier:
        current = frontier.pop()
        kids = [p for p, pp in parents.items() if pp == current]
        found += kids
        frontier += kids
    return found


def _nki_rules() -> list[dict]:
    from autocomp.backends import get_backend

    backend = get_backend("nki")
    replies = []
    for i, name in enumerate(["gemm_2.py", "gemm_3.py"] * 8):
        path = REPO / "examples" / "nki" / "steps" / name
        text = path.read_text()
        head, _, body = backend.detect(str(path), text)[0].text_of(text).partition("):\n")
        replies.append(f"```python\n{head}):\n    # variant {i}\n{body}```\n")
    return [{"role": "plan", "replies": [f"plan {i}" for i in range(20)]}, {"role": "implement", "replies": replies}]


async def test_cancel_and_shutdown_kill_evaluator_processes(tmp_path):
    source = (REPO / "examples" / "nki" / "gemm.py").read_text()
    settings = server_settings(
        str(tmp_path), targets=["nki"], target={"nki": {"tier": "interpreter"}}, search={"iterations": 4, "beam": 2, "plans": 4, "implementations": 2}
    )
    with FakeLLMServer(_nki_rules()) as fake:
        ed = await start_editor("visual-studio-code", str(tmp_path), fake, settings)
        server_pid = ed.client._server.pid
        try:
            doc = ed.open("gemm.py", source)
            job = (await ed.command("autocomp.optimize", {"uri": doc.uri, "line": 20}))["jobId"]
            deadline = time.monotonic() + 60
            while not _children(server_pid):
                assert time.monotonic() < deadline, "no evaluator process ever started"
                await asyncio.sleep(0.05)
            await ed.command("autocomp.cancel", {"jobId": job})
            await ed.wait_state(job, timeout=15)
            deadline = time.monotonic() + 10
            while _children(server_pid):
                assert time.monotonic() < deadline, f"evaluator processes survived the cancel: {_children(server_pid)}"
                await asyncio.sleep(0.1)

            # Shutdown with a job in flight: nothing survives the server either.
            # (another file, so nothing comes from the evaluation cache).
            other = ed.open("gemm_copy.py", source.replace("Tiled GEMM", "Tiled GEMM (copy)"))
            job = (await ed.command("autocomp.optimize", {"uri": other.uri, "line": 20}))["jobId"]
            deadline = time.monotonic() + 60
            while not _children(server_pid):
                assert time.monotonic() < deadline, "no evaluator process started for the second job"
                await asyncio.sleep(0.05)
            kids = _children(server_pid)
        finally:
            await ed.client.shutdown_session()
            await ed.client.stop()
        time.sleep(0.5)
        alive = [p for p in kids if os.path.exists(f"/proc/{p}") and open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"]
        assert not alive, f"processes outlived the server: {alive}"
