"""Attacks on the CUDA target, each a full hostile KernelBench candidate (what an LLM would
write for examples/cuda/matmul.py): fallbacks to PyTorch/ATen/NumPy/cuBLAS through every
door found so far, precision and algorithm switches, a ModelNew that never runs its kernel,
interpreter escapes, and compiles that try to read host files or write outside the jail.

Each asserts the attack does not win and that nothing escaped (``hostile.check``). The
fallbacks are refused by the AST allowlist (backends/cuda/pyvalidate.py) and the C++ rules
for every load_inline source; the compile attacks are beaten by the sandbox nvcc runs in,
shown here also with the static checks switched off ("even if the check were missed").
Without a GPU (this machine) nothing reaches the verified-and-timed tier; what the GPU tier
adds (candidate in its own process, fresh inputs, kernel count) is in docs/cuda.md.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

import pytest

from autocomp.backends.cuda import CudaBackend, static_checks
from autocomp.backends.cuda.compile import Compiler, find_nvcc
from autocomp.model import Evaluation, Verdict

from .conftest import not_better, substitute

ROOT = Path(__file__).resolve().parents[2]
PATH = str(ROOT / "examples" / "cuda" / "matmul.py")
TEXT = (ROOT / "examples" / "cuda" / "matmul.py").read_text()
FORWARD = "        return matmul_ext.matmul_forward(A, B)\n"
WRAPPER_RETURN = "    return C;\n}"

requires_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc (CUDA toolkit) is not installed")


@pytest.fixture
def backend(tmp_path) -> CudaBackend:
    return CudaBackend({"cache_dir": str(tmp_path / "cuda-cache"), "gpu": "off"})


@pytest.fixture
def problem(backend):
    return backend.make_problem(PATH, TEXT)


def start(problem) -> str:
    code = problem.code
    assert FORWARD in code and WRAPPER_RETURN in code
    return code


def attack(hostile, backend, problem, code: str) -> Evaluation:
    honest = asyncio.run(hostile.evaluate(backend, problem, problem.code))
    ev = asyncio.run(hostile.evaluate(backend, problem, code))
    assert ev.verdict is not Verdict.CORRECT and not ev.confirmed, ev.feedback
    assert not_better(ev, honest, "ms")
    hostile.check(json.dumps(ev.to_json()), json.dumps(honest.to_json()))
    return ev


def unchecked(monkeypatch, code: str) -> str:
    """Switch the static checks off (as if a check were missed) and return a variant of
    ``code`` the store has not seen, so it is really evaluated again."""
    monkeypatch.setattr(static_checks, "check_python", lambda *a, **k: [])
    return code + "\n# evaluated again with the static checks switched off\n"


def rejected_for(ev: Evaluation, *rules: str) -> None:
    assert ev.verdict is Verdict.REJECTED and ev.tier == "static", ev.feedback
    assert any(f"`{r}`" in ev.feedback for r in rules), ev.feedback
    assert "line" in ev.feedback  # every finding names where


# -- fallbacks through the interpreter ------------------------------------------------------------
def test_cuda_attack_getattr_torch_matmul(hostile, backend, problem):
    """getattr(torch, "matmul") hides the call from name-based checks: getattr is not on the
    allowlist (dynamic-access), and the kernel is no longer on forward's path."""
    code = start(problem).replace(FORWARD, "        return getattr(torch, 'mat' + 'mul')(A, B)\n")
    rejected_for(attack(hostile, backend, problem, code), "dynamic-access")


def test_cuda_attack_torch_ops_aten(hostile, backend, problem):
    """torch.ops.aten.mm is the ATen operator under torch.matmul: torch.ops is refused."""
    code = start(problem).replace(FORWARD, "        matmul_ext.matmul_forward(A, B)\n        return torch.ops.aten.mm(A, B)\n")
    rejected_for(attack(hostile, backend, problem, code), "torch-op")


