"""The Gemmini prompts against our evaluator: every menu option and every Gemmini command,
library function and constant the prompts (prompts/gemmini/*) name is used by a probe
kernel, and every probe compiles, runs on Spike with our Gemmini model and gives the
original's results bit for bit, through the real Gemmini backend (harness, checks,
sandbox). Probes are small (32x32 / 64x64 GEMMs, a 6x6x16 convolution) and each original's
probes go to the backend in one batch, as the search sends them.
"""

from __future__ import annotations

import asyncio
import re
import sys
import tomllib
from pathlib import Path

import pytest

from autocomp.model import Verdict
from promptkit import ROOT

sys.path.insert(0, str(ROOT / "tests" / "gemmini"))
from simkit import tools_present  # noqa: E402

pytestmark = pytest.mark.skipif(not tools_present(), reason="RISC-V toolchain / dtc missing (bash scripts/setup.sh)")

PROMPTS = ROOT / "prompts" / "gemmini"

# --------------------------------------------------------------------------------------
# Originals (the kernels the probes must match). Those with an int32 operand use Gemmini
# itself, so that the reference and the probes share the accumulator's wrap-around; the
# others are plain C.

GEMM64 = (ROOT / "examples" / "gemmini" / "gemm_64.c").read_text()
G64 = ("void gemm(const elem_t A[MAT_DIM_I][MAT_DIM_K], const elem_t B[MAT_DIM_K][MAT_DIM_J],\n"
       "          elem_t C[MAT_DIM_I][MAT_DIM_J]) {\n")
assert G64 in GEMM64

# C = relu(A x B + D), D an int32 bias: moved into the accumulator, computed onto.
BIAS32 = """\
#include "include/gemmini.h"
#define N 32
void gemm_bias(const elem_t A[N][N], const elem_t B[N][N], const acc_t D[N][N], elem_t C[N][N]) {
  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_extended3_config_ld(N, MVIN_SCALE_IDENTITY, false, 0);
  gemmini_extended3_config_ld(N, MVIN_SCALE_IDENTITY, false, 1);
  gemmini_extended3_config_ld(N * sizeof(acc_t), MVIN_SCALE_IDENTITY, false, 2);
  gemmini_extended_config_st(N, RELU, ACC_SCALE_IDENTITY);
  for (int i = 0; i < N / DIM; i++)
    for (int j = 0; j < N / DIM; j++) {
      gemmini_extended_mvin3(&D[i * DIM][j * DIM], 1u << 31, DIM, DIM);
      for (int k = 0; k < N / DIM; k++) {
        gemmini_extended_mvin(&A[i * DIM][k * DIM], 0, DIM, DIM);
        gemmini_extended_mvin2(&B[k * DIM][j * DIM], DIM, DIM, DIM);
        gemmini_extended_preload(DIM, (1u << 31) | (1u << 30), DIM, DIM, DIM, DIM);
        gemmini_extended_compute_preloaded(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
      }
      gemmini_extended_mvout(&C[i * DIM][j * DIM], 1u << 31, DIM, DIM);
    }
}
"""
GB = "void gemm_bias(const elem_t A[N][N], const elem_t B[N][N], const acc_t D[N][N], elem_t C[N][N]) {\n"

# C = saturate(A x B + D), D an int8 bias.
BIAS8 = """\
#include "include/gemmini.h"
#define N 32
void gemm_bias8(const elem_t A[N][N], const elem_t B[N][N], const elem_t D[N][N], elem_t C[N][N]) {
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      int32_t s = D[i][j];
      for (int k = 0; k < N; k++) s += A[i][k] * B[k][j];
      C[i][j] = s > 127 ? 127 : (s < -128 ? -128 : s);
    }
}
"""
GB8 = "void gemm_bias8(const elem_t A[N][N], const elem_t B[N][N], const elem_t D[N][N], elem_t C[N][N]) {\n"

# C = relu(scale(A x B, 1/8)): scaled and activated on the way out of the accumulator.
SCALED = """\
#include "include/gemmini.h"
#define N 32
void gemm_scaled(const elem_t A[N][N], const elem_t B[N][N], elem_t C[N][N]) {
  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_extended3_config_ld(N, MVIN_SCALE_IDENTITY, false, 0);
  gemmini_extended3_config_ld(N, MVIN_SCALE_IDENTITY, false, 1);
  gemmini_extended_config_st(N, RELU, 0.125f);
  for (int i = 0; i < N / DIM; i++)
    for (int j = 0; j < N / DIM; j++) {
      for (int k = 0; k < N / DIM; k++) {
        gemmini_extended_mvin(&A[i * DIM][k * DIM], 0, DIM, DIM);
        gemmini_extended_mvin2(&B[k * DIM][j * DIM], DIM, DIM, DIM);
        gemmini_extended_preload(DIM, (1u << 31) | (k ? 1u << 30 : 0), DIM, DIM, DIM, DIM);
        gemmini_extended_compute_preloaded(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
      }
      gemmini_extended_mvout(&C[i * DIM][j * DIM], 1u << 31, DIM, DIM);
    }
}
"""
GS = "void gemm_scaled(const elem_t A[N][N], const elem_t B[N][N], elem_t C[N][N]) {\n"

