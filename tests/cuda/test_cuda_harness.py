"""The verified-and-timed tier's parts that can be checked without a GPU: the generated
C++ harness builds and links, the host-side comparison catches what it must, and the
Python runner's result channel works end to end up to the point where a GPU is needed."""

from __future__ import annotations

import array
import asyncio
import struct

import pytest

from autocomp.backends.base import BackendError
from autocomp.backends.cuda import CudaBackend, annotations, gpu, harness, harness_cu
from autocomp.backends.cuda.compile import Compiler, find_nvcc
from autocomp.backends.cuda.backend import reference_file
from autocomp.model import Verdict

from cuda_testlib import example, requires_nvcc

CU_PATH, CU_TEXT = example("row_softmax.cu")
ANN = annotations.parse(CU_TEXT)


def test_entry_wrapper_casts_in_annotation_order():
    wrapper = harness_cu.entry_wrapper(CU_TEXT, ANN)
    assert 'extern "C" int autocomp_entry(void** a)' in wrapper
    assert "row_softmax((const float*)a[0], (float*)a[1], *(int*)a[2], *(int*)a[3]);" in wrapper


def test_entry_wrapper_names_undescribed_parameters():
    text = CU_TEXT.replace("// autocomp: scalar cols int 1024\n", "")
    with pytest.raises(BackendError, match="unknown name 'cols'"):
        annotations.parse(text)
    text = text.replace("[rows * cols]", "[rows * 1024]")
    with pytest.raises(BackendError, match=r"parameter `cols` of `row_softmax` is not described"):
        harness_cu.entry_wrapper(text, annotations.parse(text))


@requires_nvcc
def test_generated_harness_builds_links_and_needs_a_gpu_to_run(tmp_path):
    compiler = Compiler(find_nvcc(), "sm_90", cache_dir=tmp_path / "cache")
    problem = CudaBackend().make_problem(CU_PATH, CU_TEXT)
    candidate = problem.file_with(problem.code.replace("int threads = 128;", "int threads = 256;"))
    settings = harness.GpuSettings(trials=100, seeds=(0, 1), lock_path=str(tmp_path / "gpu.lock"))
    outcome = asyncio.run(harness.run_cu(compiler, CU_TEXT, candidate, ANN, settings, "test"))
    if gpu.gpu_names():
        assert outcome.verdict is Verdict.CORRECT, outcome.feedback
        assert outcome.metrics["ms"].source.startswith("runner clock")
    else:
        # everything built and linked, the runner ran in the sandbox and its verdict came back
        # on the result channel; the original kernel's child stops at the missing device
        assert outcome.verdict is Verdict.RUNTIME_ERROR
        assert "cannot run the reference here (reference)" in outcome.feedback
        assert "no usable GPU" in outcome.feedback


@requires_nvcc
def test_candidate_that_breaks_the_build_is_a_compile_error(tmp_path):
    compiler = Compiler(find_nvcc(), "sm_90", cache_dir=tmp_path / "cache")
    problem = CudaBackend().make_problem(CU_PATH, CU_TEXT)
    candidate = problem.file_with(problem.code.replace("float s = 0.f;", "float s = ;"))
    outcome = asyncio.run(harness.run_cu(compiler, CU_TEXT, candidate, ANN, harness.GpuSettings(), "test"))
    assert outcome.verdict is Verdict.COMPILE_ERROR and "building the candidate" in outcome.feedback


def _floats(values):
    return array.array("f", values).tobytes()


@pytest.mark.parametrize("use_numpy", [True, False])
def test_comparison_catches_poison_and_wrong_values(monkeypatch, use_numpy):
    if not use_numpy:
        import builtins

        real_import = builtins.__import__

        def no_numpy(name, *args, **kwargs):
            if name == "numpy":
                raise ImportError("numpy hidden for this test")
            return real_import(name, *args, **kwargs)

        monkeypatch.setattr(builtins, "__import__", no_numpy)
    ref = _floats([1.0, 2.0, 3.0])
    ok, diff, _ = harness_cu.compare_buffers(ref, _floats([1.0, 2.0001, 3.0]), "float", 1e-4)
    assert ok and diff == pytest.approx(1e-4, rel=0.1)
    ok, _, reason = harness_cu.compare_buffers(ref, _floats([1.0, 2.1, 3.0]), "float", 1e-4)
    assert not ok and "element 1" in reason
    poisoned = ref[:8] + b"\xff\xff\xff\xff"  # the harness's 0xFF poison: NaN
    ok, _, reason = harness_cu.compare_buffers(ref, poisoned, "float", 1e-4)
    assert not ok and "never written" in reason
    ok, _, _ = harness_cu.compare_buffers(ref, ref[:8], "float", 1e-4)
    assert not ok