def test_cuda_attack_alias_of_torch_matmul(hostile, backend, problem):
    """`f = torch.matmul` at module level, then f(A, B): library functions may not be used as
    values (module-value), and calling a variable is refused (dynamic-call)."""
    code = start(problem).replace("class ModelNew", "fast_path = torch.mm\n\n\nclass ModelNew").replace(
        FORWARD, "        matmul_ext.matmul_forward(A, B)\n        return fast_path(A, B)\n")
    rejected_for(attack(hostile, backend, problem, code), "module-value", "dynamic-call")


def test_cuda_attack_operator_module(hostile, backend, problem):
    """operator.matmul(A, B) is the @ operator by another name: `operator` is not importable."""
    code = "import operator\n" + start(problem).replace(FORWARD, "        matmul_ext.matmul_forward(A, B)\n"
                                                        "        return operator.matmul(A, B)\n")
    rejected_for(attack(hostile, backend, problem, code), "torch-op")


def test_cuda_attack_numpy_fallback(hostile, backend, problem):
    """Compute on the host with NumPy: numpy is not importable, .numpy()/.cpu() are not on
    the method allowlist."""
    code = "import numpy as np\n" + start(problem).replace(
        FORWARD, "        matmul_ext.matmul_forward(A, B)\n"
                 "        return torch.tensor(np.matmul(A.cpu().numpy(), B.cpu().numpy())).to(A.device)\n")
    rejected_for(attack(hostile, backend, problem, code), "torch-op", "not-allowed")


def test_cuda_attack_sys_modules(hostile, backend, problem):
    """sys.modules['torch'] reaches torch without naming it: sys is not importable."""
    code = "import sys\n" + start(problem).replace(
        FORWARD, "        matmul_ext.matmul_forward(A, B)\n        return sys.modules['torch'].matmul(A, B)\n")
    rejected_for(attack(hostile, backend, problem, code), "timing-tamper")


def test_cuda_attack_importlib(hostile, backend, problem):
    """importlib.import_module('torch') at call time: importlib is not importable, and
    `import` inside a function is refused too."""
    code = start(problem).replace(
        FORWARD, "        import importlib\n        matmul_ext.matmul_forward(A, B)\n"
                 "        return importlib.import_module('torch').matmul(A, B)\n")
    rejected_for(attack(hostile, backend, problem, code), "dynamic-code")


def test_cuda_attack_ctypes_cublas(hostile, backend, problem):
    """ctypes loads libcublas and calls it directly: ctypes is not importable."""
    code = "import ctypes\n" + start(problem).replace(
        FORWARD, "        lib = ctypes.CDLL('libcublas.so')\n" + FORWARD)
    rejected_for(attack(hostile, backend, problem, code), "file-access")


# -- fallbacks inside the load_inline sources ----------------------------------------------------------
def test_cuda_attack_cpp_source_calls_at_matmul(hostile, backend, problem):
    """The C++ wrapper returns at::matmul(A, B) (the kernel runs, its result is thrown away):
    every load_inline string is checked; at::matmul is not on the allowlist of torch/ATen
    names."""
    code = start(problem).replace(WRAPPER_RETURN, "    return at::matmul(A, B);\n}")
    rejected_for(attack(hostile, backend, problem, code), "torch-op")


def test_cuda_attack_cpp_source_calls_cublas(hostile, backend, problem):
    """The wrapper declares cublasSgemm itself (no header) and calls it: vendor libraries
    and extern declarations are refused in every source."""
    code = start(problem).replace("#include <cuda_runtime.h>\n", "#include <cuda_runtime.h>\n"
                                  'extern "C" int cublasSgemm_v2(void*, int, int, int, int, int, const float*, '
                                  "const float*, int, const float*, int, const float*, float*, int);\n").replace(
        WRAPPER_RETURN, "    cublasSgemm_v2(nullptr, 0, 0, N, M, K, nullptr, b.data_ptr<float>(), N, a.data_ptr<float>(), K,"
                        " nullptr, C.data_ptr<float>(), N);\n    return C;\n}")
    rejected_for(attack(hostile, backend, problem, code), "library-fallback", "hidden-code")


