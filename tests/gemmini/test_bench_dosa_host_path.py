"""bench/gemmini_dosa_layers.py's DOSA host path (_DOSA_MATMUL): the matmul layers and DOSA's
matmul mappings run through it, so it must compute the product (partial last tiles included)
and visit the tiles in the order its loop string names, innermost first, as DOSA's
tiled_matmul does. Run on the model with real programs; no doubles."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import gemmini_dosa_layers as dosa  # noqa: E402
from simkit import run_c  # noqa: E402

_PRODUCT = dosa._DOSA_MATMUL + r"""
#define MI 40
#define MJ 56
#define MK 72
static elem_t A[MI][MK], B[MK][MJ], C[MI][MJ];
static int check(void) {
  for (int i = 0; i < MI; i++)
    for (int j = 0; j < MJ; j++) {
      int32_t s = 0;
      for (int k = 0; k < MK; k++) s += A[i][k] * B[k][j];
      const elem_t want = s > 127 ? 127 : (s < -128 ? -128 : (elem_t)s);
      CHECK(C[i][j] == want, "C[%d][%d] = %d, want %d", i, j, C[i][j], want);
    }
  return failures;
}
int main(void) {
  for (int i = 0; i < MI; i++) for (int k = 0; k < MK; k++) A[i][k] = (elem_t)(rnd() % 5) - 2;
  for (int k = 0; k < MK; k++) for (int j = 0; j < MJ; j++) B[k][j] = (elem_t)(rnd() % 5) - 2;
  /* tiles of 2 x 3 x 2 blocks: 3 x 2 x 3 tiles, every last one partial and padded */
  dosa_tiled_matmul(MI, MJ, MK, &A[0][0], &B[0][0], &C[0][0], MK, MJ, MJ, 2, 3, 2, "CPKRSQN", DIM);
  gemmini_fence();
  if (check()) return 1;
  for (int i = 0; i < MI; i++) for (int j = 0; j < MJ; j++) C[i][j] = 99;
  dosa_tiled_matmul_auto(MI, MJ, MK, &A[0][0], &B[0][0], &C[0][0], MK, MJ, MJ);
  gemmini_fence();
  return check() ? 2 : 0;
}
"""


def test_the_dosa_path_computes_the_product_with_partial_tiles(tmp_path):
    run = run_c(tmp_path, _PRODUCT, max_instructions=20_000_000)
    assert run.error == "" and run.exit_code == 0, run.error or run.stdout


_ORDER = dosa._DOSA_MATMUL + r"""
static elem_t A[48][48], B[48][48], C[48][48];
static const elem_t *a0 = &A[0][0], *b0 = &B[0][0];
static void record(const elem_t *a, const elem_t *b, void *c, size_t I, size_t J, size_t K, size_t pad_I,
                   size_t pad_J, size_t pad_K, size_t stride_A, size_t stride_B, size_t stride_C, bool first_k) {
  const long i0 = (a - a0) / (16 * (long)stride_A), k0 = (a - a0) % (16 * (long)stride_A) / 16;
  const long j0 = (b - b0) % (16 * (long)stride_B) / 16;
  printf("tile %ld %ld %ld %s%s\n", i0, j0, k0, first_k ? "first" : "-", c ? " out" : "");
}
int main(void) {
  dosa_tile_routine = record;
  /* 3 x 3 x 3 blocks in tiles of one block; "KCPRSQN": j0 innermost, then k0, then i0 */
  dosa_tiled_matmul(48, 48, 48, &A[0][0], &B[0][0], &C[0][0], 48, 48, 48, 1, 1, 1, "KCPRSQN", DIM);
  return 0;
}
"""


def test_tiles_follow_the_loop_string_innermost_first(tmp_path):
    run = run_c(tmp_path, _ORDER, max_instructions=5_000_000)
    assert run.error == "" and run.exit_code == 0, run.error or run.stdout
    tiles = [tuple(line.split()[1:]) for line in run.stdout.splitlines() if line.startswith("tile ")]
    want = [(str(i), str(j), str(k), "first" if k == 0 else "-") + (("out",) if k == 2 else ())
            for i in range(3) for k in range(3) for j in range(3)]
    assert tiles == want


def test_matmul_layers_and_mappings_use_the_dosa_path():
    layer_program = dosa.program("mm", 1, 64, 128, 128, 1, 1)
    assert "dosa_tiled_matmul_auto(128, 128, 64, X, Y, Z, 64, 128, 128);" in layer_program
    assert "tiled_matmul_auto(" not in layer_program.replace("dosa_tiled_matmul_auto(", "")
    conv_program = dosa.program("conv", 1, 64, 64, 56, 1, 1)
    assert "dosa_tiled_matmul" not in conv_program  # convolutions keep our library's call


def test_the_host_path_bench_swaps_in_the_branch_library_call():
    """bench/gemmini_dosa_host_path.py runs each matmul program again on the dosa branch's own
    library: the replica's block goes, the branch's header and tiled_matmul_auto come in with
    the same shape and operands; anything else is refused rather than silently compared."""
    import pytest

    import gemmini_dosa_host_path as host_path

    program = dosa.program("mm", 1, 64, 128, 128, 1, 1)
    theirs = host_path.with_branch_library(program)
    assert "dosa_tiled_matmul" not in theirs and '#include "include/gemmini.h"' in theirs
    assert "tiled_matmul_auto(128, 128, 64, X, Y, NULL, Z, 64, 128, 128, 128, " in theirs
    with pytest.raises(ValueError, match="not a DOSA matmul program"):
        host_path.with_branch_library(dosa.program("conv", 1, 64, 64, 56, 1, 1))


def test_the_host_path_bench_says_what_it_needs(tmp_path, monkeypatch, capsys):
    import asyncio

    import pytest

    import gemmini_dosa_host_path as host_path

    monkeypatch.setattr(sys, "argv", ["gemmini_dosa_host_path.py", "--suite", str(tmp_path / "missing")])
    with pytest.raises(SystemExit, match="no such directory"):
        asyncio.run(host_path.main())
