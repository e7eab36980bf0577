"""The allowlist of the NKI language subset: what a candidate file may contain."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from autocomp.backends.nki.detect import _is_nki_decorator, _nki_aliases, find_kernels
from autocomp.backends.nki.validate import validate_file

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples" / "nki").glob("*.py")) + sorted((ROOT / "examples" / "nki" / "steps").glob("*.py"))

HEADER = '''import math
import numpy as np
import nki
import nki.isa as nisa
import nki.language as nl

TILE = 128
DT = nl.float32
'''


def issues(body: str, header: str = HEADER, original: str | None = None) -> list[tuple[int, str]]:
    text = header + "\n\n" + textwrap.dedent(body)
    return [(i.line, i.message) for i in validate_file(text, "k", original)]


def messages(body: str, **kw) -> str:
    return "\n".join(m for _, m in issues(body, **kw))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_shipped_example_passes_as_a_whole_untrusted_file(path):
    text = path.read_text()
    (span,) = find_kernels(text)
    assert validate_file(text, span.name) == []


def _test_kernels():
    """Every @nki.jit kernel written in the NKI tests, in a file with its test module's NKI
    imports (the tests import pytest and helpers too; a candidate file would not)."""
    found = []
    for path in sorted(Path(__file__).parent.glob("test_nki_*.py")):
        text = path.read_text()
        tree = ast.parse(text)
        aliases = _nki_aliases(tree)
        imports = [ast.get_source_segment(text, s) for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom))
                   and any((a.name if isinstance(s, ast.Import) else s.module or "").split(".")[0] in
                           ("nki", "neuronxcc", "numpy", "ml_dtypes") for a in s.names)]
        lines = text.splitlines()
        helpers = [ast.get_source_segment(text, s) for s in tree.body if isinstance(s, ast.FunctionDef)
                   and not s.decorator_list and not s.name.startswith("test")]
        imports += helpers
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and any(_is_nki_decorator(d, aliases) for d in node.decorator_list):
                start = min([node.lineno] + [d.lineno for d in node.decorator_list])
                src = textwrap.dedent("\n".join(lines[start - 1:node.end_lineno]))
                found.append((f"{path.name}:{node.name}:{node.lineno}", "\n\n\n".join(imports + [src]) + "\n", node.name))
    return found


# White-box tests read the interpreter's internals on purpose; closures over a test's
# locals do not exist in a candidate file.
WHITE_BOX = {"test_nki_semantics.py:k:150"}
CLOSURES = {"test_nki_cost.py"}


@pytest.mark.parametrize("case", _test_kernels(), ids=lambda c: c[0])
def test_the_test_suites_kernels_pass(case):
    name, text, fn = case
    if name in WHITE_BOX:
        assert any("private attribute" in i.message for i in validate_file(text, fn))
        return
    found = validate_file(text, fn)
    if name.split(":")[0] in CLOSURES:
        found = [i for i in found if "is not defined" not in i.message]
    assert found == [], [(i.line, i.message) for i in found]


def test_the_subset_a_kernel_may_use():
    assert issues('''
        def helper(t, n=4, dtype=nl.float32, shape=(128, 4)):
            out = nl.ndarray(shape, dtype=dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=out, src=t)
            return out

        @nki.jit(mode="simulation")
        def k(a, b):
            """Docstring."""
            P, F = a.shape
            out = nl.ndarray((P, F), dtype=a.dtype, buffer=nl.shared_hbm)
            tiles = [nl.ndarray((TILE, F), dtype=DT, buffer=nl.sbuf) for _ in range(2)]
            for i, j in enumerate(zip(range(P // TILE), nl.static_range(2))):
                if i > 0 and F >= 4 or not P:
                    pass
                x = tiles[i % 2]
                nisa.dma_copy(dst=x[:, 0:F], src=a[i * TILE:(i + 1) * TILE, :])
                y = helper(x, 2)
                nisa.tensor_tensor(dst=y, data1=y, data2=x, op=np.add)
                x[...] = y
                ix = nl.mgrid[0:128, 0:4]
                n = max(1, min(F, int(math.ceil(F / 2)))) + abs(-1) + len(tiles)
                assert n > 0, f"bad {n}"
            for r in nl.sequential_range(P // nl.tile_size.pmax):
                continue
            if F > 4096:
                raise ValueError("too wide")
            return out
    ''') == []


@pytest.mark.parametrize("body, expected", [
    ("import os\n", "imports inside the kernel"),
    ("x = np\n", "`np` is a module"),
    ("nisa.dma_copy(dst=a, src=nl)\n", "`nl` is a module"),
    ("x = np.asarray(a)\n", "`np.asarray` is not allowed"),
    ("x = np.add(a, b)\n", "computes on the host"),
    ("x = a.__class__\n", "dunder attribute `.__class__`"),
    ("x = a._data\n", "private attribute `._data`"),
    ("x = __builtins__\n", "`__builtins__` is not allowed"),
    ("x = getattr(a, 'shape')\n", "`getattr` is not allowed"),
    ("eval('1')\n", "`eval` is not allowed"),
    ("exec('1')\n", "`exec` is not allowed"),
    ("open('/etc/passwd')\n", "`open` is not allowed"),
    ("globals()\n", "`globals` is not allowed"),
    ("__import__('os')\n", "`__import__` is not allowed"),
    ("global TILE\n", "`global` is not allowed"),
    ("f = lambda: a.__class__\n", "dunder attribute `.__class__`"),  # a lambda's body is held to the rules
    ("ok = isinstance(a, type(a))\n", "`isinstance` may only test against"),
    ("while True:\n    pass\n", "`while` loops are not part"),
    ("try:\n    pass\nexcept Exception:\n    pass\n", "`try` is not allowed"),
    ("with nl.ndarray((1, 1), dtype=DT) as t:\n    pass\n", "`with`"),
    ("@nki.jit\ndef inner():\n    pass\n", "inside a kernel is not allowed"),
    ("class Inner:\n    pass\n", "inside a kernel is not allowed"),
    ("def inner():\n    pass\nx = inner\n", "can only be called, not used as a value"),
    ("def inner(s=[]):\n    pass\n", "default argument"),
    ("def inner():\n    return open('/etc/passwd')\ninner()\n", "`open` is not allowed"),
    ("a.shape = (1, 1)\n", "assigning to an attribute"),
    ("TILE[0] = 1\n", "only tiles held in local variables"),
    ("x = a.tolist()\n", "attribute `.tolist`"),
    ("x = '{0.__class__}'.format(a)\n", "attribute `.format`"),
    ("x = nl.not_an_api\n", "`nl.not_an_api` is not part of the NKI API"),
    ("x = range\n", "`range` can only be called"),
    ("nl = 1\n", "names a module"),
    ("x = chr(65)\n", "`chr` is not defined in the kernel or is not allowed"),  # a builtin outside the subset
    ("x = nl.tile_size\n", "is a module or namespace"),
    ("raise SystemExit(1)\n", "only `raise ValueError"),
    ("x = nki.jit\n", "is a module or namespace"),
])
def test_kernel_constructs_outside_the_subset_are_named_with_their_line(body, expected):
    code = "@nki.jit\ndef k(a, b):\n" + textwrap.indent(body, "    ") + "    return a\n"
    found = issues(code)
    assert any(expected in m for _, m in found), found
    first_body_line = HEADER.count("\n") + 2 + 3
    assert all(line >= first_body_line - 1 for line, _ in found), found


def test_a_local_holding_an_nki_operator_may_be_called():
    """`act = nl.gelu if ... else nl.relu; act(x)`: what a local holds was checked where it was
    assigned (builtins and helpers cannot be taken as values), so calling it reaches nothing a
    direct call could not."""
    assert issues("@nki.jit\ndef k(a, b):\n    act = nl.exp if a.shape[0] > 1 else nl.tanh\n    t = act(a)\n"
                  "    return t\n") == []
    assert any("can only be called" in m for _, m in issues("@nki.jit\ndef k(a, b):\n    f = max\n    f(1, 2)\n"
                                                               "    return a\n"))


def test_helpers_defined_inside_a_kernel_are_checked_and_allowed():
    """A plain `def` inside the kernel (AWS-style index helpers, as in Autocomp's published
    conv1d trajectory), `slice(...)`, `list.append` on a local list and `:=` are Python the
    Neuron compiler traces; the helper's body is held to the kernel's rules."""
    assert issues('''
        @nki.jit
        def k(a, b):
            def _indices(*trips):
                out = []
                colon = slice(None, None, None)
                for n in trips:
                    out.append(nl.arange(n)[colon, None] if n > 1 else 0)
                return out
            i_p, = _indices(n_rows := a.shape[0])
            out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
            return out
    ''') == []


def test_module_level_code_of_a_candidate():
    m = messages('''
        import os
        from subprocess import run
        import nki.language as nl2
        from . import sibling
        X = compute()
        Y = [1, 2]
        Z = {"a": ("float32", (128, 4))}
        W = np.float32
        class C:
            pass
        for i in range(3):
            pass
        if __name__ == "__main__":
            os.system("anything")

        @nki.jit
        def k(a):
            return a
    ''')
    assert "`import os` is not allowed" in m and "`from subprocess import run` is not allowed" in m
    assert "`from . import sibling` is not allowed" in m
    assert "module-level values must be constants" in m  # X = compute()
    assert m.count("module-level values must be constants") == 1  # Y, Z, W are constants
    assert "`class` is not allowed at module level" in m and "`for` is not allowed at module level" in m
    assert "anything" not in m and "`if`" not in m  # the main guard never runs


def test_what_the_kernel_reads_from_module_level_must_be_constant():
    m = messages('''
        CACHE = []
        SHAPE = (128, 4)
        COUNT = SHAPE[0]

        @nki.jit
        def k(a):
            x = SHAPE
            y = COUNT
            z = CACHE
            return a
    ''')
    assert "module-level `CACHE` is not a constant" in m
    assert "module-level `COUNT` is not a constant" in m  # computed at module level: refused
    assert "SHAPE" not in m


def test_defaults_decorators_and_helpers():
    m = messages('''
        def helper(t, memo=[], n=-1, dt=np.float32, s="x", none=None, tup=(1, (2, 3))):
            return t

        def bad_helper(t):
            import os
            return t

        def unused(t, state={}):
            import os

        @some_decorator
        def other(t):
            return t

        @nki.jit
        def k(a):
            helper(a)
            bad_helper(a)
            x = other
            return a
    ''')
    assert "default argument of 'helper' must be an immutable constant" in m
    assert m.count("default argument") == 2  # helper's memo, unused's state (candidate-written defs)
    assert "in `bad_helper` (called from the kernel" in m
    assert "only @nki.jit" in m
    assert "the function `other` can only be called" in m


def test_statements_kept_from_the_original_file_are_trusted_but_functions_are_not():
    original = HEADER + textwrap.dedent('''
        import os
        CACHE = []

        def reference(a):
            return np.asarray(a) * 2

        @nki.jit
        def k(a):
            return a

        if __name__ == "__main__":
            print(os.getcwd())
    ''')
    ok = original.replace("    return a\n", "    x = a.shape\n    return a\n", 1)
    assert validate_file(ok, "k", original) == []
    calls = original.replace("    return a\n", "    x = reference(a)\n    return a\n", 1)
    assert any("in `reference`" in i.message for i in validate_file(calls, "k", original))
    uses_os = original.replace("    return a\n", "    os.system('x')\n    return a\n", 1)
    assert any("`os` is a module outside the NKI API" in i.message for i in validate_file(uses_os, "k", original))
    # Without the original, the same file's `import os` is the candidate's and is refused.
    assert any("`import os` is not allowed" in i.message for i in validate_file(ok, "k"))


def test_both_api_styles_and_the_functional_forms_in_either():
    old = '''import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from neuronxcc.nki.typing import tensor
from torch_neuronx import nki_jit


@nki_jit
def k(a: tensor):
    t = nl.load(a)
    nl.store(a, value=nl.exp(t))
    return a
'''
    assert validate_file(old, "k") == []
    new = "import nki\nimport nki.language as nl\n\n\n@nki.jit\ndef k(a):\n    t = nl.load(a)\n    return a\n"
    assert validate_file(new, "k") == []  # NKI 2.29 put nl.load and the other functional forms back


def test_a_name_defined_nowhere_is_left_to_python():
    """A reference to a helper that exists nowhere, in a branch the trace never takes (AWS's
    conv2d keeps ``reshape_all`` so), compiles; the validator leaves it to a NameError if that
    line runs. Builtins outside the subset stay refused."""
    code = "@nki.jit\ndef k(a, b, opt=None):\n    if opt is not None:\n        a = reshape_all(a)\n    return a\n"
    assert issues(code) == []


def test_host_numpy_for_shapes_dtypes_and_index_arrays():
    """AWS's samples size tiles with np.dtype(...).itemsize and np.ceil, take limits from
    np.finfo and build pooling windows from np.arange: host values, allowed (what they could
    do to a tile is in tests/security: nothing)."""
    assert issues('''
        @nki.jit
        def k(a):
            size = np.dtype(a.dtype).itemsize
            low = np.finfo(np.float32).min + np.iinfo(np.int32).max
            tiles = int(np.ceil(a.shape[0] / TILE)) + int(np.floor(a.shape[1] / 2))
            starts = (np.arange(4, dtype=np.int32) * a.shape[0]) // 4
            return a
        ''') == []
    assert any("`np.cumsum` is not allowed" in m for _, m in issues('''
        @nki.jit
        def k(a):
            x = np.cumsum(a)
            return a
        '''))
