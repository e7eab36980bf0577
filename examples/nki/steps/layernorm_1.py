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
    for r in nl.affine_range(R // 128):
        g = nl.load(gamma[0:1, :]).broadcast_to((128, D))
        b = nl.load(beta[0:1, :]).broadcast_to((128, D))
        xt = nl.load(x[r * 128:(r + 1) * 128, :])
        mean = nl.mean(xt, axis=1, keepdims=True)
        xc = nl.subtract(xt, mean)
        # sum of squares from ScalarE's activation reduction instead of two VectorE passes
        ssq = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        sq = nisa.activation_reduce(op=nl.square, data=xc, reduce_op=nl.add, reduce_res=ssq)
        # rstd = (ssq / D + eps) ** -0.5 with two tiny per-partition VectorE ops
        var_eps = nisa.tensor_scalar(ssq, np.multiply, 1.0 / D, op1=np.add, operand1=1e-5)
        rstd = nisa.tensor_scalar(var_eps, nl.power, -0.5)
        xn = nl.multiply(xc, rstd)
        y = nl.add(nl.multiply(xn, g), b)
        nl.store(out[r * 128:(r + 1) * 128, :], value=y)
    return out


def get_inputs(rng):
    """Example inputs: 1024 rows of 512 fp32 features, gamma and beta rows."""
    x = rng.standard_normal((1024, 512)).astype(np.float32)
    gamma = rng.standard_normal((1, 512)).astype(np.float32)
    beta = rng.standard_normal((1, 512)).astype(np.float32)
    return [x, gamma, beta]
