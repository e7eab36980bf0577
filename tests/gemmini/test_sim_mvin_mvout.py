"""mvin / mvin2 / mvin3 / mvout on the Gemmini model: partial tiles, block strides, zero
and odd DRAM strides, zero move-ins, mvin scaling (ties to even, saturation, negative scale),
accumulator move-ins (int32, shrunk int8, accumulate bit), full and scaled/ReLU move-outs (ReLU
before the scale, as AccumulatorScale applies them)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from simkit import assert_ok, run_c  # noqa: E402


def test_scratchpad_roundtrip_partial_tiles_and_strides(tmp_path):
    run = run_c(tmp_path, r"""
static elem_t src[40][80] row_align(1);
static elem_t dst[40][80] row_align(1);
int main(void) {
  for (int i = 0; i < 40; i++) for (int j = 0; j < 80; j++) src[i][j] = (elem_t)(i * 7 + j * 3);
  const int shapes[][2] = {{1, 1}, {16, 16}, {7, 13}, {16, 64}, {3, 33}, {16, 1}};
  for (unsigned s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    int rows = shapes[s][0], cols = shapes[s][1];
    memset(dst, 0x55, sizeof dst);
    gemmini_extended4_config_ld(80, MVIN_SCALE_IDENTITY, false, DIM, 0);   /* block stride DIM */
    gemmini_config_st(80);
    gemmini_extended_mvin(&src[2][5], 100, cols, rows);
    for (int b = 0; b * DIM < cols; b++) {
      int c = cols - b * DIM < DIM ? cols - b * DIM : DIM;
      gemmini_extended_mvout(&dst[2][5 + b * DIM], 100 + b * DIM, c, rows);
    }
    gemmini_fence();
    for (int i = 0; i < 40; i++) for (int j = 0; j < 80; j++) {
      int inside = i >= 2 && i < 2 + rows && j >= 5 && j < 5 + cols;
      CHECK(dst[i][j] == (inside ? src[i][j] : 0x55), "shape %dx%d at %d,%d: %d", rows, cols, i, j, dst[i][j]);
    }
  }
  /* custom block stride: block b lands at row 200 + b*40 */
  gemmini_extended4_config_ld(80, MVIN_SCALE_IDENTITY, false, 40, 1);
  gemmini_extended_mvin2(&src[0][0], 200, 48, 4);
  gemmini_config_st(80);
  memset(dst, 0, sizeof dst);
  gemmini_extended_mvout(&dst[0][0], 240, 16, 4);
  gemmini_fence();
  for (int i = 0; i < 4; i++) for (int j = 0; j < 16; j++) CHECK(dst[i][j] == src[i][16 + j], "block stride");
  /* DRAM stride 0 repeats one row; NULL moves in zeros */
  gemmini_extended3_config_ld(0, MVIN_SCALE_IDENTITY, false, 2);
  gemmini_extended_mvin3(&src[5][0], 300, 16, 16);
  gemmini_extended_mvin(NULL, 316, 16, 16);
  gemmini_config_st(80);
  memset(dst, 0x11, sizeof dst);
  gemmini_extended_mvout(&dst[0][0], 300, 16, 16);
  gemmini_extended_mvout(&dst[16][0], 316, 16, 16);
  gemmini_fence();
  for (int i = 0; i < 16; i++) for (int j = 0; j < 16; j++) {
    CHECK(dst[i][j] == src[5][j], "stride 0");
    CHECK(dst[16 + i][j] == 0, "zeros");
  }
  /* last scratchpad row */
  gemmini_config_ld(80);
  gemmini_extended_mvin(&src[0][0], BANK_NUM * BANK_ROWS - 1, 16, 1);
  gemmini_extended_mvout(&dst[30][0], BANK_NUM * BANK_ROWS - 1, 16, 1);
  gemmini_fence();
  for (int j = 0; j < 16; j++) CHECK(dst[30][j] == src[0][j], "last row");
  return failures ? 1 : 0;
}
""")
    assert_ok(run)


def test_mvin_scale_rounds_ties_to_even_and_saturates(tmp_path):
    run = run_c(tmp_path, r"""
