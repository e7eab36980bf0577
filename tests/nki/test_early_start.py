"""A candidate starts on the oracle's first input set while the original still runs
(Harness.early_start): what the oracle's child sends early, how the parent takes it, and
that the verdicts are the ones the ordinary order gives, whatever the early run met."""

from __future__ import annotations

import asyncio
import json
import logging
import time

import numpy as np
import pytest

from autocomp.backends import get_backend
from autocomp.backends.nki.harness import ChannelParser, ChildRun, Harness, parse_channel
from autocomp.backends.nki.trace import Instr
from autocomp.model import Verdict

from test_nki_harness import BASE, ORIGINAL, OUT_ARG, variant  # the same kernels, one definition

# The original's code as a different text: evaluated as any candidate (the original's own
# text takes the shorter path of test_the_original_as_its_own_candidate_*).
COPY = ORIGINAL.rstrip("\n") + "  # a copy\n"


def _line(msg) -> bytes:
    return json.dumps(msg).encode() + b"\n"


def _array(key: str, arr: np.ndarray) -> bytes:
    return _line(["array", key, str(arr.dtype), list(arr.shape), arr.nbytes]) + arr.tobytes()


A = np.arange(12, dtype=np.float32).reshape(3, 4)
B = np.arange(5, dtype=np.int32)
INS = Instr("memset", "vector", 3, 128, 4, 4, (), ((1, 0, 128, 0, 16),), {}).to_list()
TAIL = _line(["t", [["i", INS], ["i", INS]]]) + _array("s0_out0", A) + _line(["result", {"status": "ok"}])
EARLY = _array("s0_in0", A) + _array("s0_in1", B) + _line(["inputs", 0, 2])


@pytest.mark.parametrize("size", [1, 5, 64, 1 << 30])
def test_early_inputs_are_announced_once_and_join_the_arrays(size):
    seen = []
    parser = ChannelParser(lambda seed, arrays: seen.append((seed, arrays, len(parser.trace))))
    raw = EARLY + TAIL
    for i in range(0, len(raw), size):
        parser.feed(raw[i:i + size])
    result, trace, arrays, problem = parser.finish()
    assert problem == "" and result == {"status": "ok"} and len(trace) == 2
    assert len(seen) == 1 and seen[0][0] == 0 and seen[0][2] == 0  # announced before any instruction
    np.testing.assert_array_equal(seen[0][1][0], A)
    np.testing.assert_array_equal(seen[0][1][1], B)
    assert sorted(arrays) == ["s0_in0", "s0_in1", "s0_out0"]
    np.testing.assert_array_equal(arrays["s0_in1"], B)


@pytest.mark.parametrize("raw, why", [
    (_array("s0_in0", A) + _array("s0_in0", A) + _line(["inputs", 0, 1]) + TAIL, "malformed early inputs"),
    (_array("s0_in0", A) + _line(["inputs", 0, 2]) + TAIL, "malformed early inputs"),  # names one never sent
    (_array("s0_in0", A) + _array("x", B) + _line(["inputs", 0, 1]) + TAIL, "malformed early inputs"),
    (_array("s0_in0", A) + TAIL, "without their closing line"),
    (EARLY + _array("s0_in0", A) + _line(["result", {}]), "sent again"),
    (_line(["array", "s0_in0", "float32", [3, 4], 48]) + b"\0" * 10, "bad array"),  # cut short
])
def test_malformed_early_inputs_fail_the_channel(raw, why):
    calls = []
    parser = ChannelParser(lambda seed, arrays: calls.append(seed))
    parser.feed(raw)
    result, _, _, problem = parser.finish()
    assert result is None and why in problem


def test_without_a_listener_arrays_before_the_trace_are_the_ordinary_kind():
    """A candidate's channel (no on_inputs): an instruction-less run sends its arrays first,
    and they are parsed at the end exactly as parse_channel does."""
    raw = _array("s0_out0", A) + _line(["result", {"status": "ok"}])
    parser = ChannelParser()
    parser.feed(raw)
    fed = parser.finish()
    whole = parse_channel(raw)
    assert fed[0] == whole[0] and fed[3] == whole[3] == "" and fed[2].keys() == whole[2].keys()


