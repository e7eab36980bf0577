"""Tiled GEMM on the current NKI API with its tile sizes as constants:
out[M, N] = a_t.T @ b, bf16 operands, fp32 result (a_t is A transposed, K x M).

TILE_K rows of K sit on the partitions of each operand tile, TILE_M columns of A form the
stationary tile and TILE_N columns of B the moving one (and the PSUM accumulator's free size).
The sizes are guesses; tune them on the evaluator, no LLM or key needed:
    autocomp tune examples/nki/gemm_tiled.py
"""

import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl

TILE_M = 32  # stationary free size (at most 128)
TILE_N = 64  # moving free size and PSUM tile width (at most 512 fp32 = one 2 KiB bank)
TILE_K = 32  # contraction rows on the partitions (at most 128)


@nki.jit
def gemm_kernel(a_t, b):
    K, M = a_t.shape
    _, N = b.shape
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TILE_M):
        for n in nl.affine_range(N // TILE_N):
            acc = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
            nisa.memset(dst=acc, value=0.0)
            for k in nl.affine_range(K // TILE_K):
                lhs = nl.ndarray((TILE_K, TILE_M), dtype=a_t.dtype, buffer=nl.sbuf)
                rhs = nl.ndarray((TILE_K, TILE_N), dtype=b.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=lhs, src=a_t[k * TILE_K:(k + 1) * TILE_K, m * TILE_M:(m + 1) * TILE_M])
                nisa.dma_copy(dst=rhs, src=b[k * TILE_K:(k + 1) * TILE_K, n * TILE_N:(n + 1) * TILE_N])
                nisa.nc_matmul(dst=acc, stationary=lhs, moving=rhs, accumulate=True)
            res = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc)
            nisa.dma_copy(dst=out[m * TILE_M:(m + 1) * TILE_M, n * TILE_N:(n + 1) * TILE_N], src=res)
    return out


def get_inputs(rng):
    """Example inputs: K = M = N = 256, bf16 operands (any seed)."""
    import ml_dtypes

    a_t = rng.standard_normal((256, 256)).astype(np.float32).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((256, 256)).astype(np.float32).astype(ml_dtypes.bfloat16)
    return [a_t, b]