static elem_t src[DIM][DIM] row_align(1);
static elem_t dst[DIM][DIM] row_align(1);
int main(void) {
  const float scales[] = {0.5f, 1.5f, -1.0f, -0.5f, 2.0f, 0.25f, 100.0f, 0.0f, 0.3333f};
  for (int i = 0; i < DIM; i++) for (int j = 0; j < DIM; j++) src[i][j] = (elem_t)(i * DIM + j - 128);
  for (unsigned s = 0; s < sizeof scales / sizeof scales[0]; s++) {
    gemmini_extended_config_ld(DIM, scales[s]);
    gemmini_config_st(DIM);
    gemmini_mvin(src, 0);
    gemmini_mvout(dst, 0);
    gemmini_fence();
    for (int i = 0; i < DIM; i++) for (int j = 0; j < DIM; j++)
      CHECK(dst[i][j] == ref_scale(src[i][j], scales[s]), "scale %f x=%d got %d", (double)scales[s], src[i][j], dst[i][j]);
  }
  /* explicit ties: 1*0.5=0.5 -> 0, 3*0.5=1.5 -> 2, -1*0.5 -> -0, -3*0.5 -> -2, -128*-1 -> 127 */
  src[0][0] = 1; src[0][1] = 3; src[0][2] = -1; src[0][3] = -3; src[0][4] = -128; src[0][5] = 5;
  gemmini_extended_config_ld(DIM, 0.5f);
  gemmini_mvin(src, 0);
  gemmini_mvout(dst, 0);
  gemmini_fence();
  CHECK(dst[0][0] == 0 && dst[0][1] == 2 && dst[0][2] == 0 && dst[0][3] == -2 && dst[0][5] == 2, "ties %d %d %d %d %d", dst[0][0], dst[0][1], dst[0][2], dst[0][3], dst[0][5]);
  gemmini_extended_config_ld(DIM, -1.0f);
  gemmini_mvin(src, 0);
  gemmini_mvout(dst, 0);
  gemmini_fence();
  CHECK(dst[0][4] == 127, "saturate -(-128) got %d", dst[0][4]);
  return failures ? 1 : 0;
}
""")
    assert_ok(run)


def test_accumulator_mvin_accumulate_shrunk_and_mvout_modes(tmp_path):
    run = run_c(tmp_path, r"""
