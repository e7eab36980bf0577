"""The shipped Gemmini examples and prompts: every kernel the examples' authored sessions
propose is verified correct on the real evaluator, and the best beats the starting code."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from autocomp.backends import get_backend
from autocomp.model import Verdict
from autocomp.prompts import load_pieces

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "gemmini"


def implementations(script: Path) -> list[str]:
    data = json.loads(script.read_text())
    codes = []
    for rule in data["rules"]:
        if rule["role"] == "implement":
            for reply in rule.get("replies", [rule.get("reply")]):
                m = re.search(r"```c\n(.*?)```", reply, re.S)
                assert m, f"{script.name}: implementation reply without a ```c block"
                codes.append(m.group(1))
    return codes


@pytest.mark.parametrize("name, function", [("gemm_512", "gemm"), ("gemm_64", "gemm"), ("conv", "conv")])
def test_session_kernels_are_verified_improvements(name, function):
    path = EXAMPLES / f"{name}.c"
    backend = get_backend("gemmini")
    problem = backend.make_problem(str(path), path.read_text(), function=function)
    codes = implementations(EXAMPLES / f"{name}.script.json")
    assert len(codes) >= 3
    start, *evs = asyncio.run(backend.evaluate(problem, [problem.code] + codes))
    assert start.verdict is Verdict.CORRECT, start.feedback
    for code, ev in zip(codes, evs):
        assert ev.verdict is Verdict.CORRECT, f"{code[:200]}\n{ev.feedback}"
    cycles = sorted(ev.metrics["cycles"].value for ev in evs)
    assert cycles[0] * 2 < start.metrics["cycles"].value


def test_scripts_have_plan_and_implementation_rules():
    for script in EXAMPLES.glob("*.script.json"):
        rules = json.loads(script.read_text())["rules"]
        plans = [r for r in rules if r["role"] == "plan"]
        assert plans and all("OPTIMIZATION PLAN REQUEST" in r["match"] for r in plans)
        assert any(r["match"] == ["OPTIMIZATION PLAN REQUEST"] for r in plans), "needs a fallback plan rule"


def test_prompt_folder():
    pieces = load_pieces("gemmini")
    assert pieces.language == "c"
    assert len(pieces.menu) >= 15
    for word in ("scratchpad", "accumulator", "mvin", "preload", "loop_ws", "fence"):
        assert word in pieces.description
    assert "bit-identical" in pieces.rules and "```c" in pieces.examples
