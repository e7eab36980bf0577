"""Editor flows without dead ends (issue 13, item 6): no key → the recorded session next to
the kernel is replayed, under the search settings it was recorded with."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from lsp_harness import CLIENTS, KERNEL, default_rules, start_editor

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
