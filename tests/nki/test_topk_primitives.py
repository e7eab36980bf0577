"""The VectorE top-k primitives real MoE-router and sampling kernels use: ``nisa.max8``,
``nisa.nc_find_index8`` and ``nisa.nc_match_replace8``, in both API styles, here and through
the kernel process, against NumPy, including the documented pairing of repeated values with
their occurrences and what they refuse."""

from __future__ import annotations

import numpy as np
import pytest

from nki_testlib import install, load_module, run_both_ways

from autocomp.backends.nki.cost import vector_elements
from autocomp.backends.nki.interp.errors import NkiError
from autocomp.backends.nki.interp.install import execute

NEW = '''import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def top16(x):
    # two rounds of max8 / find_index8 / match_replace8: the 16 largest values and positions
    vals = nl.ndarray((128, 16), dtype=nl.float32, buffer=nl.shared_hbm)
    idxs = nl.ndarray((128, 16), dtype=nl.uint32, buffer=nl.shared_hbm)
    work = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=work, src=x)
    m = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
    ix = nl.ndarray((128, 8), dtype=nl.uint32, buffer=nl.sbuf)
    for r in nl.sequential_range(2):
        nisa.max8(dst=m, src=work)
        nisa.nc_find_index8(dst=ix, data=work, vals=m)
        nisa.nc_match_replace8(dst=work, data=work, vals=m, imm=-1e30)
        nisa.dma_copy(dst=vals[:, nl.ds(r * 8, 8)], src=m)
        nisa.dma_copy(dst=idxs[:, nl.ds(r * 8, 8)], src=ix)
    return vals, idxs


@nki.jit
def duplicates(x, v):
    found = nl.ndarray((128, 8), dtype=nl.uint32, buffer=nl.shared_hbm)
    replaced_at = nl.ndarray((128, 8), dtype=nl.uint32, buffer=nl.shared_hbm)
    d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    w = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=d, src=x)
    nisa.dma_copy(dst=w, src=v)
    a = nl.ndarray((128, 8), dtype=nl.uint32, buffer=nl.sbuf)
    b = nl.ndarray((128, 8), dtype=nl.uint32, buffer=nl.sbuf)
    r = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.nc_find_index8(dst=a, data=d, vals=w)
    nisa.nc_match_replace8(dst=r, data=d, vals=w, imm=0.0, dst_idx=b)
    nisa.dma_copy(dst=found, src=a)
    nisa.dma_copy(dst=replaced_at, src=b)
    return found, replaced_at
'''

OLD = '''import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def top8(x):
    vals = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    idxs = nl.ndarray((128, 8), dtype=nl.uint32, buffer=nl.shared_hbm)
    rest = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    m = nisa.max8(src=t)
    ix = nisa.nc_find_index8(data=t, vals=m)
    r = nisa.nc_match_replace8(data=t, vals=m, imm=0.0)
    nl.store(vals, value=m)
    nl.store(idxs, value=ix)
    nl.store(rest, value=r)
    return vals, idxs, rest


@nki.jit
def too_few(x):
    out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x[:, 0:4])
    nl.store(out, value=nisa.max8(src=t))
    return out
'''


def _distinct(rng, shape):
    """Values with no ties (a permutation per row), so the expected positions are unique."""
    return np.stack([rng.permutation(shape[1]) for _ in range(shape[0])]).astype(np.float32) - shape[1] / 2


@pytest.fixture(scope="module")
def modules(tmp_path_factory):
    install()
    d = tmp_path_factory.mktemp("topk")
    return load_module(d, "topk_new", NEW), load_module(d, "topk_old", OLD)


def test_top16_by_rounds_of_max8(modules):
    (mod, path), _ = modules
    x = _distinct(np.random.default_rng(0), (128, 300))
    res = run_both_ways(path, mod, "top16", [x])
    order = np.argsort(-x, axis=1)[:, :16]
    np.testing.assert_array_equal(res.outputs[0], np.take_along_axis(x, order, 1))
    np.testing.assert_array_equal(res.outputs[1], order.astype(np.uint32))
    assert [i.op for i in res.trace].count("max8") == 2


def test_repeated_values_take_successive_occurrences_as_documented(modules):
    (mod, path), _ = modules
    row = np.array([1, 2, 3, 4] + [8] * 7 + [0] * 5, np.float32)
    x = np.tile(row, (128, 1))
    v = np.tile(np.array([3, 8, 8, 8, 8, 8, 8, 8], np.float32), (128, 1))
    res = run_both_ways(path, mod, "duplicates", [x, v])
    assert res.outputs[0][0].tolist() == [2, 4, 5, 6, 7, 8, 9, 10]  # find_index8: ascending
    assert res.outputs[1][0].tolist() == [2, 10, 9, 8, 7, 6, 5, 4]  # match_replace8: descending


def test_a_value_not_present_gives_the_all_ones_sentinel(modules):
    (mod, path), _ = modules
    x = np.tile(np.arange(16, dtype=np.float32), (128, 1))
    v = np.tile(np.array([3, 99, 5, 6, 7, 8, 9, 10], np.float32), (128, 1))
    res = execute(mod.duplicates, [x, v], kernel_file=path)
    assert res.outputs[0][0, 1] == 0xFFFFFFFF and res.outputs[0][0, 0] == 3


def test_older_api_forms_return_tiles(modules):
    _, (mod, path) = modules
    x = _distinct(np.random.default_rng(1), (128, 64))
    res = run_both_ways(path, mod, "top8", [x])
    order = np.argsort(-x, axis=1)[:, :8]
    np.testing.assert_array_equal(res.outputs[0], np.take_along_axis(x, order, 1))
    np.testing.assert_array_equal(res.outputs[1], order.astype(np.uint32))
    rest = x.copy()
    np.put_along_axis(rest, order, 0.0, 1)
    np.testing.assert_array_equal(res.outputs[2], rest)
    ins = next(i for i in res.trace if i.op == "max8")
    assert ins.engine == "vector" and vector_elements(ins) == 64  # N VectorE cycles


def test_fewer_than_eight_elements_is_refused(modules):
    _, (mod, path) = modules
    with pytest.raises(NkiError, match="8 to 16384"):
        execute(mod.too_few, [np.ones((128, 64), np.float32)], kernel_file=path)