# A GEMM whose sizes are not multiples of DIM (edge tiles in every dimension).
EDGE = """\
#include "include/gemmini.h"
#define DI 40
#define DJ 24
#define DK 40
void gemm_edge(const elem_t A[DI][DK], const elem_t B[DK][DJ], elem_t C[DI][DJ]) {
  for (int i = 0; i < DI; i++)
    for (int j = 0; j < DJ; j++) {
      int32_t s = 0;
      for (int k = 0; k < DK; k++) s += A[i][k] * B[k][j];
      C[i][j] = s > 127 ? 127 : (s < -128 ? -128 : s);
    }
}
"""
GE = "void gemm_edge(const elem_t A[DI][DK], const elem_t B[DK][DJ], elem_t C[DI][DJ]) {\n"

# A 3x3 convolution, stride 1, no padding: 6x6 pixels of 16 channels in, 4x4x16 out.
CONV = """\
#include "include/gemmini.h"
#define IN_DIM 6
#define IN_CH 16
#define OUT_CH 16
#define KDIM 3
#define OUT_DIM (IN_DIM - KDIM + 1)
void conv(const elem_t input[IN_DIM][IN_DIM][IN_CH], const elem_t weights[KDIM * KDIM * IN_CH][OUT_CH],
          elem_t output[OUT_DIM][OUT_DIM][OUT_CH]) {
  for (int r = 0; r < OUT_DIM; r++)
    for (int c = 0; c < OUT_DIM; c++)
      for (int o = 0; o < OUT_CH; o++) {
        int32_t s = 0;
        for (int kr = 0; kr < KDIM; kr++)
          for (int kc = 0; kc < KDIM; kc++)
            for (int i = 0; i < IN_CH; i++) s += input[r + kr][c + kc][i] * weights[(kr * KDIM + kc) * IN_CH + i][o];
        output[r][c][o] = s > 127 ? 127 : (s < -128 ? -128 : s);
      }
}
"""
GC = ("void conv(const elem_t input[IN_DIM][IN_DIM][IN_CH], const elem_t weights[KDIM * KDIM * IN_CH][OUT_CH],\n"
      "          elem_t output[OUT_DIM][OUT_DIM][OUT_CH]) {\n")

# A depthwise 3x3 convolution, stride 1, padding 1: 8x8 pixels of 5 channels, each channel with
# its own kernel.
DWCONV = """\
#include "include/gemmini.h"
#define R 8
#define CH 5
#define K 3
void dwconv(const elem_t input[R][R][CH], const elem_t weights[CH][K][K], elem_t output[R][R][CH]) {
  for (int r = 0; r < R; r++)
    for (int c = 0; c < R; c++)
      for (int ch = 0; ch < CH; ch++) {
        int32_t s = 0;
        for (int kr = 0; kr < K; kr++)
          for (int kc = 0; kc < K; kc++) {
            int ir = r + kr - 1, ic = c + kc - 1;
            if (ir >= 0 && ic >= 0 && ir < R && ic < R) s += input[ir][ic][ch] * weights[ch][kr][kc];
          }
        output[r][c][ch] = s > 127 ? 127 : (s < -128 ? -128 : s);
      }
}
"""
GDW = "void dwconv(const elem_t input[R][R][CH], const elem_t weights[CH][K][K], elem_t output[R][R][CH]) {\n"

ORIGINALS = {"gemm64": GEMM64, "bias32": BIAS32, "bias8": BIAS8, "scaled": SCALED, "edge": EDGE, "conv": CONV,
             "dwconv": DWCONV}

# --------------------------------------------------------------------------------------
# Probes: name -> (original, kernel code). 64x64x64 tile indices: A tile (i, k) at
# a + i*64 + k*16 after one wide mvin per row block; B tile (k, j) at b + k*64 + j*16.

_RESIDENT_64 = """\
  const uint32_t a = 0, b = 256, acc = 1u << 31, accumulate = 1u << 30;
  for (int i = 0; i < 4; i++) mvin_a(&A[i * DIM][0], a + i * 64, 4 * DIM, DIM);
  for (int k = 0; k < 4; k++) mvin_b(&B[k * DIM][0], b + k * 64, 4 * DIM, DIM);
  for (int j = 0; j < 4; j++) {
    for (int k = 0; k < 4; k++)
      for (int i = 0; i < 4; i++) {
        uint32_t out = acc | ((i * 4 + j) * DIM) | (k ? accumulate : 0);
        if (i == 0) {
          PRELOAD(b + k * 64 + j * DIM, out, DIM, DIM, DIM, DIM);
          COMPUTE_PRELOADED(a + i * 64 + k * DIM, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
        } else {
          PRELOAD(GARBAGE_ADDR, out, DIM, DIM, DIM, DIM);
          COMPUTE_ACCUMULATED(a + i * 64 + k * DIM, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
        }
      }
    for (int i = 0; i < 4; i++)  /* stored while the next column block computes */
      MVOUT(&C[i * DIM][j * DIM], acc | ((i * 4 + j) * DIM), DIM, DIM);
  }
"""


