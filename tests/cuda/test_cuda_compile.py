"""The compiled tier on this machine: real nvcc, ptxas figures, line-mapped errors, cache."""

from __future__ import annotations

import asyncio

import pytest

from autocomp.backends.cuda import CudaBackend, compile as cuda_compile
from autocomp.model import Verdict

from cuda_testlib import example, requires_nvcc

pytestmark = requires_nvcc


def evaluate(backend, path, text, codes=None):
    problem = backend.make_problem(path, text)
    return problem, asyncio.run(backend.evaluate(problem, codes if codes is not None else [problem.code]))


@pytest.mark.parametrize("name", ["row_softmax.cu", "softmax.py", "matmul.py", "layernorm.py", "row_mean.py", "bias_gelu.py"])
def test_examples_report_the_compiled_tier_with_figures(cpu_backend, name):
    _, (ev,) = evaluate(cpu_backend, *example(name))
    assert ev.verdict is Verdict.UNVERIFIED, ev.feedback
    assert ev.tier == "compiled" and ev.confirmed is False
    regs = ev.metrics["registers"]
    assert regs.unit == "registers/thread" and regs.source == "ptxas sm_90" and 0 < regs.value <= 255
    for key, unit in (("spill_bytes", "bytes"), ("smem_bytes", "bytes/block")):
        assert ev.metrics[key].unit == unit and ev.metrics[key].source == "ptxas sm_90"
    assert "ms" not in ev.metrics  # never a timing without a GPU
    assert "GPU" in ev.feedback and "remote" in ev.feedback


def test_figures_follow_the_code(cpu_backend):
    path, text = example("row_softmax.cu")
    problem = cpu_backend.make_problem(path, text)
    tiled = problem.code.replace(
        "    int row = blockIdx.x * blockDim.x + threadIdx.x;\n",
        "    __shared__ float stage[1024];\n    stage[threadIdx.x] = 0.f;\n    __syncthreads();\n"
        "    int row = blockIdx.x * blockDim.x + threadIdx.x + (int)stage[0];\n", 1)
    (start, shared) = asyncio.run(cpu_backend.evaluate(problem, [problem.code, tiled]))
    assert start.metrics["smem_bytes"].value == 0
    assert shared.metrics["smem_bytes"].value == 4096
    assert "row_softmax_kernel" in shared.feedback and "4096 bytes static smem" in shared.feedback


def test_cu_compile_error_line_is_relative_to_the_kernel(cpu_backend):
    path, text = example("row_softmax.cu")
    problem = cpu_backend.make_problem(path, text)
    lines = problem.code.splitlines()
    bad = next(i for i, ln in enumerate(lines) if "float s = 0.f;" in ln)
    lines[bad] = lines[bad].replace("float s = 0.f;", "float s = undefined_name;")
    (ev,) = asyncio.run(cpu_backend.evaluate(problem, ["\n".join(lines) + "\n"]))
    assert ev.verdict is Verdict.COMPILE_ERROR and ev.tier == "compiled"
    assert f"kernel line {bad + 1}: error: identifier \"undefined_name\" is undefined" in ev.feedback


def test_changed_entry_signature_is_a_compile_error(cpu_backend):
    path, text = example("row_softmax.cu")
    problem = cpu_backend.make_problem(path, text)
    code = problem.code.replace("void row_softmax(const float* x, float* y, int rows, int cols)",
                                "void row_softmax(const float* x, float* y, int rows)")
    code = code.replace("rows, cols);\n}", "rows, 1024);\n}")
    (ev,) = asyncio.run(cpu_backend.evaluate(problem, [code]))
    assert ev.verdict is Verdict.COMPILE_ERROR
    assert "entry's signature must not change" in ev.feedback


def test_inline_cuda_error_line_is_relative_to_the_kernel(cpu_backend):
    path, text = example("softmax.py")
    problem = cpu_backend.make_problem(path, text)
    lines = problem.code.splitlines()
    bad = next(i for i, ln in enumerate(lines) if "float s = 0.f;" in ln)
    lines[bad] = lines[bad].replace("float s = 0.f;", "float s = 0.f")  # missing semicolon
    (ev,) = asyncio.run(cpu_backend.evaluate(problem, ["\n".join(lines) + "\n"]))
    assert ev.verdict is Verdict.COMPILE_ERROR, ev.feedback
    assert f"kernel line {bad + 2}: error: expected a \";\"" in ev.feedback
    assert "kernel.cu" not in ev.feedback


