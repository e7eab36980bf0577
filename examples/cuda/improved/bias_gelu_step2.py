"""KernelBench-style level-1 problem (written for Autocomp): an elementwise chain,
y = gelu(x * 2 + bias), on a (8192, 4096) fp32 matrix with a per-column bias. PyTorch runs
three kernels and two temporaries; the starting CUDA kernel fuses them. `Model` is the
reference; `ModelNew` is the starting kernel that Autocomp optimizes."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline


class Model(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x * 2.0 + self.bias)


rows = 8192
features = 4096


def get_inputs():
    return [torch.randn(rows, features)]


def get_init_inputs():
    return [features]


# Step 2: a 2-D launch: blockIdx.y is the row, so the 64-bit modulo disappears; each thread keeps
# its bias vector in registers and handles the same columns of 4 rows (fewer bias loads, more ILP).
bias_gelu_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__device__ __forceinline__ float gelu_erf(float v) { return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)); }

#define ROWS_PER_BLOCK 4

__global__ void bias_gelu_rows_kernel(const float4* __restrict__ x, const float4* __restrict__ bias, float4* __restrict__ y,
                                      int rows, int cols4) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols4) return;
    float4 b = bias[c];
    int r0 = blockIdx.y * ROWS_PER_BLOCK;
#pragma unroll
    for (int k = 0; k < ROWS_PER_BLOCK; ++k) {
        int r = r0 + k;
        if (r >= rows) break;
        size_t i = (size_t)r * cols4 + c;
        float4 v = x[i];
        y[i] = make_float4(gelu_erf(fmaf(v.x, 2.0f, b.x)), gelu_erf(fmaf(v.y, 2.0f, b.y)),
                           gelu_erf(fmaf(v.z, 2.0f, b.z)), gelu_erf(fmaf(v.w, 2.0f, b.w)));
    }
}

__global__ void bias_gelu_scalar_kernel(const float* __restrict__ x, const float* __restrict__ bias, float* __restrict__ y,
                                        long long n, int cols) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = gelu_erf(fmaf(x[i], 2.0f, bias[i % cols]));
}

torch::Tensor bias_gelu_forward(torch::Tensor x, torch::Tensor bias) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 2 && x.scalar_type() == torch::kFloat32, "expected a 2-D float32 CUDA tensor");
    auto xc = x.contiguous();
    auto bc = bias.contiguous();
    auto y = torch::empty_like(xc);
    int rows = xc.size(0), cols = xc.size(1);
    const int threads = 256;
    if (cols % 4 == 0 && rows <= 65535 * ROWS_PER_BLOCK) {
        int cols4 = cols / 4;
        dim3 grid((cols4 + threads - 1) / threads, (rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
        bias_gelu_rows_kernel<<<grid, threads>>>(reinterpret_cast<const float4*>(xc.data_ptr<float>()),
                                                 reinterpret_cast<const float4*>(bc.data_ptr<float>()),
                                                 reinterpret_cast<float4*>(y.data_ptr<float>()), rows, cols4);
    } else {
        long long n = xc.numel();
        bias_gelu_scalar_kernel<<<(unsigned)((n + threads - 1) / threads), threads>>>(
            xc.data_ptr<float>(), bc.data_ptr<float>(), y.data_ptr<float>(), n, cols);
    }
    return y;
}
"""
bias_gelu_cpp = "torch::Tensor bias_gelu_forward(torch::Tensor x, torch::Tensor bias);"
bias_gelu_ext = load_inline(name="autocomp_bias_gelu", cpp_sources=bias_gelu_cpp, cuda_sources=bias_gelu_source,
                            functions=["bias_gelu_forward"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return bias_gelu_ext.bias_gelu_forward(x, self.bias)
