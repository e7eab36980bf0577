// int8 3x3 convolution on Gemmini (DIM 16, weight-stationary), stride 1, no padding.
//
// input:   IN_DIM x IN_DIM pixels, IN_CH channels each (HWC layout)
// weights: (KDIM*KDIM*IN_CH) x OUT_CH, row (kr*KDIM + kc)*IN_CH + ic
// output:  OUT_DIM x OUT_DIM pixels, OUT_CH channels each, saturated to int8
//
// The starting code treats the convolution as a GEMM whose rows are output pixels: for 16
// output pixels of one row and 16 output channels, it walks every (kr, kc, input-channel
// block), moving the 16 shifted input pixels (stride IN_CH) and the weight tile into the
// scratchpad one tile at a time. Optimize it with:
//   python bench/schedule_reuse.py (target of the conv pair)
#include "include/gemmini.h"

#define IN_DIM 34
#define IN_CH 32
#define OUT_CH 64
#define KDIM 3
#define OUT_DIM (IN_DIM - KDIM + 1)

void conv(const elem_t input[IN_DIM][IN_DIM][IN_CH], const elem_t weights[KDIM * KDIM * IN_CH][OUT_CH],
          elem_t output[OUT_DIM][OUT_DIM][OUT_CH]) {
  const uint32_t a_sp = 0;
  const uint32_t b_sp = DIM;
  const uint32_t c_acc = 1u << 31;
  const uint32_t accumulate = 1u << 30;

  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_extended3_config_ld(IN_CH * sizeof(elem_t), MVIN_SCALE_IDENTITY, false, 0);
  gemmini_extended3_config_ld(OUT_CH * sizeof(elem_t), MVIN_SCALE_IDENTITY, false, 1);
  gemmini_config_st(OUT_CH * sizeof(elem_t));

  for (int orow = 0; orow < OUT_DIM; orow++) {
    for (int ocol = 0; ocol < OUT_DIM; ocol += DIM) {
      for (int och = 0; och < OUT_CH; och += DIM) {
        int first = 1;
        for (int kr = 0; kr < KDIM; kr++) {
          for (int kc = 0; kc < KDIM; kc++) {
            for (int ich = 0; ich < IN_CH; ich += DIM) {
              gemmini_extended_mvin(&input[orow + kr][ocol + kc][ich], a_sp, DIM, DIM);
              gemmini_extended_mvin2(&weights[(kr * KDIM + kc) * IN_CH + ich][och], b_sp, DIM, DIM);
              gemmini_extended_preload(b_sp, c_acc | (first ? 0 : accumulate), DIM, DIM, DIM, DIM);
              gemmini_extended_compute_preloaded(a_sp, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
              first = 0;
            }
          }
        }
        gemmini_extended_mvout(&output[orow][ocol][och], c_acc, DIM, DIM);
      }
    }
  }
}
