"""The NKI APIs added last: ``nl.atomic_rmw``, ``nl.rand``, ``nl.random_seed``, ``nl.fmod``,
``nl.dropout``, ``nl.all_reduce``, ``nisa.tensor_copy_dynamic_src`` / ``_dst``,
``nisa.dropout``, ``nisa.sequence_bounds`` and ``nisa.local_gather``, in both API styles.

Each kernel runs in this process and through the kernel process (same trace, same outputs,
and it passes the validator) and is checked against NumPy (for the ISA instructions, the
NumPy equivalents AWS's reference gives); what each refuses is checked by its message; the
trace names the engine each runs on and the cost model takes them; and one kernel goes
through the whole evaluation (sandboxed children, the kernel process, the reversed-loop
run) as a candidate."""

from __future__ import annotations

import asyncio

import ml_dtypes  # (a test dependency: pyproject's test extra)
import numpy as np
import pytest

from nki_testlib import install, load_module, run_both_ways

from autocomp.backends.nki.cost import estimate
from autocomp.backends.nki.interp import core
from autocomp.backends.nki.interp.errors import NkiError
from autocomp.backends.nki.interp.install import execute

BF16 = np.dtype(ml_dtypes.bfloat16)

OLD = '''\
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def dyn_src_offsets(src_tensor, offsets):
    # AWS's tensor_copy_dynamic_src example 0: columns gathered at offsets held in SBUF
    out_tensor = nl.ndarray([128, 64], dtype=src_tensor.dtype, buffer=nl.shared_hbm)
    src_sbuf = nl.load(src_tensor)
    offsets_sbuf = nl.load(offsets)
    out_sbuf = nl.ndarray([128, 64], dtype=src_tensor.dtype, buffer=nl.sbuf)
    ix, iy = nl.mgrid[0:128, 0:1]
    for idx in nl.affine_range(offsets_sbuf.shape[1]):
        out_sbuf[ix, idx] = nisa.tensor_copy_dynamic_src(src_sbuf[ix, offsets_sbuf[0, idx] + iy])
    nl.store(out_tensor, value=out_sbuf)
    return out_tensor


@nki.jit
def dyn_src_axis(src_tensor, offsets):
    # AWS's example 1: the offset tile itself indexes the middle axis, on ScalarE here
    out_tensor = nl.ndarray([128, 8, 4], dtype=src_tensor.dtype, buffer=nl.shared_hbm)
    src_sbuf = nl.load(src_tensor)
    offsets_sbuf = nl.load(offsets)
    out_sbuf = nl.ndarray([128, 8, 4], dtype=src_tensor.dtype, buffer=nl.sbuf)
    ix, _, iz = nl.mgrid[0:128, 0:1, 0:4]
    for idx in nl.affine_range(offsets.shape[1]):
        out_sbuf[ix, idx, iz] = nisa.tensor_copy_dynamic_src(src_sbuf[ix, offsets_sbuf[0, idx], iz],
                                                             engine=nisa.scalar_engine)
    nl.store(out_tensor, value=out_sbuf)
    return out_tensor


@nki.jit
def dyn_dst_scatter(src_tensor, offsets):
    # the inverse: column i of src lands at column offsets[i] of a zeroed tile
    out_tensor = nl.ndarray([128, 512], dtype=src_tensor.dtype, buffer=nl.shared_hbm)
    src_sbuf = nl.load(src_tensor)
    offsets_sbuf = nl.load(offsets)
    buf = nl.zeros([128, 512], dtype=src_tensor.dtype, buffer=nl.sbuf)
    ix, iy = nl.mgrid[0:128, 0:1]
    for idx in nl.sequential_range(offsets_sbuf.shape[1]):
        nisa.tensor_copy_dynamic_dst(dst=buf[ix, offsets_sbuf[0, idx] + iy], src=src_sbuf[ix, idx + iy])
    nl.store(out_tensor, value=buf)
    return out_tensor


@nki.jit
def seq_bounds(segment_ids):
    # AWS's sequence_bounds example
    m, n = segment_ids.shape
    output = nl.ndarray([1, 2, n], dtype=segment_ids.dtype, buffer=nl.shared_hbm)
    ix, iy, iz = nl.mgrid[0:m, 0:2, 0:n]
    out_tile = nl.ndarray([m, 2, n], dtype=segment_ids.dtype, buffer=nl.sbuf)
    seq_tile = nl.load(segment_ids)
    out_tile[ix, iy, iz] = nisa.sequence_bounds(segment_ids=seq_tile)
    nl.store(output, value=out_tile)
    return output


@nki.jit
def seq_bounds_int(segment_ids):
    output = nl.ndarray([1, 2, segment_ids.shape[1]], dtype=nl.int32, buffer=nl.shared_hbm)
    nl.store(output, value=nisa.sequence_bounds(segment_ids=nl.load(segment_ids), dtype=nl.int32))
    return output


@nki.jit
def local_gather_4(src_buffer, index):
    # AWS's local_gather example: 64 indices per core, 4 contiguous elements each
    output = nl.ndarray((128, 4, 16, 4), dtype=src_buffer.dtype, buffer=nl.shared_hbm)
    output_tile = nisa.local_gather(nl.load(src_buffer), nl.load(index), 4, 64)
    nl.store(output, output_tile)
    return output


@nki.jit
def local_gather_default(src_buffer, index):
    # defaults: every index of each 16-partition slice, one element each
    output = nl.ndarray((src_buffer.shape[0], 16 * index.shape[1]), dtype=src_buffer.dtype, buffer=nl.shared_hbm)
    nl.store(output, nisa.local_gather(nl.load(src_buffer), nl.load(index)))
    return output


@nki.jit
def isa_dropout(a_tensor, b_tensor):
    # AWS's nisa.dropout examples: per-partition probabilities, then a scalar one
    c_tensor = nl.ndarray(a_tensor.shape, dtype=a_tensor.dtype, buffer=nl.shared_hbm)
    d_tensor = nl.ndarray(a_tensor.shape, dtype=a_tensor.dtype, buffer=nl.shared_hbm)
    a = nl.load(a_tensor)
    b = nl.load(b_tensor)
    nl.store(c_tensor, nisa.dropout(a, prob=b))
    nl.store(d_tensor, nisa.dropout(a, prob=0.3))
    return c_tensor, d_tensor


@nki.jit
def lang_dropout_rates(x, rates):
    # nl.dropout with a (P, 1) tile of rates, a number, and a mask= on the older API
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    out2 = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    i_p, i_f = nl.mgrid[0:128, 0:512]
    buf = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
    buf[...] = -1.0
    buf[i_p, i_f] = nl.dropout(t[i_p, i_f], rate=1.0, mask=(i_f < 256))
    nl.store(out, nl.dropout(t, rate=nl.load(rates)))
    nl.store(out2, buf)
    return out, out2


@nki.jit
def fmod_kernel(x, y):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    out2 = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    out3 = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    a = nl.load(x)
    b = nl.load(y)
    nl.store(out, nl.fmod(a, b))
    nl.store(out2, nl.fmod(a, 0.75))
    nl.store(out3, nisa.tensor_tensor(a, b, op=nl.fmod))
    return out, out2, out3


@nki.jit
def atomic(in_tensor, indices_tensor, value_tensor):
    # AWS's atomic_rmw example: rmw_tensor[indices] += value, rows named twice get both
    rmw_tensor = nl.ndarray(in_tensor.shape, dtype=in_tensor.dtype, buffer=nl.shared_hbm)
    nl.store(rmw_tensor, nl.load(in_tensor))
    value = nl.load(value_tensor)
    indices_tile = nl.load(indices_tensor)
    ix = nl.arange(512)[None, :]
    nl.atomic_rmw(rmw_tensor[indices_tile, ix], value=value, op=np.add)
    return rmw_tensor


@nki.jit
def atomic_masked(in_tensor, indices_tensor):
    # a number as the value, the older API's mask= and a per-partition predicate tile
    rmw_tensor = nl.ndarray(in_tensor.shape, dtype=in_tensor.dtype, buffer=nl.shared_hbm)
    nl.store(rmw_tensor, nl.load(in_tensor))
    indices_tile = nl.load(indices_tensor)
    i_p, i_f = nl.mgrid[0:128, 0:512]
    nl.atomic_rmw(rmw_tensor[indices_tile, i_f], value=2.0, op=nl.add, mask=(i_f < 100))
    keep = nl.copy(nl.greater(indices_tile, 63), dtype=nl.uint8)
    nl.atomic_rmw(rmw_tensor[indices_tile, i_f], value=1.0, op=np.add, predicate=keep)
    return rmw_tensor


@nki.jit
def all_reduce_one(x):
    out = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
    nl.store(out, nl.all_reduce(nl.load(x), op=np.add, program_axes=0, dtype=nl.bfloat16))
    return out
'''

