"""Builders for engine tests: scripted kernels, reply rules, a search wired to the fake
LLM server through the real SDKs."""

from __future__ import annotations

import os
from contextlib import contextmanager

from autocomp.config import SearchConfig
from autocomp.llm import build_pool
from autocomp.search import BeamSearch
from autocomp.store import Store
from autocomp.testing.fake_llm import FakeLLMServer
from autocomp.testing.scripted_backend import ScriptedBackend

KERNEL = "kernel scale {\n  result = 42\n  cost = 1000\n}\n"


def kern(cost: int, result: int = 42) -> str:
    return f"kernel scale {{\n  result = {result}\n  cost = {cost}\n}}\n"


def fenced(code: str) -> str:
    return f"Here is the new kernel:\n```kern\n{code}```\n"


def halving_rules() -> list[dict]:
    """Each plan halves the cost of whatever code it sees, down to 125."""
    rules = []
    for cost in (1000, 500, 250):
        rules.append({"role": "plan", "match": [f"cost = {cost}\n"], "reply": f"Plan: go from {cost} to {cost // 2}."})
        rules.append({"role": "implement", "match": [f"go from {cost} to {cost // 2}"], "reply": fenced(kern(cost // 2))})
    rules.append({"role": "plan", "reply": "Plan: nothing left to do, keep it."})
    rules.append({"role": "implement", "reply": fenced(kern(125))})
    return rules


@contextmanager
def fake_server(monkeypatch, **kwargs):
    server = FakeLLMServer(**kwargs).start()
    for key, value in server.env().items():
        monkeypatch.setenv(key, value)
    try:
        yield server
    finally:
        server.stop()


def make_search(specs=("openai:fake",), config=None, backend_settings=None, store=None, text=KERNEL, **search_kwargs):
    backend = ScriptedBackend(backend_settings or {})
    problem = backend.make_problem("scale.kern", text)
    store = store or Store.open(os.environ["AUTOCOMP_HOME"])
    config = config or SearchConfig(iterations=3, beam=2, plans=2, implementations=2, llm_timeout=5, llm_retries=2)
    pool = build_pool(list(specs), store, timeout=config.llm_timeout, retries=config.llm_retries, concurrency=config.llm_concurrency)
    pool.backoff = 0.01
    return BeamSearch(problem, backend, pool, config, store, **search_kwargs)


async def collect(search):
    events = []
    async for event in search.run():
        events.append(event)
    await search.pool.close()
    return events