def _recording(monkeypatch):
    """Every child run with its mode, request extras, limits and start/end times."""
    runs = []
    orig = Harness._run_child

    async def run_child(self, file_text, function, mode, extra, *a, **k):
        entry = {"mode": mode, "extra": extra, "limits": k.get("limits"), "start": time.monotonic()}
        runs.append(entry)
        run = await orig(self, file_text, function, mode, extra, *a, **k)
        entry["end"] = time.monotonic()
        entry["ok"] = run.ok
        return run

    monkeypatch.setattr(Harness, "_run_child", run_child)
    return runs


def _problem(tmp_path, text=BASE, settings=None):
    path = tmp_path / "kernel.py"
    path.write_text(text)
    backend = get_backend("nki", {"timeout": 20, "seeds": [0], **(settings or {})})
    return backend, backend.make_problem(str(path), text)


def test_the_candidate_runs_beside_the_original_with_the_smallest_limits(tmp_path, monkeypatch):
    runs = _recording(monkeypatch)
    backend, problem = _problem(tmp_path)
    (ev,) = asyncio.run(backend.evaluate(problem, [COPY]))
    assert ev.verdict is Verdict.CORRECT, ev.feedback
    oracle, cand = runs
    assert oracle["mode"] == "oracle" and oracle["extra"]["early_inputs"] is True
    assert cand["mode"] == "candidate" and cand["start"] < oracle["end"]  # started before the original ended
    assert cand["extra"]["seeds"] == [0] and cand["extra"]["poison"] == [] and cand["extra"]["reorder"] is True
    assert cand["limits"][0] == backend.harness.timeout
    # Later candidates find the oracle done and run the ordinary way.
    (ev,) = asyncio.run(backend.evaluate(problem, [variant("operand0=2.0", "operand0=3.0")]))
    assert ev.verdict is Verdict.INCORRECT and len(runs) == 3 and runs[2]["limits"] is None


def test_the_original_runs_once_however_many_candidates_wait(tmp_path, monkeypatch):
    runs = _recording(monkeypatch)
    backend, problem = _problem(tmp_path)
    wrong = variant("operand0=2.0", "operand0=3.0")
    evs = asyncio.run(backend.evaluate(problem, [COPY, wrong, ORIGINAL]))
    assert [e.verdict for e in evs] == [Verdict.CORRECT, Verdict.INCORRECT, Verdict.CORRECT]
    assert [r["mode"] for r in runs].count("oracle") == 1


def test_more_input_sets_run_after_the_early_one(tmp_path, monkeypatch):
    """The original ran three sets: the early run covered the first (with the reversed run),
    a second child the other two (no reversed run); a wrong kernel is still caught."""
    runs = _recording(monkeypatch)
    backend, problem = _problem(tmp_path, settings={"seeds": [0, 1, 2]})
    good, bad = asyncio.run(backend.evaluate(problem, [COPY, variant("operand0=2.0", "operand0=3.0")]))
    assert good.verdict is Verdict.CORRECT and bad.verdict is Verdict.INCORRECT, (good.feedback, bad.feedback)
    assert "Checked on" not in good.feedback  # all three sets
    rest = [r for r in runs if r["mode"] == "candidate" and r["extra"]["seeds"] == [1, 2]]
    assert rest and all(r["extra"]["reorder"] is False for r in rest)


def test_an_original_that_writes_an_argument_makes_the_candidate_run_again_poisoned(tmp_path, monkeypatch):
    runs = _recording(monkeypatch)
    backend, problem = _problem(tmp_path, OUT_ARG, {"seeds": [0, 1]})
    half = problem.code.replace("a.shape[0] // 128", "1")  # leaves the poisoned rows behind
    (ev,) = asyncio.run(backend.evaluate(problem, [half]))
    assert ev.verdict is Verdict.INCORRECT and "output argument 1" in ev.feedback
    assert any(r["mode"] == "candidate" and r["extra"]["poison"] == [1] for r in runs)


