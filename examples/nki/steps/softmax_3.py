"""Row softmax on the older neuronxcc.nki API: out = exp(x - max(x)) / sum(exp(x - max(x))).

Rows go on partitions, the 1024 columns on the free axis. This starting version spells out
every step as its own instruction.
"""

import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def softmax_kernel(x):
    R, C = x.shape
    out = nl.ndarray((R, C), dtype=x.dtype, buffer=nl.shared_hbm)
    for r in nl.affine_range(R // 128):
        xt = nl.load(x[r * 128:(r + 1) * 128, :])
        neg_mx = nisa.tensor_reduce(op=nl.maximum, data=xt, axis=1, negate=True, keepdims=True)
        s = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        e = nisa.activation_reduce(op=nl.exp, data=xt, reduce_op=nl.add, reduce_res=s, bias=neg_mx)
        inv = nl.reciprocal(s)
        # Normalise on ScalarE (copy with a per-partition scale) and VectorE in halves, so
        # both engines share the final full-width pass.
        y = nl.ndarray((128, C), dtype=x.dtype, buffer=nl.sbuf)
        y[:, 0:C // 2] = nisa.activation(op=nl.copy, data=e[:, 0:C // 2], scale=inv)
        y[:, C // 2:C] = nisa.tensor_scalar(e[:, C // 2:C], np.multiply, inv)
        nl.store(out[r * 128:(r + 1) * 128, :], value=y)
    return out


def get_inputs(rng):
    """Example input: 512 rows of 1024 fp32 logits."""
    return [(3.0 * rng.standard_normal((512, 1024))).astype(np.float32)]
