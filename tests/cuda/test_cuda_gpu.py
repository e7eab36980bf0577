"""The verified-and-timed tier on a real GPU. Skipped, with the reason, where none is
visible; bench/gpu_check.sh runs the same path end to end on a GPU host."""

from __future__ import annotations

import asyncio

import pytest

from autocomp.backends.cuda import CudaBackend
from autocomp.model import Verdict

from cuda_testlib import example, requires_gpu, requires_nvcc

pytestmark = [requires_nvcc, requires_gpu, pytest.mark.gpu]


@pytest.fixture
def gpu_backend(cache_dir):
    return CudaBackend({"cache_dir": str(cache_dir), "seeds": [0, 1]})


def test_cu_example_is_verified_and_timed(gpu_backend):
    path, text = example("row_softmax.cu")
    problem = gpu_backend.make_problem(path, text)
    (ev,) = asyncio.run(gpu_backend.evaluate(problem, [problem.code]))
    assert ev.verdict is Verdict.CORRECT and ev.confirmed and ev.tier == "verified and timed", ev.feedback
    assert ev.metrics["ms"].unit == "ms" and ev.metrics["ms"].source.startswith("runner clock, ")
    assert ev.metrics["trials"].value >= 100 and "overhead_ms" in ev.metrics
    assert "row_softmax_kernel" in ev.feedback  # the kernel list from the candidate's child


def test_cu_candidate_that_skips_work_is_caught_by_poisoned_outputs(gpu_backend):
    path, text = example("row_softmax.cu")
    problem = gpu_backend.make_problem(path, text)
    lazy = problem.code.replace("for (int c = 0; c < cols; ++c) out[c] = expf(in[c] - m) / s;",
                                "for (int c = 0; c < cols / 2; ++c) out[c] = expf(in[c] - m) / s;")
    (ev,) = asyncio.run(gpu_backend.evaluate(problem, [lazy]))
    assert ev.verdict is Verdict.INCORRECT and "never written" in ev.feedback


def test_cu_candidate_that_writes_its_input_is_caught(gpu_backend):
    path, text = example("row_softmax.cu")
    problem = gpu_backend.make_problem(path, text)
    sneaky = problem.code.replace("void row_softmax_kernel(const float* x,", "void row_softmax_kernel(float* x,").replace(
        "    for (int c = 0; c < cols; ++c) out[c] = expf(in[c] - m) / s;\n",
        "    for (int c = 0; c < cols; ++c) out[c] = expf(in[c] - m) / s;\n    ((float*)in)[0] = 0.f;\n").replace(
        "row_softmax_kernel<<<(rows + threads - 1) / threads, threads>>>(x,", "row_softmax_kernel<<<(rows + threads - 1) / threads, threads>>>((float*)x,")
    (ev,) = asyncio.run(gpu_backend.evaluate(problem, [sneaky]))
    assert ev.verdict is Verdict.INCORRECT and "modified its inputs" in ev.feedback


def test_kernelbench_example_is_verified_against_pytorch(gpu_backend):
    pytest.importorskip("torch", reason="PyTorch with CUDA is needed for KernelBench-style problems")
    path, text = example("row_mean.py")
    problem = gpu_backend.make_problem(path, text)
    (ev,) = asyncio.run(gpu_backend.evaluate(problem, [problem.code]))
    assert ev.verdict is Verdict.CORRECT and ev.confirmed, ev.feedback
    assert ev.metrics["reference_ms"].value > 0 and "PyTorch reference" in ev.feedback


def test_kernelbench_candidate_returning_an_unwritten_buffer_is_caught(gpu_backend):
    pytest.importorskip("torch", reason="PyTorch with CUDA is needed for KernelBench-style problems")
    path, text = example("row_mean.py")
    problem = gpu_backend.make_problem(path, text)
    stale = problem.code.replace("    y[row] = s / cols;\n", "    if (s == 12345.f) y[row] = s / cols;\n")
    (ev,) = asyncio.run(gpu_backend.evaluate(problem, [stale]))
    assert ev.verdict is Verdict.INCORRECT, ev.feedback


def test_kernelbench_runner_times_in_its_own_process_and_counts_kernels(gpu_backend):
    """The two-process runner (docs/cuda.md): metrics come from the runner's clock with the
    transfer calibration subtracted, and the profiler saw the candidate's own kernel."""
    pytest.importorskip("torch", reason="PyTorch with CUDA is needed for KernelBench-style problems")
    path, text = example("matmul.py")
    problem = gpu_backend.make_problem(path, text)
    (ev,) = asyncio.run(gpu_backend.evaluate(problem, [problem.code]))
    assert ev.verdict is Verdict.CORRECT and ev.confirmed, ev.feedback
    assert ev.metrics["ms"].source.startswith("runner clock") and "overhead_ms" in ev.metrics
    assert "matmul_naive_kernel" in ev.feedback  # "kernels launched: ..."


