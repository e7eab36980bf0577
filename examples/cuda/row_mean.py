"""KernelBench-style level-1 problem (written for Autocomp): mean over the last
dimension of a (4096, 8192) fp32 matrix. `Model` is the PyTorch reference; `ModelNew` is
the starting CUDA kernel that Autocomp optimizes. (A mean rather than a sum: a sequential
fp32 sum of 8192 values differs from PyTorch's tree-ordered sum by more than the 1e-4
tolerance on rows whose sum is near zero, so a sum problem would reject honest kernels.)"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mean(x, dim=-1)


rows = 4096
cols = 8192


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []


# Starting kernel: one thread per row, a serial loop (uncoalesced: neighbouring threads read rows apart).
rowmean_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void row_mean_kernel(const float* x, float* y, int rows, int cols) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const float* in = x + (size_t)row * cols;
    float s = 0.f;
    for (int c = 0; c < cols; ++c) s += in[c];
    y[row] = s / cols;
}

torch::Tensor row_mean_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 2 && x.scalar_type() == torch::kFloat32, "expected a 2-D float32 CUDA tensor");
    auto xc = x.contiguous();
    int rows = xc.size(0), cols = xc.size(1);
    auto y = torch::empty({rows}, xc.options());
    int threads = 128;
    row_mean_kernel<<<(rows + threads - 1) / threads, threads>>>(xc.data_ptr<float>(), y.data_ptr<float>(), rows, cols);
    return y;
}
"""
rowmean_cpp = "torch::Tensor row_mean_forward(torch::Tensor x);"
rowmean_ext = load_inline(name="autocomp_row_mean", cpp_sources=rowmean_cpp, cuda_sources=rowmean_source,
                         functions=["row_mean_forward"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rowmean_ext.row_mean_forward(x)
