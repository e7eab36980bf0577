"""The static tier: every known cheat or fallback is refused with its reason (the AST
allowlist of backends/cuda/pyvalidate.py plus the C++ rules for every load_inline source),
and the honest starting kernels and the improved example solutions pass."""

from __future__ import annotations

import asyncio

import pytest

from autocomp.backends.cuda import CudaBackend, static_checks
from autocomp.backends.cuda.backend import reference_file
from autocomp.model import Verdict

from cuda_testlib import EXAMPLES, example

PATH, TEXT = example("softmax.py")
PROBLEM = CudaBackend().make_problem(PATH, TEXT)
START = PROBLEM.code
FORWARD = "        return softmax_ext.softmax_forward(x)\n"
KERNEL_LINE = "    for (int c = 0; c < cols; ++c) out[c] = expf(in[c] - m) / s;\n"


def with_forward(body: str) -> str:
    assert FORWARD in START and "    return y;\n}" in START
    return START.replace(FORWARD, body)


REFERENCE = reference_file(PROBLEM)


def rules(code: str) -> dict[str, str]:
    findings = static_checks.check_python(code, REFERENCE, PROBLEM.file_with(code), PROBLEM.span.start_line)
    return {f.rule: f.reason for f in findings}


PY_CHEATS = {
    # the reference computes torch.softmax: using it is allowed (partial fusion), but a kernel must be on the path
    "no kernel: torch.softmax": (with_forward("        return torch.softmax(x, dim=-1)\n"), "no-custom-kernel", "never calls"),
    "no kernel: functional": ("import torch.nn.functional as F\n" + with_forward("        return F.softmax(x, -1)\n"), "no-custom-kernel", "load_inline"),
    "torch-op: new op": (with_forward("        return softmax_ext.softmax_forward(torch.exp(x))\n"), "torch-op", "torch.exp"),
    "torch-op: new functional op": ("import torch.nn.functional as F\n" + with_forward("        return F.relu(softmax_ext.softmax_forward(x))\n"), "torch-op", "functional.relu"),
    "torch-op: tensor method": (with_forward("        y = softmax_ext.softmax_forward(x)\n        return y / y.sum(-1, keepdim=True)\n"), "torch-op", ".sum()"),
    "torch-op: @ operator": (with_forward("        return softmax_ext.softmax_forward(x @ x.t())\n"), "torch-op", "@ operator"),
    "no kernel: the same op as a layer": (START.replace("        super().__init__()\n\n    def forward", "        super().__init__()\n        self.sm = nn.Softmax(dim=-1)\n\n    def forward", 1)
                           .replace(FORWARD, "        return self.sm(x)\n"), "no-custom-kernel", "never calls"),
    "torch-op: new nn layer": (START.replace("        super().__init__()\n\n    def forward", "        super().__init__()\n        self.act = nn.GELU()\n\n    def forward", 1)
                               .replace(FORWARD, "        return softmax_ext.softmax_forward(self.act(x))\n"), "torch-op", "GELU"),
    "torch-op: aten": (with_forward("        return torch.ops.aten._softmax(x, -1, False)\n"), "torch-op", "torch.ops.aten"),
    "reference: Model()": (with_forward("        return Model()(x)\n"), "reference-fallback", "`Model`"),
    "reference: inherits": (START.replace("class ModelNew(nn.Module):", "class ModelNew(Model):"), "reference-fallback", "inherits"),
    "try/except fallback": (with_forward("        try:\n            return softmax_ext.softmax_forward(x)\n        except RuntimeError:\n            return x.softmax(-1)\n"), "try-except", "fallback"),
    "side stream": (with_forward("        with torch.cuda.stream(torch.cuda.Stream()):\n            return softmax_ext.softmax_forward(x)\n"), "side-stream", "torch.cuda.stream"),
    "threads": ("import threading\n" + START, "threads", "threading"),
    "timing: import time": ("import time\n" + START, "timing-tamper", "time"),
    "timing: patch synchronize": ("torch.cuda.synchronize = lambda: None\n" + START, "timing-tamper", "torch.cuda.synchronize"),
    "timing: events": (with_forward("        e = torch.cuda.Event(enable_timing=True)\n" + FORWARD), "timing-tamper", "torch.cuda.Event"),
    "inputs: in-place": (with_forward("        x.mul_(1.0)\n" + FORWARD), "input-tamper", "in place"),
    "inputs: slice write": (with_forward("        x[0] = 0\n" + FORWARD), "input-tamper", "writes into the input"),
    "inputs: redefined get_inputs": (START + "\n\ndef get_inputs():\n    return [torch.zeros(4096, 1024)]\n", "input-tamper", "get_inputs"),
    "inputs: reseeding": ("torch.manual_seed(0)\n" + START, "input-tamper", "manual_seed"),
    "precision: half": (with_forward("        return softmax_ext.softmax_forward(x.half()).float()\n"), "precision", "half"),
    "precision: dtype": (with_forward("        return softmax_ext.softmax_forward(x.to(torch.float16)).float()\n"), "precision", "float16"),
    "precision: tf32": ("torch.backends.cuda.matmul.allow_tf32 = True\n" + START, "precision", "allow_tf32"),
    "algorithm: cudnn.benchmark": (with_forward("        torch.backends.cudnn.benchmark = True\n" + FORWARD), "algorithm", "cudnn"),
    "caching: lru_cache": ("import functools\n" + START, "result-caching", "functools"),
    "caching: attribute": (with_forward("        self.cached_out = softmax_ext.softmax_forward(x)\n        return self.cached_out\n"), "state", "cached_out"),
    "caching: default argument": (START.replace("def forward(self, x: torch.Tensor)", "def forward(self, x: torch.Tensor, memo={})"), "state", "default argument"),
    "no kernel: dead branch": (with_forward("        if False:\n            return softmax_ext.softmax_forward(x)\n        return torch.softmax(x, -1)\n"), "no-custom-kernel", "never calls"),
    "rebinding: ModelNew = helper": (START + "\n\nclass Plain(nn.Module):\n    def forward(self, x):\n        return torch.softmax(x, -1)\n\n\nModelNew = Plain\n", "rebinding", "ModelNew"),
    "override: _call_impl": (START.replace("    def forward(self, x: torch.Tensor)", "    def _call_impl(self, x):\n        return torch.softmax(x, -1)\n\n    def forward(self, x: torch.Tensor)"), "reference-fallback", "_call_impl"),
    "no ModelNew": (START.replace("class ModelNew", "class Faster"), "no-modelnew", "ModelNew"),
    "no CUDA kernel": ("class ModelNew(nn.Module):\n    def forward(self, x):\n        return x.clone()\n", "no-cuda-kernel", "no CUDA kernel"),
    "triton": ("import triton\n" + START, "not-cuda", "triton"),
    "files": (with_forward("        open('/tmp/result', 'w').write('ok')\n" + FORWARD), "file-access", "`open`"),
    "escape: getattr": (with_forward("        return getattr(torch, 'softmax')(x, -1)\n"), "dynamic-access", "getattr"),
    "escape: dunder": (with_forward("        return self.__class__.__mro__[1].forward(self, x)\n"), "dunder", "dunder attribute"),
    "escape: alias": (START.replace("class ModelNew", "sm = torch.softmax\n\n\nclass ModelNew"), "module-value", "torch.softmax"),
    "escape: sys.modules": ("import sys\n" + with_forward("        return sys.modules['torch'].softmax(x, -1)\n"), "timing-tamper", "sys"),
    "escape: lambda": (with_forward("        f = lambda t: t\n" + FORWARD), "not-allowed", "lambda"),
    "extension: alias": (with_forward("        f = softmax_ext.softmax_forward\n        return f(x)\n"), "module-value", "softmax_ext"),
    "extension: unknown function": (with_forward("        return softmax_ext.other(x)\n"), "unknown-extension-function", "softmax_ext.other"),
    "load_inline: ldflags": (START.replace("verbose=False", "verbose=False, extra_ldflags=['-lcublas']"), "load-inline", "extra_ldflags"),
    "load_inline: fast math": (START.replace("verbose=False", "verbose=False, extra_cuda_cflags=['--use_fast_math']"), "precision", "fast_math"),
    "load_inline: include path": (START.replace("verbose=False", "verbose=False, extra_include_paths=['/home/user']"), "include-path", "/home/user"),
    "cuda: side stream": (START.replace(KERNEL_LINE, KERNEL_LINE + "    cudaStream_t st; cudaStreamCreate(&st);\n"), "side-stream", "cudaStreamCreate"),
    "cuda: host thread": (START.replace("#include <cuda_runtime.h>\n", "#include <cuda_runtime.h>\n#include <thread>\n"), "threads", "<thread>"),
    "cuda: events": (START.replace(KERNEL_LINE, KERNEL_LINE + "    cudaEvent_t e; cudaEventCreate(&e);\n"), "timing-tamper", "cudaEventCreate"),
    "cuda: exit": (START.replace(KERNEL_LINE, KERNEL_LINE + "    exit(0);\n"), "process-control", "exit("),
    "cuda: empty kernel": (START.replace("__global__ void softmax_rows_kernel", "__global__ void noop() { }\n__global__ void softmax_rows_kernel"), "empty-kernel", "noop"),
    "cuda: at::softmax in the wrapper": (START.replace("    return y;\n}", "    return at::softmax(x, -1);\n}"), "torch-op", "at::softmax"),
    "cuda: tensor method in the wrapper": (START.replace("    return y;\n}", "    return x.softmax(-1);\n}"), "torch-op", ".softmax()"),
    "cuda: cuBLAS": (START.replace("#include <cuda_runtime.h>\n", "#include <cuda_runtime.h>\n#include <cublas_v2.h>\n"), "include", "cublas_v2.h"),
    "cuda: host file include": (START.replace("#include <cuda_runtime.h>\n", "#include <cuda_runtime.h>\n#include \"/etc/passwd\"\n"), "include", "/etc/passwd"),
    "cuda: using namespace": (START.replace("#include <cuda_runtime.h>\n", "#include <cuda_runtime.h>\nusing namespace at;\n"), "library-fallback", "using namespace"),
    "cuda: half in the kernel": (START.replace(KERNEL_LINE, "    __half h = __float2half(1.f);\n" + KERNEL_LINE), "precision", "__half"),
    "cuda: macro hides the namespace": (START.replace("#include <cuda_runtime.h>\n", "#include <cuda_runtime.h>\n#define NS at\n").replace("    return y;\n}", "    return NS::softmax(x, -1);\n}"), "macro", "NS"),
    "cuda: macro hides a method": (START.replace("#include <cuda_runtime.h>\n", "#include <cuda_runtime.h>\n#define SM(t) t.softmax(-1)\n"), "torch-op", ".softmax()"),
    "cuda: include_next": (START.replace("#include <cuda_runtime.h>\n", "#include <cuda_runtime.h>\n#include_next <cublas_v2.h>\n"), "include", "include_next"),
    "cuda: include through a macro": (START.replace("#include <cuda_runtime.h>\n", "#include <cuda_runtime.h>\n#define HDR <vector>\n#include HDR\n"), "include", "macro"),
    "cuda: HIP": (START.replace("#include <cuda_runtime.h>\n", "#include <hip/hip_runtime.h>\n"), "not-cuda", "HIP"),
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
    assert static_checks.check_python(problem.code, reference_file(problem), text, problem.span.start_line) == []


@pytest.mark.parametrize("name", sorted(p.name for p in (EXAMPLES / "improved").glob("*.py")))
def test_improved_example_solutions_pass_the_validator(name):
    path, text = example("improved/" + name)
    problem = CudaBackend().make_problem(path, text)
    assert static_checks.check_python(problem.code, reference_file(problem), text, problem.span.start_line) == []


def test_kernel_lines_are_relative_to_the_span():
    code = with_forward("        x.add_(1)\n" + FORWARD)
    (finding,) = [f for f in static_checks.check_python(code, REFERENCE, PROBLEM.file_with(code), PROBLEM.span.start_line)
                  if f.rule == "input-tamper"]
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
    code = with_forward("        return softmax_ext.softmax_forward(torch.exp(x))\n")
    (ev,) = asyncio.run(cpu_backend.evaluate(PROBLEM, [code]))
    assert ev.verdict is Verdict.REJECTED and ev.tier == "static" and not ev.confirmed
    assert "torch-op" in ev.feedback and "torch.exp" in ev.feedback and "kernel line" in ev.feedback


def test_plain_math_and_a_kept_reference_are_not_flagged():
    code = "import math\n" + with_forward("        scale = math.sqrt(4.0)\n" + FORWARD)
    assert rules(code) == {}
    undefined = with_forward("        scale = math.sqrt(4.0)\n" + FORWARD)  # math was never imported
    assert "unknown-name" in rules(undefined)
    model_only = ("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def __init__(self):\n"
                  "        super(Model, self).__init__()\n\n    def forward(self, x):\n        return torch.relu(x)\n\n\n"
                  "def get_inputs():\n    return [torch.randn(8)]\n")
    problem = CudaBackend().make_problem("relu.py", model_only)
    assert problem.name == "Model"
    candidate = problem.code + ("\n\nfrom torch.utils.cpp_extension import load_inline\n\n"
                                "src = r\'\'\'__global__ void relu_kernel(const float* x, float* y, int n) {\n"
                                "    int i = threadIdx.x; if (i < n) y[i] = fmaxf(x[i], 0.f); }\n"
                                "torch::Tensor relu(torch::Tensor x) { auto y = torch::empty_like(x);\n"
                                "    relu_kernel<<<1, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel()); return y; }\'\'\'\n"
                                "ext = load_inline(name='relu_ext', cpp_sources='torch::Tensor relu(torch::Tensor x);', "
                                "cuda_sources=src, functions=['relu'])\n\n\n"
                                "class ModelNew(nn.Module):\n    def forward(self, x):\n        return ext.relu(x)\n")
    assert static_checks.check_python(candidate, model_only, problem.file_with(candidate), problem.span.start_line) == []
    # a function load_inline does not bind is not a kernel
    unbound = candidate.replace("return ext.relu(x)", "return ext.relu2(x)")
    found = static_checks.check_python(unbound, model_only, problem.file_with(unbound), problem.span.start_line)
    assert "unknown-extension-function" in {f.rule for f in found}


def test_model_only_reference_is_reported_as_the_pytorch_reference(cpu_backend):
    text = ("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
            "        return torch.relu(x)\n\n\ndef get_inputs():\n    return [torch.randn(8)]\n")
    problem = cpu_backend.make_problem("relu.py", text)
    (ev,) = asyncio.run(cpu_backend.evaluate(problem, [problem.code]))
    assert ev.verdict is Verdict.UNVERIFIED and "PyTorch reference" in ev.feedback and not ev.confirmed


CONV_REFERENCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3)

    def forward(self, x):
        return torch.relu(self.conv(x))


