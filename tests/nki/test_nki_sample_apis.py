"""The NKI surface real kernels use (AWS's tutorials and reference kernels, both API styles):
block dimensions before ``nl.par_dim``, NKI's partition-aligned broadcasting, masked tail
tiles, scans, fused reductions, affine selects, the ``nki.compiler`` module and more. Each
kernel here is our own; each runs in this process, through the kernel process (the
trust-boundary split) with the same trace, and passes the validator, and is checked against
NumPy."""

from __future__ import annotations

import textwrap

import ml_dtypes
import numpy as np
import pytest

from nki_testlib import install, load_module, run_both_ways  # installs the interpreter modules first

from autocomp.backends.nki.interp.errors import NkiError
from autocomp.backends.nki.interp.install import execute

OLD = '''\
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.compiler as ncc
from neuronxcc.nki.language import par_dim
import neuronxcc.nki.typing as nt


@nki.jit
def block_scan(delta, u):
    # (2, P, F) block tensors: 2 tiles side by side in the same partitions
    out = nl.ndarray(delta.shape, dtype=delta.dtype, buffer=nl.shared_hbm)
    acc = nl.ndarray((2, par_dim(128), 512), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(2):
        d = nl.load(delta[i])
        x = nl.load(u[i])
        acc[i] = nisa.tensor_tensor_scan(d, x, initial=0, op0=np.multiply, op1=np.add)
        nl.store(out[i], value=acc[i])
    return out


@nki.jit
def softmax_rows(x):
    # NKI broadcasting: a (P,) row max broadcasts along the free axis; masked tail tile
    n, f = x.shape
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    ip = nl.arange(128)[:, None]
    jf = nl.arange(f)[None, :]
    for t in nl.affine_range((n + 127) // 128):
        tile = nl.load(x[t * 128 + ip, jf], mask=(t * 128 + ip < n))
        m = nl.max(tile, axis=1)
        e = nl.exp(nl.subtract(tile, m))
        s = nl.sum(e, axis=1)
        nl.store(out[t * 128 + ip, jf], value=nl.divide(e, s), mask=(t * 128 + ip < n))
    return out


@nki.jit
def fused_reduce_select(x):
    # tensor_scalar_reduce with reduce_op=nl.max, tensor_reduce(op=nl.max), affine_select,
    # nl.fp32.min / nl.finfo, nl.where, nl.mod, nki.compiler allocation and scheduling
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    mx = nl.ndarray((128, 2), dtype=nl.float32, buffer=nl.shared_hbm)
    buf = nl.ndarray((2, par_dim(128), 128), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)))
    rmax = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    ip, jf = nl.mgrid[0:128, 0:128]
    t = nl.load(x)
    buf[0] = nisa.tensor_scalar_reduce(data=t, op0=nl.multiply, operand0=2.0, reduce_op=nl.max, reduce_res=rmax)
    causal = nisa.affine_select(pred=(ip >= jf), on_true_tile=buf[0], on_false_value=nl.fp32.min)
    floor = nl.finfo(nl.float32).min
    with ncc.no_reorder():
        buf[1] = nl.maximum(causal, floor)
    r2 = nisa.tensor_reduce(op=nl.max, data=buf[1], axis=1)
    both = nl.ndarray((128, 2), dtype=nl.float32, buffer=nl.sbuf)
    both[:, 0:1] = nl.copy(rmax)
    both[:, 1:2] = nl.copy(r2)
    nl.store(mx, value=both)
    iota = nisa.iota(ip + 0 * jf, dtype=nl.int32)
    odd = nl.mod(iota, 2.0)
    nl.store(out, value=nl.where(odd, buf[1], 0.0))
    return out, mx


def bank_of(idx, pdim_size, fdim_size):
    return idx[0], 0, 0


@nki.jit
@ncc.skip_middle_end_transformations
def constants_and_transposes(a):
    # nl.shared_constant identity, PSUM operands to nl.matmul / nl.store (the compiler
    # copies them to SBUF), dma_transpose, psum += on a fresh PSUM tile
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    eye = nl.shared_constant(np.identity(128, dtype=np.int8), dtype=nl.float32)
    e = nl.load(eye)
    x = nl.load(a)
    xt = nisa.dma_transpose(x)
    p = nl.matmul(xt, e, transpose_x=True)  # x.T.T @ I = x
    acc = nl.ndarray((2, par_dim(128), 128), dtype=nl.float32, buffer=ncc.psum.alloc(bank_of))
    for i in nl.affine_range(2):
        acc[i] += nl.matmul(e, p, transpose_x=True)
    nl.store(out, value=acc[1])
    return out


@nki.jit
def tail_slices(x):
    # a slice reaching past the end is fine under a mask that excludes the outside
    out = nl.ndarray((200, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    ip = nl.arange(128)[:, None]
    for t in nl.affine_range(2):
        tile = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=x[t * 128:t * 128 + 128, 0:64], mask=(t * 128 + ip < 200))
        nl.store(out[t * 128:t * 128 + 128, 0:64], value=tile, mask=(t * 128 + ip < 200))
    return out


@nki.jit
def add_kernel(a, b, shape2d):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    r, c = shape2d
    i = nl.program_id(0)
    x = nl.load(a[i * r:(i + 1) * r, 0:c])
    y = nl.load(b[i * r:(i + 1) * r, 0:c])
    nl.store(out[i * r:(i + 1) * r, 0:c], value=nl.add(x, y))
    return out

'''