def test_an_early_run_that_failed_under_its_limits_is_run_again(tmp_path, monkeypatch):
    """The early run's limits are the smallest a candidate gets: a time-out there is not the
    verdict; the candidate runs again with the limits the original's time gives."""
    runs = _recording(monkeypatch)

    async def timed_out(self, problem, text, seed, arrays, reverse_only=False):
        return ChildRun(False, {}, timed_out=True)

    monkeypatch.setattr(Harness, "_early_run", timed_out)
    backend, problem = _problem(tmp_path, settings={"reorder_proof": False})
    (ev,) = asyncio.run(backend.evaluate(problem, [COPY]))
    assert ev.verdict is Verdict.CORRECT, ev.feedback
    assert [r["mode"] for r in runs] == ["oracle", "candidate"] and runs[1]["limits"] is None
    (ev,) = asyncio.run(backend.evaluate(backend.make_problem(problem.path, problem.file_text + "\n"), [ORIGINAL]))
    assert ev.verdict is Verdict.CORRECT, ev.feedback  # the original's own reversed run, likewise
    assert [r["mode"] for r in runs[2:]] == ["oracle", "candidate"] and runs[3]["extra"]["reverse_only"] is True


def test_an_original_that_fails_cancels_the_early_run_and_leaves_nothing_unretrieved(tmp_path, caplog):
    """The early candidate is killed; the futures its cancelled run left are marked retrieved
    (a finalizer logging them later can run inside ast.parse, which CPython 3.11 then fails)."""
    import gc

    from autocomp.backends.base import BackendError

    backend, problem = _problem(tmp_path, BASE.replace("operand0=2.0", "operand0=a"))
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        with pytest.raises(BackendError, match="fails in the NKI interpreter"):
            asyncio.run(backend.evaluate(problem, [problem.code]))
        gc.collect()
    assert "never retrieved" not in caplog.text
    backend, problem = _problem(tmp_path)
    (ev,) = asyncio.run(backend.evaluate(problem, [ORIGINAL]))  # its static check parses the file
    assert ev.verdict is Verdict.CORRECT


def test_early_start_off_runs_the_original_first(tmp_path, monkeypatch):
    runs = _recording(monkeypatch)
    backend, problem = _problem(tmp_path)
    backend.harness.early_start = False
    (ev,) = asyncio.run(backend.evaluate(problem, [COPY]))
    assert ev.verdict is Verdict.CORRECT
    assert runs[0]["extra"]["early_inputs"] is False and runs[1]["start"] >= runs[0]["end"]


def test_the_seed_budget_counts_cpu_seconds_and_wall_seconds_before_the_first_tick():
    """The input sets the original runs do not depend on the machine's load (a candidate
    beside it): CPU seconds count; the sandbox's CPU clock ticks every few ms, and before
    its first tick the wall time stands in (else a tiny budget would never stop a run)."""
    from autocomp.backends.nki.runner import budget_seconds

    assert budget_seconds(2.0, 7.5) == 2.0  # loaded machine: the CPU the original used
    assert budget_seconds(0.0, 0.003) == 0.003


