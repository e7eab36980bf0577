"""A run killed with SIGKILL at an arbitrary point resumes exactly: no answered LLM request
is asked again and no evaluation is repeated (the scripted backend double logs each real
evaluation), and the result equals an uninterrupted run's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from autocomp.testing.fake_llm import FakeLLMServer

from .helpers import KERNEL, halving_rules

FLAGS = ["--target", "scripted", "--iterations", "3", "--beam", "2", "--plans", "2", "--implementations", "2", "--seed", "3", "--json"]


def cli_env(server: FakeLLMServer, home: Path, log: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(server.env())
    env["AUTOCOMP_HOME"] = str(home)
    env["AUTOCOMP_SCRIPTED_LOG"] = str(log)
    return env


def final_event(stdout: str) -> dict:
    events = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    return events[-1]


def test_sigkill_then_resume_repeats_nothing(tmp_path):
    kernel = tmp_path / "scale.kern"
    kernel.write_text(KERNEL)
    cmd = [sys.executable, "-m", "autocomp", "optimize", str(kernel), "--llm", "openai:fake", *FLAGS]

    # Reference: an uninterrupted run in its own store.
    with FakeLLMServer(halving_rules()) as server:
        ref_log = tmp_path / "ref.log"
        ref = subprocess.run(cmd, env=cli_env(server, tmp_path / "ref-home", ref_log), capture_output=True, text=True, timeout=120)
        assert ref.returncode == 0, ref.stderr
        reference_requests = server.requests
    reference_evals = ref_log.read_text().splitlines()

    # Killed run: every request after the 5th hangs; kill once 5 are answered and stored.
    home, log = tmp_path / "home", tmp_path / "eval.log"
    with FakeLLMServer(halving_rules(), hang_after=5, hang_seconds=60) as server:
        proc = subprocess.Popen(cmd, env=cli_env(server, home, log), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 60
        while server.answered < 5 and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # let the client write the fifth reply to the store
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate(timeout=30)
        answered_before_kill = server.answered
    assert answered_before_kill == 5
    run_id = json.loads(out.splitlines()[0])["run_id"]
    evals_before = log.read_text().splitlines()

    with FakeLLMServer(halving_rules()) as server:
        resumed = subprocess.run(
            [sys.executable, "-m", "autocomp", "optimize", "--resume", run_id, "--json"],
            env=cli_env(server, home, log),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert resumed.returncode == 0, resumed.stderr
        resumed_requests = server.requests

    assert resumed_requests == reference_requests - answered_before_kill
    evals_after = log.read_text().splitlines()[len(evals_before) :]
    assert not set(evals_after) & set(evals_before), "an evaluation was repeated after resume"
    assert len(evals_before + evals_after) == len(set(evals_before + evals_after))
    assert sorted(evals_before + evals_after) == sorted(reference_evals)
    ref_final, res_final = final_event(ref.stdout), final_event(resumed.stdout)
    assert res_final["type"] == "run_finished"
    assert res_final["best"]["code"] == ref_final["best"]["code"]
    assert res_final["speedup"] == ref_final["speedup"]
