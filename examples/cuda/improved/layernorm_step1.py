"""KernelBench-style level-1 problem (written for Autocomp): LayerNorm over the last
dimension of a (4096, 2048) fp32 matrix, with learned weight and bias. `Model` is the
PyTorch reference; `ModelNew` is the starting CUDA kernel that Autocomp optimizes."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


class Model(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.ln = nn.LayerNorm(features, eps=1e-5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


rows = 4096
features = 2048


def get_inputs():
    return [torch.randn(rows, features)]


def get_init_inputs():
    return [features]


# Step 1: one 256-thread block per row; coalesced strided passes; block reductions by warp shuffles.
layernorm_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__device__ __forceinline__ float block_sum(float v, float* slots) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) slots[warp] = v;
    __syncthreads();
    float r = lane < (int)(blockDim.x >> 5) ? slots[lane] : 0.f;
    for (int o = 16; o > 0; o >>= 1) r += __shfl_xor_sync(0xffffffffu, r, o);
    __syncthreads();
    return r;
}

__global__ void __launch_bounds__(256) layernorm_block_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                                              const float* __restrict__ b, float* __restrict__ y,
                                                              int cols, float eps) {
    __shared__ float slots[32];
    const float* in = x + (size_t)blockIdx.x * cols;
    float* out = y + (size_t)blockIdx.x * cols;
    float s = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += in[c];
    float mean = block_sum(s, slots) / cols;
    float q = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) { float d = in[c] - mean; q = fmaf(d, d, q); }
    float inv = rsqrtf(block_sum(q, slots) / cols + eps);
    for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = (in[c] - mean) * inv * w[c] + b[c];
}

torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 2 && x.scalar_type() == torch::kFloat32, "expected a 2-D float32 CUDA tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    int rows = xc.size(0), cols = xc.size(1);
    layernorm_block_kernel<<<rows, 256>>>(xc.data_ptr<float>(), w.contiguous().data_ptr<float>(),
                                          b.contiguous().data_ptr<float>(), y.data_ptr<float>(), cols, (float)eps);
    return y;
}
"""
layernorm_cpp = "torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps);"
layernorm_ext = load_inline(name="autocomp_layernorm", cpp_sources=layernorm_cpp, cuda_sources=layernorm_source,
                            functions=["layernorm_forward"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.ln = nn.LayerNorm(features, eps=1e-5)  # holds the weights; the kernel does the work

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return layernorm_ext.layernorm_forward(x, self.ln.weight, self.ln.bias, self.ln.eps)
