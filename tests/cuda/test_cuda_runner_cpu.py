"""The two-process GPU runner's logic, run on the CPU (``device: cpu``) where PyTorch is
installed: the candidate lives in its own process, the runner's clock and verdict are out of
its reach, and every check and timed trial has fresh inputs. The CUDA parts (device nodes,
load_inline, the profiler's kernel list) need a GPU: tests/cuda/test_cuda_gpu.py.

Run here with CPU PyTorch on the path, e.g. ``pip install --target DIR torch`` and
``PYTHONPATH=DIR python -m pytest tests/cuda/test_cuda_runner_cpu.py``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="PyTorch is not installed here (CI installs none); the runner needs it")

REFERENCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, f):
        super().__init__()
        self.lin = nn.Linear(f, f)

    def forward(self, x):
        return torch.relu(self.lin(x))


def get_inputs():
    return [torch.randn(64, 32)]


def get_init_inputs():
    return [32]
'''

HONEST = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, f):
        super().__init__()
        self.lin = nn.Linear(f, f)

    def forward(self, x):
        return torch.relu(self.lin(x))
'''


def run_runner(tmp_path, candidate: str, trials: int = 10) -> dict:
    (tmp_path / "reference.py").write_text(REFERENCE)
    (tmp_path / "candidate.py").write_text(candidate)
    spec = {"reference": str(tmp_path / "reference.py"), "candidate": str(tmp_path / "candidate.py"),
            "trials": trials, "warmup": 1, "device": "cpu"}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    r, w = os.pipe()
    try:  # descriptor 3 of the runner is the write end, as the sandbox's channel would be
        start = ("import os, sys; os.dup2(int(sys.argv[1]), 3); "
                 "os.execv(sys.executable, [sys.executable, '-m', 'autocomp.backends.cuda.gpu_runner', 'spec.json'])")
        proc = subprocess.run([sys.executable, "-c", start, str(w)], cwd=tmp_path, pass_fds=(w,),
                              capture_output=True, text=True, timeout=300,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)})
    finally:
        os.close(w)
    data = os.read(r, 1 << 24)
    os.close(r)
    assert proc.returncode == 0, proc.stderr
    assert "AUTOCOMP" not in proc.stdout  # the verdict never travels on stdout
    return json.loads(data)


def test_honest_candidate_is_correct_and_timed_by_the_runner(tmp_path):
    result = run_runner(tmp_path, HONEST)
    assert result["stage"] == "done" and result["correct"], result
    assert len(result["cand_ms"]) == 10 and result["overhead_ms"] > 0


def test_memoising_candidate_fails_on_fresh_inputs(tmp_path):
    memo = HONEST.replace("        self.lin = nn.Linear(f, f)\n", "        self.lin = nn.Linear(f, f)\n        self.memo = None\n").replace(
        "        return torch.relu(self.lin(x))\n",
        "        if self.memo is None:\n            self.memo = torch.relu(self.lin(x))\n        return self.memo\n")
    result = run_runner(tmp_path, memo)
    assert result["correct"] is False and "fresh inputs" in result["reason"]


def test_candidate_patching_clocks_and_printing_verdicts_reaches_nothing(tmp_path):
    hostile = ("import time\ntime.perf_counter_ns = lambda: 0\ntime.perf_counter = lambda: 0.0\n"
               "print('AUTOCOMP-RESULT forged {\"correct\": true}')\n") + HONEST.replace(
        "        return torch.relu(self.lin(x))\n",
        "        print('AUTOCOMP-RESULT forged')\n        return torch.relu(self.lin(x))\n")
    result = run_runner(tmp_path, hostile)
    assert result["correct"] and all(ms > 0 for ms in result["cand_ms"])  # the runner's own clock ran
    assert min(result["round_trip_ms"].values()) > 0


def test_candidate_writing_its_input_is_reported(tmp_path):
    sneaky = HONEST.replace("        return torch.relu(self.lin(x))\n", "        y = torch.relu(self.lin(x))\n        x.zero_()\n        return y\n")
    result = run_runner(tmp_path, sneaky)
    assert result["correct"] is False and "modified input" in result["reason"]


def test_candidate_that_crashes_the_child_gives_a_runtime_stage(tmp_path):
    crash = HONEST.replace("        return torch.relu(self.lin(x))\n", "        import os\n        os._exit(3)\n")
    result = run_runner(tmp_path, crash)
    assert result["stage"] == "run" and "stopped answering" in result["error"]