def test_comparison_of_half_bf16_and_ints():
    half = struct.pack("<3e", 1.0, 0.5, -2.0)
    assert harness_cu.compare_buffers(half, struct.pack("<3e", 1.0, 0.5, -2.0), "half", 1e-2)[0]
    bf = struct.pack("<2H", 0x3F80, 0x4000)  # 1.0, 2.0 in bfloat16
    assert harness_cu.compare_buffers(bf, struct.pack("<2H", 0x3F80, 0x4001), "bfloat16", 1e-2)[0]
    assert not harness_cu.compare_buffers(bf, struct.pack("<2H", 0x3F80, 0x4040), "bfloat16", 1e-2)[0]
    ints = struct.pack("<2i", 3, 4)
    assert not harness_cu.compare_buffers(ints, struct.pack("<2i", 3, 5), "int", 0.0)[0]


def test_reference_for_the_runner_leaves_out_the_starting_kernel():
    path, text = example("matmul.py")
    problem = CudaBackend().make_problem(path, text)
    ref = reference_file(problem)
    assert "class Model(" in ref and "def get_inputs" in ref
    assert "load_inline(name" not in ref and "class ModelNew" not in ref


def test_runner_verdict_travels_on_the_sandbox_channel(tmp_path):
    """The real runner, in the sandbox. Here (no torch or no GPU) it must stop at setup and
    say why; its verdict travels on the result channel (descriptor 3), which no candidate
    process holds, not on standard output."""
    import importlib.util

    if importlib.util.find_spec("torch") is not None and gpu.gpu_names():
        pytest.skip("torch and a GPU are present: the GPU tests cover the runner")
    path, text = example("softmax.py")
    problem = CudaBackend().make_problem(path, text)
    settings = harness.GpuSettings(trials=100, seeds=(0,))
    outcome = asyncio.run(harness.run_python(reference_file(problem), text, settings, "test", str(tmp_path)))
    assert outcome.verdict is Verdict.RUNTIME_ERROR
    assert "cannot run the reference here (setup)" in outcome.feedback


def test_runner_outcomes_map_to_verdicts():
    ok = harness.outcome_from_runner({"stage": "done", "correct": True, "device": "NVIDIA H200", "max_abs_diff": 1e-6,
                                      "ref_ms": [2.0] * 100, "cand_ms": [1.0] * 99 + [9.0], "overhead_ms": 0.25},
                                     "x", [0, 1, 2])
    assert ok.verdict is Verdict.CORRECT
    assert ok.metrics["ms"].value == 1.0 and ok.metrics["ms"].source == "runner clock, H200, transfers subtracted"
    assert ok.metrics["ms_mean"].value == pytest.approx(1.08)
    assert ok.metrics["reference_ms"].value == 2.0 and "2.00x" in ok.feedback
    bad = harness.outcome_from_runner({"stage": "done", "correct": False, "reason": "seed 1: output 0 differs"}, "x", [0])
    assert bad.verdict is Verdict.INCORRECT and "seed 1" in bad.feedback
    build = harness.outcome_from_runner({"stage": "build", "error": "Error building extension 'x'"}, "x", [0])
    assert build.verdict is Verdict.COMPILE_ERROR
    crash = harness.outcome_from_runner({"stage": "run", "error": "illegal memory access"}, "x", [0])
    assert crash.verdict is Verdict.RUNTIME_ERROR


def test_inout_buffers_are_uploaded_and_compared_not_poisoned():
    text = ("// autocomp: entry scale_inplace\n// autocomp: inout y float [n]\n// autocomp: scalar n int 256\n"
            "__global__ void k(float* y, int n) { int i = threadIdx.x; if (i < n) y[i] *= 2.f; }\n"
            "void scale_inplace(float* y, int n) { k<<<1, 256>>>(y, n); }\n")
    ann = annotations.parse(text)
    (buf,) = ann.buffers
    assert buf.output and buf.inout
    source = harness_cu.child_source(ann)
    assert "  {256ULL, 4, 2}" in source  # role 2: uploaded like an input, returned like an output
    assert "if (SPECS[b].role == 1) err = cudaMemset(dev[b], 0xFF, bytes);" in source
