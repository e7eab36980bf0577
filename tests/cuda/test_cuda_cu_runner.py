"""The ``.cu`` runner (the timer) against a TEST DOUBLE of its C++ model child
(cu_child_double.py: same protocol, NumPy softmax), so its logic holds without a GPU: the
candidate lives in its own process, fresh inputs expose memoising, every timed trial is
checked, the kernel list is required, and nothing a child writes becomes the verdict. The
real child runs on a GPU in tests/cuda/test_cuda_gpu.py (and, without one, is built and run
in the sandbox by tests/cuda/test_cuda_harness.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from autocomp.backends.cuda import cu_runner

DOUBLE = Path(__file__).with_name("cu_child_double.py")
BUFFERS = [{"name": "x", "dtype": "float", "count": 128, "elem": 4, "role": 0, "low": -4, "high": 4, "tolerance": 1e-4},
           {"name": "y", "dtype": "float", "count": 128, "elem": 4, "role": 1, "low": -1, "high": 1, "tolerance": 1e-4}]


def run(tmp_path, monkeypatch, mode: str, trials: int = 20) -> dict:
    pytest.importorskip("numpy")
    launcher = tmp_path / "child"
    launcher.write_text(f"#!/bin/sh\nexec {sys.executable} {DOUBLE} \"$@\"\n")
    launcher.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    spec = {"child": str(launcher), "reference": "reference", "candidate": mode, "buffers": BUFFERS,
            "trials": trials, "warmup": 2, "checks": 3, "kernel_names": ["row_softmax_kernel"]}
    return cu_runner.Runner(spec).run()


def test_honest_candidate_is_correct_and_timed_by_the_runner(tmp_path, monkeypatch):
    result = run(tmp_path, monkeypatch, "honest")
    assert result["stage"] == "done" and result["correct"], result
    assert result["kernels_counted"] and result["kernels"] == ["_Z18row_softmax_kernelPKfPfii"]
    assert len(result["cand_ms"]) == 20 and len(result["ref_ms"]) == 20 and result["overhead_ms"] > 0
    assert result["device"] == "Double GPU"


def test_memoising_candidate_fails_on_fresh_inputs(tmp_path, monkeypatch):
    result = run(tmp_path, monkeypatch, "memo")
    assert result["correct"] is False and "check 2 (fresh inputs)" in result["reason"]


def test_lazy_candidate_leaves_poison(tmp_path, monkeypatch):
    result = run(tmp_path, monkeypatch, "lazy")
    assert result["correct"] is False and "never written" in result["reason"]


def test_candidate_without_its_own_kernel_is_refused(tmp_path, monkeypatch):
    result = run(tmp_path, monkeypatch, "no-kernel")
    assert result["correct"] is False and "none of the candidate's own kernels" in result["reason"]


def test_uncounted_kernels_are_reported_so_the_result_is_not_confirmed(tmp_path, monkeypatch):
    from autocomp.backends.cuda import harness

    result = run(tmp_path, monkeypatch, "uncounted", trials=3)
    assert result["correct"] and result["kernels_counted"] is False
    outcome = harness.outcome_from_runner(result, "x", [0], "the original kernel")
    assert outcome.kernels_counted is False


def test_candidate_that_writes_its_input_is_caught(tmp_path, monkeypatch):
    result = run(tmp_path, monkeypatch, "writes-input")
    assert result["correct"] is False and "modified its inputs (x)" in result["reason"]


def test_child_cannot_write_the_verdict(tmp_path, monkeypatch, capfd):
    """Descriptor 3 is not inherited (close_fds) and the child's stdout is the protocol
    pipe, so a forged verdict reaches nobody; the verdict is the runner's own."""
    result = run(tmp_path, monkeypatch, "forge", trials=5)
    assert result["correct"] and len(result["cand_ms"]) == 5 and result["ref_ms"] != [9.0]
    assert "cand_ms\": [0.001]" not in capfd.readouterr().out


def test_slow_candidate_is_measured_slower(tmp_path, monkeypatch):
    fast = run(tmp_path, monkeypatch, "honest", trials=10)
    slow = run(tmp_path, monkeypatch, "slow", trials=10)
    import statistics

    assert statistics.median(slow["cand_ms"]) > statistics.median(fast["cand_ms"]) + 3.0


def test_crashing_candidate_is_a_run_failure(tmp_path, monkeypatch):
    result = run(tmp_path, monkeypatch, "crash")
    assert result["stage"] == "run" and "stopped answering" in result["error"]


def test_outcome_maps_runner_figures_to_metrics():
    from autocomp.backends.cuda import harness
    from autocomp.model import Verdict

    ok = harness.outcome_from_runner({"stage": "done", "correct": True, "device": "NVIDIA H200", "max_abs_diff": 1e-6,
                                      "ref_ms": [2.0] * 100, "cand_ms": [1.0] * 99 + [9.0], "overhead_ms": 0.5,
                                      "kernels": ["k"], "kernels_counted": True}, "x", [0, 1, 2], "the original kernel")
    assert ok.verdict is Verdict.CORRECT and ok.kernels_counted
    assert ok.metrics["ms"].value == 1.0 and ok.metrics["ms"].source == "runner clock, H200, transfers subtracted"
    assert "the original kernel: 2.0000 ms (2.00x)" in ok.feedback
