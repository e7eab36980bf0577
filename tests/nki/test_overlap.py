"""What lets a large evaluation overlap its parts: the child says when its trace is whole
(``["trace_end"]``) and the parent starts the estimate then, while the child still runs;
the result channel's pipe is wide; the garbage collector runs rarely while a kernel runs.
Each keeps the outcome the plain order gives (same trace, same estimate, same verdict)."""

from __future__ import annotations

import asyncio
import fcntl
import gc
import json
import os

import numpy as np
import pytest

from autocomp.backends import get_backend
from autocomp.backends.nki import harness as H
from autocomp.backends.nki.cost import estimate
from autocomp.backends.nki.harness import ChannelParser, parse_channel
from autocomp.backends.nki.interp.install import GC_THRESHOLDS, execute, relaxed_gc
from autocomp.backends.nki.trace import Instr
from autocomp.model import Verdict
from autocomp.sandbox import CHANNEL_PIPE_BYTES, _widen_pipe

from test_nki_harness import BASE, ORIGINAL  # the same kernels, one definition

COPY = ORIGINAL.rstrip("\n") + "  # a copy\n"
INS = Instr("memset", "vector", 3, 128, 4, 4, (), ((1, 0, 128, 0, 16),), {}).to_list()
END = b'["trace_end"]\n'


def _line(msg) -> bytes:
    return json.dumps(msg).encode() + b"\n"


TRACE = _line(["t", [["i", INS], ["i", INS]]])
ARRAY = _line(["array", "s0_out0", "float32", [2], 8]) + np.ones(2, np.float32).tobytes()
RESULT = _line(["result", {"status": "ok"}])


@pytest.mark.parametrize("chunk", [1, 7, 1 << 20])
def test_the_trace_end_hands_over_the_whole_trace_once(chunk):
    raw = TRACE + END + ARRAY + RESULT
    seen = []
    parser = ChannelParser(on_trace=lambda trace: seen.append(trace))
    for i in range(0, len(raw), chunk):
        parser.feed(raw[i:i + chunk])
    data, trace, arrays, problem = parser.finish()
    assert problem == "" and data == {"status": "ok"} and list(arrays) == ["s0_out0"]
    assert len(seen) == 1 and seen[0] == trace and len(trace) == 2
    assert parse_channel(raw)[:2] == (data, trace)  # the whole channel at once: the same outcome


@pytest.mark.parametrize("after", [
    TRACE,  # an instruction after the end
    _line(["a", 0, [[1, 0, 1, 0, 4]], []]),  # an amendment of an instruction already estimated
    END,  # a second end
])
def test_nothing_may_change_the_trace_after_its_end(after):
    """The estimate started at the end must be the estimate of the final trace: a channel
    that goes on changing it is malformed, however it arrives."""
    raw = TRACE + END + after + ARRAY + RESULT
    result, _, _, problem = parse_channel(raw)
    assert result is None and "after the trace's end" in problem
    parser = ChannelParser(on_trace=lambda trace: None)
    parser.feed(raw)
    result, _, _, problem = parser.finish()
    assert result is None and "after the trace's end" in problem


def test_real_runs_start_their_estimate_at_the_trace_end(tmp_path, monkeypatch):
    """A real original and candidate: each traced child's run carries the estimate started
    when its trace ended (its channel still open), and it is the estimate of the trace the
    verdict was given on."""
    runs: list = []
    orig_run_child = H.Harness._run_child

    async def run_child(self, *args, **kwargs):
        run = await orig_run_child(self, *args, **kwargs)
        runs.append(run)
        return run

    monkeypatch.setattr(H.Harness, "_run_child", run_child)
    path = tmp_path / "kernel.py"
    path.write_text(BASE)
    backend = get_backend("nki", {"timeout": 20, "seeds": [0]})
    problem = backend.make_problem(str(path), BASE)
    (ev,) = asyncio.run(backend.evaluate(problem, [COPY]))
    assert ev.verdict is Verdict.CORRECT, ev.feedback
    assert len(runs) == 2 and all(r.ok and r.estimate is not None for r in runs)
    for run in runs:
        assert run.estimate.result().cycles == estimate(run.trace).cycles
    assert ev.metrics["cycles"].value == runs[1].estimate.result().cycles
    backend.harness.close()


def test_a_failed_child_has_no_estimate_to_wait_for():
    """A run whose channel ended without a whole trace falls back to estimating what it has."""
    run = H.ChildRun(True, {}, trace=[Instr.from_list(INS)])
    assert asyncio.run(run.cost()).cycles == estimate(run.trace).cycles


def test_the_collector_runs_rarely_during_a_run_and_as_before_after():
    from autocomp.backends.nki.interp.install import install

    install()
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        res = execute(_copy_kernel, [np.ones((4, 8), np.float32)])
        assert np.array_equal(res.outputs[0], np.ones((4, 8), np.float32))
        assert gc.get_threshold() == (700, 10, 10)  # restored after the run
        gc.set_threshold(0)
        with relaxed_gc():
            assert gc.get_threshold()[0] == 0  # collection turned off stays off
    finally:
        gc.set_threshold(*before)


def _copy_kernel(x):
    import neuronxcc.nki.language as nl

    assert gc.get_threshold() == GC_THRESHOLDS  # inside the run
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.load(x))
    return out


def test_the_result_channel_pipe_is_widened():
    r, w = os.pipe()
    try:
        _widen_pipe(w)
        size = fcntl.fcntl(w, getattr(fcntl, "F_GETPIPE_SZ", 1032))
        with open("/proc/sys/fs/pipe-max-size") as fh:
            allowed = int(fh.read())
        # (a host whose pipe-max-size is lower keeps its pipes as they were)
        assert size == CHANNEL_PIPE_BYTES if allowed >= CHANNEL_PIPE_BYTES else size >= 1 << 12
    finally:
        os.close(r)
        os.close(w)
