/* Autocomp's Gemmini programming interface.
 *
 * Written for Autocomp; source-compatible with programs written against the Gemmini
 * project's include/gemmini.h for the default configuration (DIM 16, int8 inputs, int32
 * accumulator, 4 x 4096-row scratchpad, 1024-row accumulator). Commands are RoCC custom-3
 * instructions executed by Autocomp's Spike extension (backends/gemmini/sim), which models
 * their results bit-exactly and their timing (rdcycle returns modelled cycles).
 *
 * Also defines the short-name dialect used in Autocomp prompts (config_ex, config_ld,
 * config_st, mvin, mvin2, mvin3, mvout, preload, compute_preloaded, compute_accumulated,
 * fence). Define GEMMINI_NO_SHORT_NAMES before including this file to leave those names free.
 */
#ifndef AUTOCOMP_GEMMINI_H
#define AUTOCOMP_GEMMINI_H

#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- configuration -------------------------------------------------------------------- */
#define XCUSTOM_ACC 3
#define DIM 16
#define ADDR_LEN 32
#define BANK_NUM 4
#define BANK_ROWS 4096
#define ACC_ROWS 1024
#define MAX_BYTES 64
#define MAX_BLOCK_LEN (MAX_BYTES / (DIM * 1))
#define MAX_BLOCK_LEN_ACC (MAX_BYTES / (DIM * 4))

typedef int8_t elem_t;
typedef int32_t acc_t;
typedef int64_t full_t;
typedef float scale_t;
typedef uint32_t scale_t_bits;
typedef int32_t scale_acc_t;
typedef uint32_t scale_acc_t_bits;
typedef float acc_scale_t;
typedef uint32_t acc_scale_t_bits;
typedef uint8_t elem_t_bits;
typedef uint32_t acc_t_bits;

static const elem_t elem_t_max = 127;
static const elem_t elem_t_min = -128;
static const acc_t acc_t_max = INT32_MAX;
static const acc_t acc_t_min = INT32_MIN;

#define HAS_MVIN_SCALE
/* defaultConfig has first-layer optimisations (GemminiConfigs.scala
 * has_first_layer_optimizations = true); a program modelling an image built without them (for
 * example the DOSA FireSim image, "nofirstlayer") defines GEMMINI_NO_FIRST_LAYER_OPTIMIZATIONS
 * before including this header, and tiled_conv_auto then packs no pixels. */
#ifndef GEMMINI_NO_FIRST_LAYER_OPTIMIZATIONS
#define HAS_FIRST_LAYER_OPTIMIZATIONS
#endif
#define ACC_SCALE_T_IS_FLOAT
#define ACC_SCALE_EXP_BITS 8
#define ACC_SCALE_SIG_BITS 24
#define MVIN_SCALE_IDENTITY 1.0
#define ACC_SCALE_IDENTITY 1.0

#define row_align(blocks) __attribute__((aligned((blocks) * DIM * sizeof(elem_t))))
#define row_align_acc(blocks) __attribute__((aligned((blocks) * DIM * sizeof(acc_t))))

/* ---- constants ------------------------------------------------------------------------ */
#define k_CONFIG 0
#define k_MVIN2 1
#define k_MVIN 2
#define k_MVOUT 3
#define k_COMPUTE_PRELOADED 4
#define k_COMPUTE_ACCUMULATE 5
#define k_PRELOAD 6
#define k_FLUSH 7
#define k_LOOP_WS 8
#define k_LOOP_WS_CONFIG_BOUNDS 9
#define k_LOOP_WS_CONFIG_ADDRS_AB 10
#define k_LOOP_WS_CONFIG_ADDRS_DC 11
#define k_LOOP_WS_CONFIG_STRIDES_AB 12
#define k_LOOP_WS_CONFIG_STRIDES_DC 13
#define k_MVIN3 14
#define k_LOOP_CONV_WS 15
#define k_LOOP_CONV_WS_CONFIG_1 16
#define k_LOOP_CONV_WS_CONFIG_2 17
#define k_LOOP_CONV_WS_CONFIG_3 18
#define k_LOOP_CONV_WS_CONFIG_4 19
#define k_LOOP_CONV_WS_CONFIG_5 20
#define k_LOOP_CONV_WS_CONFIG_6 21
#define k_COUNTER 126
/* Autocomp's model only: stop the run with an error (what the library does where the
 * original gemmini.h called exit(); a kernel may not call exit). */
