"""Probe kernels for the NKI API text in prompts/nki/api/: every call, constant and operator
name the text mentions appears in a probe of that API style, and every probe runs in the
interpreter and passes the validator (tests/prompts/test_nki_api.py)."""

from __future__ import annotations

from autocomp.backends.nki.interp.isa import BINARY, BITVEC, UNARY

ACTIVATIONS = sorted(set(UNARY) - BITVEC)  # (on float data; the bitvec operators get integer tiles)
BINARIES = sorted(set(BINARY) - BITVEC)
REDUCTIONS = ["add", "maximum", "minimum", "multiply"]

HEADER_NEW = """\
import numpy as np
import nki
import nki.language as nl
import nki.isa as nisa
"""

HEADER_OLD = """\
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.isa as nisa
"""


def _lines(template: str, names: list[str]) -> str:
    return "".join(template.format(op=n) for n in names)


# -- the `nki` API ------------------------------------------------------------------------
NEW = HEADER_NEW + '''

@nki.jit
def ops(x):
    # x: (128, 512) float32, positive
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x, oob_mode=nisa.oob_mode.error)
    acc = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    y = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
''' + _lines("    nisa.activation(dst=y, op=nl.{op}, data=t, scale=0.001)\n"
             "    nisa.tensor_tensor(dst=acc, data1=acc, data2=y, op=nl.add)\n", ACTIVATIONS) + \
    _lines("    nisa.tensor_tensor(dst=y, data1=t, data2=t, op=nl.{op})\n"
           "    nisa.tensor_tensor(dst=acc, data1=acc, data2=y, op=nl.add)\n", BINARIES) + \
    _lines("    r_{op} = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)\n"
           "    nisa.tensor_reduce(dst=r_{op}, op=nl.{op}, data=t, axis=1)\n", REDUCTIONS) + '''
    r = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=r, op=nl.maximum, data=t, axis=1, negate=True, keepdims=True)
    nisa.activation(dst=y, op=nl.exp, data=t, bias=r, scale=1.0, reduce_op=nl.add, reduce_res=r_add)
    nisa.activation_reduce(dst=y, op=nl.exp, data=t, reduce_op=nl.maximum, reduce_res=r_maximum, bias=r, scale=0.5)
    nisa.tensor_scalar(dst=y, data=t, op0=nl.multiply, operand0=r, reverse0=False, op1=nl.add, operand1=1.0,
                       reverse1=True, engine=nisa.scalar_engine)
    nisa.tensor_scalar(dst=y, data=t, op0=nl.add, operand0=1e-5, op1=nl.power, operand1=-0.5)
    nisa.scalar_tensor_tensor(dst=y, data=t, op0=nl.multiply, operand0=2.0, op1=nl.add, operand1=acc)
    nisa.tensor_tensor(dst=y, data1=t, data2=y, op=nl.subtract, engine=nisa.gpsimd_engine)
    nisa.reciprocal(dst=y, data=t)
    nisa.tensor_copy(dst=y, src=t, engine=nisa.vector_engine)
    nisa.tensor_copy(dst=y, src=t, engine=nisa.gpsimd_engine)
    nisa.memset(dst=y, value=0.0, engine=nisa.gpsimd_engine)
    nisa.memset(dst=y, value=1.0)
    nisa.tensor_scalar_reduce(dst=y, data=t, op0=nl.multiply, operand0=2.0, reduce_op=nl.add, reduce_res=r_add)
    nisa.tensor_tensor_scan(dst=y, data0=t, data1=t, initial=0.0, op0=nl.multiply, op1=nl.add)
    g = nl.mgrid[0:128, 0:512]
    nisa.affine_select(dst=y, pred=(g.x <= g.p), on_true_tile=t, on_false_value=0.0)
    nisa.tensor_copy_predicated(dst=y, src=y, predicate=(g.x <= g.p))  # (y unchanged)
    pr = nl.ndarray((1, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_partition_reduce(dst=pr, op=nl.add, data=t)
    idx = nl.ndarray((128, 512), dtype=nl.int32, buffer=nl.sbuf)
    nisa.iota(dst=idx, expr=nl.arange(128)[:, None] * 512 + nl.arange(512)[None, :])
    stats = nl.ndarray((128, 6), dtype=nl.float32, buffer=nl.sbuf)
    nisa.bn_stats(dst=stats, data=t[:, nl.ds(0, nl.tile_size.bn_stats_fmax)])
    mv = nl.ndarray((128, 2), dtype=nl.float32, buffer=nl.sbuf)
    nisa.bn_aggr(dst=mv, data=stats)
    nisa.tensor_tensor(dst=acc, data1=acc, data2=y, op=nl.add)
    nisa.dma_copy(dst=out, src=acc)
    return out


@nki.jit
def matmul(a_t, b):
    # a_t: (128, 128), b: (128, 512); out = a_t.T @ b, K split in two accumulating steps
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    sa = nl.ndarray((nl.tile_size.pmax, nl.tile_size.gemm_stationary_fmax), dtype=a_t.dtype, buffer=nl.sbuf)
    sb = nl.ndarray((128, nl.tile_size.gemm_moving_fmax), dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=sa, src=a_t)
    nisa.dma_copy(dst=sb, src=b)
    for n in nl.affine_range(2):
        ps = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.psum)
        for k in nl.sequential_range(2):
            nisa.nc_matmul(dst=ps, stationary=sa[k * 64:(k + 1) * 64, :], moving=sb[k * 64:(k + 1) * 64, nl.ds(n * 256, 256)])
        res = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=ps)
        nisa.dma_copy(dst=out[:, n * 256:(n + 1) * 256], src=res)
    return out


@nki.jit
def matmul_explicit(a_t, b):
    # the same with accumulate=False then True, in one PSUM tile reused (correctly) per n
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    sa = nl.ndarray((128, 128), dtype=a_t.dtype, buffer=nl.sbuf)
    sb = nl.ndarray((128, 512), dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=sa, src=a_t)
    nisa.dma_copy(dst=sb, src=b)
    ps = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.psum)
    for n in nl.sequential_range(2):
        nisa.nc_matmul(dst=ps, stationary=sa[0:64, :], moving=sb[0:64, n * 256:(n + 1) * 256], accumulate=False)
        nisa.nc_matmul(dst=ps, stationary=sa[64:128, :], moving=sb[64:128, n * 256:(n + 1) * 256], accumulate=True)
        res = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=ps, engine=nisa.scalar_engine)
        nisa.dma_copy(dst=out[:, n * 256:(n + 1) * 256], src=res)
    return out


@nki.jit
def stale_psum(a_t, b):
    # the pitfall the API text warns about: a PSUM tile reused without accumulate=False
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    sa = nl.ndarray((128, 128), dtype=a_t.dtype, buffer=nl.sbuf)
    sb = nl.ndarray((128, 512), dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=sa, src=a_t)
    nisa.dma_copy(dst=sb, src=b)
    ps = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.psum)
    for n in nl.sequential_range(2):
        nisa.nc_matmul(dst=ps, stationary=sa, moving=sb[:, n * 256:(n + 1) * 256])
        res = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=ps)
        nisa.dma_copy(dst=out[:, n * 256:(n + 1) * 256], src=res)
    return out


@nki.jit
def shapes(x):
    # x: (256, 128) float32: blocks before par_dim, transposes on both engines, tails, dtypes
    out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    blocks = nl.ndarray((2, nl.par_dim(128), 128), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(2):
        nisa.dma_copy(dst=blocks[i], src=x[i * 128:(i + 1) * 128, :])
    tr = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.static_range(2):
        pt = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_transpose(dst=pt, data=blocks[i], engine=nisa.tensor_engine)
        nisa.tensor_copy(dst=tr[:, i * 128:(i + 1) * 128], src=pt)
    vt = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.nc_transpose(dst=vt, data=blocks[0], engine=nisa.vector_engine)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(128)[None, :]
    tail = nl.ones((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=tail[i_p, i_f], src=x[200 + i_p, i_f], oob_mode=nisa.oob_mode.skip)
    small = nl.full((128, 1), 2.0, dtype=nl.bfloat16, buffer=nl.sbuf)
    z = nl.zeros_like(small)
    e = nl.ndarray_like(small)
    nisa.tensor_copy(dst=e, src=z)
    h = nl.ndarray((128, 1), dtype=nl.float16, buffer=nl.sbuf)
    nisa.tensor_copy(dst=h, src=small)
    q = nl.ndarray((128, 1), dtype=nl.float8_e4m3, buffer=nl.sbuf)
    nisa.tensor_copy(dst=q, src=small)
    q5 = nl.ndarray((128, 1), dtype=nl.float8_e5m2, buffer=nl.sbuf)
    nisa.tensor_copy(dst=q5, src=small)
    n32 = nl.ndarray((128, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=n32, src=small)
    n16 = nl.ndarray((128, 1), dtype=nl.int16, buffer=nl.sbuf)
    nisa.tensor_copy(dst=n16, src=small)
    n8 = nl.ndarray((128, 1), dtype=nl.int8, buffer=nl.sbuf)
    nisa.tensor_copy(dst=n8, src=small)
    u8 = nl.ndarray((128, 1), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.tensor_copy(dst=u8, src=small)
    bl = nl.ndarray((128, 1), dtype=nl.bool_, buffer=nl.sbuf)
    nisa.tensor_copy(dst=bl, src=small)
    f1 = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    f2 = nl.ndarray((128, 1), dtype=nl.bfloat16, buffer=nl.sbuf)
    f3 = nl.ndarray((128, 1), dtype=nl.float16, buffer=nl.sbuf)
    f4 = nl.ndarray((128, 1), dtype=nl.tfloat32, buffer=nl.sbuf)
    nisa.memset(dst=f1, value=nl.finfo(nl.float32).max)
    nisa.memset(dst=f2, value=nl.bf16.min + nl.fp16.max)
    nisa.memset(dst=f3, value=float(nl.tile_size.psum_fmax + nl.tile_size.psum_num_banks))
    nisa.memset(dst=f4, value=nl.fp32.min)
    col = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=col, src=tr[:, 3])
    nisa.tensor_scalar(dst=tr, data=tr, op0=nl.add, operand0=col)
    t3 = nl.ndarray((128, 2, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=t3[:, 0, :], src=tr[:, 0:128])
    nisa.tensor_copy(dst=t3[:, 1, :], src=tr[:, 128:256])
    g3 = nl.mgrid[0:128, 0:2, 0:128]
    t3b = nl.ndarray((128, 2, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=t3b, src=t3[g3.p, g3.x, g3.y])
    nisa.tensor_copy(dst=tr[:, 0:128], src=t3b[:, 1, :])
    tt = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_transpose(dst=tt, src=x[0:128, :])
    nisa.tensor_tensor(dst=tr[:, 0:128], data1=tr[:, 0:128], data2=tt, op=nl.add)
    nisa.tensor_tensor(dst=tr[:, 0:128], data1=tr[:, 0:128], data2=tail, op=nl.add)
    nisa.tensor_tensor(dst=tr[:, 128:256], data1=tr[:, 128:256], data2=vt, op=nl.add)
    for j in range(1):
        nisa.dma_copy(dst=out, src=tr)
    return out


@nki.jit
def extras(x):
    # x: (128, 512) float32; run with a launch grid of 2
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    scale = (nl.program_id(0) + 1) * nl.num_programs(0) * nl.program_ndim() * nl.spmd_dim(1, nl.nc(1))
    big = nl.iinfo(nl.uint16).max + nl.iinfo(nl.uint32).min
    eye = nl.shared_constant(np.identity(128, dtype=np.int8), dtype=nl.float32)
    half = nl.static_cast(0.5, nl.float32)
    e = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=e, src=eye)
    scratch = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.private_hbm)
    nisa.dma_copy(dst=scratch, src=t)
    spare = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.hbm)
    nisa.dma_copy(dst=spare, src=scratch, dge_mode=nisa.dge_mode.hwdge)
    nisa.dma_copy(dst=spare, src=t, dst_rmw_op=nl.add)
    gi = nl.ndarray((128, 64), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.iota(dst=gi, pattern=[[2, 64]], offset=1, channel_multiplier=0)
    gv = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.nc_n_gather(dst=gv, data=t, indices=gi)
    gw = nl.gather_flattened(t, gi)
    u = nl.empty_like(t)
    nisa.dma_copy(dst=u, src=spare)
    nl.device_print("u", u)
    r = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=u, op=nl.copy, data=u, scale=float(scale) / float(scale), reduce_op=nl.add, reduce_res=r,
                    reduce_cmd=nisa.reduce_cmd.reset_reduce)
    wide = nl.broadcast_to(r, (128, 512))
    nisa.tensor_tensor(dst=u, data1=u, data2=wide, op=nl.subtract)
    version = nisa.get_nc_version()
    gen = nisa.nc_version.gen2
    nisa.tensor_copy(dst=u, src=u, engine=nisa.unknown_engine)
    p = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=p, stationary=e, moving=u)
    sa = nl.ndarray((128, 2, 64), dtype=nl.float8_e4m3, buffer=nl.sbuf)
    ma = nl.ndarray((128, 2, 256), dtype=nl.float8_e4m3, buffer=nl.sbuf)
    nisa.memset(dst=sa, value=0.5)
    nisa.memset(dst=ma, value=0.25)
    pd = nl.ndarray((64, 256), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=pd, stationary=sa, moving=ma, perf_mode=nisa.matmul_perf_mode.double_row)
    hb = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.tensor_copy(dst=hb, src=t)
    q4 = nl.ndarray((128, 128), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    s4 = nl.ndarray((128, 128), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.quantize_mx(dst=q4, src=hb, dst_scale=s4)
    q5 = nl.ndarray((128, 128), dtype=nl.float8_e5m2_x4, buffer=nl.sbuf)
    s5 = nl.ndarray((128, 128), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.quantize_mx(dst=q5, src=hb, dst_scale=s5)
    f4 = nl.ndarray((128, 128), dtype=nl.float4_e2m1fn_x4, buffer=nl.sbuf)
    mx = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul_mx(dst=mx, stationary=q4, moving=q4, stationary_scale=s4, moving_scale=s4)
    nisa.nc_matmul_mx(dst=mx, stationary=q5, moving=q5, stationary_scale=s5, moving_scale=s5, accumulate=False)
    nisa.tensor_copy(dst=u, src=p)
    nisa.dma_copy(dst=out, src=u)
    return out


@nki.jit
def composites(x):
    # the composite helpers (NKI 2.29+ nki.language), each a new tile
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    sm = nl.softmax(t, axis=1)
    rn = nl.rms_norm(t, sm, axis=1, n=512)
    v = nl.var(rn, axis=1)
    eye = nl.shared_identity_matrix(128, dtype=nl.float32)
    e3 = nl.expand_dims(eye, 2)
    r = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=r, data=rn, op0=nl.add, operand0=v)
    nisa.tensor_tensor(dst=r[:, 0:128], data1=r[:, 0:128], data2=e3.reshape((128, 128)), op=nl.add)
    ti = nl.ndarray((128, 512), dtype=nl.int32, buffer=nl.sbuf)
    nisa.iota(dst=ti, expr=nl.arange(128)[:, None] * 512 + nl.arange(512)[None, :])
    bi = nl.ndarray((128, 512), dtype=nl.int32, buffer=nl.sbuf)
''' + _lines("    nisa.tensor_tensor(dst=bi, data1=ti, data2=ti, op=nl.{op})\n",
             sorted(BITVEC - {"invert", "left_shift"})) + '''
    nisa.tensor_scalar(dst=bi, data=ti, op0=nl.left_shift, operand0=2)
    bn = nl.invert(bi)
    m8 = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
    i8 = nl.ndarray((128, 8), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.max8(dst=m8, src=r)
    nisa.nc_find_index8(dst=i8, data=r, vals=m8)
    nisa.nc_match_replace8(dst=r, data=r, vals=m8, imm=0.0)
    b0 = nl.zeros((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    b1 = nl.full((128, 1), 64.0, dtype=nl.float32, buffer=nl.sbuf)
    rmax = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.range_select(dst=r, on_true_tile=r, comp_op0=nl.greater_equal, comp_op1=nl.less, bound0=b0, bound1=b1,
                      reduce_cmd=nisa.reduce_cmd.reset_reduce, reduce_res=rmax, reduce_op=nl.maximum, range_start=0)
    pu = nl.ndarray((128, 512), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.memset(dst=pu, value=1)
    nisa.select_reduce(dst=r, predicate=pu, on_true=r, on_false=0.0, reduce_res=rmax, reduce_cmd=nisa.reduce_cmd.reduce)
    rsum = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.exponential(dst=r, src=r, max_value=rmax, reduce_res=rsum)
    nisa.nc_stream_shuffle(dst=r, src=r, shuffle_mask=[255] * 32)
    nisa.dma_copy(dst=out, src=r)
    return out


@nki.jit
def additions(x):
    # x: (128, 512) float32: dynamic offsets, random numbers, gathers, atomics, collectives
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    off = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.iota(dst=off, expr=nl.arange(1)[:, None] * 0 + 100)
    g = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy_dynamic_src(dst=g, src=t[:, nl.ds(off[0, 0], 8)])
    nisa.tensor_copy_dynamic_dst(dst=t[:, nl.ds(off[0, 0], 8)], src=g)
    nl.random_seed(off)
    rnd = nl.rand((128, 512), dtype=nl.float32)
    d = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dropout(dst=d, data=t, prob=0.1)
    d2 = nl.dropout(rnd, rate=0.1)
    fm = nl.fmod(d2, 0.5)
    seg = nl.ndarray((1, 512), dtype=nl.int32, buffer=nl.sbuf)
    nisa.iota(dst=seg, expr=nl.arange(1)[:, None] + nl.arange(512)[None, :] // 4)
    bounds = nl.ndarray((1, 2, 512), dtype=nl.int32, buffer=nl.sbuf)
    nisa.sequence_bounds(dst=bounds, segment_ids=seg)
    li = nl.ndarray((128, 2), dtype=nl.uint16, buffer=nl.sbuf)
    nisa.iota(dst=li, expr=nl.arange(128)[:, None] * 0 + nl.arange(2)[None, :] * 8)
    lg = nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.sbuf)
    nisa.local_gather(dst=lg, src_buffer=t, index=li, num_elem_per_idx=1)
    red = nl.all_reduce(fm, op=nl.add, program_axes=0)
    nisa.tensor_tensor(dst=d, data1=d, data2=red, op=nl.add)
    nisa.dma_copy(dst=out, src=d)
    rows = nl.ndarray((128, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.iota(dst=rows, expr=nl.arange(128)[:, None])
    nl.atomic_rmw(out[rows, nl.arange(512)[None, :]], value=t, op=nl.add)
    return out
'''