NEW = '''\
import numpy as np
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def scan_and_reduce(d, u):
    out = nl.ndarray(d.shape, dtype=d.dtype, buffer=nl.shared_hbm)
    rmax = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.ndarray((2, nl.par_dim(128), 256), dtype=nl.float32, buffer=nl.sbuf)
    b = nl.ndarray((2, nl.par_dim(128), 256), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=a[0], src=d)
    nisa.dma_copy(dst=a[1], src=u)
    nisa.tensor_tensor_scan(dst=b[0], data0=a[0], data1=a[1], initial=0.0, op0=nl.multiply, op1=nl.add)
    r = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_reduce(dst=b[1], data=b[0], op0=nl.add, operand0=1.0, reduce_op=nl.maximum, reduce_res=r)
    t = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=t, src=b[1])
    nisa.dma_copy(dst=out, src=t)
    nisa.dma_copy(dst=rmax, src=r)
    return out, rmax


@nki.jit
def transpose_by_dma(x):
    out = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(dst=t, src=x)
    nisa.dma_copy(dst=out, src=t)
    return out
'''


def _module(tmp_path, name, text):
    return load_module(tmp_path, f"sample_apis_{name}", text)


_both_ways = run_both_ways


def _scan(d, u):
    h = np.zeros(d.shape[:-1], np.float64)
    out = np.zeros(d.shape, np.float64)
    for i in range(d.shape[-1]):
        h = d[..., i] * h + u[..., i]
        out[..., i] = h
    return out


@pytest.fixture(scope="module")
def old(tmp_path_factory):
    install()
    return _module(tmp_path_factory.mktemp("old"), "old_api", OLD)


@pytest.fixture(scope="module")
def new(tmp_path_factory):
    install()
    return _module(tmp_path_factory.mktemp("new"), "new_api", NEW)


def test_block_dimensions_scan(old, rng):
    mod, path = old
    d = rng.random((2, 128, 512)).astype(np.float32) * 0.9
    u = rng.random((2, 128, 512)).astype(np.float32)
    res = _both_ways(path, mod, "block_scan", [d, u])
    np.testing.assert_allclose(res.outputs[0], _scan(d, u), rtol=1e-4)
    # the (2, par_dim(128), 512) fp32 block tensor is 4 KiB per partition, not a 2-partition tile
    assert any(i.op == "tensor_tensor_scan" and i.partitions == 128 for i in res.trace)


