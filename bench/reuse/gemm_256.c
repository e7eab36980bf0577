// int8 GEMM, 256 x 256 x 256, on Gemmini (DIM 16, weight-stationary).
//
// C = saturate_int8(A x B). The starting code is the plain tiled weight-stationary loop:
// for every 16x16 output tile and every k step, move one A tile and one B tile into the
// scratchpad, preload B, stream A through the array, accumulate in the accumulator, and
// write the tile out once. Optimize it with:
//   python bench/schedule_reuse.py (target of the GEMM pair)
#include "include/gemmini.h"

#define MAT_DIM_I 256
#define MAT_DIM_J 256
#define MAT_DIM_K 256

void gemm(const elem_t A[MAT_DIM_I][MAT_DIM_K], const elem_t B[MAT_DIM_K][MAT_DIM_J],
          elem_t C[MAT_DIM_I][MAT_DIM_J]) {
  const uint32_t a_sp = 0;            // scratchpad rows of the A tile
  const uint32_t b_sp = DIM;          // scratchpad rows of the B tile
  const uint32_t c_acc = 1u << 31;    // accumulator rows of the C tile
  const uint32_t accumulate = 1u << 30;

  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_extended3_config_ld(MAT_DIM_K * sizeof(elem_t), MVIN_SCALE_IDENTITY, false, 0);
  gemmini_extended3_config_ld(MAT_DIM_J * sizeof(elem_t), MVIN_SCALE_IDENTITY, false, 1);
  gemmini_config_st(MAT_DIM_J * sizeof(elem_t));

  for (int i = 0; i < MAT_DIM_I / DIM; i++) {
    for (int j = 0; j < MAT_DIM_J / DIM; j++) {
      for (int k = 0; k < MAT_DIM_K / DIM; k++) {
        gemmini_extended_mvin(&A[i * DIM][k * DIM], a_sp, DIM, DIM);
        gemmini_extended_mvin2(&B[k * DIM][j * DIM], b_sp, DIM, DIM);
        gemmini_extended_preload(b_sp, c_acc | (k == 0 ? 0 : accumulate), DIM, DIM, DIM, DIM);
        gemmini_extended_compute_preloaded(a_sp, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
      }
      gemmini_extended_mvout(&C[i * DIM][j * DIM], c_acc, DIM, DIM);
    }
  }
}
