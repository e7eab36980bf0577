"""Host-side pieces of the Gemmini backend that need no simulator: static checks, snapshot
comparison, compiler-message mapping, harness text and the ELF symbol reader."""

from __future__ import annotations

import subprocess

import pytest

from autocomp.backends.gemmini.backend import map_compiler_message, summary
from autocomp.backends.gemmini.checks import reject_reason
from autocomp.backends.gemmini.compare import compare_function_runs, first_difference
from autocomp.backends.gemmini.detect import find_function
from autocomp.backends.gemmini.harness import MODES, generate_function_harness
from autocomp.backends.gemmini.signature import parse_signature
from autocomp.model import KernelSpan

KERNEL = """\
#include "gemmini.h"
#define N 16
void k(const elem_t A[N][N], elem_t C[N][N]) {
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) C[i][j] = A[j][i];
}
"""


@pytest.fixture
def sig():
    return parse_signature(KERNEL, find_function(KERNEL, "k"))


@pytest.mark.parametrize(
    "code, words",
    [
        ("void k(const elem_t A[N][N], elem_t C[N][N]) { autocomp_measure_end(); }", "reserved"),
        ('__attribute__((section(".text.x"))) void k(const elem_t A[N][N], elem_t C[N][N]) {}', "section"),
        ('void k(const elem_t A[N][N], elem_t C[N][N]) { asm(".pushsection .x"); }', "section"),
        ("void k(const elem_t A[N][N], elem_t C[N][N]) { extern int tohost; tohost = 1; }", "runtime"),
        ("void other(const elem_t A[N][N], elem_t C[N][N]) {}", "must define"),
        ("void k(const elem_t A[N][N], acc_t C[N][N]) {}", "parameter types"),
        ("void k(const elem_t *A, elem_t C[N][N]) {}", "parameter list changed"),
        ("   \n", "no code"),
        ("__attribute__((constructor)) static void warm(void) {}\nvoid k(const elem_t A[N][N], elem_t C[N][N]) {}", "constructor"),
        ("void k(const elem_t A[N][N], elem_t C[N][N]) { atexit(0); }", "constructor"),
    ],
)
def test_static_rejections(sig, code, words):
    assert words in (reject_reason(code, "k", sig.params) or "")


def test_accepts_same_signature_without_const(sig):
    assert reject_reason("void k(elem_t A[N][N], elem_t C[ N ][N]) { }", "k", sig.params) is None


def _snaps(pre_a, pre_c, post_a, post_c):
    return [{"A": pre_a, "C": pre_c}, {"A": post_a, "C": post_c}]


def test_compare_reports_first_mismatch_with_index_and_values(sig):
    a = bytes(range(256))
    ref = _snaps(a, b"\x00" * 256, a, bytes(256))
    got = bytearray(256)
    got[17] = 0xFF  # element [1][1] becomes -1
    m = compare_function_runs(sig, (7,), MODES, ref, _snaps(a, b"\x00" * 256, a, bytes(got)))
    assert m and "C[1][1]" in m.message and "expected 0, got -1" in m.message and "1 of 256" in m.message


def test_compare_flags_modified_input_and_poison(sig):
    a = bytes(range(256))
    poison = b"\xa5" * 256
    ref = _snaps(a, poison, a, bytes(256))
    changed = bytearray(a)
    changed[3] = 0
    m = compare_function_runs(sig, (1,), MODES, ref, _snaps(a, poison, bytes(changed), bytes(256)))
    assert m and "modified its input" in m.message and "A[0][3]" in m.message
    m = compare_function_runs(sig, (1,), MODES, ref, _snaps(a, poison, a, poison))
    assert m and "never wrote it" in m.message
    m = compare_function_runs(sig, (1,), MODES, ref, _snaps(bytes(256), poison, bytes(256), bytes(256)))
    assert m and "not what the harness wrote" in m.message
    assert compare_function_runs(sig, (1,), MODES, ref, ref) is None


def test_first_difference():
    assert first_difference(b"abc", b"abc") == -1
    assert first_difference(b"x" * 10000 + b"a", b"x" * 10000 + b"b") == 10000


def test_compiler_messages_become_kernel_relative():
    span = KernelSpan("k", "gemmini", 10, 20)
    text = (
        "In file included from harness.c:3:\n"
        "kernel.c:12:5: error: expected ';' before '}' token\n"
        "kernel.c:3:1: note: declared here\n"
        "kernel.c:40:2: error: later\n"
    )
    out = map_compiler_message(text, span, 15, "gemm.c")
    assert "kernel line 2:5: error: expected ';'" in out
    assert "gemm.c:3:1: note" in out
    assert "gemm.c:35:2: error: later" in out  # 40 - 15 candidate lines + 10 original lines
    assert "In file included" not in out


def test_summary_names_the_bottleneck():
    class Sim:
        cycles = 1000
        instructions = 400
        queue_busy = {"load": 900, "execute": 300, "store": 50}
        scratchpad_rows_used = 512
        accumulator_rows_used = 64

    text = summary(Sim())
    assert "1,000 cycles" in text and "load 900 (90% of cycles)" in text and "Busiest queue: load" in text
    assert "512 of 16,384" in text


def test_generated_harness_compiles_and_names_regions(sig, tmp_path):
    """The harness text is valid C against minimal stand-in headers (a test double for
    gemmini.h, used only to check the harness's own C, not any behaviour)."""
    (tmp_path / "gemmini.h").write_text(
        "#ifndef G\n#define G\n#include <stdint.h>\n#define DIM 16\ntypedef int8_t elem_t;\ntypedef int32_t acc_t;\n"
        "static inline void gemmini_fence(void) {}\n#endif\n"
    )
    (tmp_path / "autocomp_harness.h").write_text(
        "#define AUTOCOMP_MEASURE_BEGIN() ((void)0)\n#define AUTOCOMP_MEASURE_END() ((void)0)\n#define AUTOCOMP_SNAPSHOT() ((void)0)\n"
    )
    (tmp_path / "original.c").write_text(KERNEL)
    plan = generate_function_harness(sig, (1, 2, 3))
    assert "extern __typeof__(k) autocomp_kernel_entry;" in plan.source
    (tmp_path / "harness.c").write_text(plan.source)
    r = subprocess.run(
        ["riscv64-unknown-elf-gcc", "-march=rv64gc", "-mabi=lp64d", "--specs=picolibc.specs", "-O2", "-std=gnu99", "-Wall", "-Werror",
         "-I", str(tmp_path), "-c", str(tmp_path / "harness.c"), "-o", str(tmp_path / "h.o")],
        capture_output=True, text=True,
    )
    assert r.returncode == 0, r.stderr
    assert plan.region_symbols == {"A": "autocomp_arr_A", "C": "autocomp_arr_C"}
    assert plan.snapshots_per_run == 6