#define k_ABORT 31

#define CONFIG_EX 0
#define CONFIG_LD 1
#define CONFIG_ST 2
#define CONFIG_BERT 3

#define GARBAGE_ADDR ((uint32_t)(-1))
#define OUTPUT_STATIONARY 0
#define WEIGHT_STATIONARY 1

#define NO_ACTIVATION 0
#define RELU 1
#define LAYERNORM 2
#define IGELU 3
#define SOFTMAX 4

enum tiled_matmul_type_t { OS, WS, CPU };

/* ---- value conversions (the model rounds exactly like these) --------------------------- */
static inline scale_t_bits scale_t_to_scale_t_bits(scale_t x) {
  union { scale_t f; scale_t_bits b; } u;
  u.f = x;
  return u.b;
}
static inline scale_t scale_t_bits_to_scale_t(scale_t_bits x) {
  union { scale_t f; scale_t_bits b; } u;
  u.b = x;
  return u.f;
}
static inline acc_scale_t_bits acc_scale_t_to_acc_scale_t_bits(acc_scale_t x) {
  union { acc_scale_t f; acc_scale_t_bits b; } u;
  u.f = x;
  return u.b;
}
static inline acc_scale_t acc_scale_t_bits_to_acc_scale_t(acc_scale_t_bits x) {
  union { acc_scale_t f; acc_scale_t_bits b; } u;
  u.b = x;
  return u.f;
}
static inline elem_t elem_t_bits_to_elem_t(elem_t_bits x) { return (elem_t)x; }
static inline elem_t_bits elem_t_to_elem_t_bits(elem_t x) { return (elem_t_bits)x; }
static inline acc_t acc_t_bits_to_acc_t(acc_t_bits x) { return (acc_t)x; }
static inline acc_t_bits acc_t_to_acc_t_bits(acc_t x) { return (acc_t_bits)x; }
static inline bool elem_t_isnan(elem_t x) { (void)x; return false; }
static inline bool acc_t_isnan(acc_t x) { (void)x; return false; }

/* Round half to even, then clamp to int8: how Gemmini scales on mvin and on mvout. */
static inline float gemmini_round_near_even(float x) {
  float t = (float)(long long)x; /* truncation toward zero */
  float frac = x - t;
  float mag = frac < 0 ? -frac : frac;
  if (mag < 0.5f) return t;
  float away = x < 0 ? t - 1.0f : t + 1.0f;
  if (mag > 0.5f) return away;
  return ((long long)t % 2 == 0) ? t : away;
}
static inline elem_t gemmini_scale_to_elem(float x, float scale) {
  float y = x * scale;
  if (y != y) return 0;
  if (y >= 127.0f) return 127;
  if (y <= -128.0f) return -128;
  y = gemmini_round_near_even(y);
  return (elem_t)(y > 127.0f ? 127 : (y < -128.0f ? -128 : y));
}
#define ROUND_NEAR_EVEN(x) gemmini_round_near_even((float)(x))
#define ACC_SCALE(x, scale) ((acc_t)gemmini_scale_to_elem((float)(acc_t)(x), (float)(scale)))
#define MVIN_SCALE(x, scale) gemmini_scale_to_elem((float)(x), (float)(scale))
#define MVIN_SCALE_ACC(x, scale) (x)
#define GEMMINI_SCALE(x, scale) MVIN_SCALE((x), (scale))
#define GEMMINI_ACC_SCALE(x, scale) (x)

