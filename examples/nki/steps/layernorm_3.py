"""LayerNorm on the older neuronxcc.nki API:
out = (x - mean(x)) / sqrt(var(x) + eps) * gamma + beta, over the last axis.

Rows go on partitions, the 512 features on the free axis. gamma and beta arrive as
(1, 512) rows and are broadcast across partitions. This starting version reloads and
re-broadcasts them for every row tile and uses one instruction per arithmetic step.
"""

import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def layernorm_kernel(x, gamma, beta):
    R, D = x.shape
    out = nl.ndarray((R, D), dtype=x.dtype, buffer=nl.shared_hbm)
    # gamma/beta are shared by every row tile: load and broadcast them once.
    g = nl.load(gamma[0:1, :]).broadcast_to((128, D))
    b = nl.load(beta[0:1, :]).broadcast_to((128, D))
    for r in nl.affine_range(R // 128):
        xt = nl.load(x[r * 128:(r + 1) * 128, :])
        # mean and variance in one VectorE pass (bn_stats) plus a tiny aggregation
        stats = nisa.bn_stats(xt)
        mv = nisa.bn_aggr(stats)
        mean = mv[:, 0:1]
        rstd = nisa.tensor_scalar(mv[:, 1:2], np.add, 1e-5, op1=nl.power, operand1=-0.5)
        # (x - mean) * rstd on ScalarE, as x * rstd + (-mean * rstd) with per-partition scale and bias
        shift = nisa.tensor_scalar(mean, np.multiply, rstd, op1=np.multiply, operand1=-1.0)
        xn = nisa.activation(op=nl.copy, data=xt, scale=rstd, bias=shift)
        # * gamma and + beta on VectorE, each reading its broadcast row from PSUM
        y = nisa.tensor_tensor(nisa.tensor_tensor(xn, g, op=np.multiply), b, op=np.add)
        nl.store(out[r * 128:(r + 1) * 128, :], value=y)
    return out


def get_inputs(rng):
    """Example inputs: 1024 rows of 512 fp32 features, gamma and beta rows."""
    x = rng.standard_normal((1024, 512)).astype(np.float32)
    gamma = rng.standard_normal((1, 512)).astype(np.float32)
    beta = rng.standard_normal((1, 512)).astype(np.float32)
    return [x, gamma, beta]
