"""The Ray executor against a real local Ray head: a replayed Gemmini run gives the same
result under both executors, inside the same sandbox; caching, cancellation, resume, lost
workers, and the driver's sandbox mode behave as with the local executor."""

from __future__ import annotations

import asyncio
import io
import json
import os
import time
from contextlib import redirect_stdout

import pytest

from autocomp import sandbox
from autocomp.cli.main import main as cli_main
from autocomp.config import SearchConfig
from autocomp.evaluator import Evaluator
from autocomp.events import CandidateEvaluated, RunFinished
from autocomp.executor import LocalExecutor, RayExecutor
from autocomp.llm import build_pool
from autocomp.search import BeamSearch
from autocomp.store import Store
from autocomp.testing.fake_llm import FakeLLMServer, load_rules
from autocomp.testing.probe_backend import ProbeBackend

from tests.engine.helpers import KERNEL, collect, halving_rules

pytestmark = pytest.mark.usefixtures("ray_head")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GEMM = os.path.join(ROOT, "examples", "gemmini", "gemm_64.c")
SCRIPT = os.path.join(ROOT, "examples", "gemmini", "gemm_64.script.json")
FLAGS = ["--iterations", "3", "--beam", "2", "--plans", "2", "--implementations", "1", "--seed", "0", "--json"]


def _optimize_json(monkeypatch, home, *args) -> list[dict]:
    monkeypatch.setenv("AUTOCOMP_HOME", str(home))
    out = io.StringIO()
    with redirect_stdout(out):
        status = cli_main(["optimize", *args])
    assert status == 0, out.getvalue()[-2000:]
    return [json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")]


def _outcome(events: list[dict]) -> dict:
    """Everything that makes a run what it is, without timings and run ids."""
    cands = {}
    for e in events:
        if e["type"] in ("baseline_evaluated", "candidate_evaluated"):
            c = e["candidate"]
            ev = c["evaluation"]
            cands[c["id"]] = (c["code"], c["plan"], c["parent"], ev["verdict"], json.dumps(ev["metrics"], sort_keys=True), ev["tier"], ev["sandbox"])
    beams = [[b["id"] for b in e["beam"]] for e in events if e["type"] == "beam_updated"]
    final = events[-1]
    return {"candidates": cands, "beams": beams, "final": (final["type"], final["best"]["id"], final["speedup"], final["reason"])}


def test_replayed_gemmini_run_is_the_same_under_both_executors(tmp_path, monkeypatch):
    # A session recorded here, against this checkout's Gemmini model, from the example's
    # authored reply book (so the replay matches whatever the timing model says today).
    session = tmp_path / "gemm_64.session.jsonl"
    with FakeLLMServer(load_rules(SCRIPT)) as server:
        for k, v in server.env().items():
            monkeypatch.setenv(k, v)
        _optimize_json(monkeypatch, tmp_path / "record", GEMM, "--llm", "openai:authored-session", "--record", str(session), *FLAGS)
    local = _optimize_json(monkeypatch, tmp_path / "local", GEMM, "--llm", f"replay:{session}", "--executor", "local", *FLAGS)
    ray_run = _optimize_json(monkeypatch, tmp_path / "ray", GEMM, "--llm", f"replay:{session}", "--executor", "ray", *FLAGS)
    a, b = _outcome(local), _outcome(ray_run)
    assert a == b
    assert len(a["candidates"]) > 4
    assert a["final"][0] == "run_finished" and a["final"][2] > 1.5  # the reply book's real gain
    # Same isolation: every evaluation on the Ray worker ran in bubblewrap like the local ones.
    assert {c[6] for c in b["candidates"].values()} == {"bwrap"}
    assert {c[5] for c in b["candidates"].values()} == {"spike + gemmini timing model"}


def _probe_search(store, settings, executor, config=None, **kwargs) -> BeamSearch:
    backend = ProbeBackend(settings)
    problem = backend.make_problem("scale.kern", KERNEL)
    config = config or SearchConfig(iterations=3, beam=2, plans=2, implementations=2, llm_timeout=5, llm_retries=2, seed=3)
    pool = build_pool(["openai:fake"], store, timeout=config.llm_timeout, retries=config.llm_retries)
    pool.backoff = 0.01
    return BeamSearch(problem, backend, pool, config, store, evaluator=Evaluator(backend, store, executor=executor), **kwargs)


def _summary(events) -> tuple:
    final = events[-1]
    assert isinstance(final, RunFinished), final
    cands = sorted((e.candidate.id, e.candidate.code, e.candidate.verdict.value) for e in events if isinstance(e, CandidateEvaluated))
    return final.best.id, final.best.code, final.speedup, cands


async def test_cache_is_shared_and_nothing_is_evaluated_twice(tmp_path, monkeypatch):
    log = tmp_path / "evals.log"
    store = Store.open(tmp_path / "home")
    settings = {"log": str(log)}
    with FakeLLMServer(halving_rules()) as server:
        for k, v in server.env().items():
            monkeypatch.setenv(k, v)
        local = _probe_search(store, settings, LocalExecutor())
        first = _summary(await collect(local))
        evaluated = log.read_text().splitlines()
        ray_exec = RayExecutor()
        again = _probe_search(store, settings, ray_exec)
        second = _summary(await collect(again))
    assert first == second
    assert ray_exec.stats.submitted == 0  # every evaluation came from the shared cache
    assert log.read_text().splitlines() == evaluated
    assert len(evaluated) == len(set(evaluated))


async def test_ray_run_equals_local_run_and_evaluates_on_workers(tmp_path, monkeypatch):
    with FakeLLMServer(halving_rules()) as server:
        for k, v in server.env().items():
            monkeypatch.setenv(k, v)
        local = _summary(await collect(_probe_search(Store.open(tmp_path / "a"), {}, LocalExecutor())))
        ray_exec = RayExecutor()
        remote = _summary(await collect(_probe_search(Store.open(tmp_path / "b"), {}, ray_exec)))
    assert local == remote
    assert ray_exec.stats.submitted == ray_exec.stats.finished > 0
    assert all(not place.endswith(f":{os.getpid()}") for place in ray_exec.stats.where)


async def test_cancel_kills_the_evaluation_on_the_worker(tmp_path, monkeypatch):
    pids = tmp_path / "pids"
    pids.mkdir()
    store = Store.open(tmp_path / "home")
    ray_exec = RayExecutor()
    with FakeLLMServer(halving_rules()) as server:
        for k, v in server.env().items():
            monkeypatch.setenv(k, v)
        search = _probe_search(store, {"latency": 120, "pid_dir": str(pids)}, ray_exec)
        task = asyncio.ensure_future(collect(search))
        deadline = time.monotonic() + 60
        while not os.listdir(pids) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        running = [int(p) for p in os.listdir(pids)]
        assert running, "the evaluation never started on a worker"
        assert os.getpid() not in running
        started = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await search.pool.close()
    assert time.monotonic() - started < 10
    assert ray_exec.stats.cancelled >= 1
    deadline = time.monotonic() + 30
    alive = running
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if _alive(p)]
        await asyncio.sleep(0.2)
    assert not alive, f"worker(s) {alive} still evaluating after cancel"
    # Nothing half-done was cached.
    assert Evaluator(search.backend, store).cached(search.problem, search.problem.code) is None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except OSError:
        return False