/* Rounding arithmetic right shift, ties to even (applied to results written to the scratchpad). */
static inline int64_t gemmini_rounding_shift(int64_t x, int shift) {
  if (shift <= 0) return x << (-shift);
  int64_t q = x >> shift;
  int64_t half = (x >> (shift - 1)) & 1;
  int64_t rest = shift <= 1 ? 0 : ((x & ((((int64_t)1) << (shift - 1)) - 1)) != 0);
  return q + (half & (rest | (q & 1)));
}
#define ROUNDING_RIGHT_SHIFT(x, shift) gemmini_rounding_shift((x), (shift))
#define ROUNDING_RIGHT_SHIFT_BITS(x, shift) gemmini_rounding_shift((x), (shift))

/* ---- the instruction ------------------------------------------------------------------ */
#define GEMMINI_STR_(x) #x
#define GEMMINI_STR(x) GEMMINI_STR_(x)
/* custom-3 opcode (0x7b), funct3 3: rs1 and rs2 read, no destination. */
#define ROCC_INSTRUCTION_RS1_RS2(x, rs1, rs2, funct)                                          \
  do {                                                                                      \
    uint64_t gemmini_rs1_ = (uint64_t)(rs1), gemmini_rs2_ = (uint64_t)(rs2);                \
    __asm__ volatile(".insn r 0x7b, 3, " GEMMINI_STR(funct) ", x0, %0, %1"                   \
                     :                                                                      \
                     : "r"(gemmini_rs1_), "r"(gemmini_rs2_)                                  \
                     : "memory");                                                           \
  } while (0)
#define ROCC_INSTRUCTION_0_R_R(x, rs1, rs2, funct) ROCC_INSTRUCTION_RS1_RS2(x, rs1, rs2, funct)
/* funct3 7: with a destination register. */
#define ROCC_INSTRUCTION(x, rd, rs1, rs2, funct)                                              \
  do {                                                                                      \
    uint64_t gemmini_rd_, gemmini_rs1_ = (uint64_t)(rs1), gemmini_rs2_ = (uint64_t)(rs2);   \
    __asm__ volatile(".insn r 0x7b, 7, " GEMMINI_STR(funct) ", %0, %1, %2"                   \
                     : "=r"(gemmini_rd_)                                                    \
                     : "r"(gemmini_rs1_), "r"(gemmini_rs2_)                                  \
                     : "memory");                                                           \
    (rd) = gemmini_rd_;                                                                     \
  } while (0)

#define GEMMINI_RS2(addr, cols, rows) \
  (((uint64_t)(rows) << (ADDR_LEN + 16)) | ((uint64_t)(cols) << ADDR_LEN) | (uint64_t)(uint32_t)(addr))

/* ---- data movement -------------------------------------------------------------------- */
#define gemmini_extended_mvin(dram_addr, spad_addr, cols, rows) \
  ROCC_INSTRUCTION_RS1_RS2(XCUSTOM_ACC, (uintptr_t)(dram_addr), GEMMINI_RS2(spad_addr, cols, rows), k_MVIN)
#define gemmini_extended_mvin2(dram_addr, spad_addr, cols, rows) \
  ROCC_INSTRUCTION_RS1_RS2(XCUSTOM_ACC, (uintptr_t)(dram_addr), GEMMINI_RS2(spad_addr, cols, rows), k_MVIN2)
#define gemmini_extended_mvin3(dram_addr, spad_addr, cols, rows) \
  ROCC_INSTRUCTION_RS1_RS2(XCUSTOM_ACC, (uintptr_t)(dram_addr), GEMMINI_RS2(spad_addr, cols, rows), k_MVIN3)
#define gemmini_block_mvin(dram_addr, spad_addr, len) \
  gemmini_extended_mvin(dram_addr, spad_addr, (len) * DIM, DIM)
#define gemmini_mvin(dram_addr, spad_addr) gemmini_extended_mvin(dram_addr, spad_addr, DIM, DIM)
#define gemmini_extended_mvout(dram_addr, spad_addr, cols, rows) \
  ROCC_INSTRUCTION_RS1_RS2(XCUSTOM_ACC, (uintptr_t)(dram_addr), GEMMINI_RS2(spad_addr, cols, rows), k_MVOUT)
