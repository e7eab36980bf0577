"""Schedule reuse: a finished run keeps the plans on its best path; a search on a similar
kernel starts by re-implementing them in order, as its own candidates, then searches on;
``auto`` picks the most similar finished run of the same target and says why; the CLI's
JSON output reports what was reused and kept; resume and budgets behave as always."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from autocomp.backends import detect_target
from autocomp.config import SearchConfig
from autocomp.events import CandidateEvaluated, Notice, PlansProposed, RunFinished, RunStarted
from autocomp.schedules import ReuseChoice, resolve_reuse, signature_of, similar_runs, similarity
from autocomp.store import Store
from autocomp.testing.fake_llm import FakeLLMServer

from tests.engine.helpers import collect

from .reuse_helpers import BIG, SMALL, SOURCE_PLANS, rules, search_on, write

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _sig(rel: str):
    path = os.path.join(ROOT, rel)
    text = open(path, encoding="utf-8").read()
    backend = detect_target(path, text)[0]
    return signature_of(backend.make_problem(path, text))


def test_signatures_read_operation_and_shapes_from_the_kernel():
    g64, g512, conv = _sig("examples/gemmini/gemm_64.c"), _sig("examples/gemmini/gemm_512.c"), _sig("examples/gemmini/conv.c")
    assert (g64.op, g64.shapes) == ("matmul", [[64, 64], [64, 64], [64, 64]])
    assert (g512.op, g512.shapes) == ("matmul", [[512, 512]] * 3)
    assert (conv.op, conv.shapes) == ("conv", [[34, 34, 64], [576, 64], [32, 32, 64]])  # #define arithmetic resolved
    assert _sig("examples/nki/gemm.py").shapes == [[512, 512], [512, 512]]  # from get_inputs
    assert _sig("examples/cuda/matmul.py").op == "matmul"
    assert _sig("examples/nki/softmax.py").op == "softmax"
    assert similarity(g64, g64) == 1.0
    assert similarity(g64, g512) > 0.5 > similarity(g64, conv)


async def _source_run(tmp_path, monkeypatch, server) -> tuple[Store, str, RunFinished]:
    store = Store.open(tmp_path / "home")
    search = search_on(store, SMALL, write(tmp_path, "small.kern", SMALL))
    events = await collect(search)
    assert isinstance(events[-1], RunFinished)
    return store, search.run_id, events[-1]


def _serve(monkeypatch):
    server = FakeLLMServer(rules()).start()
    for k, v in server.env().items():
        monkeypatch.setenv(k, v)
    return server


async def test_finished_run_keeps_its_schedule(tmp_path, monkeypatch):
    server = _serve(monkeypatch)
    try:
        store, run_id, final = await _source_run(tmp_path, monkeypatch, server)
    finally:
        server.stop()
    assert final.speedup == 8.0
    schedule = store.schedule(run_id)
    assert schedule["plans"] == SOURCE_PLANS
    assert schedule["signature"]["op"] == "matmul"
    assert schedule["target"] == "scripted" and len(schedule["path"]) == 3
    assert store.run_meta(run_id)["schedule"]["plans"] == 3


async def test_reuse_auto_adapts_the_schedule_in_order_then_searches(tmp_path, monkeypatch):
    server = _serve(monkeypatch)
    try:
        store, source, _ = await _source_run(tmp_path, monkeypatch, server)
        big_path = write(tmp_path, "big.kern", BIG)
        probe = search_on(store, BIG, big_path)
        choice = resolve_reuse(store, probe.problem, "auto")
        assert choice is not None and choice.source == source and choice.plans == SOURCE_PLANS
        assert f"reusing run {source} (gemm)" in choice.reason and "similarity" in choice.reason
        first_prompt = len(server.prompts)
        search = search_on(store, BIG, big_path, reuse=choice)
        events = await collect(search)
        prompts = server.prompts[first_prompt:]
    finally:
        server.stop()
    started = events[0]
    assert isinstance(started, RunStarted) and started.reuse["source"] == source
    # The reuse phase: one implementation request per reused plan, in the schedule's order,
    # each on the previous step's best child, before any plan request.
    implement = [p for p in prompts[:3]]
    assert all("IMPLEMENTATION REQUEST" in p for p in implement)
    for plan, cost, p in zip(SOURCE_PLANS, (4000, 2000, 1000), implement):
        assert plan in p and f"cost = {cost}\n" in p
    reused = [e for e in events if isinstance(e, CandidateEvaluated) and e.iteration == 0]
    assert [e.candidate.id for e in reused] == ["i0.b0.p0.k0", "i0.b0.p1.k0", "i0.b0.p2.k0"]
    assert [e.candidate.plan for e in reused] == SOURCE_PLANS
    assert all(e.improves_parent for e in reused)
    proposals = [e for e in events if isinstance(e, PlansProposed) and e.iteration == 0]
    assert proposals[0].models == [f"(plan reused from run {source})"]
    assert any(isinstance(e, Notice) and e.message.startswith("schedule reuse: 3 of 3 plan(s)") for e in events)
    final = events[-1]
    assert isinstance(final, RunFinished)
    assert final.reuse == {"source": source, "plans": SOURCE_PLANS, "reused": 3, "kept": 3, "reason": choice.reason}
    assert final.speedup >= 8.0  # 4000 -> 500 from the schedule, then the search goes on
    assert any(isinstance(e, CandidateEvaluated) and e.iteration >= 1 for e in events)
    assert store.run_meta(search.run_id)["reuse"]["kept"] == 3


async def test_reuse_spends_the_same_call_budget(tmp_path, monkeypatch):
    server = _serve(monkeypatch)
    try:
        store, source, _ = await _source_run(tmp_path, monkeypatch, server)
        config = SearchConfig(iterations=3, beam=2, plans=2, implementations=1, llm_timeout=5, llm_retries=1, seed=1, budget_calls=4)
        big_path = write(tmp_path, "big.kern", BIG)
        plain = await collect(search_on(store, BIG, big_path, config=config))
        choice = resolve_reuse(store, search_on(store, BIG, big_path).problem, source)
        reusing = await collect(search_on(store, BIG, big_path, config=config, reuse=choice))
    finally:
        server.stop()
    for events in (plain, reusing):
        assert isinstance(events[-1], RunFinished) and events[-1].reason == "budget-calls"
        assert sum(u.calls for u in events[-1].usage.values()) <= 4
    assert reusing[-1].speedup > plain[-1].speedup  # 8x from the schedule vs 10 % steps


async def test_reuse_resumes_exactly(tmp_path, monkeypatch):
    server = _serve(monkeypatch)
    try:
        store, source, _ = await _source_run(tmp_path, monkeypatch, server)
        big_path = write(tmp_path, "big.kern", BIG)
        choice = resolve_reuse(store, search_on(store, BIG, big_path).problem, "auto")
        reference = await collect(search_on(store, BIG, big_path, reuse=choice))
        requests_before = server.requests
        killed = search_on(store, BIG, big_path, reuse=choice)
        seen = 0
        async for event in killed.run():
            if isinstance(event, CandidateEvaluated):
                seen += 1
                if seen == 2:
                    break
        await killed.pool.close()
        meta = store.run_meta(killed.run_id)
        resumed = search_on(store, BIG, big_path, run_id=killed.run_id, resumed=True, reuse=ReuseChoice.from_json(meta["reuse"]))
        again = await collect(resumed)
    finally:
        server.stop()
    assert server.requests == requests_before  # everything came from the store
    a, b = reference[-1], again[-1]
    assert (a.best.id, a.best.code, a.speedup, a.reuse) == (b.best.id, b.best.code, b.speedup, b.reuse)


def _cli(args, env):
    return subprocess.run([sys.executable, "-m", "autocomp", *args], capture_output=True, text=True, env=env, timeout=120)


def test_cli_reuse_auto_json_and_runs_listing(tmp_path):
    small, big = write(tmp_path, "small.kern", SMALL), write(tmp_path, "big.kern", BIG)
    flags = ["--target", "scripted", "--iterations", "2", "--beam", "2", "--plans", "2", "--implementations", "1", "--llm", "openai:fake"]
    with FakeLLMServer(rules()) as server:
        env = dict(os.environ, **server.env())
        nothing = _cli(["optimize", big, "--reuse", "auto", *flags], env)
        assert nothing.returncode == 0, nothing.stderr
        assert "no finished scripted run with a schedule is similar enough" in nothing.stderr
        first = _cli(["optimize", small, *flags, "--iterations", "3"], env)
        assert first.returncode == 0, first.stderr
        runs = json.loads(_cli(["runs", "--json"], env).stdout)
        source = next(r for r in runs if r["kernel"] == "gemm")
        assert source["schedule"]["plans"] == SOURCE_PLANS
        reused = _cli(["optimize", big, "--reuse", "auto", "--json", *flags], env)
        assert reused.returncode == 0, reused.stderr
        bad = _cli(["optimize", big, "--reuse", "no-such-run", *flags], env)
        listing = _cli(["runs", "--schedules"], env)
        shown = _cli(["show", source["run_id"]], env)
    events = [json.loads(line) for line in reused.stdout.splitlines()]
    assert events[0]["type"] == "run_started" and events[0]["reuse"]["source"] == source["run_id"]
    final = events[-1]
    assert final["type"] == "run_finished"
    assert final["reuse"]["source"] == source["run_id"]
    assert final["reuse"]["plans"] == SOURCE_PLANS
    assert (final["reuse"]["reused"], final["reuse"]["kept"]) == (3, 3)
    assert bad.returncode == 2 and "no run 'no-such-run'" in bad.stderr
    assert "3 plans · matmul" in listing.stdout and "1. Plan: go from 1000 to 500." in listing.stdout
    assert "schedule (3 plan(s) on the best path" in shown.stdout
    assert "↻" in listing.stdout  # the reusing run is marked


async def test_similar_runs_only_of_the_same_target_and_kind(tmp_path, monkeypatch):
    server = _serve(monkeypatch)
    try:
        store, source, _ = await _source_run(tmp_path, monkeypatch, server)
    finally:
        server.stop()
    other = search_on(store, "kernel scale {\n  result = 1\n  cost = 10\n}\n", "x.kern").problem
    assert similar_runs(store, other) == []  # an unrelated operation is never picked by auto
    assert resolve_reuse(store, other, "auto") is None
    big = search_on(store, BIG, "big.kern").problem
    assert [m.run_id for m in similar_runs(store, big)] == [source]
    assert similar_runs(store, big, exclude=source) == []
