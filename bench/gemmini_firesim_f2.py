"""Programs and published figures for the FireSim F2 measurements of Gemmini's own tests.

Source: lorikjashari/OpenASDx, llm/fpga/f2/FIRESIM.md and llm/fpga/f2/results/*.uartlog (runs of
2026-09-26). Public FireSim image firesim_gemmini_rocket_singlecore_no_nic (agfi-0f567000cb21cb06d)
on an AWS F2: FireSimLeanGemminiRocketConfig, Chipyard 1.14.0 with gemmini-rocc-tests 7c540b3,
bare metal; cycles are target cycles read with rdcycle. The Lean configuration is Gemmini's
defaultConfig with (Configs.scala leanConfig) the weight-stationary dataflow only, 64 memory
requests in flight instead of 16, int8 read-out only and the compute's D operand wired to the
garbage address (hardcode_d_to_garbage_addr: ExecuteController.scala ignores a compute's D
address in WS; the hardware loops still move a bias into the accumulator, LoopMatmul's LdD and
LoopConv's LdBias being move-ins).

The programs below are ours: they follow what each test times (shape, library call, data state)
with Autocomp's own gemmini.h library, not the suite's code. The model runs them as the Lean
image (LEAN below, the evaluator's `image = "lean"`: 64 requests in flight, FireSim's default
latency-pipe memory without an LLC, leanConfig's functional limits). Each starts cold
(gemmini_cold_start.py): on FireSim the buffers a test never writes (all of them in the three
perf tests, C in the 64^3 one) are in DRAM only, where our startup would have left them in the L2. Until both were found the programs ran warm on the
DOSA images' LLC and DDR3: conv_perf -0.0%, tiled_matmul_ws_perf -11.3%, 64^3 +13.8%; cold on
that memory +29.0%, +6.9% and +1.0%; cold on the pipe -8.8%, -10.3% and -3.1% (-8.8%, -6.8%
and +1.6% at evaluator 25).
- tiled_matmul_ws (64x64x64): A and B filled by the host (0/1 values), then tiled_matmul_auto
  (WS, no bias), timed to its end; 2,597 cycles. The same product on the Rocket core, a plain
  triple loop into 64-bit sums starting from the bias (the test's full_matmul), 3,240,505 cycles.
- tiled_matmul_ws_perf (I=128, J=256, K=256): untouched (zero, .bss) arrays, one
  tiled_matmul_auto (WS, a repeating bias from an untouched array); 39,815 cycles, "82% of
  the ideal 32,768".
- conv_perf (batch 4, 224x224x3 to 32 channels, 3x3, stride 2, padding 1): operands carved out
  of a 4 MiB .bss heap, input first, then weights, bias, output; one tiled_conv_auto; 1,862,456
  cycles.
- conv_dw_perf (depthwise, batch 3, 112x112x17, 3x3, stride 2, padding 1): laid out the same
  way, with a bias; one tiled_conv_dw_auto; 2,529,093 cycles. (The suite's own program and
  library, run locally on the model, read 2,659,425 and 1,846,658 cycles for the two
  convolutions: ours follow them to within 0.1% and 2%.)
"""

from __future__ import annotations

from gemmini_cold_start import COLD_START

from autocomp.backends.gemmini.images import LEAN  # noqa: F401 - the build these runs used (its sources there)

PUBLISHED = {
    "mm64_gemmini": 2_597,
    "mm64_cpu": 3_240_505,
    "matmul_perf": 39_815,
    "conv_perf": 1_862_456,
    "conv_dw_perf": 2_529_093,
}
MATMUL_PERF_IDEAL = 128 * 256 * 256 // (16 * 16)

_HEAD = r"""
#include "gemmini.h"
#include "autocomp_harness.h"
""" + COLD_START