NEW = '''\
import numpy as np
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def dyn_new(x, offs):
    # gathers at offsets computed on the device (nl.ds of a tile), scatters them back on GpSimdE
    out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    back_out = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    o = nl.ndarray((1, 8), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=o, src=offs)
    res = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.sbuf)
    back = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=back, value=0.0)
    for i in nl.affine_range(8):
        nisa.tensor_copy_dynamic_src(dst=res[:, i * 8:(i + 1) * 8], src=t[:, nl.ds(o[0, i], 8)])
    for i in nl.sequential_range(8):
        nisa.tensor_copy_dynamic_dst(dst=back[:, nl.ds(o[0, i], 8)], src=res[:, i * 8:(i + 1) * 8],
                                     engine=nisa.gpsimd_engine)
    nisa.dma_copy(dst=out, src=res)
    nisa.dma_copy(dst=back_out, src=back)
    return out, back_out


@nki.jit
def misc_new(x, seg, index, seed):
    out = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
    bounds_out = nl.ndarray((1, 2, 512), dtype=nl.int32, buffer=nl.shared_hbm)
    gathered_out = nl.ndarray((128, 32), dtype=x.dtype, buffer=nl.shared_hbm)
    fmod_out = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    s = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=seed)
    nl.random_seed(s)
    d = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dropout(dst=d, data=t, prob=0.25)
    nisa.dma_copy(dst=out, src=d)
    sg = nl.ndarray((1, 512), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=sg, src=seg)
    b = nl.ndarray((1, 2, 512), dtype=nl.int32, buffer=nl.sbuf)
    nisa.sequence_bounds(dst=b, segment_ids=sg)
    nisa.dma_copy(dst=bounds_out, src=b)
    ix = nl.ndarray((128, 2), dtype=nl.uint16, buffer=nl.sbuf)
    nisa.dma_copy(dst=ix, src=index)
    g = nl.ndarray((128, 32), dtype=x.dtype, buffer=nl.sbuf)
    nisa.local_gather(dst=g, src_buffer=t, index=ix, num_elem_per_idx=2, num_valid_indices=16)
    nisa.dma_copy(dst=gathered_out, src=g)
    nisa.dma_copy(dst=fmod_out, src=nl.fmod(t, 0.3))
    return out, bounds_out, gathered_out, fmod_out


@nki.jit
def atomic_new(in_tensor, indices_tensor, value_tensor):
    rmw = nl.ndarray(in_tensor.shape, dtype=in_tensor.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=rmw, src=in_tensor)
    v = nl.ndarray((128, 64), dtype=in_tensor.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=v, src=value_tensor)
    idx = nl.ndarray((128, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=idx, src=indices_tensor)
    nl.atomic_rmw(rmw[idx, nl.arange(64)[None, :]], value=v, op=nl.add)
    return rmw
'''


