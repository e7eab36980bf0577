"""The shared C/C++ scanner used by the CUDA and Gemmini backends."""

from __future__ import annotations

import random

from autocomp.backends import cscan

SOURCE = """\
#include <stdio.h>
#define ADD(a, b) \\
    ((a) + (b))
// a comment with { braces } and f(x) {
static const char *msg = "not { a } function()";

/* block comment
   void fake(int x) { } */
static void
scale(float *y,
      const float *x,  // trailing comment (
      int n)
{
    for (int i = 0; i < n; i++) y[i] = 2.0f * x[i];
}

int main(void) { return 0; }
"""


def test_mask_blanks_comments_literals_and_preprocessor_keeping_offsets():
    masked = cscan.mask(SOURCE)
    assert len(masked) == len(SOURCE)
    assert [i for i, c in enumerate(masked) if c == "\n"] == [i for i, c in enumerate(SOURCE) if c == "\n"]
    for gone in ("#include", "ADD", "((a) + (b))", "comment", "not { a }", "fake", '"'):
        assert gone not in masked
    # code stays at its original offsets
    for kept in ("static const char *msg =", "scale(float *y,", "int main(void)"):
        assert masked.index(kept) == SOURCE.index(kept)
    assert cscan.mask("char c = '}'; // x\n") == "char c =    ;     \n"


def test_multiline_signature_found_with_line_span():
    fns = cscan.find_functions(SOURCE)
    assert [f.name for f in fns] == ["scale", "main"]
    scale = fns[0]
    assert cscan.line_of(SOURCE, scale.start) == 8  # "static void"
    assert cscan.line_of(SOURCE, scale.body_end - 1) == 14  # the closing brace
    assert SOURCE[scale.body_start] == "{" and SOURCE[scale.body_end - 1] == "}"
    clean = cscan.mask(SOURCE)
    params = [p.split()[-1].lstrip("*") for p in cscan.split_top_level(" ".join(scale.params(clean).split()))]
    assert params == ["y", "x", "n"]
    assert scale.qualifiers.split() == ["static", "void"] and scale.is_host
    index = cscan.LineIndex(SOURCE)
    assert [index.line(o) for o in (scale.start, scale.body_end - 1)] == [8, 14]


def test_cxx_mode_kernels_templates_and_namespaces():
    src = (
        "namespace k {\n"
        "template <int N>\n"
        "__global__ void add(float* y, const float* x) { y[0] += x[0]; }\n"
        "}\n"
        'extern "C" {\n'
        "__device__ float sq(float v) { return v * v; }\n"
        "}\n"
        "void launch(std::pair<int, int> p, float* y = nullptr) { k::add<4><<<1, 1>>>(y, y); }\n"
    )
    fns = cscan.find_functions(src, cxx=True)
    assert [(f.name, f.is_global, f.is_device, f.is_host) for f in fns] == [
        ("add", True, False, False),
        ("sq", False, True, False),
        ("launch", False, False, True),
    ]
    # C mode does not look inside namespace/extern blocks
    assert [f.name for f in cscan.find_functions(src)] == ["launch"]
    clean = cscan.mask(src)
    assert cscan.split_params(fns[2].params(clean)) == [("std::pair<int, int>", "p"), ("float*", "y")]


def test_unclosed_body_is_reported_and_ends_the_scan():
    src = "int a(void) { return 1; }\nvoid b(int x) {\n  if (x) {\n"
    fns = cscan.find_functions(src)
    assert [(f.name, f.closed) for f in fns] == [("a", True), ("b", False)]
    assert fns[1].body_end == len(src)
    assert [f.name for f in cscan.find_functions(src, closed_only=True)] == ["a"]


def test_half_typed_code_never_raises():
    rng = random.Random(1234)
    pieces = ["{", "}", "(", ")", ";", '"', "'", "/*", "*/", "//", "\n", "#", "\\", "=", "<", ">", "::",
              "int ", "f", "__global__ ", "namespace ", "extern ", "const ", "[", "]", " "]
    samples = [SOURCE[:n] for n in range(0, len(SOURCE), 7)]
    samples += ["".join(rng.choice(pieces) for _ in range(rng.randrange(60))) for _ in range(400)]
    for text in samples:
        assert len(cscan.mask(text)) == len(text)
        for cxx in (False, True):
            for f in cscan.find_functions(text, cxx=cxx):
                assert 0 <= f.start <= f.params_start <= f.params_end < f.body_start < f.body_end <= len(text)
        cscan.find_global_arrays(text)
        cscan.split_params(text)
        cscan.code_start_line(text)
        cscan.parse_header(text, cxx=True)


def test_global_arrays_and_code_start():
    src = (
        "// header\n#include <stdint.h>\n\n"
        "static int8_t A[4][4] row_align(1);\n"
        "int32_t C[4] = {1, 2, 3, 4};\n"
        "extern int E[3];\n"
        "void f(int a[3]);\n"
        "int main(void) { int local[2]; return 0; }\n"
    )
    assert [g.name for g in cscan.find_global_arrays(src)] == ["A", "C"]
    assert cscan.code_start_line(src) == 3
