"""bench/gemmini_dosa_mapped.py without a gemmini-rocc-tests clone: a DOSA-style row (tile and
loop permutation, innermost first) becomes C loops in that order over our library's tile
steps (a matmul: a call of DOSA's host path with the order as a string), and the program runs on the model with the DOSA image's buffers, timing the library call
and then the mapping as two regions."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import gemmini_dosa_mapped as mapped  # noqa: E402
from simkit import toolchain  # noqa: E402


def _loop_vars(code: str) -> list[str]:
    return [line.split("for (")[1].split()[1] for line in code.splitlines() if "for (" in line]


def test_conv_loops_follow_the_permutation_outermost_last():
    code = mapped.mapped_conv(1, 32, 48, 6, 3, 1, {"N": 1, "P": 3, "Q": 2, "K": 16, "R": 3, "S": 1, "C": 16},
                              "KCRSPQN")
    assert _loop_vars(code) == ["b", "porow", "pocol", "krow", "kcol", "kch", "poch"]
    assert "{1, 2, 3, 16, 1, 3, 16}" in code  # batches, porows (Q), pocols (P), pochs, krows (S), kcols (R), kchs


def test_matmul_tiles_are_dosa_elements_over_16_and_the_permutation_goes_to_dosas_host_path():
    """The order itself is walked at run time (test_bench_dosa_host_path.py checks it)."""
    code = mapped.mapped_matmul(64, 48, 40, {"N": 1, "P": 40, "Q": 1, "K": 8, "R": 1, "S": 1, "C": 64}, "CPKRSQN")
    # tile_I = 40 >> 4, tile_J = max(1, 8 >> 4), tile_K = 64 >> 4
    assert code.strip() == 'dosa_tiled_matmul(40, 48, 64, X, Y, Z, 64, 48, 48, 2, 1, 4, "CPKRSQN", DIM);'


def _run(row: dict, tmp_path: Path):
    src = tmp_path / "prog.c"
    src.write_text(mapped.program(row))
    elf = tmp_path / "prog.elf"
    tc = toolchain()

    async def go():
        built = await tc.compile([str(src)], str(elf), str(tmp_path))
        assert built.ok, built.tail()
        return await tc.run(str(elf), str(tmp_path), {}, timeout=120, max_instructions=200_000_000, measure_limit=2,
                            host_dcache=True, buffers_kib=mapped.dosa.IMAGE_BUFFERS_KIB)

    return asyncio.run(go())


def test_a_mapped_layer_runs_as_two_timed_regions(tmp_path):
    """The output tile (10 x 10 pixels x 128 channels: 800 accumulator rows) needs more than
    half of defaultConfig's accumulator and runs on the 4 MiB image; the reduction loops sit
    outside the output loops, as DOSA's mappings often have them."""
    row = {"network": "retinanet", "run": "dnn", "shape": ["conv", 1, 64, 128, 10, 3, 1],
           "tile": {"N": 1, "P": 10, "Q": 10, "K": 128, "R": 3, "S": 3, "C": 32}, "permutation": "KCRSPQN"}
    run = _run(row, tmp_path)
    assert run.error == "" and run.exit_code == 0, run.error or run.stdout
    assert len(run.region_cycles) == 2 and all(c > 0 for c in run.region_cycles), run.region_cycles
