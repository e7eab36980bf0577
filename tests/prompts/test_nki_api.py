"""The NKI API text of the prompts (prompts/nki/api/) against the interpreter: every name it
mentions exists in that API style's modules, appears in a probe kernel of that style, and
every probe runs in the interpreter and passes the validator; the pitfalls it states hold."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from autocomp.backends.nki.interp import install
from autocomp.backends.nki.interp.errors import NkiError
from autocomp.backends.nki.interp.install import execute
from autocomp.backends.nki.validate import api_tree, validate_file
from autocomp.prompts import load_pieces, pieces_for_problem

import nki_probes
from promptkit import EXAMPLES, ROOT, api_names

install()
API = ROOT / "prompts" / "nki" / "api"
STYLE_OF = {"common.md": ("new", "old"), "current.md": ("new",), "older.md": ("old",)}
PROBES = {"new": nki_probes.NEW, "old": nki_probes.OLD}
# Older-API calls the `nki` section names as refused (checked below to be refused).
FUNCTIONAL_NEW = {  # the functional forms NKI 2.29 put back into nki.language
    "nl.load": "t = nl.load(a)",
    "nl.store": "nl.store(out, value=x)",
    "nl.load_transpose2d": "t = nl.load_transpose2d(a)",
    "nl.matmul": "t = nl.matmul(x, x, transpose_x=True)",
    "nl.transpose": "t = nl.transpose(x)",
    "nl.where": "t = nl.where(x, x, 0.0)",
    "nl.loop_reduce": "t = nl.loop_reduce(x, op=nl.add, loop_indices=())",
    "nl.sum": "t = nl.sum(x, axis=1)",
    "nl.max": "t = nl.max(x, axis=1)",
    "nl.min": "t = nl.min(x, axis=1)",
    "nl.mean": "t = nl.mean(x, axis=1)",
    "nl.prod": "t = nl.prod(x, axis=1)",
    "nl.exp": "t = nl.exp(x)",
    "nl.static_cast": "t = nl.static_cast(x, nl.bfloat16)",
}


def _module(tmp_path, style):
    path = tmp_path / f"probe_{style}.py"
    path.write_text(PROBES[style])
    spec = importlib.util.spec_from_file_location(f"nki_prompt_probe_{style}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, str(path)


def _resolves(style: str, name: str) -> bool:
    node = api_tree(style)
    module, *rest = name.split(".")
    node = node.children["language" if module == "nl" else "isa"]
    for part in rest:
        if not node.children or part not in node.children:
            return False
        node = node.children[part]
    return True


@pytest.mark.parametrize("section", sorted(STYLE_OF))
def test_every_name_in_the_api_text_exists_and_is_probed(section):
    names = api_names((API / section).read_text())
    assert names, section
    for style in STYLE_OF[section]:
        missing = sorted(n for n in names if not _resolves(style, n))
        assert not missing, f"{section} names what the {style} interpreter lacks: {missing}"
    probe_style = STYLE_OF[section][0]
    if section == "current.md":
        names -= set(FUNCTIONAL_NEW) - {"nl.exp"}
    unprobed = sorted(n for n in names if n + "(" not in PROBES[probe_style] and n not in PROBES[probe_style])
    assert not unprobed, f"{section}: no {probe_style}-style probe uses {unprobed}"


@pytest.mark.parametrize("style", ["new", "old"])
def test_the_api_text_is_complete(style):
    """Every `nl.` / `nisa.` name the interpreter knows in a style is mentioned by the
    sections that style's kernels get (accepted with its use, or named as refused)."""
    import re

    text = "".join((API / s).read_text() for s, styles in STYLE_OF.items() if style in styles)
    tree = api_tree(style)
    unmentioned = sorted(f"{short}.{name}" for module, short in (("language", "nl"), ("isa", "nisa"))
                         for name in (tree.children[module].children or {})
                         if not re.search(r"\b" + re.escape(name) + r"\b", text))
    assert not unmentioned, f"the {style}-style API text never mentions {unmentioned}"


RNG = np.random.default_rng(0)
POS = (np.abs(RNG.standard_normal((128, 512))) + 0.5).astype(np.float32)
A_T = RNG.standard_normal((128, 128)).astype(np.float32)
B = RNG.standard_normal((128, 512)).astype(np.float32)

CASES = {
    "new": [("ops", [POS]), ("matmul", [A_T, B]), ("matmul_explicit", [A_T, B]), ("shapes", [RNG.standard_normal((256, 128)).astype(np.float32)]),
            ("extras", [B]), ("composites", [B]), ("additions", [B])],
    "old": [("ops", [np.concatenate([POS, POS])]), ("matmul", [RNG.standard_normal((256, 128)).astype(np.float32),
                                                              RNG.standard_normal((256, 512)).astype(np.float32)]),
            ("nc_matmul_acc", [A_T, B]), ("masked_tail", [RNG.standard_normal((200, 64)).astype(np.float32)]),
            ("extras", [B])],
}


