"""Budget caps end a run cleanly with its best; cached replies cost no calls."""

from __future__ import annotations

from autocomp.config import SearchConfig
from autocomp.events import RunFinished

from .helpers import collect, fake_server, halving_rules, make_search


async def test_call_budget_ends_run_cleanly(monkeypatch):
    config = SearchConfig(iterations=8, beam=2, plans=2, implementations=2, budget_calls=5, early_stop=0)
    with fake_server(monkeypatch, rules=halving_rules()) as server:
        events = await collect(make_search(config=config))
    final = events[-1]
    assert isinstance(final, RunFinished) and final.reason == "budget-calls"
    assert server.requests <= 5
    assert final.speedup is not None and final.speedup >= 2.0


async def test_token_budget(monkeypatch):
    config = SearchConfig(iterations=8, beam=2, plans=2, implementations=2, budget_tokens=500, early_stop=0)
    with fake_server(monkeypatch, rules=halving_rules()):
        events = await collect(make_search(config=config))
    assert events[-1].reason == "budget-tokens"


async def test_time_budget(monkeypatch):
    config = SearchConfig(iterations=8, beam=1, plans=1, implementations=1, budget_seconds=0.3, early_stop=0)
    with fake_server(monkeypatch, rules=halving_rules(), delay=0.2):
        events = await collect(make_search(config=config))
    assert events[-1].reason == "budget-time"


async def test_second_identical_run_costs_nothing(monkeypatch):
    config = SearchConfig(iterations=2, beam=2, plans=2, implementations=2)
    with fake_server(monkeypatch, rules=halving_rules()) as server:
        first = await collect(make_search(config=config))
        asked = server.requests
        second = await collect(make_search(config=config))
        assert server.requests == asked
    assert first[-1].speedup == second[-1].speedup
    assert second[-1].usage["openai:fake"].calls == 0