def _resident(mvin_b: str, long_names: bool) -> str:
    names = (("gemmini_extended_preload", "gemmini_extended_compute_preloaded", "gemmini_extended_compute_accumulated",
              "gemmini_extended_mvout", "gemmini_extended_mvin") if long_names else
             ("preload", "compute_preloaded", "compute_accumulated", "mvout", "mvin"))
    body = _RESIDENT_64
    for macro, name in zip(("PRELOAD(", "COMPUTE_PRELOADED", "COMPUTE_ACCUMULATED", "MVOUT", "mvin_a"), names):
        name += "(" if macro.endswith("(") else ""
        body = body.replace(macro, name)
    return body.replace("mvin_b", mvin_b)


PROBES: dict[str, tuple[str, str]] = {
    # Whole operands resident in their own rows, wide (64-column) mvins, one weight preload
    # shared by four A tiles, accumulators resident over k, stores interleaved with compute.
    "resident wide tiles (gemmini.h names)": ("gemm64", G64 + """\
  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_extended3_config_ld(MAT_DIM_K, MVIN_SCALE_IDENTITY, false, 0);
  gemmini_extended3_config_ld(MAT_DIM_J, MVIN_SCALE_IDENTITY, false, 1);
  gemmini_config_st(MAT_DIM_J);
""" + _resident("gemmini_extended_mvin2", True) + "  gemmini_fence();\n}\n"),
    # The short-name dialect, B through the third load configuration (mvin3).
    "short names, mvin3": ("gemm64", G64 + """\
  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  config_ld(MAT_DIM_K, MVIN_SCALE_IDENTITY, DIM, 0);
  config_ld(MAT_DIM_J, MVIN_SCALE_IDENTITY, DIM, 2);
  config_st(MAT_DIM_J);
""" + _resident("mvin3", False) + "  fence();\n}\n"),
    "short names, mvin2": ("gemm64", G64 + """\
  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION);
  config_ld(MAT_DIM_K, MVIN_SCALE_IDENTITY, DIM, 0);
  config_ld(MAT_DIM_J, MVIN_SCALE_IDENTITY, DIM, 1);
  config_st(MAT_DIM_J, ACC_SCALE_IDENTITY);
""" + _resident("mvin2", False) + "}\n"),
    # The simplest names: one load configuration for both operands (same stride), a cycle
    # read (harmless), the extended config_ex form.
    "plain config names, read_cycles": ("gemm64", G64 + """\
  uint64_t t0 = read_cycles();
  gemmini_extended_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0, 1, false, false);
  gemmini_config_ld(MAT_DIM_K);
  gemmini_config_st(MAT_DIM_J);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++) {
      for (int k = 0; k < 4; k++) {
        gemmini_extended_mvin(&A[i * DIM][k * DIM], k * 2 * DIM, DIM, DIM);
        gemmini_extended_mvin(&B[k * DIM][j * DIM], (k * 2 + 1) * DIM, DIM, DIM);
        gemmini_extended_preload((k * 2 + 1) * DIM, (1u << 31) | (k ? 1u << 30 : 0), DIM, DIM, DIM, DIM);
        gemmini_extended_compute_preloaded(k * 2 * DIM, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
      }
      gemmini_extended_mvout(&C[i * DIM][j * DIM], 1u << 31, DIM, DIM);
    }
  (void)(read_cycles() - t0);
}
"""),
    # Two scratchpad regions and two accumulator regions alternate between row blocks.
    "double buffering": ("gemm64", G64 + """\
  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_extended3_config_ld(MAT_DIM_K, MVIN_SCALE_IDENTITY, false, 0);
  gemmini_extended3_config_ld(MAT_DIM_J, MVIN_SCALE_IDENTITY, false, 1);
  gemmini_config_st(MAT_DIM_J);
  const uint32_t b = 1024;
  for (int k = 0; k < 4; k++) gemmini_extended_mvin2(&B[k * DIM][0], b + k * 64, 4 * DIM, DIM);
  for (int i = 0; i < 4; i++) {
    const uint32_t a = (i % 2) * 64, acc = (1u << 31) | ((i % 2) * 64);
    gemmini_extended_mvin(&A[i * DIM][0], a, 4 * DIM, DIM);
    for (int j = 0; j < 4; j++)
      for (int k = 0; k < 4; k++) {
        gemmini_extended_preload(b + k * 64 + j * DIM, (acc + j * DIM) | (k ? 1u << 30 : 0), DIM, DIM, DIM, DIM);
        gemmini_extended_compute_preloaded(a + k * DIM, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
      }
    for (int j = 0; j < 4; j++) gemmini_extended_mvout(&C[i * DIM][j * DIM], acc + j * DIM, DIM, DIM);
  }
}
"""),
    # Output-stationary: a preload before every compute names the output (GARBAGE_ADDR until
    # the last k step), compute_preloaded starts a tile, compute_accumulated adds to it.
    "output-stationary": ("gemm64", G64 + """\
  gemmini_config_ex(OUTPUT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_extended3_config_ld(MAT_DIM_K, MVIN_SCALE_IDENTITY, false, 0);
  gemmini_extended3_config_ld(MAT_DIM_J, MVIN_SCALE_IDENTITY, false, 1);
  gemmini_config_st(MAT_DIM_J);
  const uint32_t a = 0, b = 256;
  for (int i = 0; i < 4; i++) gemmini_extended_mvin(&A[i * DIM][0], a + i * 64, 4 * DIM, DIM);
  for (int k = 0; k < 4; k++) gemmini_extended_mvin2(&B[k * DIM][0], b + k * 64, 4 * DIM, DIM);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++) {
      const uint32_t out = (1u << 31) | ((i * 4 + j) * DIM);
      for (int k = 0; k < 4; k++) {
        gemmini_extended_preload(GARBAGE_ADDR, k == 3 ? out : GARBAGE_ADDR, DIM, DIM, DIM, DIM);
        if (k == 0) gemmini_extended_compute_preloaded(a + i * 64 + k * DIM, b + k * 64 + j * DIM, DIM, DIM, DIM, DIM);
        else gemmini_extended_compute_accumulated(a + i * 64 + k * DIM, b + k * 64 + j * DIM, DIM, DIM, DIM, DIM);
      }
      gemmini_extended_mvout(&C[i * DIM][j * DIM], out, DIM, DIM);
    }
}
"""),
    # The hardware loop as worked example 3 writes it: configuration first (the loop's
    # mvins and mvouts use the config_ld / config_st DRAM strides).
    "gemmini_loop_ws (example 3)": ("gemm64", G64 + """\
  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_extended3_config_ld(MAT_DIM_K, MVIN_SCALE_IDENTITY, false, 0);
  gemmini_extended3_config_ld(MAT_DIM_J, MVIN_SCALE_IDENTITY, false, 1);
  gemmini_config_st(MAT_DIM_J);
  for (int i0 = 0; i0 < MAT_DIM_I / DIM; i0 += 4)
    for (int j0 = 0; j0 < MAT_DIM_J / DIM; j0 += 2)
      gemmini_loop_ws(4, 2, MAT_DIM_K / DIM, 0, 0, 0,
                      &A[i0 * DIM][0], &B[0][j0 * DIM], NULL, &C[i0 * DIM][j0 * DIM],
                      MAT_DIM_K, MAT_DIM_J, MAT_DIM_J, MAT_DIM_J,
                      false, false, false, false,
                      false, NO_ACTIVATION, 0, 0, false);
}
"""),
    # Example 3's pinned A block (a_spad_id 1, b_spad_id 2) reused by passing A = NULL.
    "gemmini_loop_ws pinned A reused": ("gemm64", G64 + """\
  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_extended3_config_ld(MAT_DIM_K, MVIN_SCALE_IDENTITY, false, 0);
  gemmini_extended3_config_ld(MAT_DIM_J, MVIN_SCALE_IDENTITY, false, 1);
  gemmini_config_st(MAT_DIM_J);
  for (int j0 = 0; j0 < 4; j0 += 2)
    gemmini_loop_ws(4, 2, 4, 0, 0, 0, j0 == 0 ? &A[0][0] : NULL, &B[0][j0 * DIM], NULL, &C[0][j0 * DIM],
                    MAT_DIM_K, MAT_DIM_J, MAT_DIM_J, MAT_DIM_J, false, false, false, false,
                    false, NO_ACTIVATION, 1, 2, false);
}
"""),
    # Example 3's K split: C = NULL but for the last chunk, ex_accumulate but for the first.
    "gemmini_loop_ws K split": ("gemm64", G64 + """\
  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_extended3_config_ld(MAT_DIM_K, MVIN_SCALE_IDENTITY, false, 0);
  gemmini_extended3_config_ld(MAT_DIM_J, MVIN_SCALE_IDENTITY, false, 1);
  gemmini_config_st(MAT_DIM_J);
  for (int k0 = 0; k0 < 4; k0 += 2)
    gemmini_loop_ws(4, 4, 2, 0, 0, 0, &A[0][k0 * DIM], &B[k0 * DIM][0], NULL, k0 + 2 >= 4 ? &C[0][0] : NULL,
                    MAT_DIM_K, MAT_DIM_J, MAT_DIM_J, MAT_DIM_J, false, false, false, false,
                    k0 > 0, NO_ACTIVATION, 0, 0, false);
}
"""),
    # The library (the baseline to beat; accepted, just not an optimization).
    "tiled_matmul_auto": ("gemm64", G64 + """\
  tiled_matmul_auto(MAT_DIM_I, MAT_DIM_J, MAT_DIM_K, &A[0][0], &B[0][0], NULL, &C[0][0],
                    MAT_DIM_K, MAT_DIM_J, MAT_DIM_J, MAT_DIM_J, MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY,
                    MVIN_SCALE_IDENTITY, NO_ACTIVATION, ACC_SCALE_IDENTITY, 0, false, false, false, false, false, 0, WS);
}
"""),
    # int32 bias: every D tile moved into its output's accumulator rows once, computed onto
    # with the accumulate bit; weights shared by both A tiles; ReLU in the mvout path.
    "acc_t bias in the accumulator, ReLU on mvout": ("bias32", GB + """\
  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_extended3_config_ld(N, MVIN_SCALE_IDENTITY, false, 0);
  gemmini_extended3_config_ld(N, MVIN_SCALE_IDENTITY, false, 1);
  gemmini_extended3_config_ld(N * sizeof(acc_t), MVIN_SCALE_IDENTITY, false, 2);
  gemmini_extended_config_st(N, RELU, ACC_SCALE_IDENTITY);
  const uint32_t acc = 1u << 31, accumulate = 1u << 30;
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++) gemmini_extended_mvin3(&D[i * DIM][j * DIM], acc + (i * 2 + j) * DIM, DIM, DIM);
  for (int i = 0; i < 2; i++) gemmini_extended_mvin(&A[i * DIM][0], i * 32, 2 * DIM, DIM);
  for (int k = 0; k < 2; k++) gemmini_extended_mvin2(&B[k * DIM][0], 64 + k * 32, 2 * DIM, DIM);
  for (int j = 0; j < 2; j++)
    for (int k = 0; k < 2; k++)
      for (int i = 0; i < 2; i++) {
        uint32_t out = (acc + (i * 2 + j) * DIM) | accumulate;
        if (i == 0) {
          gemmini_extended_preload(64 + k * 32 + j * DIM, out, DIM, DIM, DIM, DIM);
          gemmini_extended_compute_preloaded(i * 32 + k * DIM, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
        } else {
          gemmini_extended_preload(GARBAGE_ADDR, out, DIM, DIM, DIM, DIM);
          gemmini_extended_compute_accumulated(i * 32 + k * DIM, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
        }
      }
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++) gemmini_extended_mvout(&C[i * DIM][j * DIM], acc + (i * 2 + j) * DIM, DIM, DIM);
}
"""),
    # The same through the hardware loop: D (int32) and the activation passed to loop_ws.
    "gemmini_loop_ws with bias and ReLU": ("bias32", GB + """\
  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_extended3_config_ld(N, MVIN_SCALE_IDENTITY, false, 0);
  gemmini_extended3_config_ld(N, MVIN_SCALE_IDENTITY, false, 1);
  gemmini_extended3_config_ld(N * sizeof(acc_t), MVIN_SCALE_IDENTITY, false, 2);
  gemmini_extended_config_st(N, RELU, ACC_SCALE_IDENTITY);
  gemmini_loop_ws(2, 2, 2, 0, 0, 0, &A[0][0], &B[0][0], &D[0][0], &C[0][0], N, N, N, N,
                  false, false, false, false, true, RELU, 0, 0, false);
}
"""),
    # int8 bias as compute_preloaded's D operand in weight-stationary mode (first k only).
    "elem_t bias as the D operand (weight-stationary)": ("bias8", GB8 + """\
  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_extended3_config_ld(N, MVIN_SCALE_IDENTITY, false, 0);
  gemmini_extended3_config_ld(N, MVIN_SCALE_IDENTITY, false, 1);
  gemmini_extended3_config_ld(N, MVIN_SCALE_IDENTITY, false, 2);
  gemmini_config_st(N);
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++) {
      gemmini_extended_mvin3(&D[i * DIM][j * DIM], 128, DIM, DIM);
      for (int k = 0; k < 2; k++) {
        gemmini_extended_mvin(&A[i * DIM][k * DIM], k * 32, DIM, DIM);
        gemmini_extended_mvin2(&B[k * DIM][j * DIM], k * 32 + DIM, DIM, DIM);
        gemmini_extended_preload(k * 32 + DIM, (1u << 31) | (k ? 1u << 30 : 0), DIM, DIM, DIM, DIM);
        gemmini_extended_compute_preloaded(k * 32, k ? GARBAGE_ADDR : 128, DIM, DIM, DIM, DIM);
      }
      gemmini_extended_mvout(&C[i * DIM][j * DIM], 1u << 31, DIM, DIM);
    }
}
"""),
    # int8 bias preloaded into the array in output-stationary mode.
    "elem_t bias preloaded (output-stationary)": ("bias8", GB8 + """\
  gemmini_config_ex(OUTPUT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_extended3_config_ld(N, MVIN_SCALE_IDENTITY, false, 0);
  gemmini_extended3_config_ld(N, MVIN_SCALE_IDENTITY, false, 1);
  gemmini_extended3_config_ld(N, MVIN_SCALE_IDENTITY, false, 2);
  gemmini_config_st(N);
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++) {
      const uint32_t out = (1u << 31) | ((i * 2 + j) * DIM);
      gemmini_extended_mvin3(&D[i * DIM][j * DIM], 128, DIM, DIM);
      for (int k = 0; k < 2; k++) {
        gemmini_extended_mvin(&A[i * DIM][k * DIM], k * 32, DIM, DIM);
        gemmini_extended_mvin2(&B[k * DIM][j * DIM], k * 32 + DIM, DIM, DIM);
        gemmini_extended_preload(k ? GARBAGE_ADDR : 128, k == 1 ? out : GARBAGE_ADDR, DIM, DIM, DIM, DIM);
        if (k == 0) gemmini_extended_compute_preloaded(k * 32, k * 32 + DIM, DIM, DIM, DIM, DIM);
        else gemmini_extended_compute_accumulated(k * 32, k * 32 + DIM, DIM, DIM, DIM, DIM);
      }
      gemmini_extended_mvout(&C[i * DIM][j * DIM], out, DIM, DIM);
    }
}
"""),
    # Raw int32 mvout (bit 29, at most DIM columns) and the same scaling on the CPU.
    "raw int32 mvout (bit 29)": ("scaled", GS + """\
  acc_t raw[N][N];
  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_extended3_config_ld(N, MVIN_SCALE_IDENTITY, false, 0);
  gemmini_extended3_config_ld(N, MVIN_SCALE_IDENTITY, false, 1);
  gemmini_config_st(N * sizeof(acc_t));
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++) {
      for (int k = 0; k < 2; k++) {
        gemmini_extended_mvin(&A[i * DIM][k * DIM], k * 32, DIM, DIM);
        gemmini_extended_mvin2(&B[k * DIM][j * DIM], k * 32 + DIM, DIM, DIM);
        gemmini_extended_preload(k * 32 + DIM, (1u << 31) | ((i * 2 + j) * DIM) | (k ? 1u << 30 : 0), DIM, DIM, DIM, DIM);
        gemmini_extended_compute_preloaded(k * 32, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
      }
      gemmini_extended_mvout(&raw[i * DIM][j * DIM], (1u << 31) | (1u << 29) | ((i * 2 + j) * DIM), DIM, DIM);
    }
  gemmini_fence();
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      elem_t v = (elem_t)ACC_SCALE(raw[i][j], 0.125f);
      C[i][j] = v < 0 ? 0 : v;
    }
}
"""),
    # Scaling and ReLU applied by the hardware loop's mvouts (config_st's scale).
    "gemmini_loop_ws with scale and ReLU": ("scaled", GS + """\
  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_extended3_config_ld(N, MVIN_SCALE_IDENTITY, false, 0);
  gemmini_extended3_config_ld(N, MVIN_SCALE_IDENTITY, false, 1);
  gemmini_extended_config_st(N, RELU, 0.125f);
  gemmini_loop_ws(2, 2, 2, 0, 0, 0, &A[0][0], &B[0][0], NULL, &C[0][0], N, N, N, N,
                  false, false, false, false, false, RELU, 0, 0, false);
}
"""),
    # Edge tiles through the rows/cols arguments of every command.
    "edge tiles (rows/cols arguments)": ("edge", GE + """\
  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_extended3_config_ld(DK, MVIN_SCALE_IDENTITY, false, 0);
  gemmini_extended3_config_ld(DJ, MVIN_SCALE_IDENTITY, false, 1);
  gemmini_config_st(DJ);
  for (int i = 0; i < DI; i += DIM) {
    const int rows = DI - i < DIM ? DI - i : DIM;
    for (int j = 0; j < DJ; j += DIM) {
      const int cols = DJ - j < DIM ? DJ - j : DIM;
      for (int k = 0; k < DK; k += DIM) {
        const int ks = DK - k < DIM ? DK - k : DIM;
        gemmini_extended_mvin(&A[i][k], 0, ks, rows);
        gemmini_extended_mvin2(&B[k][j], DIM, cols, ks);
        gemmini_extended_preload(DIM, (1u << 31) | (k ? 1u << 30 : 0), cols, ks, cols, rows);
        gemmini_extended_compute_preloaded(0, GARBAGE_ADDR, ks, rows, DIM, DIM);
      }
      gemmini_extended_mvout(&C[i][j], 1u << 31, cols, rows);
    }
  }
}
"""),
    # Edge tiles through the hardware loop's padding arguments.
    "gemmini_loop_ws with padding": ("edge", GE + """\
  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_extended3_config_ld(DK, MVIN_SCALE_IDENTITY, false, 0);
  gemmini_extended3_config_ld(DJ, MVIN_SCALE_IDENTITY, false, 1);
  gemmini_config_st(DJ);
  gemmini_loop_ws(3, 2, 3, 3 * DIM - DI, 2 * DIM - DJ, 3 * DIM - DK, &A[0][0], &B[0][0], NULL, &C[0][0],
                  DK, DJ, DJ, DJ, false, false, false, false, false, NO_ACTIVATION, 0, 0, false);
}
"""),
    # Convolution: each weight tile preloaded once and streamed over all 16 output pixels
    # (four 4-pixel input rows gathered into one A tile; no im2col buffer).
    "conv weights reused over all pixels": ("conv", GC + """\
  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_extended3_config_ld(IN_CH, MVIN_SCALE_IDENTITY, false, 0);
  gemmini_extended3_config_ld(OUT_CH, MVIN_SCALE_IDENTITY, false, 1);
  gemmini_config_st(OUT_CH);
  for (int s = 0; s < KDIM * KDIM; s++) {
    const int kr = s / KDIM, kc = s % KDIM;
    const uint32_t a = s * 2 * DIM, w = a + DIM;
    for (int r = 0; r < OUT_DIM; r++) gemmini_extended_mvin(&input[r + kr][kc][0], a + r * OUT_DIM, IN_CH, OUT_DIM);
    gemmini_extended_mvin2(&weights[s * IN_CH][0], w, OUT_CH, IN_CH);
    gemmini_extended_preload(w, (1u << 31) | (s ? 1u << 30 : 0), DIM, DIM, DIM, DIM);
    gemmini_extended_compute_preloaded(a, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
  }
  gemmini_extended_mvout(&output[0][0][0], 1u << 31, DIM, DIM);
}
"""),
    # The convolution hardware loop, one tile covering the whole problem.
    "gemmini_loop_conv_ws": ("conv", GC + """\
  gemmini_extended_config_st(OUT_CH, NO_ACTIVATION, ACC_SCALE_IDENTITY);
  gemmini_extended3_config_ex(WEIGHT_STATIONARY, 0, 0, 0, 1, 1, false, false, false);
  gemmini_loop_conv_ws(1, IN_DIM, IN_DIM, IN_CH, OUT_CH, OUT_DIM, OUT_DIM, OUT_DIM, OUT_DIM, 1, 0, KDIM, 1,
                       1, 1, 0, 1, OUT_DIM, OUT_DIM, OUT_CH, KDIM, KDIM, IN_CH, 0, 0, 0, 0, 0, 0, 0, 0, OUT_DIM, OUT_DIM,
                       &weights[0][0], &output[0][0][0], (const acc_t *)1, &input[0][0][0], true, true, false, false,
                       false, NO_ACTIVATION, false, false, false, false, 1, IN_CH, OUT_CH, OUT_CH, false, 0, 0);
  gemmini_fence();
}
"""),
    # Split over kernel rows: the first call starts the sums (bias non-NULL) and keeps them
    # (output NULL), the second continues them (bias NULL) and writes the output.
    "gemmini_loop_conv_ws in two calls": ("conv", GC + """\
  gemmini_extended_config_st(OUT_CH, NO_ACTIVATION, ACC_SCALE_IDENTITY);
  gemmini_extended3_config_ex(WEIGHT_STATIONARY, 0, 0, 0, 1, 1, false, false, false);
  for (int kr = 0; kr < KDIM; kr += 2) {
    const int nkr = KDIM - kr < 2 ? KDIM - kr : 2;
    gemmini_loop_conv_ws(1, IN_DIM, IN_DIM, IN_CH, OUT_CH, OUT_DIM, OUT_DIM, OUT_DIM, OUT_DIM, 1, 0, KDIM, 1,
                         1, 1, 0, 1, OUT_DIM, OUT_DIM, OUT_CH, nkr, KDIM, IN_CH, 0, 0, 0, 0, 0, 0, 0, 0, OUT_DIM, OUT_DIM,
                         &weights[kr * KDIM * IN_CH][0], kr + nkr >= KDIM ? &output[0][0][0] : NULL,
                         kr == 0 ? (const acc_t *)1 : NULL, &input[kr][0][0], true, true, false, false,
                         false, NO_ACTIVATION, false, false, false, false, 1, IN_CH, OUT_CH, OUT_CH, false, 0, 0);
  }
}
"""),
    "tiled_conv_auto": ("conv", GC + """\
  tiled_conv_auto(1, IN_DIM, IN_DIM, IN_CH, OUT_CH, OUT_DIM, OUT_DIM, 1, 1, 1, 0, KDIM, false, false, false, false, false,
                  &input[0][0][0], &weights[0][0], NULL, &output[0][0][0], NO_ACTIVATION, ACC_SCALE_IDENTITY, 0, 0, 0, WS);
}
"""),
    "tiled_conv_dw_auto": ("dwconv", GDW + """\
  tiled_conv_dw_auto(1, R, R, CH, R, R, 1, 1, K, &input[0][0][0], &weights[0][0][0], NULL, &output[0][0][0],
                     NO_ACTIVATION, ACC_SCALE_IDENTITY, 1, 0, 0, WS);
}
"""),
}