def get_inputs():
    return [torch.randn(8, 16, 32, 32)]
'''

CONV_SOLUTION = '''import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

relu_src = r"""
#include <torch/extension.h>
__global__ void relu_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.f);
}
torch::Tensor fused_relu(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
ext = load_inline(name="relu_ext", cpp_sources="torch::Tensor fused_relu(torch::Tensor x);", cuda_sources=relu_src,
                  functions=["fused_relu"])


class ModelNew(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3)

    def forward(self, x):
        y = F.conv2d(x, self.conv.weight, self.conv.bias)
        return ext.fused_relu(y.contiguous())
'''


def _solution_rules(solution: str) -> dict[str, str]:
    return {f.rule: f.reason for f in static_checks.check_python(solution, CONV_REFERENCE, solution, 0)}


def test_partial_fusion_may_use_the_references_own_ops():
    """KernelBench levels 2-3: the reference's conv (as nn.Conv2d or F.conv2d, or by calling
    the layer) may stay in PyTorch while the candidate's kernel does the rest."""
    assert _solution_rules(CONV_SOLUTION) == {}
    assert _solution_rules(CONV_SOLUTION.replace("F.conv2d(x, self.conv.weight, self.conv.bias)", "self.conv(x)")) == {}


def test_partial_fusion_may_not_add_an_op():
    found = _solution_rules(CONV_SOLUTION.replace("return ext.fused_relu(y.contiguous())",
                                                  "return ext.fused_relu(F.max_pool2d(y, 2))"))
    assert "torch-op" in found and "max_pool2d" in found["torch-op"]
    found = _solution_rules(CONV_SOLUTION.replace("self.conv = nn.Conv2d(c, c, 3)", "self.conv = nn.Conv3d(c, c, 3)"))
    assert "torch-op" in found and "Conv3d" in found["torch-op"]


def test_helper_modules_are_followed_on_the_path_of_forward():
    """Level-3 style: ModelNew delegates to a helper nn.Module whose forward calls the kernel."""
    block = CONV_SOLUTION.replace('''class ModelNew(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3)

    def forward(self, x):
        y = F.conv2d(x, self.conv.weight, self.conv.bias)
        return ext.fused_relu(y.contiguous())''', '''class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3)

    def forward(self, x):
        return ext.fused_relu(self.conv(x).contiguous())


class ModelNew(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.block = Block(c)

    def forward(self, x):
        return self.block(x)''')
    assert "class Block" in block and _solution_rules(block) == {}
    no_kernel = block.replace("return ext.fused_relu(self.conv(x).contiguous())", "return torch.relu(self.conv(x))")
    assert "no-custom-kernel" in _solution_rules(no_kernel)
