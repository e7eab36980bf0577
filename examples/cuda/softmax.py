"""KernelBench-style level-1 problem (written for Autocomp): softmax over the last
dimension of a (4096, 1024) fp32 matrix. `Model` is the PyTorch reference; `ModelNew` is
the starting CUDA kernel that Autocomp optimizes."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


batch_size = 4096
dim = 1024


def get_inputs():
    return [torch.randn(batch_size, dim) * 4]


def get_init_inputs():
    return []


# Starting kernel: one thread per row, three passes over global memory.
softmax_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void softmax_rows_kernel(const float* x, float* y, int rows, int cols) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const float* in = x + (size_t)row * cols;
    float* out = y + (size_t)row * cols;
    float m = -INFINITY;
    for (int c = 0; c < cols; ++c) m = fmaxf(m, in[c]);
    float s = 0.f;
    for (int c = 0; c < cols; ++c) s += expf(in[c] - m);
    for (int c = 0; c < cols; ++c) out[c] = expf(in[c] - m) / s;
}

torch::Tensor softmax_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 2 && x.scalar_type() == torch::kFloat32, "expected a 2-D float32 CUDA tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    int rows = xc.size(0), cols = xc.size(1);
    int threads = 128;
    softmax_rows_kernel<<<(rows + threads - 1) / threads, threads>>>(xc.data_ptr<float>(), y.data_ptr<float>(), rows, cols);
    return y;
}
"""
softmax_cpp = "torch::Tensor softmax_forward(torch::Tensor x);"
softmax_ext = load_inline(name="autocomp_softmax", cpp_sources=softmax_cpp, cuda_sources=softmax_source,
                          functions=["softmax_forward"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax_ext.softmax_forward(x)