@pytest.fixture(scope="module")
def old(tmp_path_factory):
    install()
    return load_module(tmp_path_factory.mktemp("additions_old"), "additions_old", OLD)


@pytest.fixture(scope="module")
def new(tmp_path_factory):
    install()
    return load_module(tmp_path_factory.mktemp("additions_new"), "additions_new", NEW)


def _ops(res, op):
    return [i for i in res.trace if i.op == op]


def _engines(res):
    return {(i.op, i.engine) for i in res.trace}


def _sequence_bounds_reference(sequence):
    """nisa.sequence_bounds as the ISA reference defines it, for one row: each element gets
    [start, end) of the run of equal segment ids it is in; padding (id 0) gets (n, -1)."""
    seq = np.asarray(sequence)
    n = len(seq)
    bounds = np.empty((2, n))
    i = 0
    while i < n:
        j = i
        while j < n and seq[j] == seq[i]:
            j += 1
        bounds[0, i:j], bounds[1, i:j] = (i, j) if seq[i] != 0 else (n, -1)
        i = j
    return bounds[None]


def _local_gather_reference(src, index, num_elem_per_idx, num_valid_indices):
    """nisa.local_gather as the ISA reference defines it: each group of 16 partitions reads
    its indices partition by partition within each column (partition-first), keeps the first
    ``num_valid_indices``, and each index picks ``num_elem_per_idx`` consecutive elements of
    every partition's flattened free axis in the group."""
    p = src.shape[0]
    flat = src.reshape(p, -1)
    idx = index.reshape(p, -1)
    out = np.empty((p, num_valid_indices, num_elem_per_idx), dtype=src.dtype)
    for base in range(0, p, 16):
        order = [int(idx[base + q, f]) for f in range(idx.shape[1]) for q in range(16)][:num_valid_indices]
        for k, start in enumerate(order):
            out[base:base + 16, k, :] = flat[base:base + 16, start:start + num_elem_per_idx]
    return out


# ---------------------------------------------------------------------------- dynamic offsets
@pytest.mark.parametrize("dtype", [np.float32, np.int32, "bfloat16"])
def test_tensor_copy_dynamic_src_gathers_at_offsets_held_in_sbuf(old, dtype):
    mod, path = old
    dt = BF16 if dtype == "bfloat16" else np.dtype(dtype)
    rng = np.random.default_rng(0)
    x = (rng.random((128, 512)) * 100).astype(dt)
    offsets = (4 + np.arange(64, dtype=np.int32))[None, :] * 7 % 512
    res = run_both_ways(path, mod, "dyn_src_offsets", [x, offsets.astype(np.int32)])
    np.testing.assert_array_equal(res.outputs[0], np.take(x, offsets[0], axis=1))
    ops = _ops(res, "tensor_copy_dynamic_src")
    assert len(ops) == 64 and {i.engine for i in ops} == {"vector"}
    offset_alloc = res.trace[1].writes[0][0]  # the load of the offsets
    assert all(any(r[0] == offset_alloc for r in i.reads) for i in ops)  # each reads its offset tile


def test_tensor_copy_dynamic_src_offset_tile_as_the_index_on_scalar_engine(old):
    mod, path = old
    x = np.random.default_rng(1).random((128, 512, 4)).astype(np.float32)
    offsets = (4 + np.arange(8, dtype=np.int32) * 50)[None, :]
    res = run_both_ways(path, mod, "dyn_src_axis", [x, offsets])
    np.testing.assert_array_equal(res.outputs[0], np.take(x, offsets[0], axis=1))
    assert {i.engine for i in _ops(res, "tensor_copy_dynamic_src")} == {"scalar"}


def test_tensor_copy_dynamic_dst_scatters_to_offsets(old):
    mod, path = old
    x = np.random.default_rng(2).random((128, 512)).astype(np.float32)
    offsets = np.array([[500, 3, 77, 4, 311, 10, 0, 511]], dtype=np.int32)
    res = run_both_ways(path, mod, "dyn_dst_scatter", [x, offsets])
    expect = np.zeros((128, 512), np.float32)
    expect[:, offsets[0]] = x[:, :8]
    np.testing.assert_array_equal(res.outputs[0], expect)
    assert [i.engine for i in _ops(res, "tensor_copy_dynamic_dst")] == ["vector"] * 8


def test_new_api_nl_ds_of_a_tile_and_the_gpsimd_engine(new):
    mod, path = new
    x = np.random.default_rng(3).random((128, 512)).astype(np.float32)
    offs = (np.arange(8, dtype=np.int32) * 61 + 5)[None, :]
    res = run_both_ways(path, mod, "dyn_new", [x, offs])
    np.testing.assert_array_equal(res.outputs[0], np.concatenate([x[:, o:o + 8] for o in offs[0]], axis=1))
    back = np.zeros_like(x)
    for o in offs[0]:
        back[:, o:o + 8] = x[:, o:o + 8]
    np.testing.assert_array_equal(res.outputs[1], back)
    assert {("tensor_copy_dynamic_src", "vector"), ("tensor_copy_dynamic_dst", "gpsimd")} <= _engines(res)