# -- the older neuronxcc.nki API ------------------------------------------------------------
OLD = HEADER_OLD + '''

GRID = (2,)


@nki.jit
def ops(x):
    # x: (256, 512) float32 positive, two programs of 128 rows each
    out = nl.ndarray((256, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    pid = nl.program_id(0)
    rows = 256 // nl.num_programs(0)
    t = nl.load(x[pid * rows:(pid + 1) * rows, :])
    acc = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.sbuf)
''' + _lines("    acc[...] = nl.add(acc, nl.{op}(nl.multiply(t, 0.001)))\n", [a for a in ACTIVATIONS if a != "copy"]) + \
    _lines("    acc[...] = nl.add(acc, nl.{op}(t, t))\n", BINARIES) + '''
    s = nl.sum(t, axis=1, keepdims=True)
    m = nl.max(t, axis=1)
    mn = nl.min(t, axis=1, keepdims=True)
    me = nl.mean(t, axis=1, keepdims=True)
    pr = nl.prod(nl.multiply(t, 0.0) + 1.0, axis=1, keepdims=True)
    acc[...] = acc + s + me - mn + pr
    acc[...] = nl.subtract(acc, m)
    acc[...] = acc * 2.0 - t
    acc[...] = -acc
    acc[...] = nl.where(nl.greater(t, 1.0), acc, t)
    acc[...] = nl.copy(acc)
    row = nl.load(x[0:1, :])
    acc[...] = nl.add(acc, row.broadcast_to((128, 512)))
    neg = nisa.tensor_reduce(nl.maximum, t, 1, negate=True, keepdims=True)
    r = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    e = nisa.activation_reduce(nl.exp, t, reduce_op=nl.add, reduce_res=r, bias=neg)
    e2 = nisa.activation(nl.exp, t, bias=neg, scale=1.0)
    y = nisa.tensor_scalar(e, nl.multiply, nisa.reciprocal(r), reverse0=False, op1=nl.add, operand1=0.0)
    y2 = nisa.scalar_tensor_tensor(data=t, op0=nl.multiply, operand0=2.0, op1=nl.add, operand1=y)
    y3 = nisa.tensor_tensor(y2, e2, nl.add)
    y4 = nisa.tensor_copy(y3, engine=nisa.vector_engine)
    ms = nisa.memset((128, 512), 0.0, nl.float32)
    io = nisa.iota(nl.arange(128)[:, None] * 512 + nl.arange(512)[None, :], nl.int32)
    st = nisa.bn_stats(t)
    mv = nisa.bn_aggr(st)
    pr2 = nisa.tensor_partition_reduce(nl.add, t)
    sc = nisa.tensor_tensor_scan(t, t, 0.0, nl.multiply, nl.add)
    r2 = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    tsr = nisa.tensor_scalar_reduce(data=t, op0=nl.multiply, operand0=2.0, reduce_op=nl.add, reduce_res=r2)
    g = nl.mgrid[0:128, 0:512]
    sel = nisa.affine_select(g.x <= g.p, t, 0.0)
    nisa.tensor_copy_predicated(src=sel, dst=sel, predicate=(g.x <= g.p))  # (sel unchanged)
    m8 = nisa.max8(src=sel)
    i8 = nisa.nc_find_index8(data=sel, vals=m8)
    sel2 = nisa.nc_match_replace8(data=sel, vals=m8, imm=0.0)
    lo = nl.zeros((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    hi = nl.full((128, 1), 64.0, dtype=nl.float32, buffer=nl.sbuf)
    rs = nisa.range_select(on_true_tile=sel2, comp_op0=nl.greater_equal, comp_op1=nl.less, bound0=lo, bound1=hi)
    pm = nl.full((128, 512), 1, dtype=nl.uint8, buffer=nl.sbuf)
    nisa.select_reduce(dst=rs, predicate=pm, on_true=rs, on_false=0.0)
    nisa.nc_stream_shuffle(rs, rs, [255] * 32)
    acc[...] = acc + y4 + ms + sc + tsr + sel
    acc[...] = nl.add(acc, mv[:, 0:1])
    acc[...] = nl.add(acc, pr2)
    lr = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(2):
        lr[...] = nl.loop_reduce(t, op=np.add, loop_indices=[i])
    acc[...] = nl.add(acc, lr)
    nl.store(out[pid * rows:(pid + 1) * rows, :], value=acc)
    return out


@nki.jit
def matmul(a_t, b):
    # a_t: (256, 128), b: (256, 512) -> a_t.T @ b with += accumulation, transposes, masks
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    ps = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
    for k in nl.affine_range(2):
        at = nl.load(a_t[k * 128:(k + 1) * 128, :])
        bt = nl.load(b[k * 128:(k + 1) * 128, :])
        ps[...] += nl.matmul(at, bt, transpose_x=True)
    res = nl.copy(ps)
    tr = nl.transpose(res[:, 0:128])
    tt = nisa.nc_transpose(nl.copy(tr))
    lt = nl.load_transpose2d(a_t[0:128, :])
    dt = nisa.dma_transpose(a_t[0:128, :])
    res[:, 0:128] = nl.add(res[:, 0:128], nl.subtract(tt, tt))
    res[:, 0:128] = nl.add(res[:, 0:128], nl.subtract(lt, dt))
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(512)[None, :]
    nl.store(out[i_p, i_f], value=res, mask=(i_p < 128))
    return out


@nki.jit
def nc_matmul_acc(a_t, b):
    # a_t: (128, 128), b: (128, 512): nisa.nc_matmul with += into a fresh PSUM tile
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    at = nl.load(a_t)
    bt = nl.load(b)
    ps = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    ps[...] += nisa.nc_matmul(at, bt)
    nl.store(out, value=ps)
    return out


@nki.jit
def masked_tail(x):
    # x: (200, 64): masked loads and stores of the last, partial row tile
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    for t in nl.affine_range(2):
        tile = nl.load(x[t * 128 + i_p, i_f], mask=(t * 128 + i_p < 200))
        y = nl.multiply(tile, 2.0, mask=(t * 128 + i_p < 200))
        nl.store(out[t * 128 + i_p, i_f], value=y, mask=(t * 128 + i_p < 200))
    return out


@nki.jit
def extras(x):
    # x: (128, 512) float32
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    u = nisa.tensor_copy(t, engine=nisa.scalar_engine)
    v = nisa.tensor_copy(u, engine=nisa.gpsimd_engine)
    w = nisa.tensor_copy(v, engine=nisa.vector_engine)
    z = nisa.nc_transpose(w[:, 0:128], engine=nisa.tensor_engine)
    gi = nl.copy(nisa.iota(nl.arange(64)[None, :] * 2, dtype=nl.uint32).broadcast_to((128, 64)))
    gv = nisa.nc_n_gather(w, gi)
    gw = nl.gather_flattened(w, gi)
    nisa.dma_copy(dst=t, src=x, dge_mode=nisa.dge_mode.none)
    packed = [nl.ndarray((128, 8), dtype=d, buffer=nl.sbuf)
              for d in (nl.float8_e4m3fn_x4, nl.float8_e5m2_x4, nl.float4_e2m1fn_x4)]
    nl.store(out, value=w)
    return out
'''
