"""The Autocomp paper's Gemmini benchmark shapes, run through our library on the model.

Imported by ``gemmini_fidelity.py``. Why it exists: the paper (Hong et al., arXiv 2505.18574
v2, abstract) reports Autocomp's code 5.6x faster than Gemmini's software library on its GEMM
benchmarks and 2.7x faster on its convolutions (geometric means). No kernel can beat the
array's peak, so those figures alone bound the library from above, without the per-shape
cycle counts that stayed out of reach: its geometric-mean utilisation of the systolic array
is at most 1 / 5.6 = 17.9% on the GEMMs and 1 / 2.7 = 37.0% on the convolutions. This module
times the library on the same shapes so the bench can set the model's figure beside that bound.

The shapes are facts read from ucb-bar/autocomp (the programs here are ours):
- GEMM: ``sols/exo/sol{0..5}``, the six Exo-paper problems (int8, C = A * B with A M x K and
  B K x N): 512^3 and five ResNet-50 1x1 layers at batch 4.
- Convolution: ``sols/exo-conv/sol{0,1,2}``, the three shapes with a library baseline there:
  ResNet-50 3x3 layers at batch 4, input already padded (so padding 0, stride 1), int32 bias,
  int8 output, one ``tiled_conv_auto(..., WEIGHT_STATIONARY)`` call.
Each library call is timed once, as in the paper's harness, on the backend's default
configuration (16 memory requests in flight, Gemmini's defaultConfig, the one Autocomp used).
"""

from __future__ import annotations

import math

# (M, K, N): C[M][N] = A[M][K] * B[K][N]
GEMM_SHAPES = [(512, 512, 512), (12544, 64, 256), (12544, 256, 64),
               (3136, 128, 512), (3136, 512, 128), (784, 256, 1024)]
# (batch, padded input rows = cols, input channels, output channels); 3x3 kernel, stride 1
CONV_SHAPES = [(4, 58, 64, 64), (4, 30, 128, 128), (4, 16, 256, 256)]
KERNEL = 3

PUBLISHED_AUTOCOMP_OVER_LIBRARY_GEMM = 5.6
PUBLISHED_AUTOCOMP_OVER_LIBRARY_CONV = 2.7

_HEAD = r"""
#include "gemmini.h"
#include "autocomp_harness.h"
"""


def gemm_program(m: int, k: int, n: int) -> str:
    """One library GEMM of the given shape, measured once, spot-checked against a saturating
    int8 product (every 97th row, every 13th column)."""
    return _HEAD + f"""
#define M {m}
#define K {k}
#define N {n}
static elem_t A[M][K] __attribute__((aligned(64))), B[K][N] __attribute__((aligned(64)));
static elem_t C[M][N] __attribute__((aligned(64)));
""" + r"""
AUTOCOMP_HARNESS_FN int main(void) {
  for (int i = 0; i < M; i++) for (int k = 0; k < K; k++) A[i][k] = (elem_t)((i * 7 + k) % 5 - 2);
  for (int k = 0; k < K; k++) for (int j = 0; j < N; j++) B[k][j] = (elem_t)((k + j * 3) % 7 - 3);
  AUTOCOMP_MEASURE_BEGIN();
  tiled_matmul_auto(M, N, K, (elem_t *)A, (elem_t *)B, NULL, (elem_t *)C, K, N, N, N,
                    MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY, NO_ACTIVATION,
                    ACC_SCALE_IDENTITY, 0, false, false, false, false, false, 0, WS);
  gemmini_fence();
  AUTOCOMP_MEASURE_END();
  for (int i = 0; i < M; i += 97) for (int j = 0; j < N; j += 13) {
    int32_t s = 0;
    for (int k = 0; k < K; k++) s += A[i][k] * B[k][j];
    elem_t want = s > 127 ? 127 : (s < -128 ? -128 : s);
    if (C[i][j] != want) { printf("mismatch at %d %d: %d != %d\n", i, j, C[i][j], want); return 2; }
  }
  return 0;
}
"""