#define gemmini_mvout(dram_addr, spad_addr) gemmini_extended_mvout(dram_addr, spad_addr, DIM, DIM)

/* ---- compute -------------------------------------------------------------------------- */
#define gemmini_extended_preload(BD, C, BD_cols, BD_rows, C_cols, C_rows) \
  ROCC_INSTRUCTION_RS1_RS2(XCUSTOM_ACC, GEMMINI_RS2(BD, BD_cols, BD_rows), GEMMINI_RS2(C, C_cols, C_rows), k_PRELOAD)
#define gemmini_preload(BD, C) gemmini_extended_preload(BD, C, DIM, DIM, DIM, DIM)
#define gemmini_preload_zeros(C) gemmini_preload(GARBAGE_ADDR, C)
#define gemmini_extended_compute_preloaded(A, BD, A_cols, A_rows, BD_cols, BD_rows) \
  ROCC_INSTRUCTION_RS1_RS2(XCUSTOM_ACC, GEMMINI_RS2(A, A_cols, A_rows), GEMMINI_RS2(BD, BD_cols, BD_rows), k_COMPUTE_PRELOADED)
#define gemmini_extended_compute_accumulated(A, BD, A_cols, A_rows, BD_cols, BD_rows) \
  ROCC_INSTRUCTION_RS1_RS2(XCUSTOM_ACC, GEMMINI_RS2(A, A_cols, A_rows), GEMMINI_RS2(BD, BD_cols, BD_rows), k_COMPUTE_ACCUMULATE)
#define gemmini_compute_preloaded(A, BD) gemmini_extended_compute_preloaded(A, BD, DIM, DIM, DIM, DIM)
#define gemmini_compute_accumulated(A, BD) gemmini_extended_compute_accumulated(A, BD, DIM, DIM, DIM, DIM)

/* ---- configuration commands ------------------------------------------------------------- */
#define gemmini_extended3_config_ex(dataflow, sys_act, sys_shift, sys_acc_scale, C_stride, A_stride, A_transpose, B_transpose, set_only_strides) \
  ROCC_INSTRUCTION_RS1_RS2(XCUSTOM_ACC,                                                                     \
    ((uint64_t)acc_scale_t_to_acc_scale_t_bits((acc_scale_t)(sys_acc_scale)) << 32) |                      \
    ((uint64_t)(A_stride) << 16) | ((uint64_t)(B_transpose) << 9) | ((uint64_t)(A_transpose) << 8) |        \
    ((uint64_t)(set_only_strides) << 7) | ((uint64_t)(sys_act) << 3) | ((uint64_t)(dataflow) << 2) | CONFIG_EX, \
    ((uint64_t)(C_stride) << 48) | (uint64_t)(uint32_t)(sys_shift), k_CONFIG); /* trailing ';' as in Gemmini's own header */
#define gemmini_extended2_config_ex(dataflow, sys_act, sys_shift, A_stride, A_transpose, B_transpose) \
  gemmini_extended3_config_ex(dataflow, sys_act, sys_shift, ACC_SCALE_IDENTITY, 1, A_stride, A_transpose, B_transpose, false)
#define gemmini_extended_config_ex(dataflow, sys_act, sys_shift, A_stride, A_transpose, B_transpose) \
  gemmini_extended2_config_ex(dataflow, sys_act, sys_shift, A_stride, A_transpose, B_transpose)
#define gemmini_config_ex(dataflow, sys_act, sys_shift) \
  gemmini_extended_config_ex(dataflow, sys_act, sys_shift, 1, 0, 0)

#define gemmini_extended5_config_ld(stride, scale, shrunk, block_mvin_stride, pixel_repeats, id) \
  ROCC_INSTRUCTION_RS1_RS2(XCUSTOM_ACC,                                                          \
    ((uint64_t)scale_t_to_scale_t_bits((scale_t)(scale)) << 32) | ((uint64_t)(block_mvin_stride) << 16) | \
    ((uint64_t)(pixel_repeats) << 8) | ((uint64_t)(id) << 3) | ((uint64_t)(shrunk) << 2) | CONFIG_LD, \
    (uint64_t)(stride), k_CONFIG)
