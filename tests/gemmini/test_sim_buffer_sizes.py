"""The model's scratchpad and accumulator sizes: defaultConfig's (256 KiB in 4 banks, 64 KiB)
unless a run names another image's (`buffers_kib`; the DOSA artifact's image has 4 MiB of
each). What defaultConfig refuses runs, correctly, on the larger image; bad sizes are refused
with what is allowed."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from simkit import assert_ok, run_c  # noqa: E402

DOSA_IMAGE = (4096, 4096)

# One loop_ws over a 128 x 128 C tile: 8 x 8 blocks, 1024 accumulator rows, more than half of
# defaultConfig's accumulator (loop_ws keeps the other half for the next loop).
BIG_TILE = r"""
static elem_t A[128][32] row_align(1), B[32][128] row_align(1), C[128][128] row_align(1);
int main(void) {
  for (int i = 0; i < 128; i++) for (int k = 0; k < 32; k++) A[i][k] = rnd_elem();
  for (int k = 0; k < 32; k++) for (int j = 0; j < 128; j++) B[k][j] = rnd_elem();
  gemmini_extended_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0, 1, false, false);
  gemmini_extended_config_st(128, NO_ACTIVATION, 0.01f);
  gemmini_extended3_config_ld(32, MVIN_SCALE_IDENTITY, false, 0);
  gemmini_extended3_config_ld(128, MVIN_SCALE_IDENTITY, false, 1);
  gemmini_loop_ws(8, 8, 2, 0, 0, 0, A, B, NULL, C, 32, 128, 0, 128, false, false, false, false, false,
                  NO_ACTIVATION, 0, 0, false);
  gemmini_fence();
  for (int i = 0; i < 128; i++) for (int j = 0; j < 128; j++) {
    int32_t s = 0;
    for (int k = 0; k < 32; k++) s += A[i][k] * B[k][j];
    CHECK(C[i][j] == ref_scale(s, 0.01f), "%d,%d", i, j);
  }
  return failures ? 1 : 0;
}
"""


def test_a_tile_defaultconfig_refuses_runs_on_the_larger_image(tmp_path):
    (tmp_path / "default").mkdir()
    (tmp_path / "dosa").mkdir()
    refused = run_c(tmp_path / "default", BIG_TILE)
    assert "exceed half the accumulator (512 rows)" in refused.error, refused.error
    assert_ok(run_c(tmp_path / "dosa", BIG_TILE, buffers_kib=DOSA_IMAGE))


# A move-in to scratchpad row 100000: past defaultConfig's 16,384 rows, inside the 4 MiB
# image's 262,144 (4 banks of 65,536).
FAR_ROW = r"""
static elem_t X[16][16] row_align(1), Y[16][16] row_align(1);
int main(void) {
  for (int i = 0; i < 16; i++) for (int j = 0; j < 16; j++) X[i][j] = rnd_elem();
  gemmini_config_ld(16);
  gemmini_config_st(16);
  gemmini_mvin(X, 100000);
  gemmini_mvout(Y, 100000);
  gemmini_fence();
  for (int i = 0; i < 16; i++) for (int j = 0; j < 16; j++) CHECK(Y[i][j] == X[i][j], "%d,%d", i, j);
  return failures ? 1 : 0;
}
"""


def test_scratchpad_rows_and_banks_follow_the_image(tmp_path):
    (tmp_path / "default").mkdir()
    (tmp_path / "dosa").mkdir()
    refused = run_c(tmp_path / "default", FAR_ROW)
    assert "out of range (4 banks x 4096 rows = 16384 rows)" in refused.error, refused.error
    assert_ok(run_c(tmp_path / "dosa", FAR_ROW, buffers_kib=DOSA_IMAGE))


def test_bad_buffer_sizes_are_refused_with_what_is_allowed(tmp_path):
    run = run_c(tmp_path, "int main(void) { return 0; }\n", buffers_kib=(100, 64))
    assert run.exit_code != 0
    text = run.error + run.stderr
    assert "buffers_kib 100 64" in text and "multiple of 256 KiB" in text, text
