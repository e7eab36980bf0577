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


# Step 2: the row is read once into registers with float4 loads (online in registers), then
# max, sum and the normalised write all work from registers; scalar fallback for odd widths.
softmax_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float block_reduce(float v, bool is_max, float* slots) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = is_max ? warp_max(v) : warp_sum(v);
    if (lane == 0) slots[warp] = v;
    __syncthreads();
    float r = lane < warps ? slots[lane] : (is_max ? -INFINITY : 0.f);
    r = is_max ? warp_max(r) : warp_sum(r);
    __syncthreads();
    return r;
}

// VEC float4 per thread: the whole row lives in registers between the passes.
template <int VEC>
__global__ void __launch_bounds__(256) softmax_regs_kernel(const float4* __restrict__ x, float4* __restrict__ y, int cols4) {
    __shared__ float slots[32];
    const float4* in = x + (size_t)blockIdx.x * cols4;
    float4* out = y + (size_t)blockIdx.x * cols4;
    float4 v[VEC];
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
        int c = threadIdx.x + i * blockDim.x;
        v[i] = c < cols4 ? in[c] : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
        m = fmaxf(m, fmaxf(fmaxf(v[i].x, v[i].y), fmaxf(v[i].z, v[i].w)));
    }
    m = block_reduce(m, true, slots);
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
        v[i].x = __expf(v[i].x - m); v[i].y = __expf(v[i].y - m);
        v[i].z = __expf(v[i].z - m); v[i].w = __expf(v[i].w - m);
        s += (v[i].x + v[i].y) + (v[i].z + v[i].w);
    }
    s = block_reduce(s, false, slots);
    float inv = 1.f / s;
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
        int c = threadIdx.x + i * blockDim.x;
        if (c < cols4) out[c] = make_float4(v[i].x * inv, v[i].y * inv, v[i].z * inv, v[i].w * inv);
    }
}

__global__ void __launch_bounds__(256) softmax_scalar_kernel(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ float slots[32];
    const float* in = x + (size_t)blockIdx.x * cols;
    float* out = y + (size_t)blockIdx.x * cols;
    float m = -INFINITY;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, in[c]);
    m = block_reduce(m, true, slots);
    float s = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += __expf(in[c] - m);
    s = block_reduce(s, false, slots);
    float inv = 1.f / s;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = __expf(in[c] - m) * inv;
}

torch::Tensor softmax_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 2 && x.scalar_type() == torch::kFloat32, "expected a 2-D float32 CUDA tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    int rows = xc.size(0), cols = xc.size(1);
    const int threads = 256;
    if (cols % 4 == 0 && cols <= 4 * threads * 8) {
        int cols4 = cols / 4;
        int vec = (cols4 + threads - 1) / threads;
        auto xp = reinterpret_cast<const float4*>(xc.data_ptr<float>());
        auto yp = reinterpret_cast<float4*>(y.data_ptr<float>());
        if (vec <= 1) softmax_regs_kernel<1><<<rows, threads>>>(xp, yp, cols4);
        else if (vec <= 2) softmax_regs_kernel<2><<<rows, threads>>>(xp, yp, cols4);
        else if (vec <= 4) softmax_regs_kernel<4><<<rows, threads>>>(xp, yp, cols4);
        else softmax_regs_kernel<8><<<rows, threads>>>(xp, yp, cols4);
    } else {
        softmax_scalar_kernel<<<rows, threads>>>(xc.data_ptr<float>(), y.data_ptr<float>(), cols);
    }
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
