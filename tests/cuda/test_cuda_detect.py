"""Detection: which files and spans the CUDA target claims."""

from __future__ import annotations

import pytest

from autocomp.backends import get_backend
from autocomp.backends.base import BackendError
from autocomp.backends.cuda import CudaBackend, annotations

from cuda_testlib import example

CU_TWO = """#include <cuda_runtime.h>

__global__ void scale(float* y, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.f * x[i];
}

void launch_scale(float* y, const float* x, int n) {
  scale<<<(n + 255) / 256, 256>>>(y, x, n);
}

__device__ float sq(float v) { return v * v; }
__global__ void square(float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = sq(y[i]);
}

extern "C" void launch_square(float* y, int n) {
  square<<<(n + 255) / 256, 256>>>(y, n);
}
"""


def test_cu_spans_cover_kernels_and_launchers_without_overlap():
    spans = CudaBackend().detect("k.cu", CU_TWO)
    assert [s.name for s in spans] == ["launch_scale", "launch_square"]
    first, second = spans
    assert first.start_line == 2 and first.end_line == 10  # kernel + launcher, after the include
    assert second.start_line == 10 and second.end_line == 20
    assert "__global__ void square" in second.text_of(CU_TWO)


def test_cu_kernels_without_launcher_are_separate_compile_only_spans():
    text = "__global__ void a(float* y) { y[0] = 1.f; }\n\n__global__ void b(float* y) { y[1] = 2.f; }\n"
    assert [(s.name, s.start_line, s.end_line) for s in CudaBackend().detect("k.cuh", text)] == [("a", 0, 1), ("b", 2, 3)]


def test_annotated_example_span_excludes_annotation_and_includes():
    path, text = example("row_softmax.cu")
    (span,) = CudaBackend().detect(path, text)
    assert span.name == "row_softmax"
    code = span.text_of(text)
    assert "autocomp:" not in code and "#include" not in code
    assert code.rstrip().endswith("}")


@pytest.mark.parametrize("name", ["softmax.py", "matmul.py", "layernorm.py", "row_mean.py", "bias_gelu.py"])
def test_kernelbench_examples_span_is_the_candidate_section(name):
    path, text = example(name)
    (span,) = CudaBackend().detect(path, text)
    assert span.name == "ModelNew"
    code = span.text_of(text)
    assert "__global__" in code and "class ModelNew" in code and "load_inline(" in code
    assert "class Model(" not in code and "def get_inputs" not in code


def test_model_only_file_spans_the_model():
    text = "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n\n" \
           "def get_inputs():\n    return [torch.randn(4)]\n"
    (span,) = CudaBackend().detect("p.py", text)
    assert (span.name, span.start_line, span.end_line) == ("Model", 2, 5)


@pytest.mark.parametrize(
    "text",
    [
        "import numpy as np\n\ndef f(x):\n    return x + 1\n",
        # an NKI kernel is Python too: never ours
        "import nki\nimport nki.language as nl\n\n@nki.jit\ndef add(a, b):\n    return a\n",
        # Model without get_inputs is not KernelBench-style
        "class Model:\n    pass\n",
        # half-typed code must not raise
        "class Model(\n def get_inputs(:",
    ],
)
def test_arbitrary_python_is_not_claimed(text):
    assert CudaBackend().detect("x.py", text) == []


def test_registry_names_the_cuda_backend():
    backend = get_backend("cuda")
    assert isinstance(backend, CudaBackend)
    assert backend.file_suffixes == (".cu", ".cuh", ".py")
    assert (backend.primary_metric, backend.lower_is_better) == ("ms", True)


def test_bad_annotation_is_reported_with_its_line():
    _, text = example("row_softmax.cu")
    broken = text.replace("float [rows * cols]\n// autocomp: output", "floaty [rows * cols]\n// autocomp: output", 1)
    with pytest.raises(BackendError, match=r"row_softmax.cu:4: bad autocomp annotation: unknown type 'floaty'"):
        CudaBackend().make_problem("row_softmax.cu", broken)


def test_annotation_sizes_and_defaults():
    _, text = example("row_softmax.cu")
    ann = annotations.parse(text)
    assert ann.entry == "row_softmax"
    assert [(b.name, b.count, b.output) for b in ann.buffers] == [("x", 4096 * 1024, False), ("y", 4096 * 1024, True)]
    assert ann.buffer("x").low == -4 and ann.tolerance_for(ann.buffer("y")) == 1e-4


@pytest.mark.parametrize(
    "lines, message",
    [
        (["input x float [n]", "output y float [n]"], "no `// autocomp: entry FUNCTION` line"),
        (["entry f", "input x float [m]", "output y float [4]"], "unknown name 'm'"),
        (["entry f", "input x float [4]"], "declares no `output` buffer"),
        (["entry f", "output y float [__import__('os')]"], "unsupported syntax"),
        (["entry f", "output y float 4"], "size must be written in brackets"),
    ],
)
def test_annotation_errors_say_what_to_write(lines, message):
    text = "\n".join(f"// autocomp: {line}" for line in lines) + "\n"
    with pytest.raises(BackendError, match=message):
        annotations.parse(text, "k.cu")
