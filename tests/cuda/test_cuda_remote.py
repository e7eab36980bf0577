"""The remote-worker protocol, tested with a real local worker process (the same module a
GPU host runs over SSH or on a cluster node)."""

from __future__ import annotations

import asyncio
import json
import shlex
import sys

import pytest

from autocomp.backends.base import BackendError
from autocomp.backends.cuda import CudaBackend, remote
from autocomp.model import Verdict

from cuda_testlib import example, requires_nvcc

LOCAL_WORKER = f"{shlex.quote(sys.executable)} -m autocomp.backends.cuda.worker"


@requires_nvcc
def test_local_worker_answers_like_the_local_backend(tmp_path):
    path, text = example("row_softmax.cu")
    remote_backend = CudaBackend({"remote": LOCAL_WORKER, "gpu": "off"})
    assert remote_backend.tier().name == "remote" and remote_backend.tier().confirms
    problem = remote_backend.make_problem(path, text)
    broken = problem.code.replace("float s = 0.f;", "float s = ;")
    cheat = problem.code.replace("    int threads = 128;\n", "    int threads = 128;\n    cudaDeviceReset();\n")
    evs = asyncio.run(remote_backend.evaluate(problem, [problem.code, broken, cheat]))
    assert [e.verdict for e in evs] == [Verdict.UNVERIFIED, Verdict.COMPILE_ERROR, Verdict.REJECTED]
    assert evs[0].metrics["registers"].source == "ptxas sm_90" and not evs[0].confirmed
    assert "evaluated on" in evs[0].feedback and "autocomp.backends.cuda.worker" in evs[0].feedback
    assert "kernel line" in evs[1].feedback


def test_worker_refuses_other_protocols(tmp_path):
    import subprocess

    out = subprocess.run([sys.executable, "-m", "autocomp.backends.cuda.worker"], input=json.dumps({"protocol": "x/0"}),
                         capture_output=True, text=True, timeout=60)
    reply = remote.parse_reply(out.stdout)
    assert "this worker speaks 'autocomp-cuda/1'" in reply["error"]


def test_banner_lines_are_ignored_and_the_last_reply_counts():
    reply = remote.parse_reply("Welcome to gpuhost\n" + remote.MARKER + json.dumps({"protocol": remote.PROTOCOL, "evaluations": []}))
    assert reply["evaluations"] == []
    with pytest.raises(ValueError, match="update autocomp on the GPU host"):
        remote.parse_reply(remote.MARKER + json.dumps({"protocol": "autocomp-cuda/0"}))


def test_broken_worker_command_says_what_to_check():
    path, text = example("row_softmax.cu")
    backend = CudaBackend({"remote": f"{shlex.quote(sys.executable)} -c \"print('hello')\""})
    problem = backend.make_problem(path, text)
    with pytest.raises(BackendError, match="python -m autocomp.backends.cuda.worker` runs on the GPU host"):
        asyncio.run(backend.evaluate(problem, [problem.code]))


@requires_nvcc
def test_a_whole_candidate_file_travels_to_the_worker(tmp_path):
    """`eval FILE --against BASE` with a remote worker: the worker evaluates FILE itself
    (a KernelBench ModelNew-only file), not FILE's kernel pasted into BASE."""
    from autocomp.cli.evaluate import against_problems

    path, text = example("matmul.py")
    backend = CudaBackend({"remote": LOCAL_WORKER, "gpu": "off"})
    problem = backend.make_problem(path, text)
    reference = problem.span.replace_in(text, "")
    base = backend.make_problem(str(tmp_path / "ref.py"), reference)
    solution = ("import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n\n"
                "EXT_NAME = 'autocomp_matmul_remote'\n\n" + problem.code.replace('name="autocomp_matmul"', "name=EXT_NAME"))
    _, candidate, code = against_problems(base, backend, str(tmp_path / "sol.py"), solution)
    (ev,) = asyncio.run(backend.evaluate(candidate, [code]))
    assert ev.verdict is Verdict.UNVERIFIED, ev.feedback
    assert "matmul_naive_kernel" in ev.feedback and "evaluated on" in ev.feedback
    hostile = solution.replace("import torch\n", "import torch\nimport os\n", 1)
    _, candidate, code = against_problems(base, backend, str(tmp_path / "bad.py"), hostile)
    (ev,) = asyncio.run(backend.evaluate(candidate, [code]))
    assert ev.verdict is Verdict.REJECTED and "imports `os`" in ev.feedback