# Every menu option -> the probes that exercise what it offers (options that are about
# ordering or host code are exercised by the probes that reorder or hoist).
MENU: dict[str, tuple[str, ...]] = {
    "Tile the loops so that a block of A rows": ("resident wide tiles (gemmini.h names)", "double buffering"),
    "Choose larger tile sizes": ("resident wide tiles (gemmini.h names)", "gemmini_loop_ws pinned A reused"),
    "Reorder the i/j/k loops": ("resident wide tiles (gemmini.h names)", "short names, mvin3"),
    "Hoist loads out of inner loops": ("double buffering", "resident wide tiles (gemmini.h names)"),
    "Double-buffer the scratchpad": ("double buffering",),
    "Keep output tiles resident in the accumulator": ("resident wide tiles (gemmini.h names)", "double buffering"),
    "Use wider mvin commands": ("resident wide tiles (gemmini.h names)", "double buffering"),
    "Use the three load configurations": ("short names, mvin3", "acc_t bias in the accumulator, ReLU on mvout",
                                          "elem_t bias as the D operand (weight-stationary)"),
    "Remove redundant gemmini_fence()": ("double buffering", "raw int32 mvout (bit 29)"),
    "Remove redundant config commands": ("gemmini_loop_ws (example 3)", "resident wide tiles (gemmini.h names)"),
    "Replace the hand-written tile loop by the hardware loop gemmini_loop_ws": (
        "gemmini_loop_ws (example 3)", "gemmini_loop_ws pinned A reused", "gemmini_loop_ws K split",
        "gemmini_loop_ws with padding"),
    "Cut host overhead": ("resident wide tiles (gemmini.h names)",),
    "Interleave independent work": ("double buffering",),
    "Fuse operations into the accelerator pipeline": (
        "acc_t bias in the accumulator, ReLU on mvout", "elem_t bias as the D operand (weight-stationary)",
        "gemmini_loop_ws with bias and ReLU", "gemmini_loop_ws with scale and ReLU"),
    "Use different scratchpad rows for consecutive loads": ("plain config names, read_cycles", "double buffering"),
    "Issue mvouts of finished tiles while later tiles compute": ("resident wide tiles (gemmini.h names)",),
    "For convolutions, reorganise the loops": ("conv weights reused over all pixels",),
    "Issue a convolution block with the hardware loop gemmini_loop_conv_ws": ("gemmini_loop_conv_ws", "gemmini_loop_conv_ws in two calls",
                                                                               "tiled_conv_auto", "tiled_conv_dw_auto"),
    "Exploit the output-stationary dataflow": ("output-stationary", "elem_t bias preloaded (output-stationary)"),
    "Pad or split edge tiles correctly": ("edge tiles (rows/cols arguments)", "gemmini_loop_ws with padding"),
}

