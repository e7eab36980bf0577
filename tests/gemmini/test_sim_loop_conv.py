"""loop_conv_ws on the Gemmini model, driven directly and checked against a CPU convolution:
one call for a whole padded 3x3 layer (bias, ReLU, scaling), the input channels split across
two calls that accumulate in the accumulator, fused 2x2 max pooling, a reused (NULL)
weights operand, and both operands kept under scratchpad ids (a_spad_id / b_spad_id) and
reused as NULL, the way Gemmini's tiled_conv reuses an input tile across output-channel
tiles."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from simkit import assert_ok, run_c  # noqa: E402

CONV = r"""
#define R 8
#define K 3
#define ICH 32
#define OCH 16
static elem_t in[R][R][ICH], w[K][K][ICH][OCH], out[R][R][OCH], pooled[R / 2][R / 2][OCH];
static acc_t bias[OCH];
static elem_t ref[R][R][OCH];

static void cpu_conv(int ich_used, float scale) {
  for (int r = 0; r < R; r++) for (int c = 0; c < R; c++) for (int o = 0; o < OCH; o++) {
    int32_t s = bias[o];
    for (int kr = 0; kr < K; kr++) for (int kc = 0; kc < K; kc++) for (int ch = 0; ch < ich_used; ch++) {
      int ir = r + kr - 1, ic = c + kc - 1;
      if (ir >= 0 && ic >= 0 && ir < R && ic < R) s += in[ir][ic][ch] * w[kr][kc][ch][o];
    }
    elem_t v = ref_scale(s, scale);
    ref[r][c][o] = v < 0 ? 0 : v;
  }
}

/* One loop_conv_ws call over the whole 8x8 output with kchs input channels starting at ch0. */
static void conv_call(int ich_total, int ch0, int kchs, const acc_t *b, elem_t *o, int pool, const elem_t *weights) {
  const int pool_size = pool ? 2 : 1, pool_stride = pool ? 2 : 1;
  const int porows = pool ? R / 2 : R, pdpad = pool ? 1 : 0;
  gemmini_loop_conv_ws(1, R, R, ich_total, OCH, R, R, porows, porows,
                       1, 1, K, 1, pool_size, pool_stride, 0,
                       1, porows, porows, OCH, K, K, kchs,
                       1, 1, 1, 1, 0, pdpad, 0, pdpad, R, R,
                       weights, o, b, &in[0][0][ch0],
                       false, !pool, false, false, false, RELU, false, false, false, false, 1,
                       ICH, OCH, OCH, false, 0, 0);
}
"""


def test_loop_conv_ws_single_call_split_channels_and_pooling(tmp_path):
    run = run_c(tmp_path, CONV + r"""
int main(void) {
  for (int r = 0; r < R; r++) for (int c = 0; c < R; c++) for (int ch = 0; ch < ICH; ch++) in[r][c][ch] = rnd_elem();
  for (int kr = 0; kr < K; kr++) for (int kc = 0; kc < K; kc++) for (int ch = 0; ch < ICH; ch++) for (int o = 0; o < OCH; o++) w[kr][kc][ch][o] = rnd_elem();
  for (int o = 0; o < OCH; o++) bias[o] = (int32_t)(rnd() % 40001) - 20000;
  const float scale = 0.003f;
  gemmini_extended_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0, 1, false, false);
  gemmini_extended_config_st(OCH, RELU, scale);

  /* 1: one call, all 32 input channels */
  conv_call(ICH, 0, ICH, bias, &out[0][0][0], 0, &w[0][0][0][0]);
  gemmini_fence();
  cpu_conv(ICH, scale);
  for (int r = 0; r < R; r++) for (int c = 0; c < R; c++) for (int o = 0; o < OCH; o++)
    CHECK(out[r][c][o] == ref[r][c][o], "single %d,%d,%d got %d want %d", r, c, o, out[r][c][o], ref[r][c][o]);

  /* 2: channels 0..15 with the bias, then 16..31 accumulating and writing the output. The
   * weights slice for channel 16 starts at w[0][0][16][0]; rows are ICH apart. */
  memset(out, 0, sizeof out);
  conv_call(ICH, 0, 16, bias, NULL, 0, &w[0][0][0][0]);
  conv_call(ICH, 16, 16, NULL, &out[0][0][0], 0, &w[0][0][16][0]);
  gemmini_fence();
  for (int r = 0; r < R; r++) for (int c = 0; c < R; c++) for (int o = 0; o < OCH; o++)
    CHECK(out[r][c][o] == ref[r][c][o], "split %d,%d,%d got %d want %d", r, c, o, out[r][c][o], ref[r][c][o]);

  /* 3: fused 2x2 / stride 2 max pooling, weights reused from the previous load (NULL) is
   * not possible here (different slice), so load them again */
  conv_call(ICH, 0, ICH, bias, &pooled[0][0][0], 1, &w[0][0][0][0]);
  gemmini_fence();
  for (int pr = 0; pr < R / 2; pr++) for (int pc = 0; pc < R / 2; pc++) for (int o = 0; o < OCH; o++) {
    elem_t best = -128;
    for (int a = 0; a < 2; a++) for (int b = 0; b < 2; b++) if (ref[2 * pr + a][2 * pc + b][o] > best) best = ref[2 * pr + a][2 * pc + b][o];
    CHECK(pooled[pr][pc][o] == best, "pool %d,%d,%d got %d want %d", pr, pc, o, pooled[pr][pc][o], best);
  }

  /* 4: same weights as the previous call, passed as NULL (kept in the scratchpad) */
  memset(out, 0, sizeof out);
  conv_call(ICH, 0, ICH, bias, &out[0][0][0], 0, NULL);
  gemmini_fence();
  for (int r = 0; r < R; r++) for (int c = 0; c < R; c++) for (int o = 0; o < OCH; o++)
    CHECK(out[r][c][o] == ref[r][c][o], "reuse %d,%d,%d", r, c, o);
  return failures ? 1 : 0;
}
""")
    assert_ok(run)


def test_loop_conv_ws_null_weights_without_previous_load_is_an_error(tmp_path):
    run = run_c(tmp_path, CONV + r"""
