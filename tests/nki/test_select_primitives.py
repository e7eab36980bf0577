"""``nisa.range_select`` (the flash-attention mask with its row maximum) and
``nisa.select_reduce`` in both API styles, here and through the kernel process, against
NumPy, with ``reduce_cmd=reduce`` continuing an earlier maximum; what they refuse."""

from __future__ import annotations

import numpy as np
import pytest

from nki_testlib import install, load_module, run_both_ways

from autocomp.backends.nki.interp.errors import NkiError
from autocomp.backends.nki.interp.install import execute

NEW = '''import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def causal_block(s, lo, hi):
    # keep columns j with lo[p] <= j + 128 < hi[p]; row max over two blocks
    out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    mx = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.sbuf)
    b0 = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    b1 = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=s)
    nisa.dma_copy(dst=b0, src=lo)
    nisa.dma_copy(dst=b1, src=hi)
    y = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.sbuf)
    m = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.range_select(dst=y[:, 0:128], on_true_tile=x[:, 0:128], comp_op0=nl.greater_equal, comp_op1=nl.less,
                      bound0=b0, bound1=b1, reduce_cmd=nisa.reduce_cmd.reset_reduce, reduce_res=m,
                      reduce_op=nl.maximum, range_start=0)
    nisa.range_select(dst=y[:, 128:256], on_true_tile=x[:, 128:256], comp_op0=nl.greater_equal, comp_op1=nl.less,
                      bound0=b0, bound1=b1, reduce_cmd=nisa.reduce_cmd.reduce, reduce_res=m,
                      reduce_op=nl.maximum, range_start=128)
    nisa.dma_copy(dst=out, src=y)
    nisa.dma_copy(dst=mx, src=m)
    return out, mx


@nki.jit
def pick(a, p):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    mx = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    pr = nl.ndarray((128, 64), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    nisa.dma_copy(dst=pr, src=p)
    y = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    m = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.select_reduce(dst=y, predicate=pr, on_true=x, on_false=-5.0, reduce_res=m, reduce_op=nl.maximum)
    nisa.dma_copy(dst=out, src=y)
    nisa.dma_copy(dst=mx, src=m)
    return out, mx
'''

OLD = '''import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def masked(s, lo, hi):
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.load(s)
    y = nisa.range_select(on_true_tile=x, comp_op0=nl.greater_equal, comp_op1=nl.less, bound0=nl.load(lo),
                          bound1=nl.load(hi), on_false_value=0.0)
    nl.store(out, value=y)
    return out


@nki.jit
def pick_old(a, p):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.load(a)
    y = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.select_reduce(dst=y, predicate=nl.load(p), on_true=x, on_false=0.0, reverse_pred=True)
    nl.store(out, value=y)
    return out


@nki.jit
def float_predicate(a):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.load(a)
    y = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.select_reduce(dst=y, predicate=x, on_true=x, on_false=0.0)
    nl.store(out, value=y)
    return out
'''

RNG = np.random.default_rng(0)


@pytest.fixture(scope="module")
def modules(tmp_path_factory):
    install()
    d = tmp_path_factory.mktemp("select")
    return load_module(d, "select_new", NEW), load_module(d, "select_old", OLD)


def _bounds():
    lo = RNG.integers(0, 200, (128, 1)).astype(np.float32)
    return lo, lo + RNG.integers(1, 100, (128, 1)).astype(np.float32)


def test_range_select_masks_and_continues_the_row_maximum(modules):
    (mod, path), _ = modules
    s = RNG.standard_normal((128, 256)).astype(np.float32)
    lo, hi = _bounds()
    res = run_both_ways(path, mod, "causal_block", [s, lo, hi])
    j = np.arange(256)[None, :]
    keep = (j >= lo) & (j < hi)
    y = np.where(keep, s, np.finfo(np.float32).min)
    np.testing.assert_array_equal(res.outputs[0], y)
    np.testing.assert_array_equal(res.outputs[1], y.max(1, keepdims=True))  # across both blocks


def test_select_reduce_with_a_scalar_fallback(modules):
    (mod, path), _ = modules
    a = RNG.standard_normal((128, 64)).astype(np.float32)
    p = RNG.integers(0, 2, (128, 64)).astype(np.uint8)
    res = run_both_ways(path, mod, "pick", [a, p])
    y = np.where(p != 0, a, np.float32(-5.0))
    np.testing.assert_array_equal(res.outputs[0], y)
    np.testing.assert_array_equal(res.outputs[1], y.max(1, keepdims=True))


def test_older_api_forms(modules):
    _, (mod, path) = modules
    s = RNG.standard_normal((128, 128)).astype(np.float32)
    lo, hi = _bounds()
    res = run_both_ways(path, mod, "masked", [s, lo, hi])
    j = np.arange(128)[None, :]
    np.testing.assert_array_equal(res.outputs[0], np.where((j >= lo) & (j < hi), s, np.float32(0.0)))
    a = RNG.standard_normal((128, 64)).astype(np.float32)
    p = RNG.integers(0, 2, (128, 64)).astype(np.uint8)
    res = run_both_ways(path, mod, "pick_old", [a, p])
    np.testing.assert_array_equal(res.outputs[0], np.where(p == 0, a, np.float32(0.0)))


