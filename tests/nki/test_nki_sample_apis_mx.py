"""More of the NKI surface AWS's samples use: fixed placements computed in loop bodies
(traced once), FP8 double-row matmuls, a (P, 1) column in ``tensor_tensor``, ``np.copy`` as
an activation, on-chip reshapes, access patterns (``tensor.ap``) and the MX microscaling
instructions (``nc_matmul_mx``, ``quantize_mx``, ``*_x4`` dtypes). Each kernel is our own,
runs in this process and through the kernel process with the same trace, passes the
validator, and is checked against NumPy."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from nki_testlib import install  # noqa: F401  (installs the interpreter modules first)

from autocomp.backends.nki.interp.errors import NkiError
from test_nki_sample_apis import _both_ways, _module

OLD = '''\
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.compiler as ncc
from neuronxcc.nki.language import par_dim


@nki.jit
def placed_in_loop(x):
    # Each pass of the body bumps the address; NKI traces the body once, so every
    # iteration reuses the first pass's addresses (4 x 64 KiB would not fit otherwise).
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    addr = 0
    for i in nl.sequential_range(4):
        t = nl.ndarray((par_dim(128), 16384), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=addr))
        addr += 16384 * 4
        t[...] = nl.load(x[i])
        if i == 0:
            nl.store(out[i], value=t)
        if i > 0:
            nl.store(out[i], value=nisa.activation(np.copy, t, scale=-1.0))
    return out


@nki.jit
def small_columns(x):
    # a short affine loop of identical narrow ops: the compiler vectorizes it (cost model)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    r = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    for j in nl.affine_range(64):
        r[:, j:j + 1] = nisa.tensor_reduce(np.add, t[:, j * 4:(j + 1) * 4], axis=[1], keepdims=True)
    for i in nl.sequential_range(2):
        nl.store(out[:, i * 64:(i + 1) * 64], value=nl.multiply(r, 1.0))
    nl.store(out[:, 128:256], value=nl.copy(t[:, 0:128]))
    return out


@nki.jit
def abs_max_bytes(x):
    # tensor_scalar_reduce with op0=nl.abs under a mask, a tile viewed as another dtype, and
    # a predicate index (view[pred]) that keeps everything
    ip, jf = nl.mgrid[0:128, 0:64]
    t = nl.load(x)
    r = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    a = nisa.tensor_scalar_reduce(data=t[ip, jf], op0=nl.abs, operand0=0.0, reduce_op=nl.max, reduce_res=r,
                                  mask=(jf < 48))
    ib, jb = nl.mgrid[0:128, 0:4]
    out = nl.ndarray((128, 4), dtype=nl.uint8, buffer=nl.shared_hbm)
    nl.store(out[ib, jb], value=r.view(nl.uint8)[ib, jb])
    out2 = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out2[ip, jf], value=nl.copy(t[ip, jf][ip < 128]))
    return out, out2


@nki.jit
def double_row(a, b, col):
    # a: (128, 2, 128) fp8 stationary row pairs, b: (128, 2, 512) moving; col: (128, 1)
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    ta = nl.load(a)
    tb = nl.load(b)
    res = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
    res[...] += nisa.nc_matmul(ta, tb, perf_mode='double_row_gen3')
    s = nl.copy(res, dtype=nl.float32)
    c = nl.load(col)
    nl.store(out, value=nisa.tensor_tensor(s, c, nl.multiply))
    return out
'''

NEW = '''\
import numpy as np
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def mx_offline(st_raw, st_scale, mv_raw, mv_scale):
    # Packed FP8 data arrives as uint32 (4 values each) and is viewed as *_x4 through an
    # access pattern; contiguous (K/8, F) scales are spread over the partition quadrants.
    st = st_raw.ap(dtype=nl.float8_e5m2_x4, pattern=[[128, 128], [1, 128]], offset=0)
    mv = mv_raw.ap(dtype=nl.float8_e5m2_x4, pattern=[[512, 128], [1, 512]], offset=0)
    a = nl.ndarray((128, 128), dtype=nl.float8_e5m2_x4, buffer=nl.sbuf)
    b = nl.ndarray((128, 512), dtype=nl.float8_e5m2_x4, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=st)
    nisa.dma_copy(dst=b, src=mv)
    sa = nl.ndarray((128, 128), dtype=nl.uint8, buffer=nl.sbuf)
    sb = nl.ndarray((128, 512), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.memset(dst=sa, value=0)
    nisa.memset(dst=sb, value=0)
    for q in range(4):
        nisa.dma_copy(src=st_scale.ap(pattern=[[128, 4], [1, 128]], offset=4 * q * 128),
                      dst=sa.ap(pattern=[[128, 4], [1, 128]], offset=32 * q * 128))
        nisa.dma_copy(src=mv_scale.ap(pattern=[[512, 4], [1, 512]], offset=4 * q * 512),
                      dst=sb.ap(pattern=[[512, 4], [1, 512]], offset=32 * q * 512))
    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul_mx(dst=acc, stationary=a, moving=b, stationary_scale=sa, moving_scale=sb)
    res = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=res)
    return out


@nki.jit
def mx_quantized(st, mv):
    # st: (32, 128*4) bf16, mv: (32, 64*4) bf16, already interleaved by groups of 4 along the
    # free axis. Quantize both on chip (one quadrant of scales), then Matmul-MX. mv goes
    # through a (32, 64, 4) tile reshaped to (32, 256) on chip.
    a = nl.ndarray((32, 512), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=st)
    b3 = nl.ndarray((32, 64, 4), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=b3, src=mv.reshape((32, 64, 4)))
    b = b3.reshape((32, 256))
    qa = nl.ndarray((32, 128), dtype=nl.float8_e5m2_x4, buffer=nl.sbuf)
    qb = nl.ndarray((32, 64), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    sa = nl.ndarray((4, 128), dtype=nl.uint8, buffer=nl.sbuf)
    sb = nl.ndarray((4, 64), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.quantize_mx(src=a, dst=qa, dst_scale=sa)
    nisa.quantize_mx(src=b, dst=qb, dst_scale=sb)
    acc = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul_mx(dst=acc, stationary=qa, moving=qb, stationary_scale=sa, moving_scale=sb)
    res = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=res)
    return out


@nki.jit
def double_row_new(a, b):
    ta = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    tb = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta, src=a)
    nisa.dma_copy(dst=tb, src=b)
    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=ta, moving=tb, perf_mode=nisa.matmul_perf_mode.double_row)
    res = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=res)
    return out
'''


@pytest.fixture(scope="module")
def old(tmp_path_factory):
    return _module(tmp_path_factory.mktemp("old_mx"), "old_mx", OLD)


@pytest.fixture(scope="module")
def new(tmp_path_factory):
    return _module(tmp_path_factory.mktemp("new_mx"), "new_mx", NEW)


def _fp8_values(rng, shape, dtype):
    """Values exactly representable in ``dtype`` (small integers, 2 mantissa bits)."""
    return rng.choice(np.array([-7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7], np.float32), size=shape).astype(dtype)


def test_placements_in_a_loop_body_keep_their_first_address(old, rng):
    mod, path = old
    x = rng.standard_normal((4, 128, 16384)).astype(np.float32)
    res = _both_ways(path, mod, "placed_in_loop", [x])
    want = -x
    want[0] = x[0]
    np.testing.assert_array_equal(res.outputs[0], want)


def test_placements_past_the_partition_still_fail(tmp_path, rng):
    mod, path = _module(tmp_path, "too_far", OLD.replace("base_addr=addr", "base_addr=addr + 150000"))
    with pytest.raises(NkiError, match="base_addr 150000"):
        mod.placed_in_loop(rng.standard_normal((4, 128, 16384)).astype(np.float32))


def test_double_row_matmul_and_a_column_operand(old, rng):
    mod, path = old
    a = _fp8_values(rng, (128, 2, 128), ml_dtypes.float8_e4m3fn)
    b = _fp8_values(rng, (128, 2, 512), ml_dtypes.float8_e4m3fn)
    col = rng.standard_normal((128, 1)).astype(np.float32)
    res = _both_ways(path, mod, "double_row", [a, b, col])
    want = np.einsum("ktm,ktn->mn", a.astype(np.float64), b.astype(np.float64)) * col
    np.testing.assert_allclose(res.outputs[0], want, rtol=1e-5)


def test_double_row_matmul_in_the_nki_api(new, rng):
    mod, path = new
    a = _fp8_values(rng, (128, 2, 128), ml_dtypes.float8_e4m3fn)
    b = _fp8_values(rng, (128, 2, 512), ml_dtypes.float8_e4m3fn)
    res = _both_ways(path, mod, "double_row_new", [a, b])
    np.testing.assert_array_equal(res.outputs[0], np.einsum("ktm,ktn->mn", a.astype(np.float32), b.astype(np.float32)))


def _mx_ref(raw, scale, fmt):
    """Our reading of packed MX data: (P, F) uint32 -> (P, F, 4) values times 2**(s - 127)
    of each 8-partition group."""
    vals = raw.view(np.uint8).reshape(raw.shape[0], raw.shape[1], 4).view(fmt).astype(np.float64)
    return vals * np.exp2(np.repeat(scale.astype(np.float64), 8, axis=0) - 127.0)[:, :, None]


def test_offline_mx_matmul_with_access_patterns_and_scattered_scales(new, rng):
    mod, path = new
    st = _fp8_values(rng, (128, 512), ml_dtypes.float8_e5m2).view(np.uint32)
    mv = _fp8_values(rng, (128, 2048), ml_dtypes.float8_e5m2).view(np.uint32)
    sts = rng.integers(120, 130, size=(16, 128)).astype(np.uint8)
    mvs = rng.integers(120, 130, size=(16, 512)).astype(np.uint8)
    res = _both_ways(path, mod, "mx_offline", [st, sts, mv, mvs])
    want = np.einsum("kiq,kjq->ij", _mx_ref(st, sts, ml_dtypes.float8_e5m2), _mx_ref(mv, mvs, ml_dtypes.float8_e5m2))
    np.testing.assert_allclose(res.outputs[0], want, rtol=1e-5, atol=1e-3)  # fp32 accumulation


def test_quantize_mx_then_matmul_mx_is_exact_on_representable_values(new, rng):
    mod, path = new
    st = _fp8_values(rng, (32, 512), np.float32)
    mv = _fp8_values(rng, (32, 256), np.float32)
    res = _both_ways(path, mod, "mx_quantized", [st.astype(ml_dtypes.bfloat16), mv.astype(ml_dtypes.bfloat16)])
    want = np.einsum("kiq,kjq->ij", st.reshape(32, 128, 4), mv.reshape(32, 64, 4))
    np.testing.assert_array_equal(res.outputs[0], want)


def test_loop_context_travels_with_the_trace_and_short_affine_loops_vectorize(old, rng):
    from autocomp.backends.nki.cost import PARAMS, vectorized_groups

    mod, path = old
    x = rng.standard_normal((128, 256)).astype(np.float32)
    res = _both_ways(path, mod, "small_columns", [x])  # same trace, loop context included
    sums = x.reshape(128, 64, 4).sum(-1)
    np.testing.assert_allclose(res.outputs[0][:, :128], np.concatenate([sums, sums], 1), rtol=1e-5)
    loops = [i.info["loop"] for i in res.trace if "loop" in i.info]
    assert {tuple(l[1::3]) for l in loops} == {(64, 1), (2, 0)}  # (trip, affine) of the two loops
    fused = vectorized_groups(res.trace, int(PARAMS["vectorize_max_trip"]), PARAMS["vector_min_ii"])
    assert sorted(fused.values()).count(64) == 1 and len(fused) == 64


def test_sdk_internal_annotation_names_import(tmp_path, rng):
    # AWS's reference kernels import SDK-internal names only to annotate and size things.
    mod, _ = _module(tmp_path, "annotations", OLD + '''
from neuronxcc.nki.compiler.backends.neuron.tensor import local_tile
from neuronxcc.nki.compiler.backends.neuron.indexing import TileIndex
from neuronxcc.nki.language.constants import sizeinbytes


@nki.jit
def sized(x: local_tile):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out, value=nl.multiply(t, float(sizeinbytes(nl.bfloat16) + nl.num_programs(axes=0))))
    return out
''')
    x = rng.standard_normal((128, 64)).astype(np.float32)
    np.testing.assert_array_equal(mod.sized(x), x * 3.0)
    assert isinstance(mod.TileIndex, type)


def test_abs_reduce_under_a_mask_dtype_views_and_predicate_indexing(old, rng):
    mod, path = old
    x = rng.standard_normal((128, 64)).astype(np.float32)
    res = _both_ways(path, mod, "abs_max_bytes", [x])
    want = np.abs(x[:, :48]).max(axis=1, keepdims=True).astype(np.float32)
    np.testing.assert_array_equal(res.outputs[0], want.view(np.uint8))
    np.testing.assert_array_equal(res.outputs[1], x)


TWO_PLACES = OLD + '''

@nki.jit
def two_places(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    a = nl.ndarray((par_dim(128), 512), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    b = nl.ndarray((par_dim(128), 16384), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=150000))
    a[...] = nl.load(x)
    nl.store(out, value=a)
    return out
'''


def test_each_fixed_placement_is_checked_in_both_processes(tmp_path, rng):
    from autocomp.backends.nki.interp.install import execute
    from autocomp.backends.nki.remote import KernelFailure, KernelProcess

    mod, path = _module(tmp_path, "two_places", TWO_PLACES)
    x = rng.standard_normal((128, 512)).astype(np.float32)
    with pytest.raises(NkiError, match="base_addr 150000"):
        execute(mod.two_places, [x], kernel_file=path)
    proc = KernelProcess(path, "two_places")
    try:
        proc.load()
        with pytest.raises((NkiError, KernelFailure), match="base_addr 150000"):
            execute(proc.kernel, [x], kernel_file=path, names=proc.names)
    finally:
        proc.close()
