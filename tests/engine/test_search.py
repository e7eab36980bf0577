"""Beam search end to end through the real OpenAI/Anthropic SDKs against the loopback fake
LLM, with the scripted backend double."""

from __future__ import annotations

import pytest

from autocomp.config import SearchConfig
from autocomp.events import CandidateEvaluated, PlansProposed, RunFailed, RunFinished, RunStarted
from autocomp.model import Verdict

from .helpers import collect, fake_server, fenced, halving_rules, kern, make_search


async def test_search_improves_and_reports(monkeypatch):
    with fake_server(monkeypatch, rules=halving_rules()) as server:
        events = await collect(make_search())
    final = events[-1]
    assert isinstance(events[0], RunStarted) and not events[0].replay
    assert isinstance(final, RunFinished)
    assert final.speedup == pytest.approx(8.0)  # 1000 -> 125 over three iterations
    assert final.best.metrics["cost"].source == "scripted double"
    assert final.usage["openai:fake"].calls == server.answered


async def test_anthropic_and_openai_ensemble_split_evenly(monkeypatch):
    with fake_server(monkeypatch, rules=halving_rules()):
        search = make_search(specs=("openai:fake", "anthropic:fake"), config=SearchConfig(iterations=1, beam=1, plans=4, implementations=2))
        events = await collect(search)
    plan_models = [m for e in events if isinstance(e, PlansProposed) for m in e.models]
    assert sorted(plan_models) == sorted(["openai:fake"] * 2 + ["anthropic:fake"] * 2)
    impl_models = [e.candidate.models[-1] for e in events if isinstance(e, CandidateEvaluated)]
    # 8 implementation prompts: split 4/4 before cache hits are counted
    assert impl_models.count("openai:fake") == impl_models.count("anthropic:fake") == 4


async def test_determinism_same_seed_same_run(monkeypatch, tmp_path):
    from autocomp.store import Store

    outcomes = []
    for n in range(2):
        with fake_server(monkeypatch, rules=halving_rules()):
            store = Store.open(tmp_path / f"home{n}")
            events = await collect(make_search(store=store, config=SearchConfig(iterations=2, beam=2, plans=3, implementations=2, seed=7)))
        outcomes.append(sorted((e.candidate.id, e.candidate.code, e.candidate.plan) for e in events if isinstance(e, CandidateEvaluated)))
    assert outcomes[0] == outcomes[1]


async def test_baseline_that_fails_ends_run_with_clear_error(monkeypatch):
    with fake_server(monkeypatch, rules=halving_rules()) as server:
        events = await collect(make_search(text="kernel scale {\n  result = 1\n  crash\n  cost = 5\n}\n"))
    assert isinstance(events[-1], RunFailed)
    assert "starting kernel could not be measured" in events[-1].error
    assert server.requests == 0


async def test_repair_feeds_back_compile_error(monkeypatch):
    rules = [
        {"role": "plan", "reply": "Plan: go faster."},
        {"role": "implement", "reply": fenced("kernel scale {\n  syntax error\n  result = 42\n  cost = 400\n}\n")},
        {"role": "repair", "match": ["line 2: syntax error"], "reply": fenced(kern(400))},
    ]
    with fake_server(monkeypatch, rules=rules):
        events = await collect(make_search(config=SearchConfig(iterations=1, beam=1, plans=1, implementations=1)))
    evaluated = [e.candidate for e in events if isinstance(e, CandidateEvaluated)]
    assert [c.verdict for c in evaluated] == [Verdict.COMPILE_ERROR, Verdict.CORRECT]
    assert evaluated[1].repaired_from == evaluated[0].id
    assert events[-1].speedup == pytest.approx(2.5)


async def test_incorrect_and_slower_children_never_enter_beam(monkeypatch):
    rules = [
        {"role": "plan", "reply": "Plan: try things."},
        {"role": "implement", "replies": [fenced(kern(10, result=41)), fenced(kern(2000))]},
    ]
    with fake_server(monkeypatch, rules=rules):
        events = await collect(make_search(config=SearchConfig(iterations=2, beam=3, plans=1, implementations=2, early_stop=0)))
    final = events[-1]
    assert final.best.id == "start" and final.speedup == pytest.approx(1.0)


async def test_early_stop(monkeypatch):
    rules = [{"role": "plan", "reply": "Plan: nothing."}, {"role": "implement", "reply": fenced(kern(1000))}]
    with fake_server(monkeypatch, rules=rules):
        events = await collect(make_search(config=SearchConfig(iterations=8, beam=1, plans=1, implementations=1, early_stop=2)))
    assert events[-1].reason == "early-stop"
    assert max(e.iteration for e in events if isinstance(e, PlansProposed)) == 2


async def test_stop_ends_cleanly_with_best_so_far(monkeypatch):
    with fake_server(monkeypatch, rules=halving_rules(), delay=0.05):
        search = make_search(config=SearchConfig(iterations=8, beam=1, plans=1, implementations=1, early_stop=0))
        events = []
        async for event in search.run():
            events.append(event)
            if isinstance(event, CandidateEvaluated) and event.candidate.verdict is Verdict.CORRECT:
                search.stop()
        await search.pool.close()
    assert events[-1].reason == "cancelled"
    assert events[-1].speedup == pytest.approx(2.0)


async def test_seed_plans_are_tried_first_without_asking(monkeypatch):
    with fake_server(monkeypatch, rules=halving_rules()) as server:
        search = make_search(
            config=SearchConfig(iterations=1, beam=1, plans=1, implementations=1),
            seed_plans=["Plan: go from 1000 to 500."],
        )
        events = await collect(search)
    assert server.by_role["plan"] == 0
    assert events[-1].speedup == pytest.approx(2.0)


async def test_stop_before_first_iteration_asks_nothing(monkeypatch):
    with fake_server(monkeypatch, rules=halving_rules(), hang_after=0, hang_seconds=30) as server:
        search = make_search()
        events = []
        async for event in search.run():
            events.append(event)
            if isinstance(event, RunStarted):
                search.stop()
        await search.pool.close()
    assert events[-1].reason == "cancelled"
    assert server.requests == 0