static acc_t bias[DIM][DIM] row_align_acc(1);
static elem_t small[DIM][4 * DIM] row_align(1);
static acc_t full[DIM][DIM] row_align_acc(1);
static elem_t out8[DIM][4 * DIM] row_align(1);
int main(void) {
  const uint32_t ACC = 1u << 31, ACCUM = 1u << 30, FULL = 1u << 29;
  for (int i = 0; i < DIM; i++) for (int j = 0; j < DIM; j++) bias[i][j] = (i - 8) * 100000 + j * 37 - 2147483000 * (i == 3);
  for (int i = 0; i < DIM; i++) for (int j = 0; j < 4 * DIM; j++) small[i][j] = (elem_t)(i * 5 - j * 3);
  /* int32 mvin, then accumulate the same values again (wrapping int32 addition) */
  gemmini_extended3_config_ld(DIM * sizeof(acc_t), MVIN_SCALE_IDENTITY, false, 0);
  gemmini_extended_mvin(bias, ACC | 0, DIM, DIM);
  gemmini_extended_mvin(bias, ACC | ACCUM | 0, DIM, DIM);
  gemmini_config_st(DIM * sizeof(acc_t));
  gemmini_extended_mvout(full, ACC | FULL | 0, DIM, DIM);
  gemmini_fence();
  for (int i = 0; i < DIM; i++) for (int j = 0; j < DIM; j++)
    CHECK(full[i][j] == (acc_t)((uint32_t)bias[i][j] * 2u), "accumulate %d,%d", i, j);
  /* shrunk (int8 -> int32) mvin of 4 blocks into acc rows 64.., block b at 64 + b*DIM */
  gemmini_extended3_config_ld(4 * DIM, MVIN_SCALE_IDENTITY, true, 1);
  gemmini_extended_mvin2(small, ACC | 64, 4 * DIM, DIM);
  gemmini_config_st(DIM * sizeof(acc_t));
  for (int b = 0; b < 4; b++) {
    gemmini_extended_mvout(full, ACC | FULL | (64 + b * DIM), DIM, DIM);
    gemmini_fence();
    for (int i = 0; i < DIM; i++) for (int j = 0; j < DIM; j++) CHECK(full[i][j] == small[i][b * DIM + j], "shrunk block %d", b);
  }
  /* scaled + ReLU int8 move-out of 4 blocks at once */
  const float s = 0.0003f;
  gemmini_extended3_config_ld(DIM * sizeof(acc_t), MVIN_SCALE_IDENTITY, false, 2);
  for (int b = 0; b < 4; b++) gemmini_extended_mvin3(bias, ACC | (128 + b * DIM), DIM, DIM);
  gemmini_extended_config_st(4 * DIM, RELU, s);
  gemmini_extended_mvout(out8, ACC | 128, 4 * DIM, DIM);
  gemmini_fence();
  for (int i = 0; i < DIM; i++) for (int j = 0; j < 4 * DIM; j++) {
    elem_t want = ref_scale(bias[i][j % DIM], s);
    if (want < 0) want = 0;
    CHECK(out8[i][j] == want, "scaled relu %d,%d: got %d want %d", i, j, out8[i][j], want);
  }
  /* no activation, scale 1: saturation to int8 */
  gemmini_extended_config_st(4 * DIM, NO_ACTIVATION, 1.0f);
  gemmini_extended_mvout(out8, ACC | 128, DIM, DIM);
  gemmini_fence();
  for (int i = 0; i < DIM; i++) for (int j = 0; j < DIM; j++)
    CHECK(out8[i][j] == (bias[i][j] > 127 ? 127 : (bias[i][j] < -128 ? -128 : bias[i][j])), "saturate");
  /* the accumulate bit on a move-out's (read) address changes nothing, as Gemmini's library
   * addresses OS results (acc + accumulate bits) */
  memset(out8, 0, sizeof out8);
  gemmini_extended_mvout(out8, ACC | ACCUM | 128, DIM, DIM);
  gemmini_fence();
  for (int i = 0; i < DIM; i++) for (int j = 0; j < DIM; j++)
    CHECK(out8[i][j] == (bias[i][j] > 127 ? 127 : (bias[i][j] < -128 ? -128 : bias[i][j])), "accumulate-bit mvout");
  /* last accumulator row */
  gemmini_extended3_config_ld(DIM * sizeof(acc_t), MVIN_SCALE_IDENTITY, false, 0);
  gemmini_extended_mvin(bias, ACC | (ACC_ROWS - 1), DIM, 1);
  gemmini_config_st(DIM * sizeof(acc_t));
  gemmini_extended_mvout(full, ACC | FULL | (ACC_ROWS - 1), DIM, 1);
  gemmini_fence();
  for (int j = 0; j < DIM; j++) CHECK(full[0][j] == bias[0][j], "last acc row");
  return failures ? 1 : 0;
}
""")
    assert_ok(run)


def test_moveout_applies_relu_before_the_scale_as_accumulator_scale_does(tmp_path):
    """AccumulatorScale.scala applies the activation to the int32 entry, then the scale: with a
    negative scale a ReLU move-out gives -x*|s| for positive entries and 0 for negative ones
    (gemmini.h's C reference scales first and would give the opposite)."""
    run = run_c(tmp_path, r"""
static acc_t vals[DIM][DIM] row_align_acc(1);
static elem_t out8[DIM][DIM] row_align(1);
int main(void) {
  const uint32_t ACC = 1u << 31;
  for (int i = 0; i < DIM; i++) for (int j = 0; j < DIM; j++) vals[i][j] = (i * DIM + j) * 3 - 380;
  gemmini_extended3_config_ld(DIM * sizeof(acc_t), MVIN_SCALE_IDENTITY, false, 0);
  gemmini_extended_mvin(vals, ACC | 0, DIM, DIM);
  gemmini_extended_config_st(DIM, RELU, -0.5f);
  gemmini_extended_mvout(out8, ACC | 0, DIM, DIM);
  gemmini_fence();
  for (int i = 0; i < DIM; i++) for (int j = 0; j < DIM; j++) {
    int32_t x = vals[i][j] < 0 ? 0 : vals[i][j];
    elem_t want = ref_scale(x, -0.5f);
    CHECK(out8[i][j] == want, "relu then scale %d,%d (x=%d): got %d want %d", i, j, (int)vals[i][j], out8[i][j], want);
  }
  return failures ? 1 : 0;
}
""")
    assert_ok(run)