#define gemmini_extended4_config_ld(stride, scale, shrunk, block_mvin_stride, id) \
  gemmini_extended5_config_ld(stride, scale, shrunk, block_mvin_stride, 1, id)
#define gemmini_extended3_config_ld(stride, scale, shrunk, id) \
  gemmini_extended4_config_ld(stride, scale, shrunk, DIM, id)
#define gemmini_extended2_config_ld(stride, scale, shrunk) gemmini_extended3_config_ld(stride, scale, shrunk, 0)
#define gemmini_extended_config_ld(stride, scale) gemmini_extended2_config_ld(stride, scale, false)
#define gemmini_config_ld(stride) gemmini_extended_config_ld(stride, MVIN_SCALE_IDENTITY)

#define gemmini_extended2_config_st(stride, acc_act, acc_scale, pool_stride, pool_size, pool_out_dim, porows, pocols, orows, ocols, upad, lpad) \
  ROCC_INSTRUCTION_RS1_RS2(XCUSTOM_ACC,                                                                 \
    ((uint64_t)(ocols) << 56) | ((uint64_t)(orows) << 48) | ((uint64_t)(pocols) << 40) |                \
    ((uint64_t)(porows) << 32) | ((uint64_t)(pool_out_dim) << 24) | ((uint64_t)(lpad) << 10) |          \
    ((uint64_t)(upad) << 8) | ((uint64_t)(pool_size) << 6) | ((uint64_t)(pool_stride) << 4) |            \
    ((uint64_t)(acc_act) << 2) | CONFIG_ST,                                                             \
    ((uint64_t)acc_scale_t_to_acc_scale_t_bits((acc_scale_t)(acc_scale)) << 32) | (uint64_t)(uint32_t)(stride), k_CONFIG)
#define gemmini_extended_config_st(stride, acc_act, acc_scale) \
  gemmini_extended2_config_st(stride, acc_act, acc_scale, 0, 0, 0, 0, 0, 0, 0, 0, 0)
#define gemmini_config_st(stride) gemmini_extended_config_st(stride, NO_ACTIVATION, ACC_SCALE_IDENTITY)

#define gemmini_config_norm(q_const, q_const_type, set_stats_id_only, act_msb, stat_id, igelu_qb, igelu_qc) \
  ROCC_INSTRUCTION_RS1_RS2(XCUSTOM_ACC,                                                                   \
    (((uint64_t)(uint32_t)(q_const)) << 32) | ((uint64_t)((q_const_type) & 1) << 18) |                    \
    ((uint64_t)((set_stats_id_only) & 1) << 17) | ((uint64_t)((act_msb) & 1) << 16) |                     \
    ((uint64_t)(stat_id) << 8) | CONFIG_BERT,                                                             \
    ((uint64_t)(uint32_t)(igelu_qc) << 32) | (uint64_t)(uint32_t)(igelu_qb), k_CONFIG)

#define gemmini_flush(skip) ROCC_INSTRUCTION_RS1_RS2(XCUSTOM_ACC, skip, 0, k_FLUSH)
/* The host waits for every queued Gemmini command (the model drains its queues on fence). */
#define gemmini_fence() __asm__ volatile("fence" ::: "memory")

/* Stop the run with an error; the model reports it with whatever the program printed. */
#define gemmini_abort(code) ROCC_INSTRUCTION_RS1_RS2(XCUSTOM_ACC, code, 0, k_ABORT)

/* Performance counters (CounterFile.scala): eight counters, each configured with an event;
 * codes above 44 (the incremental events) are external levels such as the DMA byte counts
 * (44 + 4: bytes read, 44 + 5: bytes written), as gemmini-rocc-tests numbers them. */