def test_the_original_as_its_own_candidate_runs_only_the_reversed_run_beside_it(tmp_path, monkeypatch):
    """``autocomp eval FILE`` and the search's baseline: the oracle ran exactly this code on
    the same inputs, so its outputs and trace stand; only the reversed-loop run is left, and
    it starts beside the original. The rating is the original's own estimate. (Here the
    reorder proof is off; with it, see the next test.)"""
    runs = _recording(monkeypatch)
    backend, problem = _problem(tmp_path, settings={"seeds": [0, 1], "reorder_proof": False})
    (ev,) = asyncio.run(backend.evaluate(problem, [ORIGINAL]))
    assert ev.verdict is Verdict.CORRECT, ev.feedback
    oracle, rev = runs
    assert rev["mode"] == "candidate" and rev["extra"]["reverse_only"] is True and rev["extra"]["seeds"] == [0]
    assert rev["start"] < oracle["end"] and rev["limits"][0] == backend.harness.timeout
    base = backend.harness._oracles[problem.content_hash()].estimate
    assert ev.metrics["cycles"].value == base.cycles and "(1.00x the original's" in ev.feedback
    (again,) = asyncio.run(backend.evaluate(problem, [ORIGINAL]))  # oracle known: one reversed run
    assert again.verdict is Verdict.CORRECT and len(runs) == 3 and runs[2]["extra"]["reverse_only"] is True
    assert runs[2]["limits"] is None


def test_the_original_proven_by_its_own_run_needs_no_reversed_run(tmp_path, monkeypatch):
    """With the reorder proof (the default), the original's run shows its affine_range
    iterations independent: a reversed run started beside it is stopped, and evaluating the
    original again starts none."""
    runs = _recording(monkeypatch)
    backend, problem = _problem(tmp_path, settings={"seeds": [0, 1]})
    (ev,) = asyncio.run(backend.evaluate(problem, [ORIGINAL]))
    assert ev.verdict is Verdict.CORRECT, ev.feedback
    assert runs[0]["mode"] == "oracle" and runs[0]["extra"]["reorder_proof"] is True
    assert backend.harness._oracles[problem.content_hash()].reorder_proven
    before = len(runs)
    (again,) = asyncio.run(backend.evaluate(problem, [ORIGINAL]))
    assert again.verdict is Verdict.CORRECT and len(runs) == before


ORDER_DEPENDENT = '''import numpy as np
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def last_block(a):
    out = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    for i in nl.affine_range(a.shape[0] // 128):
        nisa.dma_copy(dst=t, src=a[i * 128:(i + 1) * 128, :])
    nisa.dma_copy(dst=out, src=t)
    return out


def get_inputs(rng):
    return [rng.standard_normal((512, 8)).astype(np.float32)]
'''


def test_the_original_as_its_own_candidate_still_meets_the_reversed_run(tmp_path, monkeypatch):
    """An original whose result depends on the order of its affine_range iterations fails
    as its own candidate, as any candidate with that code would."""
    runs = _recording(monkeypatch)
    backend, problem = _problem(tmp_path, ORDER_DEPENDENT)
    (ev,) = asyncio.run(backend.evaluate(problem, [problem.code]))
    assert ev.verdict is Verdict.RUNTIME_ERROR and "loop-carried dependency" in ev.feedback, ev.feedback
    assert [r["extra"].get("reverse_only") for r in runs if r["mode"] == "candidate"] == [True]


def test_an_original_that_writes_an_argument_is_its_own_candidate_the_ordinary_way(tmp_path, monkeypatch):
    """A candidate gets written arguments poisoned, which the oracle's run did not: the
    original's outputs cannot stand for such a run, so it runs as any candidate."""
    runs = _recording(monkeypatch)
    backend, problem = _problem(tmp_path, OUT_ARG, {"seeds": [0, 1]})
    (ev,) = asyncio.run(backend.evaluate(problem, [problem.code]))
    assert ev.verdict is Verdict.CORRECT, ev.feedback
    full = [r for r in runs if r["mode"] == "candidate" and not r["extra"].get("reverse_only")]
    assert full and full[-1]["extra"]["poison"] == [1]


def test_the_original_without_the_reorder_check_needs_no_candidate_run(tmp_path, monkeypatch):
    runs = _recording(monkeypatch)
    backend, problem = _problem(tmp_path)
    backend.harness.reorder = False
    (ev,) = asyncio.run(backend.evaluate(problem, [ORIGINAL]))
    assert ev.verdict is Verdict.CORRECT and [r["mode"] for r in runs] == ["oracle"]