def test_torch_host_wrapper_is_left_to_the_gpu_tier(cpu_backend):
    _, (ev,) = evaluate(cpu_backend, *example("softmax.py"))
    assert "softmax_forward" in ev.feedback and "load_inline" in ev.feedback


def test_results_are_cached_by_source_hash(tmp_path):
    compiler = cuda_compile.Compiler(cuda_compile.find_nvcc(), "sm_90", cache_dir=tmp_path)
    src = "__global__ void k(float* y) { y[threadIdx.x] = 1.f; }\n"
    first = asyncio.run(compiler.compile(src))
    second = asyncio.run(compiler.compile(src))
    assert first.ok and not first.cached
    assert second.cached
    assert second.kernels == first.kernels
    # another architecture is another entry
    other = asyncio.run(cuda_compile.Compiler(compiler.nvcc, "sm_80", cache_dir=tmp_path).compile(src))
    assert not other.cached and other.arch == "sm_80"
    assert len(list((tmp_path / "compile").rglob("*.json"))) == 2


def test_backend_evaluations_hit_the_cache(tmp_path):
    backend = CudaBackend({"cache_dir": str(tmp_path), "gpu": "off"})
    path, text = example("row_mean.py")
    _, (first,) = evaluate(backend, path, text)
    _, (second,) = evaluate(backend, path, text)
    assert first.verdict is second.verdict is Verdict.UNVERIFIED
    assert second.seconds < first.seconds and second.seconds < 0.5


def test_a_batch_compiles_concurrently_in_order(cpu_backend):
    path, text = example("row_softmax.cu")
    problem = cpu_backend.make_problem(path, text)
    codes = [problem.code.replace("int threads = 128;", f"int threads = {t};") for t in (64, 256)]
    codes.insert(1, problem.code.replace("float s = 0.f;", "float s = ;"))
    evs = asyncio.run(cpu_backend.evaluate(problem, codes))
    assert [e.verdict for e in evs] == [Verdict.UNVERIFIED, Verdict.COMPILE_ERROR, Verdict.UNVERIFIED]


def test_unannotated_cu_is_compiled_and_says_why_it_cannot_be_verified(cpu_backend):
    text = ("__global__ void scale(float* y, int n) { int i = threadIdx.x; if (i < n) y[i] *= 2.f; }\n"
            "void launch(float* y, int n) { scale<<<1, 256>>>(y, n); }\n")
    _, (ev,) = evaluate(cpu_backend, "scale.cu", text)
    assert ev.verdict is Verdict.UNVERIFIED and "no `// autocomp:` annotation" in ev.feedback
    assert ev.metrics["registers"].value > 0


def test_bad_arch_and_missing_nvcc_say_what_to_do(tmp_path):
    from autocomp.backends.base import BackendError

    with pytest.raises(BackendError, match="like sm_90"):
        cuda_compile.Compiler("nvcc", "hopper")
    backend = CudaBackend({"cache_dir": str(tmp_path), "nvcc": str(tmp_path / "missing"), "gpu": "off"})
    if cuda_compile.find_nvcc(str(tmp_path / "missing")) is None:
        pytest.skip("nvcc is on PATH, so the fallback finds it")
    assert backend.compiler


def test_ptxas_parser():
    log = """ptxas info    : Compiling entry function '_Z1kPf' for 'sm_90'
ptxas info    : Function properties for _Z1kPf
    8 bytes stack frame, 12 bytes spill stores, 16 bytes spill loads
ptxas info    : Used 96 registers, used 1 barriers, 8192 bytes smem, 368 bytes cmem[0]
"""
    (k,) = cuda_compile.parse_ptxas(log)
    assert (k.registers, k.spill_stores, k.spill_loads, k.smem_bytes, k.stack_bytes) == (96, 12, 16, 8192, 8)
