"""Tunables: detection per target, user ranges, proposed ranges and pruning (no evaluation)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from autocomp.backends import get_backend
from autocomp.tuning.space import (
    DirectiveError, c_eval, parse_directives, parse_values, powers_of_two_around, safe_eval, NotConstant,
)

ROOT = Path(__file__).resolve().parents[2]

GEMMINI = """#include "include/gemmini.h"
#define MAT_DIM_I 64
#define MAT_DIM_J 64
#define MAT_DIM_K 64
#define TI 2  // row tiles per hardware loop
#define TJ 2
#define UNUSED 8

void gemm(const elem_t A[MAT_DIM_I][MAT_DIM_K], const elem_t B[MAT_DIM_K][MAT_DIM_J],
          elem_t C[MAT_DIM_I][MAT_DIM_J]) {
  const uint32_t c_acc = 1u << 31;
  const int flags = 0x10;
  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_config_st(MAT_DIM_J * sizeof(elem_t));
  gemmini_extended3_config_ld(MAT_DIM_K * sizeof(elem_t), MVIN_SCALE_IDENTITY, false, 0);
  gemmini_extended3_config_ld(MAT_DIM_J * sizeof(elem_t), MVIN_SCALE_IDENTITY, false, 1);
  for (int i0 = 0; i0 < MAT_DIM_I / DIM; i0 += TI)
    for (int j0 = 0; j0 < MAT_DIM_J / DIM; j0 += TJ)
      gemmini_loop_ws(TI, TJ, MAT_DIM_K / DIM, 0, 0, 0, &A[i0 * DIM][0], &B[0][j0 * DIM], NULL,
                      &C[i0 * DIM][j0 * DIM], MAT_DIM_K, MAT_DIM_J, MAT_DIM_J, MAT_DIM_J,
                      false, false, false, false, false, NO_ACTIVATION, 0, 0, false);
}
"""


def space_of(target: str, path: str, text: str):
    backend = get_backend(target)
    problem = backend.make_problem(path, text)
    return asyncio.run(backend.tunables(problem)), problem


def test_directives_values_and_ranges():
    assert parse_values("4, 8, 16, 32") == [4, 8, 16, 32]
    assert parse_values("128..512 step 128") == [128, 256, 384, 512]
    assert parse_values("1..4") == [1, 2, 3, 4]
    with pytest.raises(DirectiveError):
        parse_values("8..4")
    with pytest.raises(DirectiveError):
        parse_values("a, b")
    d = parse_directives("// autocomp: tune TI in 4, 8\n# autocomp: tune TILE_N in 128..512 step 128\n"
                         "// autocomp: tune require TI * 2 <= 16\n// autocomp: tune nonsense\n")
    assert d.ranges == {"TI": [4, 8], "TILE_N": [128, 256, 384, 512]}
    assert d.requires == ["TI * 2 <= 16"]
    assert d.lines == {0, 1, 2, 3} and len(d.errors) == 1 and "line 4" in d.errors[0]


def test_safe_arithmetic_never_runs_code():
    assert c_eval("(MAT_DIM_I / DIM) % 3", {"MAT_DIM_I": 512, "DIM": 16}) == 2
    assert c_eval("(uint64_t)4u * sizeof(elem_t)", {}, {"elem_t": 1}) == 4
    assert c_eval("-7 / 2", {}) == -3  # C truncates
    for bad in ("__import__('os').system('true')", "open('x')", "x.y", "[1][0]"):
        with pytest.raises((NotConstant, SyntaxError)):
            safe_eval(bad, {"x": 1})
    assert powers_of_two_around(16) == [2, 4, 8, 16, 32, 64, 128]
    assert powers_of_two_around(12, hi=64) == [1, 2, 4, 8, 12, 16, 32, 64]


def test_gemmini_detection_excludes_problem_shapes_flags_and_unused():
    space, _ = space_of("gemmini", "/tmp/k.c", GEMMINI)
    assert space.names == ["TI", "TJ"]  # not MAT_DIM_* (signature), UNUSED, c_acc (shift), flags (hex)
    ti = space.tunables[0]
    assert ti.kind == "define" and ti.value == 2 and ti.line == 4 and not ti.in_span and ti.source == "proposed"


def test_gemmini_rules_prune_by_divisibility_and_the_accumulator_and_scratchpad():
    space, _ = space_of("gemmini", "/tmp/k.c", GEMMINI)
    descriptions = " | ".join(c.description for c in space.constraints)
    assert "TI divides MAT_DIM_I / DIM" in descriptions and "accumulator" in descriptions and "scratchpad" in descriptions
    assert space.why_invalid({"TI": 8, "TJ": 1}) and "divides" in space.why_invalid({"TI": 8, "TJ": 1})  # 64/16 = 4 tiles
    assert space.why_invalid({"TI": 4, "TJ": 4}) is None  # 4*4*16 = 256 rows <= 512
    valid = space.valid_configs()
    assert {"TI": 2, "TJ": 2} in valid and all(c["TI"] <= 4 and c["TJ"] <= 4 for c in valid)
    big = GEMMINI.replace("64", "1024")
    space, _ = space_of("gemmini", "/tmp/k.c", big)
    # K = 64 tiles: A block TI*64*16 rows <= 8192 -> TI <= 8; TI*TJ*16 <= 512 -> TI*TJ <= 32
    assert space.why_invalid({"TI": 16, "TJ": 1}) and "scratchpad" in space.why_invalid({"TI": 16, "TJ": 1})
    assert "accumulator" in space.why_invalid({"TI": 8, "TJ": 8})
    # A and B share a half (a_spad_id == b_spad_id): (8*64 + 64*4)*16 rows > 8192
    assert "scratchpad" in space.why_invalid({"TI": 8, "TJ": 4})
    assert space.why_invalid({"TI": 4, "TJ": 4}) is None


def test_user_ranges_and_requires_win():
    text = GEMMINI.replace("#define TI 2  // row tiles per hardware loop",
                           "#define TI 2  // autocomp: tune TI in 1, 2, 4\n// autocomp: tune require TI >= 2")
    space, _ = space_of("gemmini", "/tmp/k.c", text)
    assert space.names == ["TI"]  # a file that names ranges tunes exactly those
    assert space.tunables[0].values == [1, 2, 4] and space.tunables[0].source == "comment"
    assert [c["TI"] for c in space.valid_configs()] == [2, 4]


def test_code_for_redefines_out_of_span_constants_and_file_for_edits_in_place():
    space, problem = space_of("gemmini", "/tmp/k.c", GEMMINI)
    assert space.code_for(space.baseline()) == problem.code
    code = space.code_for({"TI": 4, "TJ": 2})
    assert code.startswith("#undef TI\n#define TI 4\n") and code.endswith(problem.code)
    new = space.file_for({"TI": 4, "TJ": 1})
    assert "#define TI 4  // row tiles per hardware loop" in new and "#define TJ 1\n" in new
    assert new.count("\n") == GEMMINI.count("\n")
    inside = GEMMINI.replace("  const uint32_t c_acc", "#define TK 2  // autocomp: tune TK in 1, 2\n  const uint32_t c_acc")
    inside = inside.replace("MAT_DIM_K / DIM, 0, 0, 0", "MAT_DIM_K / DIM / TK * TK, 0, 0, 0")
    space, problem = space_of("gemmini", "/tmp/k.c", inside)
    assert space.names == ["TK"] and space.tunables[0].in_span
    code = space.code_for({"TK": 1})
    assert "#define TK 1  //\n" in code and "autocomp" not in code  # candidates may not name the harness


def test_nki_module_constants_defaults_and_rules():
    text = (ROOT / "examples/nki/gemm_tiled.py").read_text()
    space, problem = space_of("nki", str(ROOT / "examples/nki/gemm_tiled.py"), text)
    assert space.names == ["TILE_M", "TILE_N", "TILE_K"]
    assert all(t.kind == "module" and not t.in_span for t in space.tunables)
    base = space.baseline()
    assert space.why_invalid(base) is None
    rules = " | ".join(c.description for c in space.constraints)
    assert "psum tile (TILE_M, TILE_N)" in rules and "2048 bytes" in rules and "moving tile rhs: free size at most 512" in rules
    assert "TILE_K divides K" in rules
    assert "partitions" in space.why_invalid({**base, "TILE_K": 256})  # 256 divides K = 256, but > 128 partitions
    assert "divides" in space.why_invalid({**base, "TILE_N": 512})  # N = 256 (from the original's inputs)
    assert len(space.valid_configs()) >= 50
    code = space.code_for({**base, "TILE_N": 128})
    assert code.startswith("TILE_N = 128\n@nki.jit")
    # a default argument is a tunable inside the span; get_inputs' constants are the problem's
    text2 = text.replace("def gemm_kernel(a_t, b):", "def gemm_kernel(a_t, b, UNROLL=2):").replace(
        "TILE_K = 32  # contraction", "SIZE = 256\nTILE_K = 32  # contraction").replace("(256, 256)", "(SIZE, SIZE)")
    text2 = text2.replace("    K, M = a_t.shape", "    K, M = a_t.shape\n    X = SIZE + UNROLL")
    space, _ = space_of("nki", "/tmp/g.py", text2)
    assert "SIZE" not in space.names and "UNROLL" in space.names
    assert next(t for t in space.tunables if t.name == "UNROLL").in_span


def test_cuda_launch_block_size():
    text = (ROOT / "examples/cuda/row_softmax.cu").read_text()
    space, _ = space_of("cuda", str(ROOT / "examples/cuda/row_softmax.cu"), text)
    assert space.names == ["threads"] and space.tunables[0].kind == "launch"
    assert all(v % 32 == 0 and v <= 1024 for v in space.tunables[0].values)
    assert space.why_invalid({"threads": 48}) and space.why_invalid({"threads": 2048})
    assert space.why_invalid({"threads": 256}) is None
    assert "int threads = 256;" in space.code_for({"threads": 256})
    # a #define'd tile used by the kernel, with a user range
    text2 = text.replace("#include <math.h>", "#include <math.h>\n#define UNROLL 4  // autocomp: tune UNROLL in 1..8")
    text2 = text2.replace("for (int c = 0; c < cols; ++c) m = fmaxf", "for (int c = 0; c < cols / UNROLL * UNROLL; ++c) m = fmaxf")
    space, _ = space_of("cuda", "/tmp/r.cu", text2)
    assert space.names == ["UNROLL"] and space.tunables[0].values == list(range(1, 9))
