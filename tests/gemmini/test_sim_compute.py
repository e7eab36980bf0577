"""preload / compute_preloaded / compute_accumulated on the Gemmini model, checked on the CPU:
weight- and output-stationary, A/B transposes, bias operand, weight reuse, partial tiles,
writes to the scratchpad with rounding shift + ReLU + saturation, accumulate vs overwrite,
and int32 wrap-around with extreme inputs."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from simkit import assert_ok, run_c  # noqa: E402

COMMON = r"""
static elem_t A[DIM][DIM] row_align(1), B[DIM][DIM] row_align(1), D[DIM][DIM] row_align(1);
static acc_t C32[DIM][DIM] row_align_acc(1);
static elem_t C8[DIM][DIM] row_align(1);
static int32_t ref[DIM][DIM];
static void fill(void) {
  for (int i = 0; i < DIM; i++) for (int j = 0; j < DIM; j++) { A[i][j] = rnd_elem(); B[i][j] = rnd_elem(); D[i][j] = rnd_elem(); }
}
/* ref = A(rows x ks) * B(ks x cols) (+ D), with optional logical transposes of the stored data */
static void reference(int rows, int cols, int ks, int at, int bt, int bias) {
  for (int i = 0; i < DIM; i++) for (int j = 0; j < DIM; j++) {
    int32_t s = bias ? D[i][j] : 0;
    for (int k = 0; k < ks; k++) s += (at ? A[k][i] : A[i][k]) * (bt ? B[j][k] : B[k][j]);
    ref[i][j] = (i < rows && j < cols) ? s : 0;
  }
}
static const uint32_t ACC = 1u << 31, ACCUM = 1u << 30, FULL = 1u << 29;
"""


def test_weight_stationary_transposes_bias_and_partial_tiles(tmp_path):
    run = run_c(tmp_path, COMMON + r"""
int main(void) {
  for (int trial = 0; trial < 24; trial++) {
    fill();
    int at = trial & 1, bt = (trial >> 1) & 1, bias = (trial >> 2) & 1;
    int rows = trial < 8 ? DIM : 1 + rnd() % DIM, cols = trial < 8 ? DIM : 1 + rnd() % DIM, ks = trial < 8 ? DIM : 1 + rnd() % DIM;
    gemmini_extended_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0, 1, at, bt);
    gemmini_config_ld(DIM);
    gemmini_config_st(DIM * sizeof(acc_t));
    gemmini_mvin(A, 0); gemmini_mvin(B, DIM); gemmini_mvin(D, 2 * DIM);
    gemmini_extended_preload(DIM, ACC | 0, cols, ks, cols, rows);
    gemmini_extended_compute_preloaded(0, bias ? 2 * DIM : GARBAGE_ADDR, ks, rows, cols, rows);
    memset(C32, 0, sizeof C32);
    gemmini_extended_mvout(C32, ACC | FULL | 0, cols, rows);
    gemmini_fence();
    reference(rows, cols, ks, at, bt, bias);
    for (int i = 0; i < DIM; i++) for (int j = 0; j < DIM; j++)
      CHECK(C32[i][j] == ref[i][j], "trial %d (at=%d bt=%d bias=%d %dx%dx%d) %d,%d got %ld want %ld", trial, at, bt, bias, rows, cols, ks, i, j, (long)C32[i][j], (long)ref[i][j]);
  }
  return failures ? 1 : 0;
}
""")
    assert_ok(run)


def test_weight_reuse_accumulate_and_overwrite(tmp_path):
    run = run_c(tmp_path, COMMON + r"""
static elem_t A2[DIM][DIM] row_align(1);
int main(void) {
  fill();
  for (int i = 0; i < DIM; i++) for (int j = 0; j < DIM; j++) A2[i][j] = rnd_elem();
  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_config_ld(DIM);
  gemmini_config_st(DIM * sizeof(acc_t));
  gemmini_mvin(A, 0); gemmini_mvin(B, DIM); gemmini_mvin(A2, 2 * DIM);
  /* C0 = A*B ; C1 = A2*B reusing the weights (preload GARBAGE + compute_accumulated) */
  gemmini_preload(DIM, ACC | 0);
  gemmini_compute_preloaded(0, GARBAGE_ADDR);
  gemmini_preload(GARBAGE_ADDR, ACC | DIM);
  gemmini_compute_accumulated(2 * DIM, GARBAGE_ADDR);
  /* accumulate A*B on top of C1, then overwrite C0 with A2*B */
  gemmini_preload(GARBAGE_ADDR, ACC | ACCUM | DIM);
  gemmini_compute_accumulated(0, GARBAGE_ADDR);
  gemmini_preload(GARBAGE_ADDR, ACC | 0);
  gemmini_compute_accumulated(2 * DIM, GARBAGE_ADDR);
  static acc_t c0[DIM][DIM], c1[DIM][DIM];
  gemmini_mvout(c0, ACC | FULL | 0);
  gemmini_mvout(c1, ACC | FULL | DIM);
  gemmini_fence();
  for (int i = 0; i < DIM; i++) for (int j = 0; j < DIM; j++) {
    int32_t ab = 0, a2b = 0;
    for (int k = 0; k < DIM; k++) { ab += A[i][k] * B[k][j]; a2b += A2[i][k] * B[k][j]; }
    CHECK(c0[i][j] == a2b, "overwrite %d,%d", i, j);
    CHECK(c1[i][j] == a2b + ab, "accumulate %d,%d", i, j);
  }
  /* preload with GARBAGE weights then compute_preloaded: zero weights -> C = bias only */
  gemmini_mvin(D, 3 * DIM);
  gemmini_preload(GARBAGE_ADDR, ACC | 0);
  gemmini_compute_preloaded(0, 3 * DIM);
  gemmini_mvout(c0, ACC | FULL | 0);
  gemmini_fence();
  for (int i = 0; i < DIM; i++) for (int j = 0; j < DIM; j++) CHECK(c0[i][j] == D[i][j], "zero weights");
  return failures ? 1 : 0;
}
""")
    assert_ok(run)


def test_output_stationary_and_scratchpad_results_with_shift_relu(tmp_path):
    run = run_c(tmp_path, COMMON + r"""
