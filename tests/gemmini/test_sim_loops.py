"""loop_ws (through tiled_matmul_auto and directly) and the library convolution on the
Gemmini model, checked against CPU references written in the tests: padded sizes, bias
(per-row and repeating, int32 and low_D int8), ReLU + scaling, full int32 output, transposes,
multi-tile K accumulation, the output-stationary path, and convolutions with stride, padding,
dilation and pooling."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from simkit import assert_ok, run_c  # noqa: E402

MATMUL = r"""
#define MAXN 200
static elem_t A[MAXN * MAXN] row_align(1), B[MAXN * MAXN] row_align(1);
static acc_t D32[MAXN * MAXN] row_align_acc(1);
static elem_t D8[MAXN * MAXN] row_align(1);
static elem_t C8[MAXN * MAXN] row_align(1);
static acc_t C32[MAXN * MAXN] row_align_acc(1);

static int check_case(int I, int J, int K, int bias, int repeating, int lowd, int act, float scale,
                      int at, int bt, int fullc, enum tiled_matmul_type_t type) {
  for (int i = 0; i < MAXN * MAXN; i++) { A[i] = rnd_elem(); B[i] = rnd_elem(); D32[i] = (int32_t)rnd() >> (rnd() % 24); D8[i] = rnd_elem(); }
  memset(C8, 0x5a, sizeof C8); memset(C32, 0x5a, sizeof C32);
  const int sA = at ? I : K, sB = bt ? K : J;
  const void *d = bias ? (lowd ? (const void *)D8 : (const void *)D32) : NULL;
  tiled_matmul_auto(I, J, K, A, B, d, fullc ? (void *)C32 : (void *)C8, sA, sB, J, J,
                    MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY,
                    act, scale, 0, repeating, at, bt, fullc, lowd, 3, type);
  int bad = 0;
  for (int i = 0; i < I; i++) for (int j = 0; j < J; j++) {
    int32_t s = 0;
    if (bias) { int r = repeating ? 0 : i; s = lowd ? D8[r * J + j] : D32[r * J + j]; }
    for (int k = 0; k < K; k++) s += (at ? A[k * sA + i] : A[i * sA + k]) * (bt ? B[j * sB + k] : B[k * sB + j]);
    if (fullc) { if (C32[i * J + j] != s) bad++; }
    else { elem_t w = ref_scale(s, scale); if (act == RELU && w < 0) w = 0; if (C8[i * J + j] != w) bad++; }
  }
  CHECK(bad == 0, "%dx%dx%d bias=%d rep=%d lowd=%d act=%d at=%d bt=%d fullc=%d type=%d: %d wrong", I, J, K, bias, repeating, lowd, act, at, bt, fullc, (int)type, bad);
  return bad;
}
"""


def test_tiled_matmul_auto_ws_variants(tmp_path):
    run = run_c(tmp_path, MATMUL + r"""
int main(void) {
  check_case(16, 16, 16, 0, 0, 0, NO_ACTIVATION, 1.0f, 0, 0, 0, WS);
  check_case(50, 70, 33, 1, 0, 0, RELU, 0.05f, 0, 0, 0, WS);
  check_case(64, 48, 200, 1, 1, 0, NO_ACTIVATION, 0.01f, 0, 0, 0, WS);     /* K spans tiles */
  check_case(37, 29, 45, 1, 0, 1, NO_ACTIVATION, 1.0f, 0, 0, 0, WS);       /* low_D */
  check_case(33, 65, 17, 1, 0, 0, NO_ACTIVATION, 1.0f, 0, 0, 1, WS);       /* full C */
  check_case(40, 24, 56, 0, 0, 0, NO_ACTIVATION, 0.125f, 1, 0, 0, WS);     /* A^T */
  check_case(40, 24, 56, 0, 0, 0, RELU, 0.125f, 0, 1, 0, WS);              /* B^T */
  check_case(200, 200, 40, 0, 0, 0, NO_ACTIVATION, 0.02f, 0, 0, 0, WS);    /* many loops */
  return failures ? 1 : 0;
}
""", max_instructions=200_000_000)
    assert_ok(run)


def test_tiled_matmul_auto_os_and_cpu(tmp_path):
    run = run_c(tmp_path, MATMUL + r"""
int main(void) {
  check_case(16, 16, 16, 0, 0, 0, NO_ACTIVATION, 1.0f, 0, 0, 0, OS);
  check_case(35, 20, 50, 1, 0, 0, RELU, 0.03f, 0, 0, 0, OS);
  check_case(20, 35, 19, 1, 1, 0, NO_ACTIVATION, 1.0f, 0, 0, 1, OS);
  check_case(21, 22, 23, 1, 0, 0, RELU, 0.1f, 0, 0, 0, CPU);
  return failures ? 1 : 0;
}
""", max_instructions=200_000_000)
    assert_ok(run)


def test_loop_ws_direct_accumulator_resident_result(tmp_path):
    """loop_ws with C = NULL leaves the result in the accumulator (rows from 0); a later
    mvout reads it."""
    run = run_c(tmp_path, r"""
