"""Tiled GEMM on the current NKI API: out[M, N] = a_t.T @ b, bf16 operands, fp32 result.

a_t is A already transposed (K x M) so that K lies on the partition axis, as TensorE needs.
This starting version is deliberately plain: 128-wide output tiles and both operands
reloaded from HBM for every matmul.
"""

import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def gemm_kernel(a_t, b):
    K, M = a_t.shape
    _, N = b.shape
    TN = 512  # widest moving tile TensorE takes; one PSUM bank of fp32
    KT = K // 128
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    # Load both operands once, in full-width row blocks (long contiguous DMA runs), and
    # reuse them for every output tile instead of reloading per matmul.
    a_sb = nl.ndarray((128, KT, M), dtype=a_t.dtype, buffer=nl.sbuf)
    b_sb = nl.ndarray((128, KT, N), dtype=b.dtype, buffer=nl.sbuf)
    for k in nl.affine_range(KT):
        nisa.dma_copy(dst=a_sb[:, k, :], src=a_t[k * 128:(k + 1) * 128, :])
        nisa.dma_copy(dst=b_sb[:, k, :], src=b[k * 128:(k + 1) * 128, :])
    for m in nl.affine_range(M // 128):
        for n in nl.affine_range(N // TN):
            acc = nl.ndarray((128, TN), dtype=nl.float32, buffer=nl.psum)
            nisa.memset(dst=acc, value=0.0)
            for k in nl.affine_range(KT):
                nisa.nc_matmul(dst=acc, stationary=a_sb[:, k, m * 128:(m + 1) * 128],
                               moving=b_sb[:, k, n * TN:(n + 1) * TN], accumulate=True)
            res = nl.ndarray((128, TN), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc)
            nisa.dma_copy(dst=out[m * 128:(m + 1) * 128, n * TN:(n + 1) * TN], src=res)
    return out


def get_inputs(rng):
    """Example inputs: K = M = N = 512, bf16 operands (any seed)."""
    import ml_dtypes

    a_t = rng.standard_normal((512, 512)).astype(np.float32).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((512, 512)).astype(np.float32).astype(ml_dtypes.bfloat16)
    return [a_t, b]
