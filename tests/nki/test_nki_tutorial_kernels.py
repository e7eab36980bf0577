"""Typical tutorial-style kernels (older and current API) run on the interpreter and match
NumPy: tensor add with nl.mgrid, transpose, single-head attention, fp8 casts."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from nki_testlib import run  # installs the interpreter modules first

import nki
import nki.isa as nisa
import nki.language as nl
import neuronxcc.nki as onki
import neuronxcc.nki.isa as onisa
import neuronxcc.nki.language as onl



@onki.jit
def tensor_add(a, b):
    c = onl.ndarray(a.shape, dtype=a.dtype, buffer=onl.shared_hbm)
    ix = onl.mgrid[0:128, 0:512]
    for m in onl.affine_range(a.shape[0] // 128):
        for n in onl.affine_range(a.shape[1] // 512):
            at = onl.load(a[m * 128 + ix.p, n * 512 + ix.x])
            bt = onl.load(b[m * 128 + ix.p, n * 512 + ix.x])
            onl.store(c[m * 128 + ix.p, n * 512 + ix.x], value=onl.add(at, bt))
    return c


def test_tensor_add_with_mgrid(rng):
    a = rng.standard_normal((256, 1024)).astype(np.float32)
    b = rng.standard_normal((256, 1024)).astype(np.float32)
    np.testing.assert_array_equal(run(tensor_add, a, b).outputs[0], a + b)


@onki.jit
def transpose_2d(x):
    out = onl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=onl.shared_hbm)
    t = onl.load(x)
    onl.store(out, value=onl.copy(onl.transpose(t)))
    u = onl.load_transpose2d(x)  # the slow DMA way gives the same values
    onl.store(out, value=u)
    return out


def test_transposes(rng):
    x = rng.standard_normal((64, 96)).astype(np.float32)
    res = run(transpose_2d, x)
    np.testing.assert_array_equal(res.outputs[0], x.T)
    assert {i.op for i in res.trace} >= {"nc_transpose", "dma_transpose"}


@onki.jit
def attention(q_t, k_t, v):
    # q_t: (d, 128), k_t: (d, S), v: (S, d); out = softmax(q @ k.T) @ v
    d, sq = q_t.shape
    s = k_t.shape[1]
    out = onl.ndarray((sq, d), dtype=onl.float32, buffer=onl.shared_hbm)
    qt = onl.load(q_t)
    kt = onl.load(k_t)
    scores = onl.copy(onl.matmul(qt, kt, transpose_x=True))  # (128, S) in SBUF
    neg_max = onisa.tensor_reduce(onl.maximum, scores, axis=1, negate=True, keepdims=True)
    rowsum = onl.ndarray((sq, 1), dtype=onl.float32, buffer=onl.sbuf)
    probs = onisa.activation_reduce(onl.exp, scores, reduce_op=onl.add, reduce_res=rowsum, bias=neg_max)
    acc = onl.zeros((sq, d), dtype=onl.float32, buffer=onl.psum)
    for j in onl.affine_range(s // 128):
        p_t = onl.copy(onl.transpose(probs[:, j * 128:(j + 1) * 128]))  # (keys, queries)
        vt = onl.load(v[j * 128:(j + 1) * 128, :])
        acc += onisa.nc_matmul(p_t, vt)
    res = onisa.tensor_scalar(acc, np.multiply, onl.reciprocal(rowsum))
    onl.store(out, value=res)
    return out


def test_single_head_attention(rng):
    d, sq, s = 64, 128, 512
    q = rng.standard_normal((sq, d)).astype(np.float32)
    k = rng.standard_normal((s, d)).astype(np.float32)
    v = rng.standard_normal((s, d)).astype(np.float32)
    out = run(attention, q.T.copy(), k.T.copy(), v).outputs[0]
    sc = q @ k.T
    p = np.exp(sc - sc.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out, (p / p.sum(axis=1, keepdims=True)) @ v, rtol=2e-4, atol=2e-5)


@nki.jit
def fp8_roundtrip(a):
    out = nl.ndarray(a.shape, dtype=nl.float8_e4m3, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    f = nl.ndarray(a.shape, dtype=nl.float8_e4m3, buffer=nl.sbuf)
    nisa.activation(dst=f, op=nl.copy, data=t)
    nisa.dma_copy(dst=out, src=f)
    return out


def test_fp8_rounding_matches_ml_dtypes(rng):
    a = rng.standard_normal((16, 32)).astype(np.float32)
    out = run(fp8_roundtrip, a).outputs[0]
    assert out.dtype == np.dtype(ml_dtypes.float8_e4m3fn)
    np.testing.assert_array_equal(out.view(np.uint8), a.astype(ml_dtypes.float8_e4m3fn).view(np.uint8))
