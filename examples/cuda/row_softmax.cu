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

// Starting kernel: one thread per row, three passes over global memory.
__global__ void row_softmax_kernel(const float* x, float* y, int rows, int cols) {
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

void row_softmax(const float* x, float* y, int rows, int cols) {
    int threads = 128;
    row_softmax_kernel<<<(rows + threads - 1) / threads, threads>>>(x, y, rows, cols);
}