#define gemmini_counter_access(rd, config_reg) ROCC_INSTRUCTION(XCUSTOM_ACC, rd, config_reg, 0, k_COUNTER)
static inline uint32_t counter_read(size_t index) {
  uint64_t r;
  gemmini_counter_access(r, (index & 0x7) << 4);
  return (uint32_t)r;
}
static inline void counter_configure(size_t index, size_t code) {
  const uint64_t external = code > 44;
  if (external) code -= 44;
  uint64_t r;
  gemmini_counter_access(r, ((index & 0x7) << 4) | 0x8 | ((code & 0x3f) << 12) | (external << 31));
  (void)r;
}
static inline void counter_reset(void) { uint64_t r; gemmini_counter_access(r, 0x1); (void)r; }
static inline void counter_snapshot_take(void) { uint64_t r; gemmini_counter_access(r, 0x4); (void)r; }
static inline void counter_snapshot_reset(void) { uint64_t r; gemmini_counter_access(r, 0x2); (void)r; }

/* ---- hardware loops ------------------------------------------------------------------- */
#define gemmini_loop_ws(I, J, K, pad_I, pad_J, pad_K, A, B, D, C, A_stride, B_stride, D_stride, C_stride, A_transpose, B_transpose, full_C, low_D, ex_accumulate, act, a_spad_id, b_spad_id, is_resadd) \
  do {                                                                                                   \
    ROCC_INSTRUCTION_RS1_RS2(XCUSTOM_ACC, ((uint64_t)(pad_K) << 32) | ((uint64_t)(pad_J) << 16) | (uint64_t)(pad_I), \
                             ((uint64_t)(K) << 32) | ((uint64_t)(J) << 16) | (uint64_t)(I), k_LOOP_WS_CONFIG_BOUNDS); \
    ROCC_INSTRUCTION_RS1_RS2(XCUSTOM_ACC, (uintptr_t)(A), (uintptr_t)(B), k_LOOP_WS_CONFIG_ADDRS_AB);      \
    ROCC_INSTRUCTION_RS1_RS2(XCUSTOM_ACC, (uintptr_t)(D), (uintptr_t)(C), k_LOOP_WS_CONFIG_ADDRS_DC);      \
    ROCC_INSTRUCTION_RS1_RS2(XCUSTOM_ACC, A_stride, B_stride, k_LOOP_WS_CONFIG_STRIDES_AB);               \
    ROCC_INSTRUCTION_RS1_RS2(XCUSTOM_ACC, D_stride, C_stride, k_LOOP_WS_CONFIG_STRIDES_DC);               \
    ROCC_INSTRUCTION_RS1_RS2(XCUSTOM_ACC,                                                                \
      ((uint64_t)(a_spad_id) << 18) | ((uint64_t)(b_spad_id) << 16) | ((uint64_t)(act) << 8) |           \
      ((uint64_t)(low_D) << 2) | ((uint64_t)(full_C) << 1) | (uint64_t)(ex_accumulate),                  \
      ((uint64_t)(is_resadd) << 2) | ((uint64_t)(B_transpose) << 1) | (uint64_t)(A_transpose), k_LOOP_WS); \
  } while (0)

