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
    (ev,) = asyncio.run(backend.evaluate(problem, [ORIGINAL]))
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
    evs = asyncio.run(backend.evaluate(problem, [ORIGINAL, wrong, ORIGINAL]))
    assert [e.verdict for e in evs] == [Verdict.CORRECT, Verdict.INCORRECT, Verdict.CORRECT]
    assert [r["mode"] for r in runs].count("oracle") == 1


def test_more_input_sets_run_after_the_early_one(tmp_path, monkeypatch):
    """The original ran three sets: the early run covered the first (with the reversed run),
    a second child the other two (no reversed run); a wrong kernel is still caught."""
    runs = _recording(monkeypatch)
    backend, problem = _problem(tmp_path, settings={"seeds": [0, 1, 2]})
    good, bad = asyncio.run(backend.evaluate(problem, [ORIGINAL, variant("operand0=2.0", "operand0=3.0")]))
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

    async def timed_out(self, problem, text, seed, arrays):
        return ChildRun(False, {}, timed_out=True)

    monkeypatch.setattr(Harness, "_early_run", timed_out)
    backend, problem = _problem(tmp_path)
    (ev,) = asyncio.run(backend.evaluate(problem, [ORIGINAL]))
    assert ev.verdict is Verdict.CORRECT, ev.feedback
    assert [r["mode"] for r in runs] == ["oracle", "candidate"] and runs[1]["limits"] is None


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
    (ev,) = asyncio.run(backend.evaluate(problem, [ORIGINAL]))
    assert ev.verdict is Verdict.CORRECT
    assert runs[0]["extra"]["early_inputs"] is False and runs[1]["start"] >= runs[0]["end"]


def test_the_seed_budget_counts_cpu_seconds_and_wall_seconds_before_the_first_tick():
    """The input sets the original runs do not depend on the machine's load (a candidate
    beside it): CPU seconds count; the sandbox's CPU clock ticks every few ms, and before
    its first tick the wall time stands in (else a tiny budget would never stop a run)."""
    from autocomp.backends.nki.runner import budget_seconds

    assert budget_seconds(2.0, 7.5) == 2.0  # loaded machine: the CPU the original used
    assert budget_seconds(0.0, 0.003) == 0.003
