"""Detection and signature parsing of Gemmini kernels (pure Python, no toolchain)."""

from __future__ import annotations

import pytest

from autocomp.backends import get_backend
from autocomp.backends.base import BackendError
from autocomp.backends.gemmini.detect import detect_kernels, find_function
from autocomp.backends.gemmini.signature import eval_dim, parse_signature

GEMM = """\
#include "include/gemmini.h"
#define M 64
#define N (2*DIM)
#define K 48

static void helper(int x) { (void)x; }

/* a tiled weight-stationary GEMM */
void gemm(const elem_t A[M][K], const elem_t B[K][N],
          elem_t C[M][N]) {
  gemmini_config_ld(K);
  for (int i = 0; i < M; i++) {
    const char *s = "{ not a brace }";
    (void)s;
  }
}

int main(void) { return 0; }
"""


def test_detects_kernel_function_with_whole_line_span():
    spans = detect_kernels(GEMM)
    assert [s.name for s in spans] == ["gemm"]
    lines = GEMM.splitlines()
    assert lines[spans[0].start_line].startswith("void gemm(")
    assert lines[spans[0].end_line - 1] == "}"


def test_array_params_count_only_when_file_includes_gemmini():
    text = "void f(int A[4]) { A[0] = 1; }\n"
    assert detect_kernels(text) == []
    assert [s.name for s in detect_kernels('#include "gemmini.h"\n' + text)] == ["f"]


def test_short_name_dialect_is_a_kernel():
    text = "void k(elem_t *a) {\n  mvin(a, 0, 16, 16);\n  fence();\n}\n"
    assert [s.name for s in detect_kernels(text)] == ["k"]


def test_substitute_markers_win():
    text = "int main() {\n  // SUBSTITUTE HERE\n  tiled_matmul_auto(1);\n  // SUBSTITUTE END\n}\n"
    spans = detect_kernels(text)
    assert len(spans) == 1 and (spans[0].start_line, spans[0].end_line) == (2, 3)


def test_half_typed_code_never_raises():
    for cut in range(0, len(GEMM), 7):
        detect_kernels(GEMM[:cut])


def test_signature_roles_types_and_shapes():
    sig = parse_signature(GEMM, find_function(GEMM, "gemm"))
    assert [(p.name, p.ctype, p.role, p.shape) for p in sig.params] == [
        ("A", "elem_t", "input", (64, 48)),
        ("B", "elem_t", "input", (48, 32)),
        ("C", "elem_t", "output", (64, 32)),
    ]


def test_non_const_written_through_mvout_is_output():
    text = (
        '#include "gemmini.h"\n#define N 16\n'
        "void k(elem_t X[N][N], acc_t D[N][N], elem_t Y[N][N]) {\n"
        "  gemmini_mvin(X, 0); gemmini_mvin(D, 1<<31); gemmini_extended_mvout(Y, 0, 16, 16);\n}\n"
    )
    sig = parse_signature(text, find_function(text, "k"))
    assert [p.role for p in sig.params] == ["input", "input", "output"]
    assert sig.params[1].elem_size == 4


@pytest.mark.parametrize(
    "params, words",
    [
        ("elem_t *A, elem_t C[4]", "pointer"),
        ("int n, elem_t C[4]", "not an array"),
        ("elem_t C[][4]", "empty dimension"),
        ("bfloat16 C[4]", "element type"),
        ("void", "no parameters"),
    ],
)
def test_unsupported_signatures_explain_the_fix(params, words):
    text = f'#include "gemmini.h"\nvoid k({params}) {{ gemmini_fence(); }}\n'
    with pytest.raises(BackendError, match=words):
        parse_signature(text, find_function(text, "k"))


def test_dimension_expressions():
    defs = {"A": "(B * 2)", "B": "DIM", "C": "A / 4 + 1"}
    assert eval_dim("A", defs) == 32
    assert eval_dim("C", defs) == 9
    assert eval_dim("UNKNOWN", defs) is None


def test_make_problem_and_hint():
    b = get_backend("gemmini")
    p = b.make_problem("gemm.c", GEMM)
    assert p.name == "gemm" and p.target == "gemmini"
    with pytest.raises(BackendError, match="SUBSTITUTE"):
        b.make_problem("empty.c", "int x;\n")
