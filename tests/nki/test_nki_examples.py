"""The shipped examples: each step of every authored session is correct and strictly
faster (estimated) than its parent, and an evaluation takes well under a few seconds."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from autocomp.backends import get_backend
from autocomp.model import Verdict

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "nki"
NAMES = ["gemm", "rmsnorm", "layernorm", "softmax"]


@pytest.mark.parametrize("name", NAMES)
def test_each_step_is_correct_and_faster(name):
    backend = get_backend("nki", {"seeds": [0, 1]})
    path = EXAMPLES / f"{name}.py"
    problem = backend.make_problem(str(path), path.read_text())
    steps = sorted((EXAMPLES / "steps").glob(f"{name}_*.py"))
    assert len(steps) >= 3
    codes = [problem.code] + [backend.make_problem(str(s), s.read_text()).code for s in steps]
    evs = asyncio.run(backend.evaluate(problem, codes))
    cycles = []
    for step, ev in zip(["original"] + [s.name for s in steps], evs):
        assert ev.verdict is Verdict.CORRECT, f"{step}: {ev.feedback}"
        cycles.append(ev.metrics["cycles"].value)
    assert all(b < a for a, b in zip(cycles, cycles[1:])), cycles


@pytest.mark.parametrize("name", NAMES)
def test_session_script_and_recording_exist(name):
    script = json.loads((EXAMPLES / "sessions" / f"{name}.script.json").read_text())
    roles = {r["role"] for r in script["rules"]}
    assert {"plan", "implement"} <= roles
    session = (EXAMPLES / f"{name}.session.jsonl").read_text().splitlines()
    header = json.loads(session[0])
    assert "authored" in header.get("note", "")
    kinds = [json.loads(line)["kind"] for line in session[1:]]
    assert kinds.count("implement") >= 3


def test_replaying_a_recorded_session_reproduces_its_improvement(tmp_path):
    """`autocomp optimize` on an example with its recorded session (no network)."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, AUTOCOMP_HOME=str(tmp_path))
    cmd = [sys.executable, "-m", "autocomp", "optimize", str(EXAMPLES / "rmsnorm.py"), "--llm",
           f"replay:{EXAMPLES / 'rmsnorm.session.jsonl'}", "--seed", "0", "--iterations", "3", "--beam", "2",
           "--plans", "2", "--implementations", "1"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = proc.stdout + proc.stderr
    import re

    # the figures move with the cost model; the improvement must not
    m = re.search(r"cycles: ([\d,]+) cycles \(nki estimate\) → ([\d,]+) cycles \(nki estimate\)", text)
    assert m, text[-3000:]
    before, after = (int(g.replace(",", "")) for g in m.groups())
    assert after < before, text[-3000:]
