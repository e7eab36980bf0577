"""In-search tuning (``--tune-evals N``, ``autocomp.search.tuneEvals``): a new best's constants
are tuned with at most N evaluations and the tuned variant enters the beam as its own
candidate ``<id>.t`` ("tuned from <id>"). The contract end to end on the real Gemmini
evaluator and the loopback LLM double; budget, failures, kernels without tunables and stop()
on the scripted backend double (whose evaluations the tests control)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from autocomp.cli.main import main
from autocomp.config import SearchConfig
from autocomp.events import CandidateEvaluated, Notice, RunFinished
from autocomp.model import Evaluation, Verdict
from autocomp.testing.scripted_backend import ScriptedBackend
from autocomp.tuning.space import Space, Tunable

from tests.engine.helpers import collect, fake_server, halving_rules, kern, make_search

ROOT = Path(__file__).resolve().parents[2]

# gemm_64's starting code (no tunables) and a faster rewrite with two tile constants in it.
HEAD = (ROOT / "examples/gemmini/gemm_64.c").read_text().split("void gemm(", 1)[0]
LOOP_WS = """void gemm(const elem_t A[MAT_DIM_I][MAT_DIM_K], const elem_t B[MAT_DIM_K][MAT_DIM_J],
          elem_t C[MAT_DIM_I][MAT_DIM_J]) {
  const int TI = 1;  // row tiles per hardware loop
  const int TJ = 1;  // column tiles per hardware loop
  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_config_st(MAT_DIM_J * sizeof(elem_t));
  gemmini_extended3_config_ld(MAT_DIM_K * sizeof(elem_t), MVIN_SCALE_IDENTITY, false, 0);
  gemmini_extended3_config_ld(MAT_DIM_J * sizeof(elem_t), MVIN_SCALE_IDENTITY, false, 1);
  for (int i0 = 0; i0 < MAT_DIM_I / DIM; i0 += TI)
    for (int j0 = 0; j0 < MAT_DIM_J / DIM; j0 += TJ)
      gemmini_loop_ws(TI, TJ, MAT_DIM_K / DIM, 0, 0, 0, &A[i0 * DIM][0], &B[0][j0 * DIM], NULL,
                      &C[i0 * DIM][j0 * DIM], MAT_DIM_K, MAT_DIM_J, MAT_DIM_J, MAT_DIM_J,
                      false, false, false, false, false, NO_ACTIVATION, 0, 0, false);
}
"""
GEMMINI_RULES = [
    {"role": "plan", "reply": "Plan: hand each block of output tiles to the hardware loop gemmini_loop_ws."},
    {"role": "implement", "reply": f"Here it is:\n```c\n{LOOP_WS}```\n"},
]
FLAGS = ["--iterations", "1", "--beam", "2", "--plans", "1", "--implementations", "1", "--seed", "0"]
NOTE = "Constants are tuned for you"


def _events(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


@pytest.mark.slow
def test_gemmini_new_best_is_tuned_and_enters_the_beam(tmp_path, capsys, monkeypatch):
    kernel = tmp_path / "gemm.c"
    kernel.write_text((ROOT / "examples/gemmini/gemm_64.c").read_text())
    with fake_server(monkeypatch, rules=GEMMINI_RULES) as server:
        assert main(["optimize", str(kernel), "--llm", "openai:fake", *FLAGS, "--tune-evals", "3", "--json"]) == 0
        events = _events(capsys.readouterr().out)
        tuned_prompts = list(server.prompts)
        # Off (the default): no tuning, and the plan prompt does not mention it.
        assert main(["optimize", str(kernel), "--llm", "openai:fake", *FLAGS, "--json"]) == 0
        off = _events(capsys.readouterr().out)
        off_prompts = server.prompts[len(tuned_prompts):]
        # The setting by its key reaches the same field.
        assert main(["optimize", str(kernel), "--llm", "openai:fake", *FLAGS, "--set", "search.tuneEvals=2"]) == 0
        text = capsys.readouterr()
    assert events[0]["type"] == "run_started" and events[0]["config"]["tune_evals"] == 3
    cands = {e["candidate"]["id"]: e for e in events if e["type"] == "candidate_evaluated"}
    assert set(cands) == {"i1.b0.p0.k0", "i1.b0.p0.k0.t"}
    tuned = cands["i1.b0.p0.k0.t"]["candidate"]
    assert tuned["plan"].startswith("tuned from i1.b0.p0.k0: ") and tuned["parent"] == "i1.b0.p0.k0"
    assert tuned["evaluation"]["verdict"] == "correct" and tuned["usage"]["calls"] == 0
    assert cands["i1.b0.p0.k0.t"]["improves_parent"] is True
    assert cands["i1.b0.p0.k0.t"]["speedup"] > cands["i1.b0.p0.k0"]["speedup"]
    assert re.search(r"const int T[IJ] = [24];", tuned["code"])  # only the constants changed
    beam = next(e for e in events if e["type"] == "beam_updated")
    assert beam["beam"][0]["id"] == "i1.b0.p0.k0.t" and "i1.b0.p0.k0" in [b["id"] for b in beam["beam"]]
    notice = next(e["message"] for e in events if e["type"] == "notice" and "tuned i1.b0.p0.k0" in e["message"])
    assert "3 configuration(s) of TI, TJ" in notice and "in the beam as i1.b0.p0.k0.t" in notice  # the budget
    final = events[-1]
    assert final["type"] == "run_finished" and final["best"]["id"] == "i1.b0.p0.k0.t"
    # the plan prompt says constants are tuned only when tuning is on
    plan_on = [p for p in tuned_prompts if "OPTIMIZATION PLAN REQUEST" in p]
    plan_off = [p for p in off_prompts if "OPTIMIZATION PLAN REQUEST" in p]
    assert plan_on and all(NOTE in p and "up to 3 configurations" in p for p in plan_on)
    assert plan_off and not any(NOTE in p for p in plan_off)
    assert not [e for e in off if e["type"] == "candidate_evaluated" and e["candidate"]["id"].endswith(".t")]
    assert [e for e in off if e["type"] == "run_finished"][0]["best"]["id"] == "i1.b0.p0.k0"
    # --set search.tuneEvals: the human output names the tuned candidate as the best
    assert "tuned i1.b0.p0.k0: 2 configuration(s)" in text.err
    assert "best: i1.b0.p0.k0.t — tuned from i1.b0.p0.k0" in text.err
    # the store: `autocomp show RUN --json` has the tuned candidate and the run's tuning count
    assert main(["runs", "--json"]) == 0
    runs = [r for r in json.loads(capsys.readouterr().out) if r["kind"] == "search"]
    first = runs[0]
    assert first["best"] == "i1.b0.p0.k0.t" and first["tuned_evaluations"] == 3
    assert not any(first["schedule"]["plans"][i].startswith("tuned from") for i in range(len(first["schedule"]["plans"])))
    assert main(["show", first["run_id"], "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert any(c["id"] == "i1.b0.p0.k0.t" and c["plan"].startswith("tuned from i1.b0.p0.k0") for c in shown["candidates"])


# -- the scripted double with a tunable: its `cost` literal, so tuning has a known optimum --
class TunableScripted(ScriptedBackend):
    """The scripted double whose ``cost`` literal is a tunable (values ``VALUES``); an
    evaluation of cost 13 fails (a failed trial), of cost 7 never ends (for stop())."""

    VALUES = [100, 200, 300, 400]

    def __init__(self, settings=None):
        super().__init__(settings or {})
        self.evaluated_codes: list[str] = []
        self.hanging = asyncio.Event()

    async def tunables(self, problem):
        text, s, e = problem.file_text, problem.span.start_line, problem.span.end_line
        lines = text.splitlines(keepends=True)
        for n in range(s, e):
            m = re.match(r"(\s*cost\s*=\s*)(\d+)", lines[n])
            if m:
                start = sum(len(x) for x in lines[:n]) + m.end(1)
                value = int(m.group(2))
                values = sorted(set(self.VALUES) | {value})
                return Space([Tunable("cost", value, values, "const", n, start, start + len(m.group(2)), True)], [],
                             text, s, e, "python")
        return None

    async def _one(self, problem, code):
        self.evaluated_codes.append(code)
        if re.search(r"cost = 13\b", code):
            return Evaluation(Verdict.RUNTIME_ERROR, feedback="scripted failure")
        if re.search(r"cost = 7\b", code):
            self.hanging.set()
            await asyncio.sleep(3600)
        return await super()._one(problem, code)


def _search(backend, tune_evals, iterations=1):
    config = SearchConfig(iterations=iterations, beam=2, plans=1, implementations=1, llm_timeout=5, llm_retries=0,
                          tune_evals=tune_evals)
    search = make_search(config=config)
    search.backend = backend
    search.evaluator.backend = backend
    return search


def test_budget_failed_trials_and_the_tuned_candidate(monkeypatch):
    backend = TunableScripted()
    backend.VALUES = [13, 100, 200, 300, 400]
    with fake_server(monkeypatch, rules=halving_rules()):
        search = _search(backend, tune_evals=3)
        events = asyncio.run(collect(search))
    tuned = search.candidates.get("i1.b0.p0.k0.t")
    assert search.tuned_evaluations == 3  # at most the budget
    tuning_codes = [c for c in backend.evaluated_codes if "cost = 500" not in c and "cost = 1000" not in c]
    assert len(tuning_codes) <= 3
    assert tuned is not None and tuned.plan.startswith("tuned from i1.b0.p0.k0: cost=")
    assert tuned.verdict is Verdict.CORRECT and tuned.parent == "i1.b0.p0.k0"
    assert any(isinstance(e, CandidateEvaluated) and e.candidate.id == tuned.id for e in events)
    final = events[-1]
    assert isinstance(final, RunFinished) and final.best.id == tuned.id and final.reason == "completed"


def test_off_at_zero_and_no_tunables_means_no_tuning(monkeypatch):
    with fake_server(monkeypatch, rules=halving_rules()):
        off = _search(TunableScripted(), tune_evals=0)
        off_events = asyncio.run(collect(off))
        plain = make_search(config=SearchConfig(iterations=2, beam=2, plans=1, implementations=1, llm_timeout=5,
                                                llm_retries=0, tune_evals=5))
        plain_events = asyncio.run(collect(plain))
    for search, events in ((off, off_events), (plain, plain_events)):
        assert search.tuned_evaluations == 0
        assert not [c for c in search.candidates if c.endswith(".t")]
        assert not [e for e in events if isinstance(e, Notice) and "tun" in e.message]  # skipped silently
        assert isinstance(events[-1], RunFinished)
    assert plain_events[-1].best.code == kern(250)


def test_stop_during_tuning_ends_the_run(monkeypatch):
    backend = TunableScripted()
    backend.VALUES = [7]  # the only other configuration never finishes evaluating

    async def drive(search):
        async def stopper():
            await asyncio.wait_for(backend.hanging.wait(), 30)
            search.stop()

        task = asyncio.create_task(stopper())
        events = await asyncio.wait_for(collect(search), 30)
        await task
        return events

    with fake_server(monkeypatch, rules=halving_rules()):
        search = _search(backend, tune_evals=4, iterations=3)
        events = asyncio.run(drive(search))
    final = events[-1]
    assert isinstance(final, RunFinished) and final.reason == "cancelled"
    assert final.best.id == "i1.b0.p0.k0" and final.best.code == kern(500)  # the best so far
    assert not [c for c in search.candidates if c.endswith(".t")]


def test_flag_and_setting_reach_the_config(tmp_path):
    from autocomp.cli.main import build_parser
    from autocomp.schema import cli_overrides, knob

    k = knob("autocomp.search.tuneEvals")
    assert (k.cli, k.field, k.default, k.minimum) == ("--tune-evals", "tune_evals", 0, 0)
    args = build_parser().parse_args(["optimize", str(tmp_path / "k.c"), "--tune-evals", "6"])
    assert cli_overrides(args)["tune_evals"] == 6
    args = build_parser().parse_args(["optimize", str(tmp_path / "k.c"), "--set", "search.tuneEvals=4"])
    assert cli_overrides(args)["tune_evals"] == 4
    assert SearchConfig().tune_evals == 0
    with pytest.raises(Exception):
        SearchConfig(tune_evals=-1).validate()


@pytest.mark.slow
def test_runs_lists_tune_runs_marked_as_such(tmp_path, capsys, monkeypatch):
    from tests.tuning.test_space import GEMMINI

    scripted = tmp_path / "scale.kern"
    scripted.write_text(kern(1000))
    with fake_server(monkeypatch, rules=halving_rules()):
        assert main(["optimize", str(scripted), "--target", "scripted", "--llm", "openai:fake", "--iterations", "1", "--plans", "1",
                     "--implementations", "1", "--json"]) == 0
    gemm = tmp_path / "gemm.c"
    gemm.write_text(GEMMINI)
    assert main(["tune", str(gemm), "--budget-evals", "2", "--json"]) == 0
    tuned = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert main(["runs", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["kind"] for r in rows] == ["search", "tune"]
    tune_row = rows[1]
    assert tune_row["run_id"] == f"tune:{tuned['run_id']}" and tune_row["kernel"] == "gemm"
    assert tune_row["target"] == "gemmini" and tune_row["configs_tried"] == 2 and tune_row["strategy"] == "tpe"
    assert tune_row["speedup"] == tuned["speedup"]
    assert main(["runs"]) == 0
    listing = capsys.readouterr().out.splitlines()
    line = next(x for x in listing if x.startswith(f"tune:{tuned['run_id']}"))
    assert " tune " in line and "gemmini" in line and "tune · 2 configs" in line and "no LLM (tpe tuner)" in line
    assert any(x.split()[1] == "finished" for x in listing[1:] if not x.startswith("tune:"))
    assert main(["show", f"tune:{tuned['run_id']}"]) == 0
    shown = capsys.readouterr().out
    assert f"tune run {tuned['run_id']}: tpe" in shown and "2 configurations tried" in shown
    assert main(["show", "tune:no-such-run"]) == 2


@pytest.mark.parametrize("target", ["gemmini", "nki", "cuda"])
def test_each_target_says_constants_are_tuned_only_when_tuning_is_on(target):
    from autocomp.model import Candidate, Metric
    from autocomp.prompting import plan_request
    from autocomp.prompts import load_pieces, read_text

    note = read_text(f"{target}/tuning.md")
    assert NOTE in note and "$tune_evals" in note and "structure" in note
    assert len(note) < 1000  # the worst-case plan prompts keep > 5,000 characters of their budget
    pieces = load_pieces(target)
    start = Candidate(id="start", code="k", evaluation=Evaluation(Verdict.CORRECT, metrics={"cycles": Metric(1.0, "cycles", "m")}))
    off = plan_request(pieces, "k", start, [start], ["a"], 1, 3, "cycles", "tier")
    on = plan_request(pieces, "k", start, [start], ["a"], 1, 3, "cycles", "tier", tuning=note.replace("$tune_evals", "8"))
    assert off.user.endswith("Do not write the full code yet.") and NOTE not in off.user + off.system
    assert on.user.startswith(off.user) and on.user.endswith(note.replace("$tune_evals", "8").strip())
    assert on.system == off.system  # the provider-cached part is the same


def test_tuning_is_reproducible(monkeypatch):
    """Same seed, same replies: the same configurations and the same tuned candidate, on any
    machine (the batch size does not follow the executor's concurrency)."""
    results = []
    for concurrency in (1, 16):
        backend = TunableScripted()
        backend.VALUES = [13, 50, 100, 150, 200, 250, 300, 350, 400]
        with fake_server(monkeypatch, rules=halving_rules()):
            search = _search(backend, tune_evals=5)
            search.evaluator.executor.concurrency = concurrency
            asyncio.run(collect(search))
        tuned = search.candidates["i1.b0.p0.k0.t"]
        results.append((tuned.code, tuned.plan, search.tuned_evaluations))
    assert results[0] == results[1]