int main(void) {
  gemmini_extended_config_st(OCH, RELU, 1.0f);
  conv_call(ICH, 0, 8, bias, &out[0][0][0], 0, NULL);
  gemmini_fence();
  return 0;
}
""")
    assert "loop_conv_ws: weights pointer is NULL" in run.error


SPAD_IDS = r"""
#define R 8
#define K 3
#define ICH 32
#define OCH 32
static elem_t in[R][R][ICH], w[K][K][ICH][OCH], out[R][R][OCH], ref[R][R][OCH];
static acc_t bias[OCH];

/* Output channels och0..och0+15 of a padded 3x3 conv over the whole 8x8 image; `input` and
 * `weights` may be NULL (reuse what was loaded under a_spad_id / b_spad_id). */
static void conv16(int och0, const elem_t *input, const elem_t *weights, int a_id, int b_id) {
  gemmini_loop_conv_ws(1, R, R, ICH, 16, R, R, R, R,
                       1, 1, K, 1, 1, 1, 0,
                       1, R, R, 16, K, K, ICH,
                       1, 1, 1, 1, 0, 0, 0, 0, R, R,
                       weights, &out[0][0][och0], &bias[och0], input,
                       false, true, false, false, false, NO_ACTIVATION, false, false, false, false, 1,
                       ICH, OCH, OCH, false, a_id, b_id);
}
"""


def test_loop_conv_ws_spad_ids_reuse_input_and_weights(tmp_path):
    """The same input tile for two output-channel tiles: the second call passes input = NULL
    under the same a_spad_id; then the first weights tile again as NULL under its b_spad_id
    (the second tile's weights sit under another id). Every output is checked on the CPU."""
    run = run_c(tmp_path, SPAD_IDS + r"""
static void cpu_ref(void) {
  for (int r = 0; r < R; r++) for (int c = 0; c < R; c++) for (int o = 0; o < OCH; o++) {
    int32_t s = bias[o];
    for (int kr = 0; kr < K; kr++) for (int kc = 0; kc < K; kc++) for (int ch = 0; ch < ICH; ch++) {
      int ir = r + kr - 1, ic = c + kc - 1;
      if (ir >= 0 && ic >= 0 && ir < R && ic < R) s += in[ir][ic][ch] * w[kr][kc][ch][o];
    }
    ref[r][c][o] = ref_scale(s, 0.01f);
  }
}
static void check(const char *what) {
  for (int r = 0; r < R; r++) for (int c = 0; c < R; c++) for (int o = 0; o < OCH; o++)
    CHECK(out[r][c][o] == ref[r][c][o], "%s %d,%d,%d got %d want %d", what, r, c, o, out[r][c][o], ref[r][c][o]);
}
int main(void) {
  for (int r = 0; r < R; r++) for (int c = 0; c < R; c++) for (int ch = 0; ch < ICH; ch++) in[r][c][ch] = rnd_elem();
  for (int kr = 0; kr < K; kr++) for (int kc = 0; kc < K; kc++) for (int ch = 0; ch < ICH; ch++) for (int o = 0; o < OCH; o++) w[kr][kc][ch][o] = rnd_elem();
  for (int o = 0; o < OCH; o++) bias[o] = (int32_t)(rnd() % 4001) - 2000;
  cpu_ref();
  gemmini_extended_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0, 1, false, false);
  gemmini_extended_config_st(OCH, NO_ACTIVATION, 0.01f);

  conv16(0, &in[0][0][0], &w[0][0][0][0], 1, 1);     /* loads input (id 1) and weights tile 0 (id 1) */
  conv16(16, NULL, &w[0][0][0][16], 1, 2);          /* input reused; weights tile 1 under id 2 */
  gemmini_fence();
  check("first pass");

  memset(out, 0, sizeof out);
  conv16(0, NULL, NULL, 1, 1);                       /* both reused: tile 0's weights are still id 1 */
  conv16(16, NULL, NULL, 1, 2);                      /* and tile 1's are id 2 */
  gemmini_fence();
  check("reused");
  return failures ? 1 : 0;
}
""")
    assert_ok(run)
