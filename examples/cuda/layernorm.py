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


# Starting kernel: one thread per row, mean and variance in two serial passes.
layernorm_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void layernorm_rows_kernel(const float* x, const float* w, const float* b, float* y,
                                      int rows, int cols, float eps) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const float* in = x + (size_t)row * cols;
    float* out = y + (size_t)row * cols;
    float mean = 0.f;
    for (int c = 0; c < cols; ++c) mean += in[c];
    mean /= cols;
    float var = 0.f;
    for (int c = 0; c < cols; ++c) { float d = in[c] - mean; var += d * d; }
    var /= cols;
    float inv = rsqrtf(var + eps);
    for (int c = 0; c < cols; ++c) out[c] = (in[c] - mean) * inv * w[c] + b[c];
}

torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 2 && x.scalar_type() == torch::kFloat32, "expected a 2-D float32 CUDA tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    int rows = xc.size(0), cols = xc.size(1);
    int threads = 128;
    layernorm_rows_kernel<<<(rows + threads - 1) / threads, threads>>>(
        xc.data_ptr<float>(), w.contiguous().data_ptr<float>(), b.contiguous().data_ptr<float>(),
        y.data_ptr<float>(), rows, cols, (float)eps);
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