async def test_resume_under_ray_repeats_nothing_and_matches(tmp_path, monkeypatch):
    log = tmp_path / "evals.log"
    settings = {"log": str(log)}
    with FakeLLMServer(halving_rules()) as server:
        for k, v in server.env().items():
            monkeypatch.setenv(k, v)
        reference = _summary(await collect(_probe_search(Store.open(tmp_path / "ref"), {}, LocalExecutor())))
        store = Store.open(tmp_path / "home")
        search = _probe_search(store, settings, RayExecutor())
        seen = 0
        async for event in search.run():  # killed mid-run: the consumer goes away
            if isinstance(event, CandidateEvaluated):
                seen += 1
                if seen == 3:
                    break
        await search.pool.close()
        before = log.read_text().splitlines()
        resumed = _probe_search(store, settings, RayExecutor(), run_id=search.run_id, resumed=True)
        result = _summary(await collect(resumed))
    after = log.read_text().splitlines()[len(before):]
    assert result == reference
    assert not set(after) & set(before), "an evaluation was repeated after resume"


async def test_lost_worker_is_retried_on_another(tmp_path, monkeypatch):
    marks = tmp_path / "died"
    marks.mkdir()
    pids = tmp_path / "pids"
    pids.mkdir()
    config = SearchConfig(iterations=1, beam=1, plans=1, implementations=1, llm_timeout=5, llm_retries=2, seed=3)
    ray_exec = RayExecutor()
    with FakeLLMServer(halving_rules()) as server:
        for k, v in server.env().items():
            monkeypatch.setenv(k, v)
        settings = {"die_once": str(marks), "driver_pid": os.getpid()}
        events = await collect(_probe_search(Store.open(tmp_path / "home"), settings, ray_exec, config=config))
    final = events[-1]
    assert isinstance(final, RunFinished), final
    assert final.best.verdict.value == "correct" and final.speedup == 2.0
    assert len(os.listdir(marks)) == 2  # the start and the one candidate each lost a worker once
    assert ray_exec.stats.finished == 2


