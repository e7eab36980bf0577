"""Explicit tiles in our Gemmini library, on the model: tiled_matmul and tiled_conv with the tile
sizes a caller gives (Gemmini's signatures), checked against CPU references written here; the
tiles are really used (scratchpad and accumulator footprint, modelled cycles); tiles that do not
fit are refused with the reason; and the plan API visits tiles in another order (DOSA's loop
permutations) with the same result when the reduction stays innermost."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from simkit import assert_ok, run_c  # noqa: E402

MATMUL = r"""
#define MAXN 160
static elem_t A[MAXN * MAXN] row_align(1), B[MAXN * MAXN] row_align(1);
static acc_t D32[MAXN * MAXN] row_align_acc(1);
static elem_t C8[MAXN * MAXN] row_align(1);

static void fill(void) {
  for (int i = 0; i < MAXN * MAXN; i++) { A[i] = rnd_elem(); B[i] = rnd_elem(); D32[i] = (int32_t)rnd() >> (rnd() % 24); }
  memset(C8, 0x5a, sizeof C8);
}
static int wrong(int I, int J, int K, int bias, float scale) {
  int bad = 0;
  for (int i = 0; i < I; i++) for (int j = 0; j < J; j++) {
    int32_t s = bias ? D32[i * J + j] : 0;
    for (int k = 0; k < K; k++) s += A[i * K + k] * B[k * J + j];
    bad += C8[i * J + j] != ref_scale(s, scale);
  }
  return bad;
}
static int tiled_case(int I, int J, int K, int bias, float scale, int ti, int tj, int tk) {
  fill();
  tiled_matmul(I, J, K, A, B, bias ? D32 : NULL, C8, K, J, J, J, MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY,
               MVIN_SCALE_IDENTITY, NO_ACTIVATION, scale, 0, false, ti, tj, tk, false, false, false, false, 3, WS);
  const int bad = wrong(I, J, K, bias, scale);
  CHECK(bad == 0, "%dx%dx%d tiles %dx%dx%d bias=%d: %d wrong", I, J, K, ti, tj, tk, bias, bad);
  return bad;
}
"""


def test_tiled_matmul_explicit_tiles_compute_the_product(tmp_path):
    run = run_c(tmp_path, MATMUL + r"""
int main(void) {
  tiled_case(64, 64, 64, 0, 1.0f, 1, 1, 1);      /* one block per loop_ws, K over four tiles */
  tiled_case(50, 70, 33, 1, 0.05f, 2, 3, 1);     /* padded edges, bias only on the first K tile */
  tiled_case(96, 48, 160, 1, 0.01f, 3, 1, 4);    /* uneven last K tile */
  tiled_case(40, 40, 40, 0, 0.1f, 99, 99, 99);   /* larger than the problem: clipped */
  return failures ? 1 : 0;
}
""", max_instructions=200_000_000)
    assert_ok(run)


def _footprint_and_cycles(tmp_path, name: str, tiles: tuple[int, int, int]) -> tuple[int, int, int]:
    d = tmp_path / name
    d.mkdir()
    ti, tj, tk = tiles
    run = run_c(d, MATMUL + rf"""
AUTOCOMP_HARNESS_FN int main(void) {{
  fill();
  AUTOCOMP_MEASURE_BEGIN();
  tiled_matmul(128, 128, 128, A, B, NULL, C8, 128, 128, 128, 128, MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY,
               MVIN_SCALE_IDENTITY, NO_ACTIVATION, 0.01f, 0, false, {ti}, {tj}, {tk}, false, false, false, false, 3, WS);
  AUTOCOMP_MEASURE_END();
  return wrong(128, 128, 128, 0, 0.01f) ? 1 : 0;
}}
""", max_instructions=200_000_000)
    assert_ok(run)
    assert run.cycles
    return run.scratchpad_rows_used, run.accumulator_rows_used, run.cycles


def test_tiled_matmul_uses_the_tiles_it_is_given(tmp_path):
    """One-block tiles touch a few scratchpad and accumulator rows and reload operands for
    every block; 4x4x4 tiles fill far more of both and reuse what they load, so they are
    faster on the model."""
    small_sp, small_acc, small_cycles = _footprint_and_cycles(tmp_path, "small", (1, 1, 1))
    big_sp, big_acc, big_cycles = _footprint_and_cycles(tmp_path, "big", (4, 4, 4))
    assert small_acc <= 2 * 16 and big_acc >= 4 * 4 * 16, (small_acc, big_acc)
    assert small_sp < big_sp, (small_sp, big_sp)
    assert big_cycles < small_cycles, (big_cycles, small_cycles)


def test_tiled_matmul_refuses_tiles_that_do_not_fit(tmp_path):
    """8 x 8 blocks of C need 1024 accumulator rows, all of defaultConfig's (loop_ws keeps half
    free for the next tile): refused with the reason, nothing computed in its place."""
    run = run_c(tmp_path, MATMUL + r"""
