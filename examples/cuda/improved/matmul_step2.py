"""KernelBench-style level-1 problem (written for Autocomp): square fp32 matrix multiply,
C = A @ B with A, B of shape (1024, 1024). `Model` is the PyTorch reference; `ModelNew`
is the starting CUDA kernel that Autocomp optimizes."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


N = 1024


def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]


def get_init_inputs():
    return []


# Step 2: register tiling. A 64x64 block tile with BK=16, 256 threads, each thread computing a
# 4x4 output tile from values held in registers (16 FMAs per pair of shared loads).
matmul_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

#define BM 64
#define BN 64
#define BK 16
#define TM 4
#define TN 4

__global__ void __launch_bounds__(256) matmul_regtile_kernel(const float* __restrict__ A, const float* __restrict__ B,
                                                             float* __restrict__ C, int M, int N, int K) {
    __shared__ float As[BK][BM + 4];  // A tile stored transposed: As[k][m]
    __shared__ float Bs[BK][BN + 4];
    const int tid = threadIdx.x;
    const int tr = tid / (BN / TN);  // 0..15: which 4-row strip
    const int tc = tid % (BN / TN);  // 0..15: which 4-column strip
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[TM][TN] = {};
    for (int k0 = 0; k0 < K; k0 += BK) {
        // 64x16 A elements and 16x64 B elements, 4 of each per thread
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            int e = tid + i * 256;
            int am = e / BK, ak = e % BK;
            int gr = row0 + am, gk = k0 + ak;
            As[ak][am] = (gr < M && gk < K) ? A[(size_t)gr * K + gk] : 0.f;
            int bk = e / BN, bn = e % BN;
            int gk2 = k0 + bk, gc = col0 + bn;
            Bs[bk][bn] = (gk2 < K && gc < N) ? B[(size_t)gk2 * N + gc] : 0.f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = As[k][tr * TM + i];
#pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = Bs[k][tc * TN + j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        int r = row0 + tr * TM + i;
        if (r >= M) continue;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            int c = col0 + tc * TN + j;
            if (c < N) C[(size_t)r * N + c] = acc[i][j];
        }
    }
}

torch::Tensor matmul_forward(torch::Tensor A, torch::Tensor B) {
    TORCH_CHECK(A.is_cuda() && B.is_cuda() && A.dim() == 2 && B.dim() == 2 && A.size(1) == B.size(0), "bad operands");
    auto a = A.contiguous(), b = B.contiguous();
    int M = a.size(0), K = a.size(1), N = b.size(1);
    auto C = torch::empty({M, N}, a.options());
    dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
    matmul_regtile_kernel<<<grid, 256>>>(a.data_ptr<float>(), b.data_ptr<float>(), C.data_ptr<float>(), M, N, K);
    return C;
}
"""
matmul_cpp = "torch::Tensor matmul_forward(torch::Tensor A, torch::Tensor B);"
matmul_ext = load_inline(name="autocomp_matmul", cpp_sources=matmul_cpp, cuda_sources=matmul_source,
                         functions=["matmul_forward"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return matmul_ext.matmul_forward(A, B)
