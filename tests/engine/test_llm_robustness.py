"""Replies the SDKs cannot decode and servers that ask us to wait: one failed candidate, never
a failed run; ``Retry-After`` honoured (issue 13, item 5)."""

from __future__ import annotations

import time

import pytest

from autocomp.config import SearchConfig
from autocomp.events import CandidateEvaluated, RunFinished
from autocomp.model import Verdict

from .helpers import collect, fake_server, fenced, kern, make_search

ONE = SearchConfig(iterations=1, beam=1, plans=1, implementations=2, llm_timeout=10, llm_retries=2, repair=False)
GOOD = [{"role": "plan", "reply": "Plan: halve."}, {"role": "implement", "reply": fenced(kern(500))}]


@pytest.mark.parametrize("fault", ["badutf8", "malformed"])
@pytest.mark.parametrize("spec", ["openai:fake", "anthropic:fake"])
async def test_undecodable_reply_is_one_failed_candidate(monkeypatch, fault, spec):
    # plan ok, first implementation garbage, second implementation fine
    with fake_server(monkeypatch, rules=GOOD, faults=["ok", fault]) as server:
        events = await collect(make_search(specs=(spec,), config=ONE))
    candidates = sorted((e.candidate for e in events if isinstance(e, CandidateEvaluated)), key=lambda c: c.id)
    assert isinstance(events[-1], RunFinished), events[-1]
    verdicts = sorted(c.verdict for c in candidates)
    assert Verdict.LLM_ERROR in verdicts and Verdict.CORRECT in verdicts, [(c.id, c.verdict, c.feedback) for c in candidates]
    failed = next(c for c in candidates if c.verdict is Verdict.LLM_ERROR)
    assert "reply" in failed.feedback and "\n" not in failed.feedback.strip()
    assert events[-1].speedup == pytest.approx(2.0)
    assert server.requests == 3  # a malformed reply is not retried


async def test_retry_after_is_honoured(monkeypatch):
    with fake_server(monkeypatch, rules=GOOD, faults=["429:1.2", "ok", "ok", "ok"]) as server:
        search = make_search(config=ONE)
        assert search.pool.backoff == 0.01  # our own backoff alone would retry at once
        started = time.monotonic()
        events = await collect(search)
    assert isinstance(events[-1], RunFinished) and events[-1].speedup == pytest.approx(2.0)
    assert time.monotonic() - started >= 1.2
    assert server.requests == 4
    assert any("retrying in 1.2s" in n for n in search.pool.notices), search.pool.notices
