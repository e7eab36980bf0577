"""``nisa.tensor_copy_predicated`` in both API styles: a tile predicate (non-zero is true), a
causal comparison of index expressions as the predicate (Autocomp's published SD-attention
trajectory writes one), a scalar source, ``reverse_pred``; what it refuses; its VectorE cost.
Each kernel runs here and through the kernel process (same trace, same outputs) and is checked
against NumPy."""

from __future__ import annotations


import numpy as np
import pytest

from nki_testlib import install, load_module, run_both_ways

from autocomp.backends.nki.cost import vector_elements
from autocomp.backends.nki.interp.errors import NkiError
from autocomp.backends.nki.interp.install import execute

OLD = '''\
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def causal_copy(x):
    # the published SD-attention step's form: src in PSUM, predicate an index comparison
    out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    ip, jf = nl.mgrid[0:128, 0:128]
    buf = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.sbuf)
    buf[...] = -9984.0
    for j in nl.affine_range(2):
        ps = nl.zeros((128, 128), dtype=nl.float32, buffer=nl.psum)
        ps[...] += nisa.nc_matmul(nl.load(x[:, 0:128]), nl.load(x[:, j * 128:(j + 1) * 128]))
        nisa.tensor_copy_predicated(src=ps[ip, jf], dst=buf[ip, j * 128 + jf], predicate=(ip >= j * 128 + jf))
    nl.store(out, value=buf)
    return out


@nki.jit
def tile_predicate(x, p):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    dst = nl.load(x)
    pred = nl.load(p)
    nisa.tensor_copy_predicated(src=7.0, dst=dst, predicate=pred)
    nisa.tensor_copy_predicated(src=nl.multiply(dst, 2.0), dst=dst, predicate=pred, reverse_pred=True)
    nl.store(out, value=dst)
    return out
'''

NEW = '''\
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def new_style(x, p):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    dst = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    src = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    pred = nl.ndarray(p.shape, dtype=p.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=dst, src=x)
    nisa.dma_copy(dst=pred, src=p)
    nisa.tensor_scalar(dst=src, data=dst, op0=nl.add, operand0=1.0)
    nisa.tensor_copy_predicated(dst, src, pred)
    nisa.dma_copy(dst=out, src=dst)
    return out
'''


def _module(tmp_path, name, text):
    install()
    return load_module(tmp_path, name, text)


_both_ways = run_both_ways


@pytest.fixture(scope="module")
def old(tmp_path_factory):
    return _module(tmp_path_factory.mktemp("pred_old"), "pred_old", OLD)


def test_causal_comparison_predicate_with_src_in_psum(old):
    mod, path = old
    x = np.random.default_rng(0).standard_normal((128, 256)).astype(np.float32)
    res = _both_ways(path, mod, "causal_copy", [x])
    qk = x[:, 0:128].T @ x  # (128, 256): stationary.T @ moving per 128-column block
    rows, cols = np.arange(128)[:, None], np.arange(256)[None, :]
    expect = np.where(rows >= cols, qk, np.float32(-9984.0))
    np.testing.assert_allclose(res.outputs[0], expect, rtol=1e-4, atol=1e-3)
    ops = [i for i in res.trace if i.op == "tensor_copy_predicated"]
    assert len(ops) == 2 and all(i.engine == "vector" for i in ops)


def test_tile_predicate_scalar_source_and_reverse_pred(old):
    mod, path = old
    rng = np.random.default_rng(1)
    x = rng.standard_normal((128, 64)).astype(np.float32)
    p = (rng.integers(0, 3, (128, 64)) * (rng.random((128, 64)) < 0.5)).astype(np.uint8)  # 0, 1 or 2
    res = _both_ways(path, mod, "tile_predicate", [x, p])
    first = np.where(p != 0, np.float32(7.0), x)
    np.testing.assert_array_equal(res.outputs[0], np.where(p == 0, 2 * first, first))


def test_new_api_positional_form(tmp_path):
    mod, path = _module(tmp_path, "pred_new", NEW)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((128, 32)).astype(np.float32)
    p = rng.integers(0, 2, (128, 32)).astype(np.uint32)
    res = _both_ways(path, mod, "new_style", [x, p])
    np.testing.assert_array_equal(res.outputs[0], np.where(p != 0, x + 1, x))


@pytest.mark.parametrize("body, message", [
    ("pred = nl.load(x)\n    nisa.tensor_copy_predicated(src=dst, dst=dst, predicate=pred)", "integers"),
    ("pred = nl.load(p)\n    nisa.tensor_copy_predicated(src=dst[:, 0:32], dst=dst, predicate=pred)", "same partitions"),
    ("pred = nl.load(p)\n    nisa.tensor_copy_predicated(src='x', dst=dst, predicate=pred)", "tile or a number"),
    ("nisa.tensor_copy_predicated(src=1.0, dst=dst, predicate=1.5)", "comparison"),
    ("pp = nl.copy(nl.load(p), dtype=nl.uint8)\n    ps = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.psum)\n"
     "    pq = nl.zeros((128, 64), dtype=nl.uint8, buffer=nl.psum)\n    pq[...] = nl.copy(pp)\n"
     "    ps[...] = nl.copy(dst)\n    nisa.tensor_copy_predicated(src=ps, dst=dst, predicate=pq)", "both in PSUM"),
])
def test_what_it_refuses(tmp_path, body, message):
    text = OLD.split("@nki.jit")[0] + (
        "@nki.jit\ndef bad(x, p):\n    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)\n"
        f"    dst = nl.load(x)\n    {body}\n    nl.store(out, value=dst)\n    return out\n")
    mod, path = _module(tmp_path, "pred_bad", text)
    x = np.ones((128, 64), np.float32)
    p = np.ones((128, 64), np.uint8)
    with pytest.raises(NkiError, match=message):
        execute(mod.bad, [x, p], kernel_file=path)


def test_cost_is_two_passes_in_sbuf_one_with_an_operand_in_psum(old):
    mod, path = old
    x = np.ones((128, 256), np.float32)
    res = execute(mod.causal_copy, [x], kernel_file=path)
    ins = next(i for i in res.trace if i.op == "tensor_copy_predicated")
    psum_ids = {ins.reads[0][0]}
    assert vector_elements(ins, psum_ids) == ins.free
    assert vector_elements(ins, set()) == 2 * ins.free
