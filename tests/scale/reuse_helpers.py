"""Two similar scripted kernels (both GEMM by name) and the fake LLM replies that make a
schedule found on the small one worth reusing on the big one."""

from __future__ import annotations

import os

from autocomp.config import SearchConfig
from autocomp.llm import build_pool
from autocomp.search import BeamSearch
from autocomp.testing.scripted_backend import ScriptedBackend


def gemm(name: str, cost: int, result: int) -> str:
    return f"kernel {name} {{\n  result = {result}\n  cost = {cost}\n}}\n"


SMALL = gemm("gemm", 1000, 42)
BIG = gemm("gemm_big", 4000, 7)
SOURCE_PLANS = ["Plan: go from 1000 to 500.", "Plan: go from 500 to 250.", "Plan: go from 250 to 125."]


def fenced(code: str) -> str:
    return f"Here is the new kernel:\n```kern\n{code}```\n"


def rules() -> list[dict]:
    out = []
    # The small kernel: each plan halves the cost (the schedule worth reusing).
    for cost in (1000, 500, 250):
        out.append({"role": "plan", "match": ["kernel `gemm`", f"cost = {cost}\n"], "reply": f"Plan: go from {cost} to {cost // 2}."})
        out.append({"role": "implement", "match": ["kernel gemm {", f"go from {cost} to {cost // 2}"], "reply": fenced(gemm("gemm", cost // 2, 42))})
    # The big kernel: re-implementing the small one's plans halves it too...
    for plan_cost, cost in ((1000, 4000), (500, 2000), (250, 1000)):
        out.append(
            {"role": "implement", "match": ["kernel gemm_big {", f"go from {plan_cost} to {plan_cost // 2}", f"cost = {cost}\n"], "reply": fenced(gemm("gemm_big", cost // 2, 7))}
        )
    # ...while a fresh search on it only finds 10 % per step.
    for cost in (4000, 3600, 3240, 2916, 2000, 1800, 1000, 900, 500):
        nxt = cost * 9 // 10
        out.append({"role": "plan", "match": ["kernel `gemm_big`", f"cost = {cost}\n"], "reply": f"Plan: shave {cost} to {nxt}."})
        out.append({"role": "implement", "match": ["kernel gemm_big {", f"shave {cost} to {nxt}"], "reply": fenced(gemm("gemm_big", nxt, 7))})
    out.append({"role": "plan", "reply": "Plan: nothing left to do, keep it."})
    out.append({"role": "implement", "reply": "no code this time"})
    return out


def search_on(store, text: str, path: str, config: SearchConfig | None = None, **kwargs) -> BeamSearch:
    backend = ScriptedBackend({})
    problem = backend.make_problem(path, text)
    config = config or SearchConfig(iterations=3, beam=2, plans=2, implementations=1, llm_timeout=5, llm_retries=1, seed=1, early_stop=0)
    pool = build_pool(["openai:fake"], store, timeout=config.llm_timeout, retries=config.llm_retries)
    pool.backoff = 0.01
    return BeamSearch(problem, backend, pool, config, store, **kwargs)


def write(tmp_path, name: str, text: str) -> str:
    path = os.path.join(str(tmp_path), name)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    return path
