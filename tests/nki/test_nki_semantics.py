"""Each interpreted instruction against a NumPy reference."""

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


BF16 = ml_dtypes.bfloat16


def _load(src, shape, dtype=nl.float32):
    t = nl.ndarray(shape, dtype=dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=src)
    return t


@nki.jit
def matmul_k(s, m):
    out = nl.ndarray((s.shape[1], m.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    st = _load(s, s.shape, s.dtype)
    mt = _load(m, m.shape, m.dtype)
    ps = nl.ndarray((s.shape[1], m.shape[1]), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=st, moving=mt, accumulate=False)
    sb = nl.ndarray(ps.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=sb, src=ps)
    nisa.dma_copy(dst=out, src=sb)
    return out


def test_nc_matmul_is_stationary_transposed_times_moving(rng):
    s = rng.standard_normal((128, 96)).astype(np.float32)
    m = rng.standard_normal((128, 320)).astype(np.float32)
    res = run(matmul_k, s, m)
    np.testing.assert_allclose(res.outputs[0], s.T @ m, rtol=1e-5, atol=1e-4)
    (mm,) = [i for i in res.trace if i.op == "nc_matmul"]
    assert (mm.engine, mm.partitions, mm.free, mm.info["stationary_free"]) == ("tensor", 128, 320, 96)


def test_nc_matmul_bf16_accumulates_in_fp32(rng):
    s = rng.standard_normal((64, 32)).astype(BF16)
    m = rng.standard_normal((64, 16)).astype(BF16)
    out = run(matmul_k, s, m).outputs[0]
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, s.astype(np.float32).T @ m.astype(np.float32), rtol=1e-5, atol=1e-5)


@nki.jit
def elementwise_k(a, b):
    out = nl.ndarray((6,) + a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    at = _load(a, a.shape)
    bt = _load(b, b.shape)
    col = nl.ndarray((a.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=col, op=nl.maximum, data=at, axis=1, negate=True)
    r = [nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf) for _ in range(6)]
    nisa.tensor_tensor(dst=r[0], data1=at, data2=bt, op=nl.subtract)
    nisa.tensor_scalar(dst=r[1], data=at, op0=nl.subtract, operand0=2.0, reverse0=True, op1=nl.multiply, operand1=col)
    nisa.activation(dst=r[2], op=nl.exp, data=at, bias=col, scale=0.5)
    nisa.scalar_tensor_tensor(dst=r[3], data=at, op0=nl.multiply, operand0=col, op1=nl.add, operand1=bt)
    nisa.tensor_copy(dst=r[4], src=at)
    nisa.reciprocal(dst=r[5], data=bt)
    for i in range(6):
        nisa.dma_copy(dst=out[i], src=r[i])
    return out


def test_vector_and_scalar_instructions(rng):
    a = rng.standard_normal((128, 64)).astype(np.float32)
    b = (rng.random((128, 64)) + 0.5).astype(np.float32)
    out = run(elementwise_k, a, b).outputs[0]
    negmax = -a.max(axis=1, keepdims=True)
    np.testing.assert_allclose(out[0], a - b, rtol=1e-6)
    np.testing.assert_allclose(out[1], (2.0 - a) * negmax, rtol=1e-6)
    np.testing.assert_allclose(out[2], np.exp(a * 0.5 + negmax), rtol=1e-5)
    np.testing.assert_allclose(out[3], a * negmax + b, rtol=1e-6)
    np.testing.assert_allclose(out[4], a)
    np.testing.assert_allclose(out[5], 1.0 / b, rtol=1e-6)


@nki.jit
def act_reduce_k(a):
    out = nl.ndarray((a.shape[0], a.shape[1] + 1), dtype=nl.float32, buffer=nl.shared_hbm)
    at = _load(a, a.shape)
    sq = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    s = nl.ndarray((a.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=sq, op=nl.square, data=at, reduce_op=nl.add, reduce_res=s)
    nisa.dma_copy(dst=out[:, 0:a.shape[1]], src=sq)
    nisa.dma_copy(dst=out[:, a.shape[1]:a.shape[1] + 1], src=s)
    return out


def test_activation_with_reduction(rng):
    a = rng.standard_normal((32, 48)).astype(np.float32)
    out = run(act_reduce_k, a).outputs[0]
    np.testing.assert_allclose(out[:, :48], a * a, rtol=1e-6)
    np.testing.assert_allclose(out[:, 48], (a * a).sum(axis=1), rtol=1e-5)


@nki.jit
def transpose_iota_k(a):
    out = nl.ndarray((a.shape[1], a.shape[0]), dtype=nl.float32, buffer=nl.shared_hbm)
    idx = nl.ndarray((a.shape[1], a.shape[0]), dtype=nl.int32, buffer=nl.shared_hbm)
    at = _load(a, a.shape)
    ps = nl.ndarray((a.shape[1], a.shape[0]), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_transpose(dst=ps, data=at)
    sb = nl.ndarray(ps.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=sb, src=ps)
    nisa.dma_copy(dst=out, src=sb)
    io = nl.ndarray(ps.shape, dtype=nl.int32, buffer=nl.sbuf)
    nisa.iota(io, nl.arange(a.shape[1])[:, None] * 1000 + nl.arange(a.shape[0])[None, :])
    nisa.dma_copy(dst=idx, src=io)
    return out, idx


def test_transpose_and_iota(rng):
    a = rng.standard_normal((16, 40)).astype(np.float32)
    out, idx = run(transpose_iota_k, a).outputs
    np.testing.assert_array_equal(out, a.T)
    np.testing.assert_array_equal(idx, np.arange(40)[:, None] * 1000 + np.arange(16)[None, :])


@nki.jit
def cast_k(a):
    out = nl.ndarray(a.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
    at = _load(a, a.shape)
    bt = nl.ndarray(a.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.tensor_copy(dst=bt, src=at)
    nisa.dma_copy(dst=out, src=bt)
    return out


def test_store_to_narrower_dtype_rounds_to_nearest_even(rng):
    a = rng.standard_normal((8, 64)).astype(np.float32)
    out = run(cast_k, a).outputs[0]
    assert out.dtype == BF16
    np.testing.assert_array_equal(out.view(np.uint16), a.astype(BF16).view(np.uint16))


def test_new_buffers_start_as_nan():
    @nki.jit
    def k(a):
        t = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.sbuf)
        assert not t._written.any()
        out = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.memset(dst=t[:, 0:2], value=3.0)
        u = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=u, src=t)  # a partly written tile read whole: the rest reads as NaN
        nisa.dma_copy(dst=out, src=u)
        return out

    got = run(k, np.zeros((1,), np.float32)).outputs[0]
    assert (got[:, 0:2] == 3.0).all() and np.isnan(got[:, 2:]).all()


def test_integer_buffers_read_unwritten_as_zero():
    @nki.jit
    def k(a):
        t = nl.ndarray((4, 4), dtype=nl.int32, buffer=nl.sbuf)
        out = nl.ndarray((4, 4), dtype=nl.int32, buffer=nl.shared_hbm)
        nisa.memset(dst=t[:, 0:1], value=7)
        u = nl.ndarray((4, 4), dtype=nl.int32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=u, src=t)
        nisa.dma_copy(dst=out, src=u)
        return out

    got = run(k, np.zeros((1,), np.float32)).outputs[0]
    assert (got[:, 0] == 7).all() and (got[:, 1:] == 0).all()


# ------------------------------------------------------------------ older API
@onki.jit
def old_softmax_k(x):
    out = onl.ndarray(x.shape, dtype=x.dtype, buffer=onl.shared_hbm)
    i_p = onl.arange(128)[:, None]
    i_f = onl.arange(x.shape[1])[None, :]
    for r in onl.affine_range(x.shape[0] // 128):
        t = onl.load(x[r * 128 + i_p, i_f])
        e = onl.exp(t - onl.max(t, axis=1, keepdims=True))
        y = e / onl.sum(e, axis=1, keepdims=True)
        onl.store(out[r * 128 + i_p, i_f], value=y)
    return out


def test_old_api_functional_softmax_with_arange_indexing(rng):
    x = rng.standard_normal((256, 64)).astype(np.float32)
    out = run(old_softmax_k, x).outputs[0]
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(axis=1, keepdims=True), rtol=1e-5)


@onki.jit
def old_matmul_k(a, b):
    # a: (M, K) loaded as is; nl.matmul transposes it on TensorE
    out = onl.ndarray((a.shape[0], b.shape[1]), dtype=onl.float32, buffer=onl.shared_hbm)
    acc = onl.zeros((a.shape[0], b.shape[1]), dtype=onl.float32, buffer=onl.psum)
    for k in onl.affine_range(a.shape[1] // 128):
        at = onl.load(a[:, k * 128:(k + 1) * 128])
        bt = onl.load(b[k * 128:(k + 1) * 128, :])
        acc += onl.matmul(at, bt)
    onl.store(out, value=onl.copy(acc))
    return out


def test_old_api_matmul_psum_accumulation(rng):
    a = rng.standard_normal((64, 256)).astype(np.float32)
    b = rng.standard_normal((256, 96)).astype(np.float32)
    res = run(old_matmul_k, a, b)
    np.testing.assert_allclose(res.outputs[0], a @ b, rtol=1e-4, atol=1e-4)
    ops = [i.op for i in res.trace]
    assert ops.count("nc_matmul") == 2 and ops.count("nc_transpose") == 2


@onki.jit
def old_masked_k(x):
    out = onl.ndarray(x.shape, dtype=x.dtype, buffer=onl.shared_hbm)
    i_p = onl.arange(128)[:, None]
    i_f = onl.arange(x.shape[1])[None, :]
    for r in onl.affine_range((x.shape[0] + 127) // 128):
        rows = r * 128 + i_p
        valid = rows < x.shape[0]
        t = onl.load(x[rows % x.shape[0], i_f], mask=valid)
        y = onisa.tensor_scalar(t, onl.multiply, 2.0, mask=valid)
        onl.store(out[rows % x.shape[0], i_f], value=y, mask=valid)
    return out


def test_old_api_masks_cover_ragged_tiles(rng):
    x = rng.standard_normal((200, 32)).astype(np.float32)
    np.testing.assert_allclose(run(old_masked_k, x).outputs[0], 2 * x)


@onki.jit
def grid_k(x):
    out = onl.ndarray(x.shape, dtype=x.dtype, buffer=onl.shared_hbm)
    p = onl.program_id(0)
    t = onl.load(x[p * 128:(p + 1) * 128, :])
    onl.store(out[p * 128:(p + 1) * 128, :], value=t * 3.0)
    return out


def test_spmd_grid_launch(rng):
    from autocomp.backends.nki.interp.install import execute

    x = rng.standard_normal((256, 16)).astype(np.float32)
    res = execute(grid_k, [x], grid=(2,))
    np.testing.assert_allclose(res.outputs[0], 3 * x)
    assert np.allclose(grid_k[2](x), 3 * x)


@nki.jit
def bn_k(a):
    out = nl.ndarray((a.shape[0], 2), dtype=nl.float32, buffer=nl.shared_hbm)
    t = _load(a, a.shape)
    stats = nl.ndarray((a.shape[0], 12), dtype=nl.float32, buffer=nl.sbuf)
    half = a.shape[1] // 2
    nisa.bn_stats(dst=stats[:, 0:6], data=t[:, 0:half])
    nisa.bn_stats(dst=stats[:, 6:12], data=t[:, half:a.shape[1]])
    mv = nl.ndarray((a.shape[0], 2), dtype=nl.float32, buffer=nl.sbuf)
    nisa.bn_aggr(dst=mv, data=stats)
    nisa.dma_copy(dst=out, src=mv)
    return out


def test_bn_stats_and_bn_aggr_give_mean_and_variance(rng):
    a = (rng.standard_normal((64, 1024)) * 3 + 1).astype(np.float32)
    out = run(bn_k, a).outputs[0]
    np.testing.assert_allclose(out[:, 0], a.mean(axis=1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out[:, 1], a.var(axis=1), rtol=1e-4)