#define gemmini_loop_conv_ws(batch_size, in_row_dim, in_col_dim, in_channels, out_channels, out_row_dim, out_col_dim, pool_out_row_dim, pool_out_col_dim, stride, padding, kernel_dim, kernel_dilation, pool_size, pool_stride, pool_padding, batches, porows, pocols, pochs, krows, kcols, kchs, lpad, rpad, upad, dpad, plpad, prpad, pupad, pdpad, orows, ocols, weights, output, bias, input, no_bias, no_pool, downsample, wrot180, input_dilated, activation, trans_output_1203, trans_weight_1203, trans_weight_0132, trans_input_3120, max_pixels_per_row, in_stride, weight_stride, out_stride, dw, a_spad_id, b_spad_id) \
  do {                                                                                                   \
    ROCC_INSTRUCTION_RS1_RS2(XCUSTOM_ACC,                                                                \
      ((uint64_t)(out_channels) << 48) | ((uint64_t)(in_channels) << 32) | ((uint64_t)(in_row_dim) << 16) | (uint64_t)(batch_size), \
      ((uint64_t)(padding) << 56) | ((uint64_t)(stride) << 48) | ((uint64_t)(out_col_dim) << 32) | ((uint64_t)(pool_out_row_dim) << 16) | (uint64_t)(out_row_dim), \
      k_LOOP_CONV_WS_CONFIG_1);                                                                          \
    ROCC_INSTRUCTION_RS1_RS2(XCUSTOM_ACC,                                                                \
      ((uint64_t)(kernel_dim) << 48) | ((uint64_t)(pool_out_col_dim) << 32) | ((uint64_t)(pool_size) << 16) | ((uint64_t)(pool_stride) << 8) | (uint64_t)(pool_padding), \
      ((uint64_t)(batches) << 48) | ((uint64_t)(porows) << 32) | ((uint64_t)(pocols) << 16) | (uint64_t)(pochs), \
      k_LOOP_CONV_WS_CONFIG_2);                                                                          \
    ROCC_INSTRUCTION_RS1_RS2(XCUSTOM_ACC,                                                                \
      ((uint64_t)(krows) << 48) | ((uint64_t)(kcols) << 32) | ((uint64_t)(kchs) << 16) | (uint64_t)(lpad), \
      ((uint64_t)(rpad) << 48) | ((uint64_t)(upad) << 32) | ((uint64_t)(dpad) << 24) | ((uint64_t)(plpad) << 16) | (uint64_t)(in_col_dim), \
      k_LOOP_CONV_WS_CONFIG_3);                                                                          \
    ROCC_INSTRUCTION_RS1_RS2(XCUSTOM_ACC,                                                                \
      ((uint64_t)(orows) << 48) | ((uint64_t)(prpad) << 32) | ((uint64_t)(pupad) << 21) | ((uint64_t)(pdpad) << 10) | (uint64_t)(kernel_dilation), \
      ((uint64_t)(in_stride) << 48) | ((uint64_t)(weight_stride) << 32) | ((uint64_t)(out_stride) << 16) | (uint64_t)(ocols), \
      k_LOOP_CONV_WS_CONFIG_4);                                                                          \
    ROCC_INSTRUCTION_RS1_RS2(XCUSTOM_ACC, (uintptr_t)(weights), (uintptr_t)(output), k_LOOP_CONV_WS_CONFIG_5); \
    ROCC_INSTRUCTION_RS1_RS2(XCUSTOM_ACC, (uintptr_t)(bias), (uintptr_t)(input), k_LOOP_CONV_WS_CONFIG_6);     \
    ROCC_INSTRUCTION_RS1_RS2(XCUSTOM_ACC,                                                                \
      ((uint64_t)(a_spad_id) << 18) | ((uint64_t)(b_spad_id) << 16) | ((uint64_t)(max_pixels_per_row) << 8) | \
      ((uint64_t)(dw) << 6) | ((uint64_t)(trans_input_3120) << 5) | ((uint64_t)(trans_weight_0132) << 4) | \
      ((uint64_t)(trans_weight_1203) << 3) | ((uint64_t)(trans_output_1203) << 2) | ((uint64_t)(wrot180) << 1) | (uint64_t)(no_bias), \
      ((uint64_t)(activation) << 3) | ((uint64_t)(input_dilated) << 2) | ((uint64_t)(downsample) << 1) | (uint64_t)(no_pool), \
      k_LOOP_CONV_WS);                                                                                   \
  } while (0)

/* ---- time ----------------------------------------------------------------------------- */
/* Modelled cycles (the Spike extension's timing model drives the cycle CSR). Programs that
 * use the Gemmini test utilities get theirs from there (same instruction). */
#ifndef SRC_MAIN_C_GEMMINI_TESTUTILS_H
static inline uint64_t read_cycles(void) {
  uint64_t c;
  __asm__ volatile("rdcycle %0" : "=r"(c));
  return c;
}
#endif
/* Retired instructions (Spike's own count). */
static inline uint64_t read_instret(void) {
  uint64_t c;
  __asm__ volatile("rdinstret %0" : "=r"(c));
  return c;
}