static elem_t A[32][48] row_align(1), B[48][32] row_align(1);
static acc_t C[32][32] row_align_acc(1);
int main(void) {
  for (int i = 0; i < 32; i++) for (int k = 0; k < 48; k++) A[i][k] = rnd_elem();
  for (int k = 0; k < 48; k++) for (int j = 0; j < 32; j++) B[k][j] = rnd_elem();
  gemmini_extended_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0, 1, false, false);
  gemmini_extended3_config_ld(48, MVIN_SCALE_IDENTITY, false, 0);
  gemmini_extended3_config_ld(32, MVIN_SCALE_IDENTITY, false, 1);
  gemmini_loop_ws(2, 2, 3, 0, 0, 0, A, B, NULL, NULL, 48, 32, 0, 0, false, false, false, false, false, NO_ACTIVATION, 0, 0, false);
  gemmini_config_st(32 * sizeof(acc_t));
  for (int i = 0; i < 2; i++) for (int j = 0; j < 2; j++)
    gemmini_mvout(&C[i * DIM][j * DIM], (1u << 31) | (1u << 29) | ((i * 2 + j) * DIM));
  gemmini_fence();
  for (int i = 0; i < 32; i++) for (int j = 0; j < 32; j++) {
    int32_t s = 0;
    for (int k = 0; k < 48; k++) s += A[i][k] * B[k][j];
    CHECK(C[i][j] == s, "%d,%d", i, j);
  }
  return failures ? 1 : 0;
}
""")
    assert_ok(run)


def test_tiled_conv_auto_against_direct_convolution(tmp_path):
    run = run_c(tmp_path, r"""
#define MAXE 6000
static elem_t in[MAXE], w[MAXE], out[MAXE], ref[MAXE];
static acc_t bias[64];
static int conv_case(int batch, int rows, int cols, int ich, int och, int k, int stride, int pad, int kdil, int psize, int pstride, int ppad, int act, float scale) {
  const int orows = (rows + 2 * pad - kdil * (k - 1) - 1) / stride + 1, ocols = (cols + 2 * pad - kdil * (k - 1) - 1) / stride + 1;
  for (int i = 0; i < batch * rows * cols * ich; i++) in[i] = rnd_elem();
  for (int i = 0; i < k * k * ich * och; i++) w[i] = rnd_elem();
  for (int i = 0; i < och; i++) bias[i] = (int32_t)(rnd() % 20001) - 10000;
  static elem_t conv[MAXE];
  for (int b = 0; b < batch; b++) for (int orow = 0; orow < orows; orow++) for (int ocol = 0; ocol < ocols; ocol++) for (int o = 0; o < och; o++) {
    int32_t s = bias[o];
    for (int kr = 0; kr < k; kr++) for (int kc = 0; kc < k; kc++) for (int c = 0; c < ich; c++) {
      int ir = orow * stride + kr * kdil - pad, ic = ocol * stride + kc * kdil - pad;
      if (ir >= 0 && ic >= 0 && ir < rows && ic < cols) s += in[((b * rows + ir) * cols + ic) * ich + c] * w[((kr * k + kc) * ich + c) * och + o];
    }
    elem_t v = ref_scale(s, scale);
    if (act == RELU && v < 0) v = 0;
    conv[((b * orows + orow) * ocols + ocol) * och + o] = v;
  }
  int prows = orows, pcols = ocols;
  if (psize > 1) {
    prows = (orows + 2 * ppad - psize) / pstride + 1; pcols = (ocols + 2 * ppad - psize) / pstride + 1;
    for (int b = 0; b < batch; b++) for (int pr = 0; pr < prows; pr++) for (int pc = 0; pc < pcols; pc++) for (int o = 0; o < och; o++) {
      elem_t best = -128;
      for (int wr = 0; wr < psize; wr++) for (int wc = 0; wc < psize; wc++) {
        int r = pr * pstride + wr - ppad, c = pc * pstride + wc - ppad;
        elem_t v = (r >= 0 && c >= 0 && r < orows && c < ocols) ? conv[((b * orows + r) * ocols + c) * och + o] : 0;
        if (v > best) best = v;
      }
      ref[((b * prows + pr) * pcols + pc) * och + o] = best;
    }
  } else memcpy(ref, conv, (size_t)batch * orows * ocols * och);
  memset(out, 0x33, sizeof out);
  tiled_conv_auto(batch, rows, cols, ich, och, orows, ocols, stride, 1, kdil, pad, k, false, false, false, false, false,
                  in, w, bias, out, act, scale, psize, pstride, ppad, WS);
  int bad = 0;
  for (int i = 0; i < batch * prows * pcols * och; i++) bad += out[i] != ref[i];
  CHECK(bad == 0, "conv %dx%dx%dx%d -> %d k=%d s=%d p=%d d=%d pool=%d/%d/%d: %d wrong", batch, rows, cols, ich, och, k, stride, pad, kdil, psize, pstride, ppad, bad);
  return bad;
}
int main(void) {
  conv_case(1, 9, 9, 3, 16, 3, 1, 1, 1, 1, 1, 0, RELU, 0.01f);
  conv_case(2, 8, 7, 17, 20, 3, 2, 1, 1, 1, 1, 0, NO_ACTIVATION, 0.005f);
  conv_case(1, 10, 10, 8, 8, 3, 1, 2, 2, 1, 1, 0, NO_ACTIVATION, 0.01f);
  conv_case(1, 8, 8, 4, 16, 3, 1, 1, 1, 3, 2, 1, RELU, 0.02f);
  return failures ? 1 : 0;
}
""", max_instructions=200_000_000)
    assert_ok(run)


def test_loop_ws_residual_add_mode(tmp_path):
    """is_resadd: C = act(scale(MVIN_SCALE(A) + MVIN_SCALE(B))) through the accumulator."""
    run = run_c(tmp_path, r"""