# Names the prompts mention that are not commands or library calls of ours (example
# variables, words).
NOT_API = {"DRAM", "GEMM", "RISC", "NULL", "C_ACC", "C_ACC_BASE", "ACCUMULATE", "GROUPS", "KSTEPS", "LOADS_PER_GROUP",
           "STORES_PER_GROUP", "TILE_I", "TILE_J", "MAT_DIM_I", "MAT_DIM_J", "MAT_DIM_K"}
_SHORT = ("config_ex", "config_ld", "config_st", "mvin", "mvin2", "mvin3", "mvout", "preload", "compute_preloaded",
          "compute_accumulated", "fence", "read_cycles")
_NAME = re.compile(r"\b(gemmini_\w+|tiled_\w+|[A-Z][A-Z0-9_]{3,})\b|(?<![\w.])(" + "|".join(_SHORT) + r")\b")


def prompt_text() -> str:
    return "\n".join(p.read_text() for p in sorted(PROMPTS.iterdir()) if p.suffix in (".md", ".toml"))


def mentioned_names(text: str) -> set[str]:
    return {m.group(1) or m.group(2) for m in _NAME.finditer(text)} - NOT_API


def used_names(code: str) -> set[str]:
    return {m.group(1) or m.group(2) for m in _NAME.finditer(code)}