def test_cuda_attack_cpp_source_in_cpp_sources_string(hostile, backend, problem):
    """The fallback hides in cpp_sources (not cuda_sources), which older checks skipped."""
    code = start(problem).replace(
        'matmul_cpp = "torch::Tensor matmul_forward(torch::Tensor A, torch::Tensor B);"',
        'matmul_cpp = "torch::Tensor matmul_forward(torch::Tensor A, torch::Tensor B);\\n'
        'torch::Tensor fast(torch::Tensor A, torch::Tensor B) { return torch::mm(A, B); }"')
    rejected_for(attack(hostile, backend, problem, code), "torch-op")


# -- precision and algorithm switches -------------------------------------------------------------------
def test_cuda_attack_half_precision(hostile, backend, problem):
    """Run the kernel on half-precision copies (and cast back): the reference file computes in
    fp32, so .half() is another precision."""
    code = start(problem).replace(FORWARD, "        return matmul_ext.matmul_forward(A.half(), B.half()).float()\n")
    rejected_for(attack(hostile, backend, problem, code), "precision")


def test_cuda_attack_tf32_switch(hostile, backend, problem):
    """Turn TF32 on for the whole process at import time."""
    code = start(problem).replace("class ModelNew", "torch.backends.cuda.matmul.allow_tf32 = True\n\n\nclass ModelNew")
    rejected_for(attack(hostile, backend, problem, code), "precision")


def test_cuda_attack_fast_math_flag(hostile, backend, problem):
    """--use_fast_math through extra_cuda_cflags changes the numerics of the kernel."""
    code = start(problem).replace("verbose=False", "verbose=False, extra_cuda_cflags=['-O3', '--use_fast_math']")
    rejected_for(attack(hostile, backend, problem, code), "precision")


def test_cuda_attack_algorithm_switch(hostile, backend, problem):
    """cudnn.benchmark / deterministic switches pick other algorithms for the reference's ops."""
    code = start(problem).replace(FORWARD, "        torch.backends.cudnn.benchmark = True\n" + FORWARD)
    rejected_for(attack(hostile, backend, problem, code), "algorithm")


# -- the kernel never runs ----------------------------------------------------------------------------
def test_cuda_attack_modelnew_never_calls_the_kernel(hostile, backend, problem):
    """The extension is built but forward uses the reference's own op (allowed for partial
    fusion) and never the kernel: at least one custom kernel must be on forward's path
    (statically here; on a GPU the profiler's kernel list must also contain one)."""
    code = start(problem).replace(FORWARD, "        if False:\n            return matmul_ext.matmul_forward(A, B)\n"
                                           "        return torch.matmul(A, B)\n")
    rejected_for(attack(hostile, backend, problem, code), "no-custom-kernel")


# -- interpreter escapes -------------------------------------------------------------------------------
def test_cuda_attack_class_and_globals_escape(hostile, backend, problem):
    """self.forward.__globals__['torch'] and self.__class__.__mro__ reach anything: dunder
    attributes are refused."""
    code = start(problem).replace(
        FORWARD, "        matmul_ext.matmul_forward(A, B)\n"
                 "        return self.forward.__globals__['torch'].matmul(A, B)\n")
    rejected_for(attack(hostile, backend, problem, code), "dunder")


def test_cuda_attack_builtins_through_dunder_import(hostile, backend, problem):
    """__import__('os').environ would leak keys into the output: __import__ is refused, and
    the candidate never runs in a process that has keys (the jail's environment is empty)."""
    code = start(problem).replace(
        FORWARD, "        print(__import__('os').environ)\n" + FORWARD)
    rejected_for(attack(hostile, backend, problem, code), "dynamic-code", "dunder")


# -- the compile tries to reach the host -------------------------------------------------------------
CANARY_INCLUDE = '#include "{{CANARY}}"\n'


