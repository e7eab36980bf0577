"""bench/prompt_quality.py: without a live model it says what it needs and exits 0; with
one (here the loopback fake LLM double serving the original kernel) it reports per example."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from autocomp.testing.fake_llm import FakeLLMServer

from promptkit import ROOT

BENCH = str(ROOT / "bench" / "prompt_quality.py")


def test_without_a_key_it_says_so_and_exits_0():
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AUTOCOMP_LLM")}
    proc = subprocess.run([sys.executable, BENCH], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0 and "needs a live model" in proc.stdout


def test_with_a_model_it_reports_each_example(tmp_path):
    code = Path(ROOT / "examples" / "nki" / "rmsnorm.py").read_text()
    rules = [{"role": "plan", "match": ["OPTIMIZATION PLAN REQUEST"], "reply": "Plan: keep it as it is."},
             {"role": "implement", "match": ["IMPLEMENTATION REQUEST"], "reply": "```python\n" + code + "\n```"}]
    with FakeLLMServer(rules) as server:
        env = dict(os.environ, **server.env(), AUTOCOMP_HOME=str(tmp_path))
        proc = subprocess.run([sys.executable, BENCH, "--llm", "openai:fake", "--n", "2", "--target", "nki", "--only", "rmsnorm"],
                              capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "examples/nki/rmsnorm.py" in proc.stdout and "correct 2/2" in proc.stdout, proc.stdout + proc.stderr[-2000:]
