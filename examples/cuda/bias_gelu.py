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


# Starting kernel: fused, one thread per element, scalar loads and an integer modulo per element.
bias_gelu_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void bias_gelu_kernel(const float* x, const float* bias, float* y, long long n, int cols) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i] * 2.0f + bias[i % cols];
    y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
}

torch::Tensor bias_gelu_forward(torch::Tensor x, torch::Tensor bias) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 2 && x.scalar_type() == torch::kFloat32, "expected a 2-D float32 CUDA tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    long long n = xc.numel();
    int cols = xc.size(1);
    int threads = 256;
    long long blocks = (n + threads - 1) / threads;
    bias_gelu_kernel<<<(unsigned)blocks, threads>>>(xc.data_ptr<float>(), bias.contiguous().data_ptr<float>(),
                                                    y.data_ptr<float>(), n, cols);
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