@pytest.mark.parametrize("style", ["new", "old"])
def test_probes_run_in_the_interpreter_and_pass_the_validator(tmp_path, style):
    mod, path = _module(tmp_path, style)
    text = open(path).read()
    for name, args in CASES[style]:
        assert validate_file(text, name) == [], name
        grid = (2,) if name == "extras" or (style == "old" and name == "ops") else ()
        result = execute(getattr(mod, name), args, kernel_file=path, grid=grid)
        assert result.outputs and result.trace, name
        if name in ("matmul", "matmul_explicit", "nc_matmul_acc") and args[0].shape == (128, 128):
            np.testing.assert_allclose(result.outputs[0], args[0].T.astype(np.float64) @ args[1], rtol=1e-4, atol=1e-3)


def test_the_stale_psum_pitfall_is_real(tmp_path):
    """The API text says nc_matmul's default accumulates into a fully written PSUM tile:
    reusing one tile for two output tiles adds the first tile's sums into the second."""
    mod, path = _module(tmp_path, "new")
    out = execute(mod.stale_psum, [A_T, B], kernel_file=path).outputs[0]
    expect = A_T.T.astype(np.float64) @ B
    np.testing.assert_allclose(out[:, :256], expect[:, :256], rtol=1e-4, atol=1e-3)
    assert not np.allclose(out[:, 256:], expect[:, 256:], rtol=1e-3, atol=1e-2)


@pytest.mark.parametrize("name", sorted(FUNCTIONAL_NEW) + ["mask="])
def test_functional_forms_run_and_masks_are_refused_under_import_nki(tmp_path, name):
    """What the `nki` section says: the functional forms run (NKI 2.29+), `mask=` is refused."""
    line = FUNCTIONAL_NEW.get(name, "nisa.tensor_copy(dst=t, src=x, mask=(nl.arange(128)[:, None] < 64))")
    body = nki_probes.HEADER_NEW + f'''

@nki.jit
def k(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    {line}
    nisa.dma_copy(dst=out, src=x)
    return out
'''
    path = tmp_path / "refused.py"
    path.write_text(body)
    spec = importlib.util.spec_from_file_location("nki_prompt_refused", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if name == "mask=":
        with pytest.raises(NkiError):
            execute(mod.k, [B[:, :128].copy()], kernel_file=str(path))
    else:
        result = execute(mod.k, [B[:, :128].copy()], kernel_file=str(path))
        np.testing.assert_array_equal(result.outputs[0], B[:, :128])


@pytest.mark.parametrize("path", EXAMPLES["nki"])
def test_each_kernel_gets_the_api_of_its_style(path):
    text = open(path).read()
    pieces = pieces_for_problem(load_pieces("nki"), path, {"file": text})
    new = "import nki" in text and "neuronxcc" not in text
    assert ("## The `nki` API" in pieces.description) == new
    assert ("## The older `neuronxcc.nki` API" in pieces.description) == (not new)
    assert "## NKI language reference" in pieces.description


def test_a_file_of_neither_style_gets_both():
    pieces = pieces_for_problem(load_pieces("nki"), "k.py", {"file": "from torch import nn\n"})
    assert "## The `nki` API" in pieces.description and "## The older `neuronxcc.nki` API" in pieces.description


def test_static_range_unrolling_is_not_offered():
    """The estimate gives an unrolled loop the same instructions, so it cannot reward it."""
    assert not any("static_range" in option for option in load_pieces("nki").menu)


_BROADCAST_KERNEL = '''
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def scale_rows(x, row):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    r = nl.load(row)
    wide = r.broadcast_to((128, x.shape[1]))
    nl.store(out, value=nl.multiply(t, wide))
    return out
'''


@pytest.mark.parametrize("width", [512, 1024])
def test_the_broadcast_claim_of_the_hardware_text_holds_in_the_estimate(tmp_path, width):
    """description.md: a partition broadcast is a TensorE matmul into PSUM; wider than one
    PSUM bank (512 fp32 per partition) it costs an extra VectorE copy."""
    from autocomp.backends.nki.cost import estimate
    text = (ROOT / "prompts" / "nki" / "description.md").read_text(encoding="utf-8")
    assert "wider than one PSUM bank (512 fp32 per" in " ".join(text.split())
    path = tmp_path / "bcast.py"
    path.write_text(_BROADCAST_KERNEL)
    spec = importlib.util.spec_from_file_location("nki_prompt_bcast", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    x = np.ones((128, width), np.float32)
    row = np.arange(width, dtype=np.float32)[None, :]
    res = execute(mod.scale_rows, [x, row], kernel_file=str(path))
    np.testing.assert_array_equal(res.outputs[0], x * row)
    est = estimate(res.trace)
    assert est.engines["tensor"].instructions >= 1
    assert est.engines["vector"].instructions == (1 if width == 512 else 2)
