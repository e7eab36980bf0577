"""Garbage and failing LLM replies through the real SDKs: each becomes a clear verdict or a
retried call, never a crashed run."""

from __future__ import annotations

from autocomp.config import SearchConfig
from autocomp.events import CandidateEvaluated, Notice, RunFinished
from autocomp.model import Verdict

from .helpers import collect, fake_server, fenced, kern, make_search

ONE = SearchConfig(iterations=1, beam=1, plans=1, implementations=1, llm_timeout=3, llm_retries=2, repair=False)
GOOD = [{"role": "plan", "reply": "Plan: halve."}, {"role": "implement", "reply": fenced(kern(500))}]


async def run_one(monkeypatch, rules=GOOD, **server_kwargs):
    with fake_server(monkeypatch, rules=rules, **server_kwargs) as server:
        events = await collect(make_search(config=ONE))
    candidates = [e.candidate for e in events if isinstance(e, CandidateEvaluated)]
    return events, candidates, server


async def test_empty_reply_is_no_code(monkeypatch):
    events, candidates, _ = await run_one(monkeypatch, faults=["ok", "empty"])
    assert candidates[0].verdict is Verdict.NO_CODE
    assert "empty" in candidates[0].feedback
    assert isinstance(events[-1], RunFinished)


async def test_reply_without_code_block(monkeypatch):
    rules = [{"role": "plan", "reply": "Plan."}, {"role": "implement", "reply": "Sure! I would make it faster by tiling."}]
    _, candidates, _ = await run_one(monkeypatch, rules=rules)
    assert candidates[0].verdict is Verdict.NO_CODE
    assert "no code in reply" in candidates[0].feedback


async def test_truncated_reply(monkeypatch):
    _, candidates, _ = await run_one(monkeypatch, faults=["ok", "truncate"])
    assert candidates[0].verdict is Verdict.NO_CODE
    assert "truncated" in candidates[0].feedback


async def test_http_500_is_retried_then_succeeds(monkeypatch):
    events, candidates, server = await run_one(monkeypatch, faults=["500", "ok", "ok"])
    assert candidates[0].verdict is Verdict.CORRECT
    assert server.requests == 3
    assert any(isinstance(e, Notice) and "500" in e.message for e in events)


async def test_429_then_ok(monkeypatch):
    _, candidates, server = await run_one(monkeypatch, faults=["ok", "429", "ok"])
    assert candidates[0].verdict is Verdict.CORRECT and server.requests == 3


async def test_persistent_500_becomes_llm_error(monkeypatch):
    _, candidates, server = await run_one(monkeypatch, faults=["ok", "500", "500", "500"])
    assert candidates[0].verdict is Verdict.LLM_ERROR
    assert "500" in candidates[0].feedback
    assert server.requests == 4  # one try + two retries for the implementation


async def test_hang_past_timeout(monkeypatch):
    events, candidates, _ = await run_one(monkeypatch, faults=["ok", "hang"], hang_seconds=30)
    assert candidates[0].verdict is Verdict.LLM_ERROR
    assert "no reply within" in candidates[0].feedback
    assert isinstance(events[-1], RunFinished)


async def test_bad_plan_reply_does_not_crash(monkeypatch):
    events, candidates, _ = await run_one(monkeypatch, faults=["empty"])
    assert candidates == []
    assert isinstance(events[-1], RunFinished) and events[-1].best.id == "start"
