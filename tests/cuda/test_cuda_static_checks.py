"""The static tier: every known cheat or fallback is refused with its reason, and the
honest starting kernels pass."""

from __future__ import annotations

import asyncio

import pytest

from autocomp.backends.cuda import CudaBackend, static_checks
from autocomp.model import Verdict

from cuda_testlib import example

PATH, TEXT = example("softmax.py")
PROBLEM = CudaBackend().make_problem(PATH, TEXT)
START = PROBLEM.code
FORWARD = "        return softmax_ext.softmax_forward(x)\n"
KERNEL_LINE = "    for (int c = 0; c < cols; ++c) out[c] = expf(in[c] - m) / s;\n"


def with_forward(body: str) -> str:
    assert FORWARD in START
    return START.replace(FORWARD, body)


def rules(code: str) -> dict[str, str]:
    findings = static_checks.check_python(code, PROBLEM.file_text, PROBLEM.file_with(code))
    return {f.rule: f.reason for f in findings}


PY_CHEATS = {
    "torch-op: torch.softmax": (with_forward("        return torch.softmax(x, dim=-1)\n"), "torch-op", "torch.softmax"),
    "torch-op: functional": ("import torch.nn.functional as F\n" + with_forward("        return F.softmax(x, -1)\n"), "torch-op", "F.softmax"),
    "torch-op: tensor method": (with_forward("        y = softmax_ext.softmax_forward(x)\n        return y / y.sum(-1, keepdim=True)\n"), "torch-op", ".sum()"),
    "torch-op: @ operator": (with_forward("        return softmax_ext.softmax_forward(x @ x.t())\n"), "torch-op", "@ operator"),
    "torch-op: nn layer": (START.replace("        super().__init__()\n\n    def forward", "        super().__init__()\n        self.sm = nn.Softmax(dim=-1)\n\n    def forward", 1)
                           .replace(FORWARD, "        return self.sm(x)\n"), "torch-op", "self.sm"),
    "reference: Model()": (with_forward("        return Model()(x)\n"), "reference-fallback", "reference `Model`"),
    "reference: inherits": (START.replace("class ModelNew(nn.Module):", "class ModelNew(Model):"), "reference-fallback", "inherits"),
    "try/except fallback": (with_forward("        try:\n            return softmax_ext.softmax_forward(x)\n        except RuntimeError:\n            return x.softmax(-1)\n"), "try-except", "fallback"),
    "side stream": (with_forward("        with torch.cuda.stream(torch.cuda.Stream()):\n            return softmax_ext.softmax_forward(x)\n"), "side-stream", "current stream"),
    "threads": ("import threading\n" + START, "threads", "threading"),
    "timing: import time": ("import time\n" + START, "timing-tamper", "time"),
    "timing: patch synchronize": ("torch.cuda.synchronize = lambda: None\n" + START, "timing-tamper", "torch.cuda.synchronize"),
    "timing: events": (with_forward("        e = torch.cuda.Event(enable_timing=True)\n" + FORWARD), "timing-tamper", "torch.cuda.Event"),
    "inputs: in-place": (with_forward("        x.mul_(1.0)\n" + FORWARD), "input-tamper", "in place"),
    "inputs: slice write": (with_forward("        x[0] = 0\n" + FORWARD), "input-tamper", "writes into the input"),
    "inputs: redefined get_inputs": (START + "\n\ndef get_inputs():\n    return [torch.zeros(4096, 1024)]\n", "input-tamper", "get_inputs"),
    "inputs: reseeding": ("torch.manual_seed(0)\n" + START, "input-tamper", "manual_seed"),
    "precision: half": (with_forward("        return softmax_ext.softmax_forward(x.half()).float()\n"), "precision", "half"),
    "precision: tf32": ("torch.backends.cuda.matmul.allow_tf32 = True\n" + START, "precision", "backend settings"),
    "caching: lru_cache": ("import functools\n" + START, "result-caching", "functools"),
    "caching: attribute": (with_forward("        self.cached_out = softmax_ext.softmax_forward(x)\n        return self.cached_out\n"), "result-caching", "cached"),
    "no ModelNew": (START.replace("class ModelNew", "class Faster"), "no-modelnew", "ModelNew"),
    "no CUDA kernel": ("class ModelNew(nn.Module):\n    def forward(self, x):\n        return x.clone()\n", "no-cuda-kernel", "no CUDA kernel"),
    "triton": ("import triton\n" + START, "not-cuda", "Triton"),
    "files": (with_forward("        open('/tmp/result', 'w').write('ok')\n" + FORWARD), "file-access", "opens files"),
    "cuda: side stream": (START.replace(KERNEL_LINE, KERNEL_LINE + "    cudaStream_t st; cudaStreamCreate(&st);\n"), "side-stream", "cudaStreamCreate"),
    "cuda: host thread": (START.replace("#include <cuda_runtime.h>\n", "#include <cuda_runtime.h>\n#include <thread>\n"), "threads", "<thread>"),
    "cuda: events": (START.replace(KERNEL_LINE, KERNEL_LINE + "    cudaEvent_t e; cudaEventCreate(&e);\n"), "timing-tamper", "cudaEventCreate"),
    "cuda: exit": (START.replace(KERNEL_LINE, KERNEL_LINE + "    exit(0);\n"), "process-control", "exit("),
    "cuda: empty kernel": (START.replace("__global__ void softmax_rows_kernel", "__global__ void noop() { }\n__global__ void softmax_rows_kernel"), "empty-kernel", "noop"),
}


