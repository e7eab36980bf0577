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


# Step 2: the row is read from global memory once, with float4 loads, and kept in registers for
# the mean, the variance (two-pass, exact) and the output; scalar kernel for other widths.
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

template <int VEC>
__global__ void __launch_bounds__(256) layernorm_regs_kernel(const float4* __restrict__ x, const float4* __restrict__ w,
                                                             const float4* __restrict__ b, float4* __restrict__ y,
                                                             int cols4, float eps) {
    __shared__ float slots[32];
    const float4* in = x + (size_t)blockIdx.x * cols4;
    float4* out = y + (size_t)blockIdx.x * cols4;
    const float n = 4.f * cols4;
    float4 v[VEC];
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
        int c = threadIdx.x + i * blockDim.x;
        v[i] = c < cols4 ? in[c] : make_float4(0.f, 0.f, 0.f, 0.f);
        s += (v[i].x + v[i].y) + (v[i].z + v[i].w);
    }
    float mean = block_sum(s, slots) / n;
    float q = 0.f;
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
        int c = threadIdx.x + i * blockDim.x;
        if (c < cols4) {
            float dx = v[i].x - mean, dy = v[i].y - mean, dz = v[i].z - mean, dw = v[i].w - mean;
            q += (dx * dx + dy * dy) + (dz * dz + dw * dw);
        }
    }
    float inv = rsqrtf(block_sum(q, slots) / n + eps);
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
        int c = threadIdx.x + i * blockDim.x;
        if (c < cols4) {
            float4 g = w[c], h = b[c];
            out[c] = make_float4((v[i].x - mean) * inv * g.x + h.x, (v[i].y - mean) * inv * g.y + h.y,
                                 (v[i].z - mean) * inv * g.z + h.z, (v[i].w - mean) * inv * g.w + h.w);
        }
    }
}

__global__ void __launch_bounds__(256) layernorm_scalar_kernel(const float* __restrict__ x, const float* __restrict__ w,
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
    auto wc = w.contiguous(), bc = b.contiguous();
    auto y = torch::empty_like(xc);
    int rows = xc.size(0), cols = xc.size(1);
    const int threads = 256;
    if (cols % 4 == 0 && cols <= 4 * threads * 8) {
        int cols4 = cols / 4;
        int vec = (cols4 + threads - 1) / threads;
        auto xp = reinterpret_cast<const float4*>(xc.data_ptr<float>());
        auto wp = reinterpret_cast<const float4*>(wc.data_ptr<float>());
        auto bp = reinterpret_cast<const float4*>(bc.data_ptr<float>());
        auto yp = reinterpret_cast<float4*>(y.data_ptr<float>());
        if (vec <= 1) layernorm_regs_kernel<1><<<rows, threads>>>(xp, wp, bp, yp, cols4, (float)eps);
        else if (vec <= 2) layernorm_regs_kernel<2><<<rows, threads>>>(xp, wp, bp, yp, cols4, (float)eps);
        else if (vec <= 4) layernorm_regs_kernel<4><<<rows, threads>>>(xp, wp, bp, yp, cols4, (float)eps);
        else layernorm_regs_kernel<8><<<rows, threads>>>(xp, wp, bp, yp, cols4, (float)eps);
    } else {
        layernorm_scalar_kernel<<<rows, threads>>>(xc.data_ptr<float>(), wc.data_ptr<float>(), bc.data_ptr<float>(),
                                                   y.data_ptr<float>(), cols, (float)eps);
    }
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