def test_kernelbench_memoising_candidate_fails_on_fresh_inputs(gpu_backend):
    """A candidate that computes once and returns the stored result: every check and every
    timed trial has fresh inputs, so the second one already differs."""
    pytest.importorskip("torch", reason="PyTorch with CUDA is needed for KernelBench-style problems")
    path, text = example("matmul.py")
    problem = gpu_backend.make_problem(path, text)
    memo = problem.code.replace("        super().__init__()\n\n    def forward",
                                "        super().__init__()\n        self.out = None\n\n    def forward", 1)
    memo = memo.replace("        return matmul_ext.matmul_forward(A, B)\n",
                        "        if self.out is None:\n            self.out = matmul_ext.matmul_forward(A, B)\n"
                        "        return self.out\n")
    from autocomp.backends.cuda import harness
    from autocomp.backends.cuda.backend import reference_file

    # straight to the runner: the static check (state) would refuse it before it ran
    outcome = asyncio.run(harness.run_python(reference_file(problem), problem.file_with(memo), gpu_backend._gpu_settings,
                                             "GPU", str(gpu_backend.cache_dir / "memo-ext"), kernel_names=["matmul_naive_kernel"],
                                             toolkit=gpu_backend.compiler.isolation().readable))
    assert outcome.verdict is Verdict.INCORRECT and "fresh inputs" in outcome.feedback


def _run_cu_directly(gpu_backend, problem, code):
    """Straight to the .cu runner, past the static C++ rules, to show the runner holds alone."""
    from autocomp.backends.cuda import annotations, harness

    text = problem.file_with(code)
    return asyncio.run(harness.run_cu(gpu_backend.compiler, problem.file_text, text, annotations.parse(problem.file_text),
                                      gpu_backend._gpu_settings, "GPU", kernel_names=["row_softmax_kernel"]))


def test_cu_memoising_candidate_fails_on_fresh_inputs(gpu_backend):
    path, text = example("row_softmax.cu")
    problem = gpu_backend.make_problem(path, text)
    memo = problem.code.replace(
        "    int threads = 128;\n",
        "    static bool done = false;\n    if (done) return;\n    done = true;\n    int threads = 128;\n")
    assert memo != problem.code
    outcome = _run_cu_directly(gpu_backend, problem, memo)
    assert outcome.verdict is Verdict.INCORRECT and "fresh inputs" in outcome.feedback, outcome.feedback


def test_cu_candidate_printing_and_writing_descriptor_3_cannot_forge(gpu_backend):
    """The library prints a fake verdict to stdout and writes one to descriptor 3: stdout
    is the child's log (the protocol has private descriptors) and descriptor 3 is not open
    in the child, so the runner's verdict stands (correct, with measured times)."""
    path, text = example("row_softmax.cu")
    problem = gpu_backend.make_problem(path, text)
    forged = r'printf("{\"stage\": \"done\", \"correct\": true, \"ref_ms\": [9.0], \"cand_ms\": [0.001]}\n");'
    code = "#include <cstdio>\n#include <unistd.h>\n" + problem.code.replace(
        "    int threads = 128;\n", f"    {forged} fflush(stdout); write(3, \"x\", 1);\n    int threads = 128;\n")
    outcome = _run_cu_directly(gpu_backend, problem, code)
    assert outcome.verdict is Verdict.CORRECT, outcome.feedback
    assert outcome.metrics["reference_ms"].value != 9.0 and outcome.metrics["ms"].value > 0.001


def test_cu_candidate_computing_on_the_host_is_refused(gpu_backend):
    """No kernel of its own on the GPU: the child's launch list shows it."""
    path, text = example("row_softmax.cu")
    problem = gpu_backend.make_problem(path, text)
    host = problem.code.replace(
        "    int threads = 128;\n    row_softmax_kernel<<<(rows + threads - 1) / threads, threads>>>(x, y, rows, cols);\n",
        "    size_t n = (size_t)rows * cols;\n    float* h = (float*)malloc(n * 4);\n"
        "    cudaMemcpy(h, x, n * 4, cudaMemcpyDeviceToHost);\n"
        "    for (int r = 0; r < rows; ++r) { float m = -INFINITY, s = 0.f; float* p = h + (size_t)r * cols;\n"
        "      for (int c = 0; c < cols; ++c) m = fmaxf(m, p[c]);\n"
        "      for (int c = 0; c < cols; ++c) s += expf(p[c] - m);\n"
        "      for (int c = 0; c < cols; ++c) p[c] = expf(p[c] - m) / s; }\n"
        "    cudaMemcpy(y, h, n * 4, cudaMemcpyHostToDevice);\n    free(h);\n")
    assert host != problem.code
    outcome = _run_cu_directly(gpu_backend, problem, "#include <cstdlib>\n" + host)
    assert outcome.verdict is Verdict.INCORRECT and "none of the candidate's own kernels" in outcome.feedback, outcome.feedback
