"""Static checks on candidate code and kernel detection."""

from __future__ import annotations

from autocomp.backends.nki.detect import api_style, find_kernels
from autocomp.backends.nki.static import check_candidate

FILE = '''import numpy as np
import nki
import nki.language as nl
import nki.isa as nisa


@nki.jit
def k(a):
    return a
'''


def _issues(code: str, file_text: str = FILE) -> list[str]:
    start = file_text.index("@nki.jit")
    new_text = file_text[:start] + code
    line = file_text[:start].count("\n")
    return [i.message for i in check_candidate(new_text, line, code, "k", file_text[start:])]


def test_clean_kernel_passes():
    assert _issues("@nki.jit\ndef k(a):\n    t = nl.ndarray((128, 4), dtype=np.float32, buffer=nl.sbuf)\n    return a\n") == []


def test_forbidden_constructs():
    assert any("getattr" in m for m in _issues("@nki.jit\ndef k(a):\n    return getattr(a, 'x')\n"))
    assert any("private" in m for m in _issues("@nki.jit\ndef k(a):\n    return a._data\n"))
    assert any("host" in m for m in _issues("@nki.jit\ndef k(a):\n    return np.asarray(a)\n"))
    assert any("imports" in m for m in _issues("@nki.jit\ndef k(a):\n    import os\n    return a\n"))
    assert any("signature" in m for m in _issues("@nki.jit\ndef k(a, b):\n    return a\n"))
    assert any("must define" in m for m in _issues("@nki.jit\ndef other(a):\n    return a\n"))
    assert not _issues("@nki.jit\ndef k(a):\n    return nl.load(a)\n")  # (nki.language has it again since NKI 2.29)


def test_both_api_imports_rejected():
    text = FILE.replace("import nki\n", "import nki\nimport neuronxcc.nki.language as onl\n")
    assert any("both" in m for m in _issues("@nki.jit\ndef k(a):\n    return a\n", text))


def test_syntax_error_is_reported_as_syntax():
    code = "@nki.jit\ndef k(a):\n    return (\n"
    start = FILE.index("@nki.jit")
    issues = check_candidate(FILE[:start] + code, FILE[:start].count("\n"), code, "k", FILE[start:])
    assert issues and issues[0].kind == "syntax"


def test_detection_variants():
    text = '''import neuronxcc.nki as nki
from neuronxcc.nki import jit
from torch_neuronx import nki_jit

@nki.jit
def a(x): pass

@nki.jit(mode="simulation")
def b(x): pass

@jit
def c(x): pass

@nki_jit
def d(x): pass

def helper(x): pass
'''
    spans = find_kernels(text)
    assert [s.name for s in spans] == ["a", "b", "c", "d"]
    assert spans[0].start_line == 4 and spans[0].end_line == 6
    assert api_style(text) == {"old"} and api_style(FILE) == {"new"}
    assert find_kernels("def f(:") == []
