"""Cost-model sanity: more work never estimates faster, wider tiles beat narrow ones,
every parameter has a source, and the DMA bandwidth booking never double-books."""

from __future__ import annotations

import random

import numpy as np
import pytest

from nki_testlib import run  # installs the interpreter modules first

import nki
import nki.isa as nisa
import nki.language as nl
from autocomp.backends.nki.cost import PARAMS_FILE, estimate, load_params
from autocomp.backends.nki.trace import Instr, trace_from_json, trace_to_json



def _cycles(kernel, *arrays) -> float:
    return estimate(run(kernel, *arrays).trace).cycles


def make_vector_kernel(passes: int, width: int, loop=None):
    loop = loop or nl.sequential_range

    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        for _ in range(passes):
            for j in loop(a.shape[1] // width):
                nisa.tensor_scalar(dst=t[:, j * width:(j + 1) * width], data=t[:, j * width:(j + 1) * width],
                                   op0=nl.multiply, operand0=1.0)
        nisa.dma_copy(dst=out, src=t)
        return out

    return k


A = np.ones((128, 2048), np.float32)


@pytest.mark.parametrize("width", [64, 256, 2048])
def test_strictly_more_work_on_the_same_engine_never_estimates_faster(width):
    costs = [_cycles(make_vector_kernel(p, width), A) for p in (1, 2, 3, 5)]
    assert costs == sorted(costs) and costs[0] < costs[-1]


def test_wider_free_dimension_tiles_estimate_faster():
    # Tiles too narrow to hide the tensor access requests (arch guide: ~60 cycles each) cost
    # more per element; once an instruction streams longer than that, the requests hide
    # behind the previous instruction's streaming and only the elements count.
    narrow, medium, wide = (_cycles(make_vector_kernel(2, w), A) for w in (32, 256, 2048))
    assert wide <= medium < narrow


def test_the_compiler_vectorizes_short_affine_loops_of_identical_bodies():
    # NKI docs: affine_range lets the compiler vectorize a loop. A 64-iteration affine loop
    # of narrow identical ops whose widened result fits in vectorize_max_bytes runs as one
    # wide op; a sequential one, a longer one, or one whose widened result is too big does not.
    def ops(a, width, loop=None):  # cycles the vector passes add to the DMAs alone
        return _cycles(make_vector_kernel(8, width, loop), a) - _cycles(make_vector_kernel(0, a.shape[1]), a)

    a = np.ones((128, 512), np.float32)
    wide = ops(a, 512)
    short_affine = ops(a, 8, nl.affine_range)  # 64 iterations, widened result 64 x 32 B = 2 KiB
    short_seq = ops(a, 8, nl.sequential_range)
    assert short_affine <= wide * 1.05
    assert short_seq > 2 * short_affine
    b = np.ones((128, 1024), np.float32)
    long_affine = ops(b, 1, nl.affine_range)  # 1024 iterations: more than vectorize_max_trip
    too_big = ops(b, 16, nl.affine_range)  # 64 iterations, widened result 64 x 64 B = 4 KiB
    assert long_affine > 2 * short_affine and too_big > 2 * ops(b, 1024)


def test_wider_matmul_moving_tiles_estimate_faster():
    def mm(width):
        @nki.jit
        def k(a):
            out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
            s = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
            m = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.sbuf)
            nisa.memset(dst=s, value=1.0)
            nisa.memset(dst=m, value=1.0)
            p = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
            for j in nl.affine_range(512 // width):
                nisa.nc_matmul(dst=p[:, j * width:(j + 1) * width], stationary=s, moving=m[:, j * width:(j + 1) * width],
                               accumulate=False)
            r = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=r, src=p)
            nisa.dma_copy(dst=out, src=r)
            return out

        return _cycles(k, A)

    # NKI ISA reference, nc_matmul: max(min(64, N_stationary), N_moving) TensorE cycles, so a
    # moving tile under 64 columns pays for 64; at and above it only the columns count.
    assert mm(512) <= mm(128) < mm(32)