# ---------------------------------------------------------------------------- sequence_bounds, local_gather
@pytest.mark.parametrize("ids", [
    [[0, 1, 1, 2, 2, 2, 0, 3, 3]],  # the ISA reference's example
    [[5, 5, 5, 5]],
    [[0, 0, 0]],
    [[1, 2, 1, 0, 0, 7]],  # equal IDs apart are separate runs
])
def test_sequence_bounds_matches_the_reference(old, ids):
    mod, path = old
    seg = np.array(ids, dtype=np.int32)
    res = run_both_ways(path, mod, "seq_bounds", [seg])
    np.testing.assert_array_equal(res.outputs[0], _sequence_bounds_reference(seg[0]))
    if ids[0][:9] == [0, 1, 1, 2, 2, 2, 0, 3, 3]:
        np.testing.assert_array_equal(res.outputs[0][0], [[9, 1, 1, 3, 3, 3, 9, 7, 7], [-1, 3, 3, 6, 6, 6, -1, 9, 9]])
    assert [(i.engine, i.partitions, i.free) for i in _ops(res, "sequence_bounds")] == [("gpsimd", 1, seg.shape[1])]


def test_sequence_bounds_float_ids_and_an_int32_result(old):
    mod, path = old
    rng = np.random.default_rng(0)
    seg = np.sort(rng.integers(0, 32, size=32)).reshape(1, 32).astype(np.float32)  # the reference test's input
    res = run_both_ways(path, mod, "seq_bounds", [seg])
    assert res.outputs[0].dtype == np.float32
    np.testing.assert_array_equal(res.outputs[0], _sequence_bounds_reference(seg[0]))
    res = run_both_ways(path, mod, "seq_bounds_int", [seg])
    assert res.outputs[0].dtype == np.int32
    np.testing.assert_array_equal(res.outputs[0], _sequence_bounds_reference(seg[0]))


def test_local_gather_matches_the_reference(old):
    mod, path = old
    rng = np.random.default_rng(4)
    src = (rng.random((128, 512, 4)) * 100).astype(np.float32)
    index = np.tile(rng.integers(0, 512, size=(16, 4)).astype(np.uint16), (8, 1))  # the same indices on every core
    res = run_both_ways(path, mod, "local_gather_4", [src, (index * 4).astype(np.uint16)])
    expect = _local_gather_reference(src, index * 4, 4, 64).reshape(128, 4, 16, 4)
    np.testing.assert_array_equal(res.outputs[0], expect)
    # the NumPy equivalent in AWS's test, element blocks of 4 taken along axis 1
    for core_ in (0, 7):
        rows = slice(core_ * 16, core_ * 16 + 16)
        aws = np.take(src[rows], index[rows].flatten(order="F")[:64], axis=1)
        np.testing.assert_array_equal(res.outputs[0][rows].reshape(16, 64, 4), aws)
    (ins,) = _ops(res, "local_gather")
    assert (ins.engine, ins.partitions, ins.free) == ("gpsimd", 128, 256)


@pytest.mark.parametrize("dtype, shape", [(np.float32, (32, 256)), ("bfloat16", (64, 8, 16)), (np.int32, (16, 100))])
def test_local_gather_defaults_per_core_indices(old, dtype, shape):
    mod, path = old
    dt = BF16 if dtype == "bfloat16" else np.dtype(dtype)
    rng = np.random.default_rng(5)
    src = (rng.random(shape) * 50).astype(dt)
    free = int(np.prod(shape[1:]))
    index = rng.integers(0, free, size=(shape[0], 3)).astype(np.uint16)  # different indices on every core
    res = run_both_ways(path, mod, "local_gather_default", [src, index])
    expect = _local_gather_reference(src, index, 1, 48).reshape(shape[0], 48)
    np.testing.assert_array_equal(res.outputs[0], expect)
    assert res.outputs[0].dtype == dt


# ---------------------------------------------------------------------------- random numbers
def test_nisa_dropout_zeroes_with_the_probability_and_does_not_rescale(old):
    mod, path = old
    rng = np.random.default_rng(6)
    a = (rng.random((128, 512)) * 100 + 1).astype(np.float32)
    prob = np.zeros((128, 1), np.float32)
    prob[32:64] = 1.0
    prob[64:] = 0.5
    prob[100:] = 7.0  # AWS's own example passes rates up to 100: beyond 1 everything drops
    res = run_both_ways(path, mod, "isa_dropout", [a, prob])
    c, d = res.outputs
    np.testing.assert_array_equal(c[:32], a[:32])  # probability 0 keeps all
    assert not c[32:64].any() and not c[100:].any()  # probability 1 (and more) drops all
    kept = c[64:100] != 0
    assert 0.45 < 1 - kept.mean() < 0.55
    np.testing.assert_array_equal(c[64:100][kept], a[64:100][kept])  # kept values unscaled
    dropped = d == 0
    assert 0.28 < dropped.mean() < 0.32
    np.testing.assert_array_equal(d[~dropped], a[~dropped])
    assert [(i.engine, i.free) for i in _ops(res, "dropout")] == [("vector", 512)] * 2
    # deterministic: a second run draws the same
    again = execute(mod.isa_dropout, [a, prob], kernel_file=path)
    np.testing.assert_array_equal(again.outputs[1], d)


