// int8 GEMM, 512 x 512 x 512, on Gemmini (DIM 16, weight-stationary), blocked for the
// hardware loop gemmini_loop_ws: each call multiplies a TI x TK block of A tiles by a
// TK x TJ block of B tiles, accumulating over the K blocks in one half of the accumulator,
// and writes C after the last K block.
//
// The tile constants TI, TJ and TK are guesses. Tune them on the evaluator, no LLM or key:
//   autocomp tune examples/gemmini/gemm_tiled.c
// (the rules the tuner prunes with: TI*TJ*DIM within half the accumulator, the A and B
// blocks within half the scratchpad, each constant dividing its dimension in tiles).
#include "include/gemmini.h"

#define MAT_DIM_I 512
#define MAT_DIM_J 512
#define MAT_DIM_K 512

#define TI 2  // row tiles of A per hardware loop
#define TJ 2  // column tiles of B per hardware loop
#define TK 4  // K tiles per hardware loop

void gemm(const elem_t A[MAT_DIM_I][MAT_DIM_K], const elem_t B[MAT_DIM_K][MAT_DIM_J],
          elem_t C[MAT_DIM_I][MAT_DIM_J]) {
  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_config_st(MAT_DIM_J * sizeof(elem_t));
  gemmini_extended3_config_ld(MAT_DIM_K * sizeof(elem_t), MVIN_SCALE_IDENTITY, false, 0);
  gemmini_extended3_config_ld(MAT_DIM_J * sizeof(elem_t), MVIN_SCALE_IDENTITY, false, 1);
  for (int i0 = 0; i0 < MAT_DIM_I / DIM; i0 += TI)
    for (int j0 = 0; j0 < MAT_DIM_J / DIM; j0 += TJ)
      for (int k0 = 0; k0 < MAT_DIM_K / DIM; k0 += TK)
        gemmini_loop_ws(TI, TJ, TK, 0, 0, 0, &A[i0 * DIM][k0 * DIM], &B[k0 * DIM][j0 * DIM], NULL,
                        k0 + TK >= MAT_DIM_K / DIM ? &C[i0 * DIM][j0 * DIM] : NULL, MAT_DIM_K, MAT_DIM_J, MAT_DIM_J,
                        MAT_DIM_J, false, false, false, false, k0 > 0, NO_ACTIVATION, 0, 0, false);
}