def test_every_menu_option_is_covered_by_probes():
    options = tomllib.loads((PROMPTS / "menu.toml").read_text())["options"]
    for option in options:
        keys = [k for k in MENU if option.startswith(k)]
        assert len(keys) == 1, f"menu option without (or with several) probe entries: {option!r}"
    assert len(MENU) == len(options), "MENU lists an option the menu no longer has"
    for probes in MENU.values():
        for name in probes:
            assert name in PROBES, name


def test_every_name_the_prompts_mention_is_used_by_a_probe():
    used = set().union(*(used_names(code) for _o, code in PROBES.values()))
    missing = mentioned_names(prompt_text()) - used
    assert not missing, f"named in prompts/gemmini but used by no probe: {sorted(missing)}"


@pytest.fixture(scope="module")
def verdicts():
    from backend_support import backend as make_backend

    backend = make_backend(max_instructions=30_000_000, run_timeout=60)

    async def run_all():
        out = {}
        for key, original in ORIGINALS.items():
            problem = backend.make_problem(f"{key}.c", original)
            names = [n for n, (o, _c) in PROBES.items() if o == key]
            evs = await backend.evaluate(problem, [problem.code] + [PROBES[n][1] for n in names])
            out[f"original {key}"] = evs[0]
            out.update(zip(names, evs[1:]))
        return out

    return asyncio.run(run_all())


@pytest.mark.parametrize("name", sorted(PROBES))
def test_probe_compiles_and_runs_correct_on_spike(verdicts, name):
    original = PROBES[name][0]
    assert verdicts[f"original {original}"].verdict is Verdict.CORRECT, verdicts[f"original {original}"].feedback
    ev = verdicts[name]
    assert ev.verdict is Verdict.CORRECT, f"{name}: {ev.verdict.value}: {ev.feedback[:3000]}"