def test_small_contiguous_dma_runs_cost_more():
    def loader(cols):
        @nki.jit
        def k(a):
            out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
            t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
            nisa.memset(dst=t, value=0.0)
            for j in nl.affine_range(2048 // cols):
                nisa.dma_copy(dst=t[:, 0:min(cols, 64)], src=a[:, j * cols:j * cols + min(cols, 64)])
            nisa.dma_copy(dst=out, src=t)
            return out

        return _cycles(k, A)

    assert loader(16) > loader(64)


def test_random_traces_adding_an_instruction_never_reduces_the_estimate():
    rnd = random.Random(7)
    engines = ["tensor", "vector", "scalar", "gpsimd", "dma"]
    for _ in range(200):
        trace = []
        for _ in range(rnd.randint(1, 25)):
            e = rnd.choice(engines)
            alloc = rnd.randint(1, 4)
            reads = ((alloc, 0, 128, 0, rnd.choice([256, 1024])),)
            writes = ((rnd.randint(1, 4), 0, 128, 0, 512),)
            info = {"bytes": rnd.randint(1, 1 << 18), "chunk_bytes": rnd.choice([64, 512, 4096])} if e == "dma" else {}
            trace.append(Instr("op", e, 1, 128, rnd.randint(1, 2048), rnd.choice([2, 4]), reads, writes, info))
        base = estimate(trace).cycles
        extra = list(trace) + [Instr("op", rnd.choice(engines), 1, 128, rnd.randint(1, 2048), 4,
                                     ((1, 0, 128, 0, 512),), ((2, 0, 128, 0, 512),), {"bytes": 4096, "chunk_bytes": 4096})]
        assert estimate(extra).cycles >= base


def test_dma_transfers_share_bandwidth_and_the_estimate_is_linear_in_trace_length():
    import time

    p = load_params()
    def dma(i):
        return Instr("dma_copy", "dma", 1, 128, 512, 4, ((-1, 0, 1, 0, 1 << 18),), ((1 + i, 0, 128, 0, 2048),),
                     {"bytes": 1 << 18, "chunk_bytes": 2048})

    one = estimate([dma(0)]).cycles
    many = estimate([dma(i) for i in range(64)]).cycles  # 64 loads into 64 tiles: bandwidth-bound, not latency-bound
    assert many >= 64 * ((1 << 18) / p["hbm_bytes_per_cycle"]) and many < 64 * one

    def timed(n):
        trace = []
        for i in range(n):
            a = 1 + i % 64
            trace.append(Instr("dma_copy", "dma", 1, 128, 512, 4, ((-1, 0, 1, i * 4096, i * 4096 + 4096),),
                               ((a, 0, 128, 0, 2048),), {"bytes": 4096, "chunk_bytes": 2048}))
            trace.append(Instr("tensor_tensor", "vector", 1, 128, 512, 4, ((a, 0, 128, 0, 2048),),
                               ((100 + a, 0, 128, 0, 2048),), {}))
        t0 = time.perf_counter()
        estimate(trace)
        return time.perf_counter() - t0

    small, big = timed(2000), timed(16000)
    assert big < 8 * small * 2.5  # 8x the trace: well under the 64x a quadratic estimate would take


def test_every_parameter_has_value_unit_and_source():
    import tomllib

    data = tomllib.loads(PARAMS_FILE.read_text())
    assert len(data) >= 10
    for name, entry in data.items():
        assert {"value", "unit", "source"} <= set(entry), name
        assert len(entry["source"]) > 15, name
    assert load_params()["clock_ghz"] > 0


def test_trace_round_trips_through_json():
    res = run(make_vector_kernel(1, 512), A)
    assert trace_from_json(trace_to_json(res.trace)) == res.trace


def _psum_kernel(consume_at_once: bool):
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 16 * 512), dtype=nl.float32, buffer=nl.shared_hbm)
        s = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
        m = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.memset(dst=s, value=1.0)
        nisa.memset(dst=m, value=1.0)
        p = nl.ndarray((16, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)
        r = nl.ndarray((128, 16 * 512), dtype=nl.float32, buffer=nl.sbuf)
        for i in nl.sequential_range(16):
            nisa.nc_matmul(dst=p[i], stationary=s, moving=m)
            if consume_at_once:
                nisa.tensor_copy(dst=r[:, i * 512:(i + 1) * 512], src=p[i])
        if not consume_at_once:
            for i in nl.sequential_range(16):
                nisa.tensor_copy(dst=r[:, i * 512:(i + 1) * 512], src=p[i])
        nisa.dma_copy(dst=out, src=r)
        return out

    return k


def test_psum_tiles_live_beyond_its_eight_banks_are_spilled():
    from autocomp.backends.nki.cost import PARAMS, psum_spills

    held = run(_psum_kernel(False), A).trace
    streamed = run(_psum_kernel(True), A).trace
    assert sum(len(v) for v in psum_spills(held, int(PARAMS["psum_banks"])).values()) == 8
    assert psum_spills(streamed, int(PARAMS["psum_banks"])) == {}
    assert estimate(held).cycles > estimate(streamed).cycles


def test_zeros_of_a_blocked_tile_spans_its_par_dim_partitions():
    """nl.zeros((N, C, nl.par_dim(128), F)) is a memset over 128 partitions of N*C*F elements
    each, not over N partitions of C*128*F (the block dimensions are free, as for every other
    instruction on such a tile): the 4_conv1d trajectory's first steps zero two such tiles."""

    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        big = nl.zeros((2, 3, nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)
        flat = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        nisa.tensor_tensor(dst=t, data1=t, data2=big[1, 2], op=nl.add)
        nisa.tensor_tensor(dst=t, data1=t, data2=flat, op=nl.add)
        nisa.dma_copy(dst=out, src=t)
        return out

    trace = run(k, np.ones((128, 64), np.float32)).trace
    blocked, plain = [(i.partitions, i.free) for i in trace if i.op == "memset"]
    assert blocked == (128, 2 * 3 * 64) and plain == (128, 64)


def test_a_changed_interpreter_or_cost_model_never_serves_cached_estimates(tmp_path, monkeypatch):
    """The evaluation cache is keyed by the backend's cache identity; a change to the cost
    model's code (a scheduling rule) leaves its parameters as they were, so the identity also
    carries a digest of the interpreter's and cost model's sources. (Before, a changed DMA
    scheduler kept serving the old estimates to `autocomp optimize` from the cache.)"""
    import os

    from autocomp.backends import base
    from autocomp.backends import get_backend

    backend = get_backend("nki", {})
    here = os.path.dirname(os.path.abspath(base.__file__))
    nki_dir = os.path.join(here, "nki")
    assert base.sources_digest(nki_dir, ("", "interp", "params")) in backend.cache_identity()
    # the digest follows the files' contents
    (tmp_path / "cost.py").write_text("A = 1\n")
    first = base.sources_digest(str(tmp_path))
    (tmp_path / "cost.py").write_text("A = 2\n")
    monkeypatch.setattr(base, "_DIGESTS", {})
    assert base.sources_digest(str(tmp_path)) != first