@pytest.mark.parametrize("case", sorted(PY_CHEATS))
def test_cheat_is_rejected_with_its_reason(case):
    code, rule, words = PY_CHEATS[case]
    found = rules(code)
    assert rule in found, f"{case}: expected {rule}, got {found}"
    assert words in found[rule], f"{case}: reason {found[rule]!r} should mention {words!r}"


@pytest.mark.parametrize("name", ["softmax.py", "matmul.py", "layernorm.py", "row_mean.py", "bias_gelu.py"])
def test_starting_kernels_pass(name):
    path, text = example(name)
    problem = CudaBackend().make_problem(path, text)
    assert static_checks.check_python(problem.code, text, text) == []


def test_kernel_lines_are_relative_to_the_span():
    code = with_forward("        x.add_(1)\n" + FORWARD)
    (finding,) = [f for f in static_checks.check_python(code, TEXT, PROBLEM.file_with(code)) if f.rule == "input-tamper"]
    assert code.splitlines()[finding.line - 1].strip() == "x.add_(1)"
    assert finding.render().startswith("static check `input-tamper` (kernel line ")


def test_extension_calls_are_not_mistaken_for_torch_ops():
    # the extension's function is called softmax-something; that is the kernel, not PyTorch
    code = with_forward("        return softmax_ext.softmax_forward(x.contiguous().view(x.shape))\n")
    assert rules(code) == {}


CU_PATH, CU_TEXT = example("row_softmax.cu")
CU_PROBLEM = CudaBackend().make_problem(CU_PATH, CU_TEXT)


@pytest.mark.parametrize(
    "inject, rule",
    [
        ("    FILE* f = fopen(\"/tmp/x\", \"w\");\n", "file-access"),
        ("    cudaDeviceReset();\n", "process-control"),
        ("    std::thread t([]{});\n", "threads"),
        ("    cudaEvent_t e; cudaEventRecord(e);\n", "timing-tamper"),
    ],
)
def test_cu_cheats_are_rejected(inject, rule):
    code = CU_PROBLEM.code.replace("    int threads = 128;\n", "    int threads = 128;\n" + inject)
    assert rule in {f.rule for f in static_checks.check_cu(code, CU_PROBLEM.code)}


def test_cu_main_and_half_precision_are_rejected():
    code = CU_PROBLEM.code + "\nint main() { return 0; }\n"
    assert "host-main" in {f.rule for f in static_checks.check_cu(code, CU_PROBLEM.code)}
    half = CU_PROBLEM.code.replace("float s = 0.f;", "__half s = __float2half(0.f);")
    assert "precision" in {f.rule for f in static_checks.check_cu(half, CU_PROBLEM.code)}


def test_comments_and_strings_do_not_trigger_cuda_rules():
    code = CU_PROBLEM.code.replace("    int threads = 128;\n", "    // we could exit( early or use cudaStreamCreate here\n    int threads = 128;\n")
    assert static_checks.check_cu(code, CU_PROBLEM.code) == []


def test_backend_reports_rejections_in_the_static_tier(cpu_backend):
    code = with_forward("        return torch.softmax(x, dim=-1)\n")
    (ev,) = asyncio.run(cpu_backend.evaluate(PROBLEM, [code]))
    assert ev.verdict is Verdict.REJECTED and ev.tier == "static" and not ev.confirmed
    assert "torch-op" in ev.feedback and "torch.softmax" in ev.feedback


def test_plain_math_and_a_kept_reference_are_not_flagged():
    code = with_forward("        scale = math.sqrt(4.0)\n" + FORWARD)
    assert rules(code) == {}
    model_only = ("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def __init__(self):\n"
                  "        super(Model, self).__init__()\n\n    def forward(self, x):\n        return torch.relu(x)\n\n\n"
                  "def get_inputs():\n    return [torch.randn(8)]\n")
    problem = CudaBackend().make_problem("relu.py", model_only)
    assert problem.name == "Model"
    candidate = problem.code + ("\n\nsrc = r'''__global__ void relu_kernel(const float* x, float* y, int n) {\n"
                                "    int i = threadIdx.x; if (i < n) y[i] = fmaxf(x[i], 0.f); }'''\n"
                                "ext = load_inline(name='relu_ext', cpp_sources='', cuda_sources=src, functions=[])\n\n\n"
                                "class ModelNew(nn.Module):\n    def forward(self, x):\n        return ext.relu(x)\n")
    assert static_checks.check_python(candidate, model_only, problem.file_with(candidate)) == []


def test_model_only_reference_is_reported_as_the_pytorch_reference(cpu_backend):
    text = ("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
            "        return torch.relu(x)\n\n\ndef get_inputs():\n    return [torch.randn(8)]\n")
    problem = cpu_backend.make_problem("relu.py", text)
    (ev,) = asyncio.run(cpu_backend.evaluate(problem, [problem.code]))
    assert ev.verdict is Verdict.UNVERIFIED and "PyTorch reference" in ev.feedback and not ev.confirmed