@requires_nvcc
def test_cuda_attack_include_host_file(hostile, backend, problem, monkeypatch):
    """#include "/abs/path/to/canary" would print the canary in nvcc's error message: the
    include is refused statically, and with the check switched off nvcc still cannot see the
    file (the compile's sandbox holds only the toolkit and its work directory)."""
    code = substitute(start(problem).replace("#include <cuda_runtime.h>\n", "#include <cuda_runtime.h>\n" + CANARY_INCLUDE), hostile)
    rejected_for(attack(hostile, backend, problem, code), "include")
    ev = attack(hostile, backend, problem, unchecked(monkeypatch, code))
    assert ev.verdict is Verdict.COMPILE_ERROR and "No such file" in ev.feedback, ev.feedback


@requires_nvcc
def test_cuda_attack_extra_include_paths_to_the_canary_dir(hostile, backend, problem, monkeypatch):
    """extra_include_paths=[canary's folder] + #include "canary.txt": an include path the
    user's file does not name is refused, and is never bound into the compile's sandbox even
    when the check is switched off."""
    folder, name = str(hostile.canary.parent), hostile.canary.name
    code = start(problem).replace("#include <cuda_runtime.h>\n", f'#include <cuda_runtime.h>\n#include "{name}"\n').replace(
        "verbose=False", f"verbose=False, extra_include_paths=[{folder!r}]")
    rejected_for(attack(hostile, backend, problem, code), "include-path", "include")
    ev = attack(hostile, backend, problem, unchecked(monkeypatch, code))
    assert ev.verdict is Verdict.COMPILE_ERROR and "canary.txt" in ev.feedback, ev.feedback


@requires_nvcc
def test_cuda_attack_proc_environ_include(hostile, backend, problem, monkeypatch):
    """#include "/proc/self/environ" would put the compiler's environment (keys) into the
    error message: there is no /proc in the compile's sandbox and no key in its environment."""
    code = start(problem).replace("#include <cuda_runtime.h>\n", '#include <cuda_runtime.h>\n#include "/proc/self/environ"\n')
    rejected_for(attack(hostile, backend, problem, code), "include")
    ev = attack(hostile, backend, problem, unchecked(monkeypatch, code))
    assert ev.verdict is Verdict.COMPILE_ERROR, ev.feedback


@requires_nvcc
def test_cuda_attack_compile_writes_forbidden_file(hostile, backend, problem, monkeypatch):
    """nvcc -MD -MF <host path> (through extra_cuda_cflags) makes the compiler write a file
    outside its work directory: the flag is refused; with the check switched off the flag is
    still not passed (only allowlisted flags are); and passed straight to the compiler, the
    sandbox has no such directory to write into."""
    code = substitute(start(problem).replace(
        "verbose=False", "verbose=False, extra_cuda_cflags=['-MD', '-MF', '{{FORBIDDEN}}']"), hostile)
    rejected_for(attack(hostile, backend, problem, code), "compile-flag")
    ev = attack(hostile, backend, problem, unchecked(monkeypatch, code))
    assert ev.verdict is Verdict.UNVERIFIED and not ev.confirmed  # built without the refused flag
    assert not hostile.forbidden.exists()
    # both checks bypassed: the flag reaches nvcc, inside the jail
    compiler = Compiler(find_nvcc(), cache_dir=Path(tempfile.mkdtemp()))
    source = "__global__ void k(float* x) { x[threadIdx.x] = 1.f; }\n"
    result = asyncio.run(compiler.compile(source, extra_flags=("-MD", "-MF", str(hostile.forbidden)), use_cache=False))
    assert not hostile.forbidden.exists()
    hostile.check(result.log)
    # and the canary folder cannot be read even when named as an include path by a caller
    # that forgot to check it (only the include paths of the user's own file are bound)
    result = asyncio.run(compiler.compile(f'#include "{hostile.canary}"\n' + source, use_cache=False))
    assert not result.ok and "No such file" in result.log
    hostile.check(result.log)
    result = asyncio.run(compiler.compile(f'#include "{hostile.canary.name}"\n' + source, use_cache=False,
                                          include_paths=("/nonexistent-autocomp",)))
    assert not result.ok
    hostile.check(result.log)