def test_a_float_predicate_is_refused(modules):
    _, (mod, path) = modules
    with pytest.raises(NkiError, match="predicate must hold integers"):
        execute(mod.float_predicate, [np.ones((128, 64), np.float32)], kernel_file=path)


ACCUMULATE = '''import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def running_sum(a):
    # NKI 2.31+: reduce_cmd=reduce continues the sum, reduce_init seeds it, negate flips it
    out = nl.ndarray((128, 3), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    y = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    r = nl.ndarray((128, 3), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_reduce(dst=y, data=x, op0=nl.multiply, operand0=1.0, reduce_op=nl.add, reduce_res=r[:, 0:1],
                              reduce_cmd=nisa.reduce_cmd.reset_reduce, reduce_init=10.0)
    nisa.tensor_scalar_reduce(dst=y, data=x, op0=nl.multiply, operand0=2.0, reduce_op=nl.add, reduce_res=r[:, 0:1],
                              reduce_cmd=nisa.reduce_cmd.reduce)
    nisa.tensor_scalar_reduce(dst=y, data=x, op0=nl.add, operand0=0.0, reduce_op=nl.add, reduce_res=r[:, 1:2],
                              reduce_res_negate=True)
    nisa.tensor_scalar_reduce(dst=y, data=x, op0=nl.add, operand0=0.0, reduce_op=nl.maximum, reduce_res=r[:, 2:3])
    nisa.dma_copy(dst=out, src=r)
    return out
'''


def test_tensor_scalar_reduce_accumulator_controls(tmp_path):
    install()
    mod, path = load_module(tmp_path, "accumulate", ACCUMULATE)
    a = RNG.standard_normal((128, 64)).astype(np.float32)
    res = run_both_ways(path, mod, "running_sum", [a])
    s = a.astype(np.float64).sum(1)
    np.testing.assert_allclose(res.outputs[0][:, 0], 10.0 + s + 2 * s, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(res.outputs[0][:, 1], -s, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(res.outputs[0][:, 2], a.max(1))


EXPONENTIAL = '''import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def softmax_rows(a):
    # the flash-attention step: row max, exp(x - max) with its row sums (NKI 2.31+, trn3)
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    m = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=m, op=nl.maximum, data=x, axis=1)
    e = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    s = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.exponential(dst=e, src=x, max_value=m, reduce_res=s, reduce_cmd=nisa.reduce_cmd.reset_reduce)
    nisa.tensor_scalar(dst=e, data=e, op0=nl.divide, operand0=s)
    nisa.dma_copy(dst=out, src=e)
    return out
'''


def test_exponential_with_row_sums(tmp_path):
    install()
    mod, path = load_module(tmp_path, "exponential", EXPONENTIAL)
    a = RNG.standard_normal((128, 64)).astype(np.float32)
    res = run_both_ways(path, mod, "softmax_rows", [a])
    e = np.exp(a.astype(np.float64) - a.max(1, keepdims=True))
    np.testing.assert_allclose(res.outputs[0], e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
    assert any(i.op == "exponential" and i.engine == "vector" for i in res.trace)


SHUFFLE = '''import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def shuffle(a):
    # reverse the partitions of each quadrant of 32, leave partition 5 of each as it is; in place
    out = nl.ndarray((128, 16), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 16), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    lanes = [31 - i for i in range(32)]
    lanes[5] = 255
    nisa.nc_stream_shuffle(dst=t, src=t, shuffle_mask=lanes)
    nisa.dma_copy(dst=out, src=t)
    return out
'''

SHUFFLE_OLD = '''import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def shuffle_old(a):
    out = nl.ndarray((64, 16), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    d = nl.ndarray((64, 16), dtype=nl.float32, buffer=nl.sbuf)
    nisa.nc_stream_shuffle(t, d, [0] * 32)
    nl.store(out, value=d)
    return out


@nki.jit
def bad_lanes(a):
    out = nl.ndarray((64, 16), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    nisa.nc_stream_shuffle(t, t, [40] * 32)
    nl.store(out, value=t)
    return out
'''


def test_nc_stream_shuffle_moves_partitions_within_quadrants(tmp_path):
    install()
    mod, path = load_module(tmp_path, "shuffle", SHUFFLE)
    a = RNG.standard_normal((128, 16)).astype(np.float32)
    res = run_both_ways(path, mod, "shuffle", [a])
    lanes = np.array([31 - i for i in range(32)])
    rows = np.concatenate([q * 32 + lanes for q in range(4)])
    expect = a[rows]
    for q in range(4):
        expect[q * 32 + 5] = a[q * 32 + 5]
    np.testing.assert_array_equal(res.outputs[0], expect)
    old, old_path = load_module(tmp_path, "shuffle_old", SHUFFLE_OLD)
    b = RNG.standard_normal((64, 16)).astype(np.float32)
    res = run_both_ways(old_path, old, "shuffle_old", [b])
    np.testing.assert_array_equal(res.outputs[0], np.concatenate([np.tile(b[0], (32, 1)), np.tile(b[32], (32, 1))]))
    with pytest.raises(NkiError, match="32 partition numbers"):
        execute(old.bad_lanes, [b], kernel_file=old_path)
