"""Prompt data for the CUDA target, the authored-session scripts, and the GPU check
script's plumbing (its compile-only mode runs here)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys

import pytest

from autocomp.backends.cuda import CudaBackend, static_checks
from autocomp.backends.cuda.backend import reference_file
from autocomp.prompts import load_pieces, pieces_for_file

from cuda_testlib import EXAMPLES, ROOT, example, requires_nvcc

KB = ["softmax", "matmul", "layernorm", "row_mean", "bias_gelu"]


def test_prompt_pieces_load():
    pieces = load_pieces("cuda")
    assert pieces.language == "cuda"
    assert pieces_for_file(pieces, "model.py").language == "python"  # KernelBench replies are Python
    assert len(pieces.menu) >= 40 and len(set(pieces.menu)) == len(pieces.menu)
    for words in ("shared memory", "Tensor cores", "Occupancy", "warps of 32"):
        assert words.lower() in pieces.description.lower()
    assert "ModelNew" in pieces.rules and "```cuda" in pieces.examples


def _sessions():
    spec = importlib.util.spec_from_file_location("cuda_sessions", EXAMPLES / "sessions" / "make_scripts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", KB)
def test_session_scripts_are_current_and_their_code_passes_static_checks(name):
    sessions = _sessions()
    on_disk = json.loads((EXAMPLES / "sessions" / f"{name}.script.json").read_text())
    assert on_disk == sessions.script(name), "run examples/cuda/sessions/make_scripts.py"
    path, text = example(f"{name}.py")
    problem = CudaBackend().make_problem(path, text)
    for rule in on_disk["rules"]:
        if rule["role"] in ("implement", "repair"):
            code = rule["reply"].split("```python\n", 1)[1].rsplit("```", 1)[0]
            assert static_checks.check_python(code, reference_file(problem), problem.file_with(code),
                                              problem.span.start_line) == [], rule["match"]
    roles = [r["role"] for r in on_disk["rules"]]
    assert roles.count("plan") == 2 and roles.count("implement") == 4


@requires_nvcc
@pytest.mark.parametrize("name", KB)
def test_improved_kernels_compile(cpu_backend, name):
    sessions = _sessions()
    path, text = example(f"{name}.py")
    problem = cpu_backend.make_problem(path, text)
    evs = asyncio.run(cpu_backend.evaluate(problem, [sessions.section(name, 1), sessions.section(name, 2)]))
    assert [e.verdict.value for e in evs] == ["unverified", "unverified"], [e.feedback for e in evs]


@requires_nvcc
def test_gpu_check_compile_only_runs_without_installing(tmp_path):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = dict(os.environ, GPU_CHECK_OUT=str(tmp_path / "out"), AUTOCOMP_CUDA_CACHE=str(tmp_path / "cache"),
               TMPDIR=str(scratch))
    proc = subprocess.run(["bash", str(ROOT / "bench" / "gpu_check.sh"), "--compile-only", "--only", "row_softmax_cu"],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "row_softmax_cu" in proc.stdout and "unverified" in proc.stdout
    assert (tmp_path / "out" / "gpu_check.txt").exists()
    # Its work folder goes when it ends (an exec of the check used to skip the EXIT trap).
    assert [p.name for p in scratch.iterdir() if p.name.startswith("autocomp-gpu-check.")] == []


def test_gpu_check_refuses_the_gpu_tier_without_a_gpu(tmp_path):
    from autocomp.backends.cuda import gpu

    if gpu.gpu_names():
        pytest.skip("a GPU is present")
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_check.py"), "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "no NVIDIA GPU visible" in proc.stderr