#include "gemmini_lib.h"

/* ---- Autocomp short-name dialect ------------------------------------------------------ */
#ifndef GEMMINI_NO_SHORT_NAMES
#define GEMMINI_ARGC_(_1, _2, _3, _4, _5, _6, N, ...) N
#define GEMMINI_ARGC(...) GEMMINI_ARGC_(__VA_ARGS__, 6, 5, 4, 3, 2, 1, 0)
#define GEMMINI_CAT_(a, b) a##b
#define GEMMINI_CAT(a, b) GEMMINI_CAT_(a, b)

/* config_ex(dataflow, act, A_stride, A_transpose, B_transpose); also (dataflow, act, shift). */
#define config_ex(...) GEMMINI_CAT(gemmini_short_config_ex_, GEMMINI_ARGC(__VA_ARGS__))(__VA_ARGS__)
#define gemmini_short_config_ex_5(dataflow, act, A_stride, A_transpose, B_transpose) \
  gemmini_extended_config_ex(dataflow, act, 0, A_stride, A_transpose, B_transpose)
#define gemmini_short_config_ex_3(dataflow, act, shift) gemmini_config_ex(dataflow, act, shift)
#define gemmini_short_config_ex_2(dataflow, act) gemmini_config_ex(dataflow, act, 0)
#define gemmini_short_config_ex_1(dataflow) gemmini_config_ex(dataflow, NO_ACTIVATION, 0)

/* config_ld(dram_stride, scale_factor, spad_block_stride, id); also (stride, scale) and (stride). */
#define config_ld(...) GEMMINI_CAT(gemmini_short_config_ld_, GEMMINI_ARGC(__VA_ARGS__))(__VA_ARGS__)
#define gemmini_short_config_ld_4(stride, scale, block_stride, id) \
  gemmini_extended4_config_ld(stride, scale, false, block_stride, id)
#define gemmini_short_config_ld_2(stride, scale) gemmini_extended_config_ld(stride, scale)
#define gemmini_short_config_ld_1(stride) gemmini_config_ld(stride)

/* config_st(dram_stride, scale_factor); also (dram_stride, act, scale_factor) and (stride). */
#define config_st(...) GEMMINI_CAT(gemmini_short_config_st_, GEMMINI_ARGC(__VA_ARGS__))(__VA_ARGS__)
#define gemmini_short_config_st_3(stride, act, scale) gemmini_extended_config_st(stride, act, scale)
#define gemmini_short_config_st_2(stride, scale) gemmini_extended_config_st(stride, NO_ACTIVATION, scale)
#define gemmini_short_config_st_1(stride) gemmini_config_st(stride)

#define mvin(dram_addr, spad_addr, cols, rows) gemmini_extended_mvin(dram_addr, spad_addr, cols, rows)
#define mvin2(dram_addr, spad_addr, cols, rows) gemmini_extended_mvin2(dram_addr, spad_addr, cols, rows)
#define mvin3(dram_addr, spad_addr, cols, rows) gemmini_extended_mvin3(dram_addr, spad_addr, cols, rows)
#define mvout(dram_addr, spad_addr, cols, rows) gemmini_extended_mvout(dram_addr, spad_addr, cols, rows)
#define preload(B, C, B_cols, B_rows, C_cols, C_rows) gemmini_extended_preload(B, C, B_cols, B_rows, C_cols, C_rows)
#define compute_preloaded(A, BD, A_cols, A_rows, BD_cols, BD_rows) \
  gemmini_extended_compute_preloaded(A, BD, A_cols, A_rows, BD_cols, BD_rows)
#define compute_accumulated(A, BD, A_cols, A_rows, BD_cols, BD_rows) \
  gemmini_extended_compute_accumulated(A, BD, A_cols, A_rows, BD_cols, BD_rows)
#define fence() gemmini_fence()
#endif

#endif /* AUTOCOMP_GEMMINI_H */