MM64 = _HEAD + r"""
#define S 64
static elem_t A[S][S] row_align(1), B[S][S] row_align(1), C[S][S] row_align(1);
static acc_t D[S][S] row_align_acc(1);
static int64_t G[S][S];
static uint32_t lcg = 1;
static elem_t bit(void) { lcg = lcg * 1103515245u + 12345u; return (elem_t)((lcg >> 16) & 1); }
/* The host's version: the product into 64-bit sums, starting from the bias; noipa keeps it
 * compiled for any arrays, as the test's out-of-line full_matmul is (a store per step). */
static void __attribute__((noipa)) host_matmul(elem_t a[S][S], elem_t b[S][S], acc_t d[S][S], int64_t g[S][S]) {
  for (size_t r = 0; r < S; r++)
    for (size_t c = 0; c < S; c++) {
      g[r][c] = d[r][c];
      for (size_t k = 0; k < S; k++) g[r][c] += a[r][k] * b[k][c];
    }
}
AUTOCOMP_HARNESS_FN int main(void) {
  start_cold();  /* untouched buffers in DRAM only, as FireSim loads them */
  for (int i = 0; i < S; i++) for (int k = 0; k < S; k++) A[i][k] = bit();
  for (int k = 0; k < S; k++) for (int j = 0; j < S; j++) B[k][j] = bit();
  AUTOCOMP_MEASURE_BEGIN();
#ifdef ON_HOST
  host_matmul(A, B, D, G);
#else
  tiled_matmul_auto(S, S, S, (elem_t *)A, (elem_t *)B, NULL, (elem_t *)C, S, S, S, S,
                    MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY, NO_ACTIVATION,
                    ACC_SCALE_IDENTITY, 0, false, false, false, false, false, 0, WS);
#endif
  AUTOCOMP_MEASURE_END();
#ifdef ON_HOST
  for (int r = 0; r < S; r++) for (int c = 0; c < S; c += 7) {
    int64_t s = 0;
    for (int k = 0; k < S; k++) s += A[r][k] * B[k][c];
    if (G[r][c] != s) return 2;
  }
#else
  for (int r = 0; r < S; r++) for (int c = 0; c < S; c += 7) {
    int32_t s = 0;
    for (int k = 0; k < S; k++) s += A[r][k] * B[k][c];
    if (C[r][c] != (elem_t)(s > 127 ? 127 : s)) return 2;
  }
#endif
  return 0;
}
"""

MATMUL_PERF = _HEAD + r"""
#define I 128
#define J 256
#define K 256
static elem_t A[I][K] row_align(1), B[K][J] row_align(1), C[I][J] row_align(1);
static acc_t D[I][J] row_align_acc(1);
AUTOCOMP_HARNESS_FN int main(void) {
  start_cold();  /* untouched buffers in DRAM only, as FireSim loads them */
  AUTOCOMP_MEASURE_BEGIN();
  tiled_matmul_auto(I, J, K, (elem_t *)A, (elem_t *)B, (acc_t *)D, (elem_t *)C, K, J, J, J,
                    MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY, NO_ACTIVATION,
                    ACC_SCALE_IDENTITY, 0, true, false, false, false, false, 0, WS);
  AUTOCOMP_MEASURE_END();
  return C[5][7] == 0 ? 0 : 2;  /* zero operands, zero product */
}
"""

CONV_PERF = _HEAD + r"""
#define BATCH 4
#define IN_DIM 224
#define IN_CH 3
#define OUT_CH 32
#define KDIM 3
#define PAD 1
#define STRIDE 2
#define OUT_DIM ((IN_DIM + 2 * PAD - KDIM) / STRIDE + 1)
static uint8_t heap[4 * 1024 * 1024];
AUTOCOMP_HARNESS_FN int main(void) {
  start_cold();  /* untouched buffers in DRAM only, as FireSim loads them */
  elem_t *input = (elem_t *)heap;
  elem_t *weights = input + BATCH * IN_DIM * IN_DIM * IN_CH;
  acc_t *bias = (acc_t *)(weights + OUT_CH * KDIM * KDIM * IN_CH);
  elem_t *output = (elem_t *)(bias + OUT_CH);
  AUTOCOMP_MEASURE_BEGIN();
  tiled_conv_auto(BATCH, IN_DIM, IN_DIM, IN_CH, OUT_CH, OUT_DIM, OUT_DIM, STRIDE, 1, 1, PAD, KDIM,
                  false, false, false, false, false, input, weights, bias, output,
                  NO_ACTIVATION, ACC_SCALE_IDENTITY, 0, 0, 0, WS);
  AUTOCOMP_MEASURE_END();
  return output[5] == 0 ? 0 : 2;  /* zero operands, zero output */
}
"""

CONV_DW_PERF = _HEAD + r"""
#define BATCH 3
#define IN_DIM 112
#define CH 17
#define KDIM 3
#define PAD 1
#define STRIDE 2
#define OUT_DIM ((IN_DIM + 2 * PAD - KDIM) / STRIDE + 1)
static uint8_t heap[4 * 1024 * 1024];
AUTOCOMP_HARNESS_FN int main(void) {
  start_cold();  /* untouched buffers in DRAM only, as FireSim loads them */
  elem_t *input = (elem_t *)heap;
  elem_t *weights = input + BATCH * IN_DIM * IN_DIM * CH;
  acc_t *bias = (acc_t *)(weights + CH * KDIM * KDIM);
  elem_t *output = (elem_t *)(bias + CH);
  AUTOCOMP_MEASURE_BEGIN();
  tiled_conv_dw_auto(BATCH, IN_DIM, IN_DIM, CH, OUT_DIM, OUT_DIM, STRIDE, PAD, KDIM, input, weights, bias, output,
                     NO_ACTIVATION, ACC_SCALE_IDENTITY, 1, 0, 0, WS);
  AUTOCOMP_MEASURE_END();
  return output[5] == 0 ? 0 : 2;  /* zero operands, zero output */
}
"""