int main(void) {
  for (int trial = 0; trial < 8; trial++) {
    fill();
    int shift = trial, relu = trial & 1;
    int rows = trial < 4 ? DIM : 5 + trial, cols = trial < 4 ? DIM : 3 + trial, ks = trial < 4 ? DIM : 2 + trial;
    /* OS: preload D as the in-array bias, then two k-steps accumulate in the PEs */
    gemmini_config_ex(OUTPUT_STATIONARY, relu ? RELU : NO_ACTIVATION, shift);
    gemmini_config_ld(DIM);
    gemmini_config_st(DIM);
    gemmini_mvin(A, 0); gemmini_mvin(B, DIM); gemmini_mvin(D, 2 * DIM);
    gemmini_extended_preload(2 * DIM, GARBAGE_ADDR, cols, rows, cols, rows);
    gemmini_extended_compute_preloaded(0, DIM, ks, rows, cols, ks);
    gemmini_extended_preload(GARBAGE_ADDR, 3 * DIM, DIM, DIM, cols, rows);   /* results to the scratchpad */
    gemmini_extended_compute_accumulated(0, DIM, ks, rows, cols, ks);
    memset(C8, 0x77, sizeof C8);
    gemmini_extended_mvout(C8, 3 * DIM, cols, rows);
    gemmini_fence();
    for (int i = 0; i < rows; i++) for (int j = 0; j < cols; j++) {
      int64_t s = D[i][j];
      for (int k = 0; k < ks; k++) s += 2 * A[i][k] * B[k][j];
      int64_t v = ROUNDING_RIGHT_SHIFT(s, shift);
      if (relu && v < 0) v = 0;
      elem_t want = v > 127 ? 127 : (v < -128 ? -128 : (elem_t)v);
      CHECK(C8[i][j] == want, "trial %d %d,%d got %d want %d", trial, i, j, C8[i][j], want);
    }
    for (int i = 0; i < DIM; i++) for (int j = 0; j < DIM; j++)
      if (i >= rows || j >= cols) CHECK(C8[i][j] == 0x77, "outside the tile was written");
  }
  /* rounding shift ties to even on known values */
  CHECK(ROUNDING_RIGHT_SHIFT(5, 1) == 2 && ROUNDING_RIGHT_SHIFT(7, 1) == 4 && ROUNDING_RIGHT_SHIFT(-5, 1) == -2 && ROUNDING_RIGHT_SHIFT(6, 2) == 2 && ROUNDING_RIGHT_SHIFT(10, 2) == 2, "shift ties");
  return failures ? 1 : 0;
}
""")
    assert_ok(run)


def test_extreme_values_wrap_like_int32(tmp_path):
    run = run_c(tmp_path, COMMON + r"""
int main(void) {
  for (int i = 0; i < DIM; i++) for (int j = 0; j < DIM; j++) { A[i][j] = -128; B[i][j] = -128; }
  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_config_ld(DIM);
  gemmini_config_st(DIM * sizeof(acc_t));
  gemmini_mvin(A, 0); gemmini_mvin(B, DIM);
  gemmini_preload(DIM, ACC | 0);
  gemmini_compute_preloaded(0, GARBAGE_ADDR);
  for (int r = 0; r < 200; r++) {   /* 201 * 16 * 16384 overflows int32 */
    gemmini_preload(GARBAGE_ADDR, ACC | ACCUM | 0);
    gemmini_compute_accumulated(0, GARBAGE_ADDR);
  }
  gemmini_mvout(C32, ACC | FULL | 0);
  gemmini_fence();
  int32_t want = (int32_t)(uint32_t)(201u * 16u * 16384u);
  for (int i = 0; i < DIM; i++) for (int j = 0; j < DIM; j++) CHECK(C32[i][j] == want, "wrap %ld vs %ld", (long)C32[i][j], (long)want);
  return failures ? 1 : 0;
}
""")
    assert_ok(run)
