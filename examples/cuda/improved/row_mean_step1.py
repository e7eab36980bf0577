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


# Step 1: one 256-thread block per row: coalesced strided loads, warp-shuffle block reduction.
rowmean_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void __launch_bounds__(256) row_mean_block_kernel(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ float slots[32];
    const float* in = x + (size_t)blockIdx.x * cols;
    float s = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += in[c];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) slots[warp] = s;
    __syncthreads();
    if (warp == 0) {
        float r = lane < (int)(blockDim.x >> 5) ? slots[lane] : 0.f;
        for (int o = 16; o > 0; o >>= 1) r += __shfl_xor_sync(0xffffffffu, r, o);
        if (lane == 0) y[blockIdx.x] = r / cols;
    }
}

torch::Tensor row_mean_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 2 && x.scalar_type() == torch::kFloat32, "expected a 2-D float32 CUDA tensor");
    auto xc = x.contiguous();
    int rows = xc.size(0), cols = xc.size(1);
    auto y = torch::empty({rows}, xc.options());
    row_mean_block_kernel<<<rows, 256>>>(xc.data_ptr<float>(), y.data_ptr<float>(), cols);
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