def test_rand_and_nl_dropout_follow_the_seed(tmp_path):
    # nl.rand is uniform in [0, 1); nl.random_seed restarts the stream (from a tile or an
    # integer); nl.dropout re-draws the same mask after the same seed (AWS's flash attention
    # backward relies on it)
    text = OLD.split("@nki.jit")[0] + '''
@nki.jit
def seeded(x, seed, rate):
    r1 = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    r2 = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    r3 = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    d1 = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    d2 = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    r4 = nl.ndarray((64, 32), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    s = nl.load(seed)
    t = nl.load(x)
    rt = nl.load(rate)
    nl.random_seed(seed=nl.add(s[0, 0], 1))
    nl.store(r1, nl.rand((128, 512), dtype=nl.float32))
    nl.store(d1, nl.dropout(t, rate=rt))
    nl.random_seed(seed=nl.add(s[0, 0], 1))
    nl.store(r2, nl.rand((128, 512)))
    nl.store(d2, nl.dropout(t, rate=rt))
    nl.random_seed(12345)
    nl.store(r3, nl.rand((128, 512), dtype=nl.float32))
    nl.store(r4, nl.rand((64, 32), dtype=nl.bfloat16))
    return r1, r2, r3, d1, d2, r4
'''
    mod, path = load_module(tmp_path, "seeded", text)
    x = np.random.default_rng(8).random((128, 512)).astype(np.float32) + 1
    res = run_both_ways(path, mod, "seeded", [x, np.array([[41]], np.int32), np.array([[0.4]], np.float32)])
    r1, r2, r3, d1, d2, r4 = res.outputs
    assert r1.min() >= 0 and r1.max() < 1 and abs(r1.mean() - 0.5) < 0.01
    np.testing.assert_array_equal(r1, r2)
    assert not np.array_equal(r1, r3)
    np.testing.assert_array_equal(d1, d2)
    assert 0.38 < (d1 == 0).mean() < 0.42  # a one-element rate tile applies to every partition
    assert r4.dtype == BF16
    assert ("random_seed", "vector") in _engines(res) and ("rand", "vector") in _engines(res)
    assert len(_ops(res, "random_seed")) == 3 and all(i.writes == () for i in _ops(res, "random_seed"))
    # without a seed the values are the same in every run (the fixed default seed)
    text2 = OLD.split("@nki.jit")[0] + '''
@nki.jit
def unseeded():
    r = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    h = nl.rand((4, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(r, nl.rand((128, 64), dtype=nl.float32))
    return r, h
'''
    mod2, path2 = load_module(tmp_path, "unseeded", text2)
    a = run_both_ways(path2, mod2, "unseeded", [])
    b = execute(mod2.unseeded, [], kernel_file=path2)
    np.testing.assert_array_equal(a.outputs[0], b.outputs[0])
    stream = np.random.default_rng(core.DEFAULT_RANDOM_SEED)  # one stream: h's draws come first
    np.testing.assert_array_equal(a.outputs[1], stream.random((4, 8), dtype=np.float32))
    np.testing.assert_array_equal(a.outputs[0], stream.random((128, 64), dtype=np.float32))
    assert [i.engine for i in _ops(a, "rand")] == ["dma", "vector"]  # an HBM tensor is filled by a DMA


def test_nl_dropout_rates_per_partition_and_mask(old):
    mod, path = old
    x = np.random.default_rng(9).random((128, 512)).astype(np.float32) + 1
    rates = np.linspace(0, 1, 128, dtype=np.float32).reshape(128, 1)
    res = run_both_ways(path, mod, "lang_dropout_rates", [x, rates])
    out, masked = res.outputs
    np.testing.assert_array_equal(out[0], x[0])
    assert not out[-1].any()
    assert np.corrcoef((out == 0).mean(axis=1), rates[:, 0])[0, 1] > 0.99
    assert not masked[:, :256].any() and (masked[:, 256:] == -1).all()  # rate 1 under the mask only