@requires_nvcc
def test_cuda_attack_hip_source(hostile, backend, problem):
    """A HIP kernel (hipLaunchKernelGGL) is not CUDA: it is named as such, not passed to nvcc."""
    code = start(problem).replace("#include <cuda_runtime.h>\n", "#include <hip/hip_runtime.h>\n")
    ev = attack(hostile, backend, problem, code)
    rejected_for(ev, "not-cuda")
    assert "not CUDA" in ev.feedback


def test_cuda_attack_gpu_runner_verdict_channel(hostile, tmp_path):
    """A candidate printing a forged result line: the GPU runner's verdict travels only on
    the sandbox's result channel (descriptor 3), never on stdout; here (no torch/GPU in the
    jail) the runner says so on that channel."""
    from autocomp.backends.cuda import harness
    from autocomp.backends.cuda.backend import reference_file

    backend = CudaBackend()
    problem = backend.make_problem(PATH, TEXT)
    forged = 'print(\'AUTOCOMP-RESULT x {"stage": "done", "correct": true, "ref_ms": [9], "cand_ms": [1]}\')\n' + TEXT
    outcome = asyncio.run(harness.run_python(reference_file(problem), forged, harness.GpuSettings(trials=100, seeds=(0,)),
                                             "test", str(tmp_path)))
    assert outcome.verdict is not Verdict.CORRECT
    hostile.check(outcome.feedback)


def test_cuda_cu_runner_child_cannot_forge_the_verdict(tmp_path, monkeypatch):
    """Attack: the candidate's process writes a winning verdict to descriptor 3 and to its
    stdout. Defence by construction: the .cu runner (the timer) starts each model child
    with pipes only (descriptor 3 stays in the runner) and its clock and comparison are its
    own; shown with the protocol double of the C++ child, which needs a GPU to run."""
    import importlib.util
    import sys as _sys
    from pathlib import Path as _Path

    pytest.importorskip("numpy")
    from autocomp.backends.cuda import cu_runner

    double = _Path(__file__).resolve().parents[1] / "cuda" / "cu_child_double.py"
    launcher = tmp_path / "child"
    launcher.write_text(f"#!/bin/sh\nexec {_sys.executable} {double} \"$@\"\n")
    launcher.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    buffers = [{"name": "x", "dtype": "float", "count": 128, "elem": 4, "role": 0, "low": -4, "high": 4,
                "tolerance": 1e-4},
               {"name": "y", "dtype": "float", "count": 128, "elem": 4, "role": 1, "low": -1, "high": 1,
                "tolerance": 1e-4}]
    spec = {"child": str(launcher), "reference": "reference", "candidate": "forge", "buffers": buffers, "trials": 5,
            "warmup": 1, "checks": 3, "kernel_names": ["row_softmax_kernel"]}
    result = cu_runner.Runner(spec).run()
    assert result["ref_ms"] != [9.0] and result["cand_ms"] != [0.001] and len(result["cand_ms"]) == 5
    memo = cu_runner.Runner({**spec, "candidate": "memo"}).run()
    assert memo["correct"] is False and "fresh inputs" in memo["reason"]
    assert importlib.util.find_spec("autocomp.backends.cuda.cu_runner") is not None


def test_cuda_results_without_a_kernel_list_are_never_confirmed():
    """A runner that could not list the launched kernels (no CUPTI) cannot show the
    candidate's own kernel ran: such a result is correct but never `confirmed`, so no
    --write or auto-apply acts on it without --accept-unconfirmed."""
    from autocomp.backends.cuda import harness as cuda_harness
    from autocomp.model import Metric

    metrics = {"ms": Metric(0.001, "ms", "runner clock, test")}
    uncounted = cuda_harness.GpuOutcome(Verdict.CORRECT, "timed", metrics, kernels_counted=False)
    counted = cuda_harness.GpuOutcome(Verdict.CORRECT, "timed", metrics)
    backend = CudaBackend({"gpu": "off"})
    cu = backend._gpu_evaluation(uncounted, None)
    assert cu.verdict is Verdict.CORRECT and cu.confirmed is False and "Not confirmed" in cu.feedback
    assert backend._gpu_evaluation(counted, None).confirmed is True