#define I 35
#define J 70
static elem_t A[I][J], B[I][J], C[I][J];
int main(void) {
  for (int i = 0; i < I; i++) for (int j = 0; j < J; j++) { A[i][j] = rnd_elem(); B[i][j] = rnd_elem(); }
  const float as = 0.7f, bs = -1.5f, cs = 0.5f;
  gemmini_extended_config_st(J, RELU, cs);
  gemmini_config_ex(WEIGHT_STATIONARY, 0, 0);
  gemmini_extended4_config_ld(J, as, true, DIM, 0);
  gemmini_extended4_config_ld(J, bs, true, DIM, 1);
  const int ti = (I + DIM - 1) / DIM, tj = (J + DIM - 1) / DIM;
  gemmini_loop_ws(ti, tj, 0, ti * DIM - I, tj * DIM - J, 0, A, B, NULL, C, J, J, 0, J, false, false, false, false, false, RELU, 0, 0, true);
  gemmini_fence();
  for (int i = 0; i < I; i++) for (int j = 0; j < J; j++) {
    int32_t s = ref_scale(A[i][j], as) + ref_scale(B[i][j], bs);
    elem_t want = ref_scale(s, cs);
    if (want < 0) want = 0;
    CHECK(C[i][j] == want, "%d,%d got %d want %d", i, j, C[i][j], want);
  }
  return failures ? 1 : 0;
}
""")
    assert_ok(run)


def test_library_resadd_and_global_average(tmp_path):
    run = run_c(tmp_path, r"""
static elem_t A[40][100], B[40][100], C[40][100], G[3][7][7][40], avg[3][40];
int main(void) {
  for (int i = 0; i < 40; i++) for (int j = 0; j < 100; j++) { A[i][j] = rnd_elem(); B[i][j] = rnd_elem(); }
  tiled_resadd_stride_auto(37, 90, 0.5f, 2.0f, 0.25f, 100, &A[0][0], &B[0][0], &C[0][0], true, WS);
  for (int i = 0; i < 37; i++) for (int j = 0; j < 90; j++) {
    int32_t s = ref_scale(A[i][j], 0.5f) + ref_scale(B[i][j], 2.0f);
    elem_t want = ref_scale(s, 0.25f);
    CHECK(C[i][j] == (want < 0 ? 0 : want), "resadd %d,%d", i, j);
  }
  for (int b = 0; b < 3; b++) for (int r = 0; r < 7; r++) for (int c = 0; c < 7; c++) for (int ch = 0; ch < 40; ch++) G[b][r][c][ch] = rnd_elem();
  tiled_global_average_auto(&G[0][0][0][0], &avg[0][0], 3, 40, 7, WS);
  for (int b = 0; b < 3; b++) for (int ch = 0; ch < 40; ch++) {
    int32_t s = 0;
    for (int r = 0; r < 7; r++) for (int c = 0; c < 7; c++) s += G[b][r][c][ch];
    CHECK(avg[b][ch] == ref_scale(s, 1.0f / 49), "average %d,%d got %d", b, ch, avg[b][ch]);
  }
  return failures ? 1 : 0;
}
""")
    assert_ok(run)