def test_nki_broadcasting_and_masked_tail_tiles(old, rng):
    mod, path = old
    x = rng.standard_normal((300, 64)).astype(np.float32)
    res = _both_ways(path, mod, "softmax_rows", [x])
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(res.outputs[0], e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_fused_reductions_affine_select_dtype_limits_where_mod_and_compiler_module(old, rng):
    mod, path = old
    x = rng.standard_normal((128, 128)).astype(np.float32)
    res = _both_ways(path, mod, "fused_reduce_select", [x])
    y = 2 * x
    causal = np.where(np.arange(128)[:, None] >= np.arange(128)[None, :], y, np.finfo(np.float32).min)
    expect = np.where(np.arange(128)[:, None] % 2 == 1, causal, 0.0)
    np.testing.assert_allclose(res.outputs[0], expect, rtol=1e-6)
    np.testing.assert_allclose(res.outputs[1], np.stack([y.max(1), causal.max(1)], 1), rtol=1e-6)
    assert {"affine_select", "tensor_scalar", "tensor_reduce"} <= {i.op for i in res.trace}


def test_shared_constants_psum_operands_dma_transpose_and_fresh_psum_accumulation(old, rng):
    mod, path = old
    a = rng.standard_normal((128, 128)).astype(np.float32)
    res = _both_ways(path, mod, "constants_and_transposes", [a])
    np.testing.assert_allclose(res.outputs[0], a, rtol=1e-5, atol=1e-5)
    assert "dma_transpose" in {i.op for i in res.trace}


def test_slices_past_the_end_under_a_mask(old, rng):
    mod, path = old
    x = rng.standard_normal((200, 64)).astype(np.float32)
    res = _both_ways(path, mod, "tail_slices", [x])
    np.testing.assert_array_equal(res.outputs[0], x)


def test_tuple_arguments_and_spmd_dim_grids(old, rng):
    mod, path = old
    import neuronxcc.nki.language as nl

    a = rng.standard_normal((256, 64)).astype(np.float32)
    b = rng.standard_normal((256, 64)).astype(np.float32)
    grid = (nl.spmd_dim(1, nl.nc(2)),)
    assert grid == (2,)
    out = mod.add_kernel[grid](a, b, (128, 64))
    np.testing.assert_array_equal(out, a + b)
    assert nl.static_cast(np.array([1.0, 2.5]), nl.bfloat16).dtype == ml_dtypes.bfloat16


def test_new_api_scan_scalar_reduce_and_dma_transpose(new, rng):
    mod, path = new
    d = rng.random((128, 256)).astype(np.float32) * 0.9
    u = rng.random((128, 256)).astype(np.float32)
    res = _both_ways(path, mod, "scan_and_reduce", [d, u])
    s = _scan(d, u) + 1.0
    np.testing.assert_allclose(res.outputs[0], s, rtol=1e-4)
    np.testing.assert_allclose(res.outputs[1][:, 0], s.max(1), rtol=1e-4)
    x = rng.standard_normal((64, 96)).astype(np.float32)
    np.testing.assert_array_equal(_both_ways(path, mod, "transpose_by_dma", [x]).outputs[0], x.T)


def test_unmasked_use_of_a_view_past_the_end_is_still_an_error(old, rng, tmp_path):
    mod, path = _module(tmp_path, "oob", textwrap.dedent('''\
        import neuronxcc.nki as nki
        import neuronxcc.nki.language as nl


        @nki.jit
        def k(x):
            out = nl.ndarray((200, 64), dtype=x.dtype, buffer=nl.shared_hbm)
            t = nl.load(x[128:256, 0:64])
            nl.store(out[0:128, 0:64], value=t)
            return out
        '''))
    with pytest.raises(NkiError) as info:
        execute(mod.k, [np.zeros((200, 64), np.float32)], kernel_file=path)
    assert info.value.kind == "out-of-bounds" and "mask=" in info.value.message and info.value.line == 8


def test_partly_loaded_tiles_never_reach_hbm_as_written(tmp_path):
    mod, path = _module(tmp_path, "partial", textwrap.dedent('''\
        import neuronxcc.nki as nki
        import neuronxcc.nki.language as nl


        @nki.jit
        def k(x):
            out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
            ip = nl.arange(128)[:, None]
            jf = nl.arange(64)[None, :]
            t = nl.load(x[ip, jf], mask=(ip < 100))
            nl.store(out, value=nl.multiply(t, 2.0))  # rows 100.. hold garbage (NaN)
            return out
        '''))
    res = execute(mod.k, [np.ones((128, 64), np.float32)], kernel_file=path)
    assert (res.outputs[0][:100] == 2).all() and np.isnan(res.outputs[0][100:]).all()


def test_block_tensors_hold_one_block_of_capacity_and_each_block_must_fit(tmp_path):
    """The compiler allocates the blocks of a block tensor as their live ranges require: 32
    PSUM banks' worth of blocks and 256 KiB of SBUF blocks are accepted, a single block over
    the partition's capacity is not."""
    mod, path = _module(tmp_path, "cap", textwrap.dedent('''\
        import neuronxcc.nki as nki
        import neuronxcc.nki.language as nl
        from neuronxcc.nki.language import par_dim


        @nki.jit
        def fits(x):
            a = nl.ndarray((32, par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)
            b = nl.ndarray((64, par_dim(128), 1024), dtype=nl.float32, buffer=nl.sbuf)
            return x


        @nki.jit
        def too_big(x):
            b = nl.ndarray((2, par_dim(128), 65536), dtype=nl.float32, buffer=nl.sbuf)
            return x
        '''))
    execute(mod.fits, [np.zeros((2, 2), np.float32)], kernel_file=path)
    with pytest.raises(NkiError) as info:
        execute(mod.too_big, [np.zeros((2, 2), np.float32)], kernel_file=path)
    assert info.value.kind == "capacity" and "262144 B/partition" in info.value.message


def test_loop_reduce_accumulates_into_its_destination_across_iterations(tmp_path):
    mod, path = _module(tmp_path, "loopred", textwrap.dedent('''\
        import numpy as np
        import neuronxcc.nki as nki
        import neuronxcc.nki.language as nl


        @nki.jit
        def k(x):
            out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
            acc = nl.zeros((128, 64), dtype=nl.float32)
            for i in nl.affine_range(4):
                t = nl.load(x[i])
                acc[...] = nl.loop_reduce(nl.multiply(t, 2.0), op=np.add, loop_indices=(i,))
            nl.store(out, value=acc)
            return out
        '''))
    x = np.random.default_rng(0).standard_normal((4, 128, 64)).astype(np.float32)
    res = _both_ways(path, mod, "k", [x])
    np.testing.assert_allclose(res.outputs[0], 2 * x.sum(0), rtol=1e-5, atol=1e-5)


def test_array_keyword_arguments_scalar_loads_and_indirect_row_gathers(tmp_path):
    mod, path = _module(tmp_path, "kwargs", textwrap.dedent('''\
        import numpy as np
        import neuronxcc.nki as nki
        import neuronxcc.nki.isa as nisa
        import neuronxcc.nki.language as nl


        @nki.jit
        def k(x, scale=None):
            out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
            s = nl.load(scale[0, 1])                      # one element -> a (1, 1) tile
            sb = s.broadcast_to((128, 1))
            ip = nl.arange(128)[:, None]
            jf = nl.arange(64)[None, :]
            rows = nisa.iota(127 - ip, dtype=nl.int32)     # reversed row order, computed on chip
            t = nl.load(x[rows, jf])                       # indirect DMA: rows chosen by a tile
            nl.store(out, value=nl.multiply(t, sb))
            return out
        '''))
    x = np.random.default_rng(1).standard_normal((128, 64)).astype(np.float32)
    scale = np.array([[1.0, 3.0]], np.float32)
    res = execute(mod.k, [x], kernel_file=path, kwargs={"scale": scale})
    np.testing.assert_allclose(res.outputs[0], 3.0 * x[::-1], rtol=1e-6)