def test_fmod_takes_the_dividends_sign(old, new):
    mod, path = old
    rng = np.random.default_rng(10)
    x = (rng.standard_normal((128, 256)) * 5).astype(np.float32)
    y = (rng.choice([-1.0, 1.0], (128, 256)) * (rng.random((128, 256)) + 0.5)).astype(np.float32)
    res = run_both_ways(path, mod, "fmod_kernel", [x, y])
    np.testing.assert_allclose(res.outputs[0], np.fmod(x, y), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(res.outputs[1], np.fmod(x, np.float32(0.75)), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(res.outputs[2], np.fmod(x, y), rtol=1e-6, atol=1e-6)
    assert not np.allclose(res.outputs[0], np.mod(x, y))  # not nl.mod
    assert {i.engine for i in res.trace if i.info.get("op") == "fmod"} == {"vector"}


def test_new_api_forms(new):
    mod, path = new
    rng = np.random.default_rng(11)
    x = rng.random((128, 512)).astype(np.float32) + 1
    seg = np.repeat(np.arange(64, dtype=np.int32), 8).reshape(1, 512)
    index = rng.integers(0, 255, size=(128, 2)).astype(np.uint16)
    res = run_both_ways(path, mod, "misc_new", [x, seg, index, np.array([[5]], np.int32)])
    dropped, bounds, gathered, fm = res.outputs
    assert 0.23 < (dropped == 0).mean() < 0.27
    np.testing.assert_array_equal(dropped[dropped != 0], x[dropped != 0])
    np.testing.assert_array_equal(bounds, _sequence_bounds_reference(seg[0]))
    np.testing.assert_array_equal(gathered, _local_gather_reference(x, index, 2, 16).reshape(128, 32))
    np.testing.assert_allclose(fm, np.fmod(x, np.float32(0.3)), rtol=1e-6, atol=1e-6)
    # the same seed through a tile gives the same draws as in the older API's kernel process
    again = execute(mod.misc_new, [x, seg, index, np.array([[5]], np.int32)], kernel_file=path)
    np.testing.assert_array_equal(again.outputs[0], dropped)


# ---------------------------------------------------------------------------- atomic_rmw, all_reduce
def test_atomic_rmw_adds_at_indirect_rows_duplicates_included(old):
    mod, path = old
    rng = np.random.default_rng(12)
    x = (rng.random((128, 512)) * 100).astype(np.float32)
    value = (rng.random((128, 512)) * 100).astype(np.float32)
    res = run_both_ways(path, mod, "atomic", [x, np.arange(128, dtype=np.int32)[:, None], value])
    np.testing.assert_allclose(res.outputs[0], x + value, rtol=1e-6)  # AWS's example
    idx = (np.arange(128, dtype=np.int32) % 5)[:, None]  # five rows, each named ~25 times
    res = run_both_ways(path, mod, "atomic", [x, idx, value])
    expect = x.copy()
    np.add.at(expect, idx[:, 0], value)
    np.testing.assert_allclose(res.outputs[0], expect, rtol=1e-5)
    (ins,) = _ops(res, "atomic_rmw")
    assert ins.engine == "dma" and ins.info["bytes"] == 128 * 512 * 4
    assert any(r == ins.writes[0] for r in ins.reads)  # it reads what it writes (an accumulation)


def test_atomic_rmw_scalar_value_mask_and_predicate(old):
    mod, path = old
    x = np.zeros((128, 512), np.float32)
    idx = np.arange(128, dtype=np.int32)[::-1].copy()[:, None]
    res = run_both_ways(path, mod, "atomic_masked", [x, idx])
    expect = np.zeros((128, 512), np.float32)
    expect[:, :100] += 2.0
    expect[64:, :] += 1.0  # the predicate names rows by the index tile's partitions (indices > 63)
    np.testing.assert_array_equal(res.outputs[0], expect)


def test_atomic_rmw_new_api(new):
    mod, path = new
    rng = np.random.default_rng(13)
    x = rng.random((300, 64)).astype(np.float32)
    idx = rng.integers(0, 300, size=(128, 1)).astype(np.int32)
    v = rng.random((128, 64)).astype(np.float32)
    res = run_both_ways(path, mod, "atomic_new", [x, idx, v])
    expect = x.copy()
    np.add.at(expect, idx[:, 0], v)
    np.testing.assert_allclose(res.outputs[0], expect, rtol=1e-6)


def test_all_reduce_of_one_program_is_the_tile(old):
    mod, path = old
    x = np.random.default_rng(14).standard_normal((128, 64)).astype(np.float32)
    res = run_both_ways(path, mod, "all_reduce_one", [x])
    np.testing.assert_array_equal(res.outputs[0], x.astype(res.outputs[0].dtype))
    assert [i.engine for i in _ops(res, "all_reduce")] == ["dma"]
    # a launch grid of one program along the axis: still one participant
    res = execute(mod.all_reduce_one, [x], kernel_file=path, grid=(1, 2))
    np.testing.assert_array_equal(res.outputs[0], x.astype(res.outputs[0].dtype))


def test_all_reduce_across_programs_is_refused(old):
    mod, path = old
    with pytest.raises(NkiError, match="not supported in the interpreter") as info:
        execute(mod.all_reduce_one, [np.ones((128, 64), np.float32)], kernel_file=path, grid=(2,))
    assert "2 SPMD programs" in str(info.value)


# ---------------------------------------------------------------------------- what they refuse
HEADER_OLD = OLD.split("@nki.jit")[0]


@pytest.mark.parametrize("body, message", [
    # views at a dynamic offset
    ("y = nl.copy(t[:, off[0, 0]])", "only nisa.tensor_copy_dynamic_src reads"),
    ("t[:, off[0, 0]] = nl.copy(t[:, 0:1])", "nisa.tensor_copy_dynamic_dst writes"),
    ("y = nisa.tensor_copy_dynamic_src(t[off[0, 0], 0:4])", "free axis"),
    ("y = nisa.tensor_copy_dynamic_src(t[:, nl.copy(t[0:1, 0:1])])", "one-element integer tile"),
    ("y = nisa.tensor_copy_dynamic_src(t[:, off[0, 0:2]])", "one-element integer tile"),
    ("p = nl.zeros((1, 1), dtype=nl.int32, buffer=nl.psum)\n    y = nisa.tensor_copy_dynamic_src(t[:, p])",
     "in SBUF"),
    ("y = nisa.tensor_copy_dynamic_src(t[:, nl.ds(off[0, 7], 8)])", "dynamic offset 510 puts the view"),
    ("y = t + nl.arange(512)[None, :]", "one-element integer tile"),
    ("y = nl.multiply(off[0, 0], nl.arange(4)[None, :])", "index expression added"),
    ("y = nl.load(x[:, off[0, 0] + nl.arange(8)[None, :]])", "indirect DMA"),
    ("ps = nl.zeros((128, 8), dtype=nl.float32, buffer=nl.psum)\n"
     "    nisa.tensor_copy_dynamic_dst(dst=ps[:, nl.ds(off[0, 0], 4)], src=t[:, 0:4], engine=nisa.gpsimd_engine)",
     "GpSimdE cannot access PSUM"),
    ("nisa.tensor_copy_dynamic_dst(dst=t[:, nl.ds(off[0, 0], 4)], src=t[:, 0:8])", "same partitions"),
    # sequence_bounds
    ("y = nisa.sequence_bounds(segment_ids=t)", "one partition"),
    ("y = nisa.sequence_bounds(segment_ids=nl.copy(t[0:1, :], dtype=nl.bfloat16))", "float32 or int32"),
    ("y = nisa.sequence_bounds(segment_ids=nl.subtract(t[0:1, :], 2.0))", "non-negative integers"),
    ("y = nisa.sequence_bounds(segment_ids=off, dtype=nl.float16)", "float32 or int32"),
    # local_gather
    ("y = nisa.local_gather(t, nl.copy(ix, dtype=nl.uint32))", "uint16"),
    ("y = nisa.local_gather(t[0:8, :], ix[0:8, :])", "multiple of 16"),
    ("y = nisa.local_gather(t, ix, 3)", "num_elem_per_idx"),
    ("y = nisa.local_gather(t, ix, 1, 65)", "num_valid_indices"),
    ("y = nisa.local_gather(t, nl.add(ix, 509, dtype=nl.uint16), 4)", "past element"),
    ("ps = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)\n    y = nisa.local_gather(ps, ix)", "PSUM"),
    # dropout
    ("y = nisa.dropout(t, prob=t[:, 0:2])", "(128, 1) tile"),
    ("y = nisa.dropout(t, prob=nl.copy(off[0:1, 0:1]))", "float tile"),
    ("y = nisa.dropout(nl.copy(t, dtype=nl.int32), prob=nl.copy(t[:, 0:1], dtype=nl.bfloat16))",
     "float32 when data is an integer"),
    ("y = nisa.dropout(nl.copy(t, dtype=nl.int32), prob=0.5, dtype=nl.float32)", "must be data's"),
    ("y = nisa.dropout(t, prob='half')", "number or a (128, 1) tile"),
    ("y = nl.dropout(t, rate=t[0:2, 0:1])", "(128, 1) tile"),
    ("y = nisa.dropout(x, prob=0.5)", "HBM tensor"),
    # random_seed
    ("nl.random_seed(seed=off)", "[1, 1] tile"),
    ("nl.random_seed(1.5)", "integer tile or an integer"),
    ("nl.random_seed(seed=nl.copy(t[0:1, 0:1]))", "must be an integer"),
    # atomic_rmw
    ("nl.atomic_rmw(out[0:128, :], value=t, op=np.add)", "only indirect dynamic indexing"),
    ("nl.store(out, t)\n    nl.atomic_rmw(out[idx, nl.arange(512)[None, :]], value=t, op=np.multiply)",
     "only op=np.add"),
    ("nl.atomic_rmw(t[:, 0:8], value=t[:, 0:8], op=np.add)", "updates HBM data"),
    ("nl.atomic_rmw(t[idx, nl.arange(512)[None, :]], value=t, op=np.add)", "free axis"),
    ("nl.store(out, t)\n    nl.atomic_rmw(out[idx, nl.arange(512)[None, :]], value=t[:, 0:8], op=np.add)",
     "same partitions"),
    ("nl.atomic_rmw(out[idx, nl.arange(512)[None, :]], value=t, op=np.add)", "no instruction wrote"),
    ("nl.store(out, t)\n    nl.atomic_rmw(out[idx, nl.arange(512)[None, :]], value='t', op=np.add)",
     "tile or a number"),
    # all_reduce
    ("y = nl.all_reduce(t, op=np.subtract, program_axes=0)", "reduction operator"),
    ("y = nl.all_reduce(t, op=np.add, program_axes='x')", "program_axes"),
])
def test_what_they_refuse(tmp_path, body, message):
    text = HEADER_OLD + (
        "@nki.jit\ndef bad(x, o, i, ii):\n    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)\n"
        "    t = nl.load(x)\n    off = nl.load(o)\n    ix = nl.load(i)\n    idx = nl.load(ii)\n"
        f"    {body}\n    nl.store(out, value=t)\n    return out\n")
    mod, path = load_module(tmp_path, "additions_bad", text)
    args = [np.random.default_rng(0).random((128, 512)).astype(np.float32),
            np.array([[0, 1, 2, 3, 4, 5, 6, 510]], np.int32),
            np.zeros((128, 4), np.uint16), np.arange(128, dtype=np.int32)[:, None]]
    with pytest.raises(NkiError) as info:
        execute(mod.bad, args, kernel_file=path)
    assert message in str(info.value), str(info.value)


@pytest.mark.parametrize("body, message", [
    ("nisa.dropout(dst=y_bf16, data=t, prob=0.5)", "must be data's"),
    ("nisa.local_gather(dst=y_bf16[:, 0:64], src_buffer=t, index=ix)", "does not cast"),
    ("nisa.sequence_bounds(dst=y[0:1, 0:3], segment_ids=off[0:1, 0:3])", "shape"),
    ("nl.random_seed(3, mask=True)", "mask= belongs to the older"),
    ("nisa.tensor_copy_dynamic_src(y, t)", "shape"),
    ("nisa.tensor_copy_dynamic_src(dst=y[:, 0:4], src=t[:, nl.ds(off[0, 0], 4)], engine=nisa.tensor_engine)",
     "engine=tensor"),
    ("nisa.tensor_copy_dynamic_src(t[:, nl.ds(off[0, 0], 4)])", "src must be an NKI tensor"),
    ("nisa.tensor_copy(dst=y[:, 0:4], src=t[:, nl.ds(off[0, 0], 4)])", "only nisa.tensor_copy_dynamic_src reads"),
])
def test_what_the_new_api_forms_refuse(tmp_path, body, message):
    text = NEW.split("@nki.jit")[0] + (
        "@nki.jit\ndef bad(x, o, i):\n    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)\n"
        "    t = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)\n    nisa.dma_copy(dst=t, src=x)\n"
        "    off = nl.ndarray((1, 8), dtype=nl.int32, buffer=nl.sbuf)\n    nisa.dma_copy(dst=off, src=o)\n"
        "    ix = nl.ndarray((128, 4), dtype=nl.uint16, buffer=nl.sbuf)\n    nisa.dma_copy(dst=ix, src=i)\n"
        "    y = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.sbuf)\n"
        "    y_bf16 = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.sbuf)\n"
        f"    {body}\n    nisa.dma_copy(dst=out, src=t)\n    return out\n")
    mod, path = load_module(tmp_path, "additions_bad_new", text)
    args = [np.random.default_rng(0).random((128, 512)).astype(np.float32),
            np.arange(8, dtype=np.int32)[None, :], np.zeros((128, 4), np.uint16)]
    with pytest.raises(NkiError) as info:
        execute(mod.bad, args, kernel_file=path)
    assert message in str(info.value), str(info.value)


def test_host_arrays_stay_out_of_tile_data_in_the_kernel_process(tmp_path):
    """Through the kernel process an index expression may be added to an offset tile (the
    interpreter reads it as a dynamic offset's index), never to other tiles: that stays the
    error it was, with the same message."""
    from autocomp.backends.nki.remote import KernelFailure, KernelProcess

    text = HEADER_OLD + '''
@nki.jit
def sneaky(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out, value=t + nl.arange(64)[None, :])
    return out
'''
    path = tmp_path / "sneaky.py"
    path.write_text(text)
    proc = KernelProcess(str(path), "sneaky")
    try:
        proc.load()
        with pytest.raises(KernelFailure) as info:
            execute(proc.kernel, [np.zeros((128, 64), np.float32)], kernel_file=str(path), names=proc.names)
    finally:
        proc.close()
    assert "host array can only index" in info.value.error["message"]


# ---------------------------------------------------------------------------- cost and the reorder proof
def test_the_cost_model_takes_every_new_instruction(old, new):
    mod, path = old
    rng = np.random.default_rng(15)
    x = rng.random((128, 512)).astype(np.float32)
    traces = [
        run_both_ways(path, mod, "dyn_src_offsets", [x, np.arange(64, dtype=np.int32)[None, :]]).trace,
        execute(mod.atomic, [x, np.arange(128, dtype=np.int32)[:, None], x], kernel_file=path).trace,
        execute(mod.isa_dropout, [x, np.full((128, 1), 0.5, np.float32)], kernel_file=path).trace,
        execute(mod.all_reduce_one, [x[:, :64]], kernel_file=path).trace,
        execute(mod.local_gather_4, [rng.random((128, 512, 4)).astype(np.float32), np.zeros((128, 4), np.uint16)],
                kernel_file=path).trace,
        execute(mod.seq_bounds, [np.ones((1, 64), np.int32)], kernel_file=path).trace,
    ]
    nmod, npath = new
    traces.append(execute(nmod.misc_new, [x, np.ones((1, 512), np.int32), np.zeros((128, 2), np.uint16),
                                          np.array([[1]], np.int32)], kernel_file=npath).trace)
    engines = {}
    for trace in traces:
        est = estimate(trace)
        assert est.cycles > 0 and est.instructions == len(trace)
        for ins in trace:
            engines[ins.op] = ins.engine
    for op, engine in {"tensor_copy_dynamic_src": "vector", "atomic_rmw": "dma", "dropout": "vector",
                       "all_reduce": "dma", "local_gather": "gpsimd", "sequence_bounds": "gpsimd",
                       "random_seed": "vector"}.items():
        assert engines[op] == engine, op
    # a local_gather costs GpSimdE time that grows with what it gathers
    small = estimate([i for i in traces[4] if i.op == "local_gather"])
    assert small.engines["gpsimd"].busy > 0


def test_random_draws_in_affine_loops_leave_the_order_to_the_reversed_run(tmp_path):
    text = NEW.split("@nki.jit")[0] + '''
@nki.jit
def k(x, seed):
    out = nl.ndarray((256, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    s = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=seed)
    for i in nl.affine_range(2):
        t = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[i * 128:(i + 1) * 128, :])
        nl.random_seed(nl.add(s, i))
        d = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dropout(dst=d, data=t, prob=0.5)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=d)
    return out
'''
    mod, path = load_module(tmp_path, "affine_draws", text)
    x = np.ones((256, 64), np.float32)
    seed = np.array([[3]], np.int32)
    first = execute(mod.k, [x, seed], kernel_file=path, prove_reorder=True)
    assert first.reorder_conflict and "random" in first.reorder_conflict
    # seeded per iteration, the reversed run draws the same values
    rev = execute(mod.k, [x, seed], kernel_file=path, reverse_affine=True)
    np.testing.assert_array_equal(first.outputs[0], rev.outputs[0])


# ---------------------------------------------------------------------------- the whole evaluation
E2E = '''import numpy as np
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def gather_drop(x, offs, rows, seed):
    out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.ndarray((256, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    o = nl.ndarray((1, 8), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=o, src=offs)
    s = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=seed)
    res = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.sbuf)
    for i in nl.affine_range(8):
        g = nl.ndarray((128, 8), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy_dynamic_src(dst=g, src=t[:, nl.ds(o[0, i], 8)])
        nl.random_seed(nl.add(s, i))
        nisa.dropout(dst=res[:, i * 8:(i + 1) * 8], data=g, prob=0.25)
    nisa.dma_copy(dst=out, src=res)
    z = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=z, value=0.0)
    nisa.dma_copy(dst=acc[0:128, :], src=z)
    nisa.dma_copy(dst=acc[128:256, :], src=z)
    r = nl.ndarray((128, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=r, src=rows)
    nl.atomic_rmw(acc[r, nl.arange(64)[None, :]], value=res, op=nl.add)
    return out, acc


def get_inputs(rng):
    return [rng.standard_normal((128, 512)).astype(np.float32),
            (np.arange(8, dtype=np.int32) * 63)[None, :],
            rng.integers(0, 256, size=(128, 1)).astype(np.int32),
            np.array([[17]], dtype=np.int32)]
'''


def test_a_kernel_using_them_goes_through_the_evaluation(tmp_path):
    from autocomp.backends import get_backend
    from autocomp.model import Verdict

    path = tmp_path / "gather_drop.py"
    path.write_text(E2E)
    backend = get_backend("nki", {"timeout": 30, "seeds": [0, 1]})
    problem = backend.make_problem(str(path), E2E)
    start, end = E2E.index("@nki.jit"), E2E.index("def get_inputs")
    original = E2E[start:end].rstrip() + "\n"
    copy = original.rstrip("\n") + "  # a copy\n"
    wrong = original.replace("prob=0.25", "prob=0.5")
    good, bad = asyncio.run(backend.evaluate(problem, [copy, wrong]))
    assert good.verdict is Verdict.CORRECT, good.feedback
    assert good.metrics["cycles"].value > 0 and "not a measurement" in good.feedback
    assert bad.verdict is Verdict.INCORRECT, bad.feedback