@pytest.mark.parametrize("mode", ["off", None])
async def test_driver_sandbox_mode_reaches_the_worker(tmp_path, monkeypatch, mode):
    monkeypatch.delenv(sandbox.ENV_VAR, raising=False)
    sandbox.configure(mode)
    try:
        backend = ProbeBackend({"report_sandbox": True})
        problem = backend.make_problem("scale.kern", KERNEL)
        result = await RayExecutor().evaluate(backend, problem, problem.code)
    finally:
        sandbox.configure(None)
    assert f"sandbox seen by the evaluating process: {mode or 'bwrap'}" in result.feedback
    assert result.sandbox == (mode or "bwrap")


async def test_sandbox_unavailable_on_a_worker_stops_the_run(tmp_path, monkeypatch):
    backend = ProbeBackend({"unavailable": True})
    problem = backend.make_problem("scale.kern", KERNEL)
    evaluator = Evaluator(backend, Store.open(tmp_path / "home"), executor=RayExecutor())
    with pytest.raises(sandbox.SandboxUnavailable, match="on Ray worker"):
        await evaluator.evaluate_one(problem, problem.code)


async def test_server_setting_runs_a_job_on_the_cluster(tmp_path, ray_head):
    """``autocomp.executor = "ray"`` in the editor: the server (a subprocess) joins the
    running cluster through RAY_ADDRESS, and its job's evaluations run there."""
    from lsprotocol import types as lsp

    from tests.server.lsp_harness import KERNEL as SERVER_KERNEL, default_rules, server_settings, start_editor

    address = ray_head.get_runtime_context().gcs_address
    with FakeLLMServer(default_rules()) as fake:
        settings = server_settings(str(tmp_path), executor="ray", search={"iterations": 1, "beam": 1, "plans": 1, "implementations": 1})
        editor = await start_editor("neovim@0.7", str(tmp_path), fake, settings, env={"RAY_ADDRESS": address})
        try:
            doc = editor.open("k.kern", SERVER_KERNEL)
            actions = await editor.code_actions(doc, 2)
            optimize = next(a for a in actions if isinstance(a, lsp.CodeAction) and a.title.startswith("Optimize kernel scale"))
            result = await editor.command(optimize.command.command, optimize.command.arguments[0])
            final = await editor.wait_state(result["jobId"], timeout=120)
        finally:
            await editor.client.shutdown_session()
            await editor.client.stop()
    assert final["state"] == "finished", final
    assert final["bestSpeedup"] and final["bestSpeedup"] > 1.0
    # The evaluations ran as tasks of this cluster (task events reach the GCS within seconds).
    deadline, ran = time.monotonic() + 30, 0
    while ran < 2 and time.monotonic() < deadline:
        ran = sum(1 for e in ray_head.timeline() if e.get("name") == "autocomp.executor.evaluate_in_worker")
        await asyncio.sleep(0.5)
    assert ran >= 2  # the start and the one candidate


@pytest.mark.parametrize(
    "rel, device",
    [("examples/gemmini/gemm_64.c", "gemmini_sim"), ("examples/nki/gemm.py", "trainium"), ("examples/cuda/row_softmax.cu", "GPU")],
)
async def test_each_task_gets_the_device_its_target_needs(rel, device):
    from autocomp.backends import detect_target

    path = os.path.join(ROOT, rel)
    text = open(path, encoding="utf-8").read()
    backend = detect_target(path, text)[0]
    problem = backend.make_problem(path, text)
    ray_exec = RayExecutor()
    remote = await ray_exec.evaluate(backend, problem, problem.code)
    assigned = ray_exec.stats.assigned[-1]
    assert assigned.get("CPU") == 1.0 and assigned.get(device) == 1.0, assigned
    local = await LocalExecutor().evaluate(backend, problem, problem.code)
    assert (remote.verdict, remote.tier, remote.confirmed) == (local.verdict, local.tier, local.confirmed)
    assert {k: m.to_json() for k, m in remote.metrics.items()} == {k: m.to_json() for k, m in local.metrics.items()}
