// Row-wise softmax over a rows x cols matrix: a standalone .cu kernel for Autocomp.
// The annotation below tells the harness how to call `row_softmax` (docs/cuda-annotations.md).
// autocomp: entry row_softmax
// autocomp: input  x float [rows * cols]
// autocomp: output y float [rows * cols]
// autocomp: scalar rows int 4096
// autocomp: scalar cols int 1024
// autocomp: range x -4 4
#include <cuda_runtime.h>
#include <math.h>

// Step 1: one 256-thread block per row, coalesced strided loads, warp-shuffle reductions.
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__global__ void __launch_bounds__(256) row_softmax_block_kernel(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ float slots[32];
    const float* in = x + (size_t)blockIdx.x * cols;
    float* out = y + (size_t)blockIdx.x * cols;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    float m = -INFINITY;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, in[c]);
    m = warp_max(m);
    if (lane == 0) slots[warp] = m;
    __syncthreads();
    m = warp_max(lane < warps ? slots[lane] : -INFINITY);
    __syncthreads();
    float s = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += __expf(in[c] - m);
    s = warp_sum(s);
    if (lane == 0) slots[warp] = s;
    __syncthreads();
    s = warp_sum(lane < warps ? slots[lane] : 0.f);
    float inv = 1.f / s;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = __expf(in[c] - m) * inv;
}

void row_softmax(const float* x, float* y, int rows, int cols) {
    row_softmax_block_kernel<<<rows, 256>>>(x, y, cols);
}