def conv_program(batch: int, in_dim: int, in_ch: int, out_ch: int) -> str:
    """One library convolution (3x3, stride 1, pre-padded input, bias), measured once, with
    every 37th output checked against a direct int32 sum saturated to int8."""
    return _HEAD + f"""
#define BATCH {batch}
#define IN_DIM {in_dim}
#define IN_CH {in_ch}
#define OUT_CH {out_ch}
#define KDIM {KERNEL}
#define OUT_DIM (IN_DIM - KDIM + 1)
""" + r"""
static elem_t input[BATCH][IN_DIM][IN_DIM][IN_CH] __attribute__((aligned(64)));
static elem_t weights[KDIM][KDIM][IN_CH][OUT_CH] __attribute__((aligned(64)));
static acc_t bias[OUT_CH] __attribute__((aligned(64)));
static elem_t output[BATCH][OUT_DIM][OUT_DIM][OUT_CH] __attribute__((aligned(64)));
AUTOCOMP_HARNESS_FN int main(void) {
  for (int b = 0; b < BATCH; b++) for (int r = 0; r < IN_DIM; r++) for (int c = 0; c < IN_DIM; c++)
    for (int ch = 0; ch < IN_CH; ch++) input[b][r][c][ch] = (elem_t)((b * 3 + r * 5 + c * 7 + ch) % 5 - 2);
  for (int kr = 0; kr < KDIM; kr++) for (int kc = 0; kc < KDIM; kc++) for (int ch = 0; ch < IN_CH; ch++)
    for (int o = 0; o < OUT_CH; o++) weights[kr][kc][ch][o] = (elem_t)((kr + kc * 2 + ch * 3 + o) % 3 - 1);
  for (int o = 0; o < OUT_CH; o++) bias[o] = o % 7 - 3;
  AUTOCOMP_MEASURE_BEGIN();
  tiled_conv_auto(BATCH, IN_DIM, IN_DIM, IN_CH, OUT_CH, OUT_DIM, OUT_DIM, 1, 1, 1, 0, KDIM,
                  false, false, false, false, false, (elem_t *)input, (elem_t *)weights, bias,
                  (elem_t *)output, NO_ACTIVATION, ACC_SCALE_IDENTITY, 0, 0, 0, WS);
  gemmini_fence();
  AUTOCOMP_MEASURE_END();
  const long total = (long)BATCH * OUT_DIM * OUT_DIM * OUT_CH;
  for (long at = 0; at < total; at += 37) {
    const int o = at % OUT_CH, c = (at / OUT_CH) % OUT_DIM, r = (at / OUT_CH / OUT_DIM) % OUT_DIM;
    const int b = at / OUT_CH / OUT_DIM / OUT_DIM;
    int32_t s = bias[o];
    for (int kr = 0; kr < KDIM; kr++) for (int kc = 0; kc < KDIM; kc++) for (int ch = 0; ch < IN_CH; ch++)
      s += input[b][r + kr][c + kc][ch] * weights[kr][kc][ch][o];
    elem_t want = s > 127 ? 127 : (s < -128 ? -128 : s);
    if (output[b][r][c][o] != want) { printf("mismatch at %ld: %d != %d\n", at, output[b][r][c][o], want); return 2; }
  }
  return 0;
}
"""


def gemm_ideal_cycles(m: int, k: int, n: int, dim: int = 16) -> int:
    """Cycles at the array's peak: one DIM x DIM block of multiply-accumulates per cycle."""
    return m * k * n // (dim * dim)


def conv_ideal_cycles(batch: int, in_dim: int, in_ch: int, out_ch: int, dim: int = 16) -> int:
    out_dim = in_dim - KERNEL + 1
    return batch * out_dim * out_dim * out_ch * in_ch * KERNEL * KERNEL // (dim * dim)


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))