int main(void) {
  fill();
  tiled_matmul(128, 128, 16, A, B, NULL, C8, 16, 128, 128, 128, MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY,
               MVIN_SCALE_IDENTITY, NO_ACTIVATION, 1.0f, 0, false, 8, 8, 1, false, false, false, false, 3, WS);
  return 0;
}
""")
    assert "stopped itself with code 2" in run.error, run.error
    assert "tiled_matmul: tiles 8 x 8 x 1 refused" in run.stdout, run.stdout
    assert "accumulator" in run.stdout, run.stdout


def test_matmul_plan_visits_tiles_in_another_order(tmp_path):
    """j outermost, then i, k innermost (DOSA's permutation "CPK" read innermost first): the
    same product as tiled_matmul's i, j, k order."""
    run = run_c(tmp_path, MATMUL + r"""
int main(void) {
  fill();
  struct gemmini_matmul_plan p;
  gemmini_matmul_plan_begin(&p, 80, 96, 112, A, B, D32, C8, 112, 96, 96, 96, MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY,
                            NO_ACTIVATION, 0.02f, false, 2, 2, 3, false, false, false, false);
  for (size_t j0 = 0; j0 < p.J; j0 += p.tJ)
    for (size_t i0 = 0; i0 < p.I; i0 += p.tI)
      for (size_t k0 = 0; k0 < p.K; k0 += p.tK) gemmini_matmul_tile(&p, i0, j0, k0);
  gemmini_fence();
  const int bad = wrong(80, 96, 112, 1, 0.02f);
  CHECK(bad == 0, "%d wrong", bad);
  return failures ? 1 : 0;
}
""", max_instructions=200_000_000)
    assert_ok(run)


CONV = r"""
#define MAXE 8000
static elem_t in[MAXE], w[MAXE], out[MAXE], ref[MAXE];
static acc_t bias[64];
static int orows_of(int rows, int k, int stride, int pad) { return (rows + 2 * pad - (k - 1) - 1) / stride + 1; }
static void conv_fill_and_reference(int batch, int rows, int ich, int och, int k, int stride, int pad, float scale) {
  const int orows = orows_of(rows, k, stride, pad);
  for (int i = 0; i < batch * rows * rows * ich; i++) in[i] = rnd_elem();
  for (int i = 0; i < k * k * ich * och; i++) w[i] = rnd_elem();
  for (int i = 0; i < och; i++) bias[i] = (int32_t)(rnd() % 20001) - 10000;
  for (int b = 0; b < batch; b++) for (int orow = 0; orow < orows; orow++) for (int ocol = 0; ocol < orows; ocol++) for (int o = 0; o < och; o++) {
    int32_t s = bias[o];
    for (int kr = 0; kr < k; kr++) for (int kc = 0; kc < k; kc++) for (int c = 0; c < ich; c++) {
      int ir = orow * stride + kr - pad, ic = ocol * stride + kc - pad;
      if (ir >= 0 && ic >= 0 && ir < rows && ic < rows) s += in[((b * rows + ir) * rows + ic) * ich + c] * w[((kr * k + kc) * ich + c) * och + o];
    }
    ref[((b * orows + orow) * orows + ocol) * och + o] = ref_scale(s, scale);
  }
  memset(out, 0x33, sizeof out);
}
static int conv_wrong(int batch, int rows, int och, int k, int stride, int pad) {
  const int orows = orows_of(rows, k, stride, pad);
  int bad = 0;
  for (int i = 0; i < batch * orows * orows * och; i++) bad += out[i] != ref[i];
  return bad;
}
static int conv_tiled(int batch, int rows, int ich, int och, int k, int stride, int pad, float scale,
                      int tb, int tpr, int tpc, int toc, int tkr, int tkc, int tkch) {
  const int orows = orows_of(rows, k, stride, pad);
  conv_fill_and_reference(batch, rows, ich, och, k, stride, pad, scale);
  tiled_conv(batch, rows, rows, ich, och, orows, orows, stride, 1, 1, pad, k, ich, och, och, false, false, false, false, false,
             tb, tpr, tpc, toc, tkr, tkc, tkch, in, w, bias, out, NO_ACTIVATION, scale, 1, 1, 0, WS);
  const int bad = conv_wrong(batch, rows, och, k, stride, pad);
  CHECK(bad == 0, "conv %dx%d ich=%d och=%d k=%d s=%d tiles %d/%d/%d/%d/%d/%d/%d: %d wrong", batch, rows, ich, och, k, stride,
        tb, tpr, tpc, toc, tkr, tkc, tkch, bad);
  return bad;
}
"""


def test_tiled_conv_explicit_tiles_compute_the_convolution(tmp_path):
    run = run_c(tmp_path, CONV + r"""
int main(void) {
  conv_tiled(2, 8, 20, 24, 3, 1, 1, 0.005f, 1, 3, 4, 16, 1, 2, 16);   /* every dimension split */
  conv_tiled(1, 9, 32, 16, 3, 2, 1, 0.01f, 1, 5, 5, 16, 3, 3, 32);    /* strided, whole kernel */
  conv_tiled(2, 6, 8, 8, 1, 1, 0, 0.05f, 9, 99, 99, 99, 9, 9, 99);    /* larger than the problem: clipped */
  return failures ? 1 : 0;
}
""", max_instructions=200_000_000)
    assert_ok(run)


def test_tiled_conv_refuses_tiles_that_do_not_fit(tmp_path):
    """A 32 x 32 output tile of 16 channels needs 1024 accumulator rows, more than half."""
    run = run_c(tmp_path, CONV + r"""
int main(void) {
  conv_fill_and_reference(1, 32, 4, 16, 1, 1, 0, 1.0f);
  tiled_conv(1, 32, 32, 4, 16, 32, 32, 1, 1, 1, 0, 1, 4, 16, 16, false, false, false, false, false,
             1, 32, 32, 16, 1, 1, 4, in, w, bias, out, NO_ACTIVATION, 1.0f, 1, 1, 0, WS);
  return 0;
}
""")
    assert "stopped itself with code 2" in run.error, run.error
    assert "tiled_conv: tile 1 x 32 x 32 x 16 x 1 x 1 x 4 refused" in run.stdout, run.stdout
    assert "accumulator rows" in run.stdout, run.stdout


def test_conv_plan_visits_tiles_in_another_order(tmp_path):
    """Output channels outermost, then batches, columns, rows (the kernel and input-channel
    loops innermost, so each output tile is finished before the next): the same result."""
    run = run_c(tmp_path, CONV + r"""
int main(void) {
  conv_fill_and_reference(2, 8, 20, 40, 3, 1, 1, 0.005f);
  const struct gemmini_conv_tile t = {1, 3, 5, 16, 2, 3, 16};
  struct gemmini_conv_plan p;
  if (!gemmini_conv_plan_begin(&p, "test", 2, 8, 8, 20, 40, 8, 8, 1, 1, 1, 1, 3, 20, 40, 40, false, false, false, false,
                               false, &t, in, w, bias, out, NO_ACTIVATION, 0.005f, 1, 1, 0))
    return 2;
  for (int poch = 0; poch < 40; poch += t.pochs)
    for (int b = 0; b < 2; b += t.batches)
      for (int pocol = 0; pocol < 8; pocol += t.pocols)
        for (int porow = 0; porow < 8; porow += t.porows)
          for (int kch = 0; kch < 20; kch += t.kchs)
            for (int krow = 0; krow < 3; krow += t.krows)
              for (int kcol = 0; kcol < 3; kcol += t.kcols) gemmini_conv_tile_step(&p, b, porow, pocol, poch, krow, kcol, kch);
  gemmini_fence();
  const int bad = conv_wrong(2, 8, 40, 3, 1, 1);
  CHECK(bad == 0, "%d wrong", bad);
  return failures ? 1 : 0;
}
""", max_instructions=200_000_000)
    assert_ok(run)
