"""The cost model's documented mechanisms, each on a hand-made trace: engine clocks, the
per-instruction cost rules of the NKI ISA reference, partition broadcasts on TensorE, which
tiles live in PSUM, and the on-chip RAM interfaces two engines share."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from autocomp.backends.nki.cost import (
    estimate,
    instr_cost,
    is_partition_broadcast,
    load_params,
    psum_allocations,
    vector_elements,
)
from autocomp.backends.nki.trace import Instr

P = load_params()
OVH = P["instr_overhead_cycles"]


def vec(name, n, reads, writes, dtype=4, **info):
    return Instr(name, "vector", 1, 128, n, dtype, tuple(reads), tuple(writes), info)


def whole(a, nbytes=8192):
    return (a, 0, 128, 0, nbytes)


def _loaded(*allocs):
    """DMAs that write ``allocs`` (so the model sees them as written SBUF tiles)."""
    return [Instr("dma_copy", "dma", 1, 128, 2048, 4, ((-1, 0, 1, 0, 8192),), (whole(a),), {"bytes": 8192})
            for a in allocs]


def test_vector_cycles_are_converted_from_the_vector_engine_clock():
    # Arch guide: VectorE runs at 1.12 GHz, the model counts 1.4 GHz cycles.
    ins = vec("tensor_scalar", 2048, [whole(1)], [whole(2)])
    assert instr_cost(ins, P, [None]) == pytest.approx(2048 * P["clock_ghz"] / P["vector_clock_ghz"] + OVH)


def test_tiny_instructions_cost_their_tensor_access_requests():
    # Arch guide: each tensor access request costs a static ~60 cycles on the engine's
    # SBUF/PSUM read or write interface; different interfaces overlap, the same one does not.
    acc = P["access_overhead_cycles"]
    pre = _loaded(1, 3)
    one_input = vec("tensor_scalar", 3, [whole(1)], [whole(2)])
    two_inputs = vec("tensor_tensor", 3, [whole(1), whole(3)], [whole(4)], op="multiply")
    def extra(ins, n):  # cycles n more copies of ins add (past the loads)
        return estimate(pre + [ins] * (n + 20)).cycles - estimate(pre + [ins] * 20).cycles
    assert extra(one_input, 10) == pytest.approx(10 * acc, abs=2)
    assert extra(two_inputs, 10) == pytest.approx(20 * acc, abs=2)
    # The conv1d pattern (ucb-bar/autocomp examples/trn-advanced/4_conv1d_trace.py): a
    # tensor_tensor with both inputs in SBUF then a reduce of its result, 3 requests on the
    # SBUF read interface per iteration; with one input in PSUM (step 5), 2.
    mm = Instr("nc_matmul", "tensor", 1, 128, 3, 2, (whole(1), whole(1)), (whole(9, 12),), {})
    def body(second, k):
        tt = vec("tensor_tensor", 3, [whole(1), whole(second)], [whole(100 + k, 12)], op="multiply")
        return [tt, vec("tensor_reduce", 3, [whole(100 + k, 12)], [whole(5, 4)], op="add")]
    def loop(second, n):
        return estimate(pre + [mm] + [i for k in range(n) for i in body(second, k)]).cycles
    assert loop(3, 120) - loop(3, 20) == pytest.approx(300 * acc, rel=0.01)
    assert loop(9, 120) - loop(9, 20) == pytest.approx(200 * acc, rel=0.01)


def test_tensor_tensor_costs_follow_the_isa_reference():
    two_sbuf = vec("tensor_tensor", 1024, [whole(1), whole(2)], [whole(3)], op="multiply")
    assert vector_elements(two_sbuf) == 2048  # both inputs in SBUF: 2N
    assert vector_elements(two_sbuf, {2}) == 1024  # one input in PSUM: N
    bf16_add = vec("tensor_tensor", 1024, [whole(1), whole(2)], [whole(3)], dtype=2, op="add")
    assert vector_elements(bf16_add) == 1024  # all bf16, add/multiply/subtract: N
    bf16_div = vec("tensor_tensor", 1024, [whole(1), whole(2)], [whole(3)], dtype=2, op="divide")
    assert vector_elements(bf16_div) == 2048
    assert vector_elements(vec("tensor_tensor_scan", 512, [whole(1), whole(2)], [whole(3)])) == 1024
    assert vector_elements(vec("tensor_reduce", 512, [whole(1)], [whole(3)], dtype=2, op="add")) == 256
    assert vector_elements(vec("tensor_reduce", 512, [whole(1)], [whole(3)], op="add")) == 512
    assert vector_elements(vec("reciprocal", 100, [whole(1)], [whole(3)])) == 800


def test_gpsimd_instructions_pay_their_startup():
    ins = Instr("iota", "gpsimd", 1, 128, 512, 4, (), (whole(1),), {})
    assert instr_cost(ins, P, [None]) == pytest.approx(P["gpsimd_start_cycles"] + 512 * P["gpsimd_cycles_per_element"] + OVH)


def _row_broadcast(n: int) -> Instr:
    """A (1, n) fp32 row broadcast to (128, n), as ``broadcast_to`` records it."""
    return Instr("tensor_copy", "gpsimd", 1, 128, n, 4, ((5, 0, 1, 0, 4 * n),), ((6, 0, 128, 0, 4 * n),), {})


def test_a_partition_broadcast_runs_on_tensor_engine_and_lands_in_psum():
    # Arch guide: broadcast_to along partitions is a TensorE matmul with a ones vector. A
    # (128, 512) fp32 result is one PSUM bank, the most one PSUM tile holds.
    n = 512
    bcast = _row_broadcast(n)
    assert is_partition_broadcast(bcast)
    use = vec("tensor_tensor", n, [(7, 0, 128, 0, 4 * n), (6, 0, 128, 0, 4 * n)], [(8, 0, 128, 0, 4 * n)],
              op="multiply")
    est = estimate([bcast, use])
    assert est.engines["tensor"].instructions == 1 and est.engines["gpsimd"].instructions == 0
    # Its consumer reads a PSUM operand: N, not 2N.
    assert est.engines["vector"].instructions == 1
    assert est.engines["vector"].busy == pytest.approx(n * P["clock_ghz"] / P["vector_clock_ghz"] + OVH)
    same = Instr("tensor_copy", "gpsimd", 1, 128, 2048, 4, (whole(5),), (whole(6),), {})
    assert not is_partition_broadcast(same)


@pytest.mark.parametrize("n", [513, 1024, 4096, 8192])
def test_a_broadcast_larger_than_one_psum_bank_is_copied_out_and_read_from_sbuf(n):
    # NKI API reference: nl.broadcast_to's result is an SBUF tile. Direct-allocation guide: a
    # PSUM tile cannot cross a bank boundary (2 KiB, 512 fp32 values per partition). A larger
    # broadcast is the TensorE product copied out of PSUM by a VectorE pass, and its reader
    # pays 2N (two SBUF inputs): AWS's Mamba tutorial measures mamba_v2's (128, seq_len)
    # broadcasts at no cost for seq_len 512 and 33-35% from 1024 on; AWS's LayerNorm
    # tutorial broadcasts gamma and beta to (128, 8192).
    bcast = _row_broadcast(n)
    use = vec("tensor_tensor", n, [(7, 0, 128, 0, 4 * n), (6, 0, 128, 0, 4 * n)], [(8, 0, 128, 0, 4 * n)], op="multiply")
    pre = [Instr("dma_copy", "dma", 1, 128, n, 4, ((-1, 0, 1, 0, 4 * n),), ((a, 0, 128 if a == 7 else 1, 0, 4 * n),),
                 {"bytes": 4 * n * 128}) for a in (5, 7)]
    est = estimate(pre + [bcast, use])
    per = n * P["clock_ghz"] / P["vector_clock_ghz"]
    assert est.engines["tensor"].instructions == 1
    assert est.engines["vector"].instructions == 2  # the copy out of PSUM, then the multiply
    assert est.engines["vector"].busy == pytest.approx(per + OVH + 2 * per + OVH, rel=0.01)


def test_psum_tiles_are_those_tensor_engine_writes_the_trace_marks_or_read_before_written():
    mm = Instr("nc_matmul", "tensor", 1, 128, 512, 2, (whole(1), whole(2)), (whole(3),), {})
    load = Instr("dma_copy", "dma", 1, 128, 512, 4, ((-1, 0, 1, 0, 8192),), (whole(1),), {"bytes": 8192})
    acc = vec("tensor_tensor", 512, [whole(4), whole(5)], [whole(4)], op="add")  # psum_tile += x, zeroed without an instruction
    marked = vec("tensor_copy", 512, [whole(1)], [whole(9)], psum=[9])
    plain = vec("tensor_copy", 512, [whole(3)], [whole(6)])
    fill = vec("memset", 512, [], [whole(5)])
    assert psum_allocations([load, fill, mm, acc, marked, plain]) == {3, 4, 9}


def test_vector_and_gpsimd_take_turns_on_sbuf():
    # Arch guide: VectorE and GpSimdE cannot access SBUF in parallel.
    pre = _loaded(1, 4, 6)
    v = vec("tensor_scalar", 4096, [whole(1)], [whole(2)])
    g = Instr("iota", "gpsimd", 1, 128, 4096, 4, (), (whole(3),), {})
    tg = instr_cost(g, P, [None])
    assert estimate(pre + [v, g]).cycles == pytest.approx(estimate(pre + [v]).cycles + tg, abs=1)
    assert estimate(pre + [g]).cycles < estimate(pre + [v]).cycles
    # ScalarE has its own SBUF interface: it overlaps VectorE.
    s = Instr("activation", "scalar", 1, 128, 4096, 4, (whole(4),), (whole(5),), {"func": "exp"})
    assert estimate(pre + [v, s]).cycles == pytest.approx(max(estimate(pre + [v]).cycles, estimate(pre + [s]).cycles), abs=1)
    # ... but not on PSUM: VectorE and ScalarE cannot access PSUM in parallel.
    mm = Instr("nc_matmul", "tensor", 1, 128, 512, 2, (whole(6), whole(6)), (whole(7, 2048), whole(8, 2048)), {})
    vp = vec("tensor_copy", 512, [whole(7, 2048)], [whole(9)])
    sp = Instr("activation", "scalar", 1, 128, 512, 4, (whole(8, 2048),), (whole(10),), {"func": "exp"})
    assert estimate(pre + [mm, vp, sp]).cycles == pytest.approx(
        estimate(pre + [mm, vp]).cycles + instr_cost(sp, P, [None]), abs=1)


def test_a_psum_operand_costs_less_than_an_sbuf_one():
    mm = Instr("nc_matmul", "tensor", 1, 128, 512, 2, (whole(1), whole(2)), (whole(3, 2048),), {})
    from_psum = vec("tensor_tensor", 512, [whole(4), whole(3, 2048)], [whole(5)], op="multiply")
    copy = vec("tensor_copy", 512, [whole(3, 2048)], [whole(6)])
    from_sbuf = vec("tensor_tensor", 512, [whole(4), whole(6)], [whole(5)], op="multiply")
    pre = _loaded(1, 2, 4)
    a = estimate(pre + [mm, from_psum]).engines["vector"].busy
    b = estimate(pre + [mm, copy, from_sbuf]).engines["vector"].busy - estimate(pre + [mm, copy]).engines["vector"].busy
    assert b - OVH == pytest.approx(2 * (a - OVH))


def test_the_fidelity_bench_reports_a_statement_lost_into_a_comment():
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    try:
        from nki_fidelity import published_defect
    finally:
        sys.path.pop(0)
    code = "def test(a):\n    x = 1\n    # tail chunk (size <= psum   if x > 0:\n    y = a[2048:2048]\n    return a\n"
    assert "merged into a comment" in published_defect(code, "slice 2048:2048 on axis 2")
    assert published_defect("def test(a):\n    # just   a comment\n    return a\n", "boom") == ""


def test_the_fidelity_bench_prints_each_sources_error_and_refuses_an_unknown_parameter():
    import subprocess
    bench = Path(__file__).resolve().parents[2] / "bench"
    sys.path.insert(0, str(bench))
    try:
        from nki_fidelity import source_error_line
    finally:
        sys.path.pop(0)
    everything = {
        "2_gemm": [{"measured_ms": 10.0, "estimate_ms": 20.0}, {"measured_ms": 1.0, "estimate_ms": None}],
        "1_gemm": [{"measured_ms": 10.0, "estimate_ms": 80.0}],  # 2_gemm's measurements again: not counted
        "docs_matmul": [{"measured_ms": 4.0, "estimate_ms": 2.0}, {"measured_ms": 4.0, "estimate_ms": 8.0}],
    }
    line = source_error_line(everything)
    assert "Autocomp 0.693 over 1 kernels" in line and "AWS 0.693 over 2 kernels" in line
    out = subprocess.run([sys.executable, str(bench / "nki_fidelity.py"), "--neuron-docs", "/nonexistent",
                          "--param", "hbm_bytes_per_cyle=100"], capture_output=True, text=True)
    assert out.returncode == 2 and "no cost-model parameter 'hbm_bytes_per_cyle'" in out.stderr


def test_the_trace_marks_psum_operands_so_a_filter_copied_to_psum_halves_sbuf_reads():
    # The tracer records the ids of each instruction's PSUM operands (info["psum"]), so a
    # tile a VectorE copy writes into PSUM counts as PSUM: its reader's tensor_tensor takes
    # one SBUF and one PSUM read request (ISA: N instead of 2N), the step 3 -> 5 change of
    # the conv1d trajectory (ucb-bar/autocomp examples/trn-advanced/4_conv1d_trace.py).
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    try:
        from nki_testlib import run
    finally:
        sys.path.pop(0)
    import neuronxcc.nki as nki  # the older API, as the published trajectories use it
    import neuronxcc.nki.isa as nisa
    import neuronxcc.nki.language as nl

    def kernel(in_psum):
        @nki.jit
        def k(img, filt):
            out = nl.ndarray((128, 256), dtype=img.dtype, buffer=nl.shared_hbm)
            x = nl.load(img)
            f = nl.load(filt)
            if in_psum:
                fp = nl.zeros((nl.par_dim(128), 3), dtype=filt.dtype, buffer=nl.psum)
                fp[...] = nisa.tensor_copy(f, engine=nisa.vector_engine)
                f = fp
            res = nl.ndarray((nl.par_dim(128), 256), dtype=img.dtype, buffer=nl.sbuf)
            for i in nl.sequential_range(256):
                prod = nisa.tensor_tensor(x[:, i:i + 3], f, op=np.multiply)
                res[:, i:i + 1] = nisa.tensor_reduce(np.add, prod, axis=[1], keepdims=True)
            nl.store(out, res)
            return out
        return k

    img, filt = np.ones((128, 258), np.float32), np.ones((128, 3), np.float32)
    sb, ps = run(kernel(False), img, filt).trace, run(kernel(True), img, filt).trace
    marked = {a for ins in ps for a in ins.info.get("psum", ())}
    assert marked and not any("psum" in ins.info for ins in sb)
    assert any(ins.op == "tensor_tensor" and marked & {r[0] for r in ins.reads} for ins in ps)
    acc = P["access_overhead_cycles"]
    # Three SBUF read requests per iteration against two.
    assert estimate(sb).cycles - estimate(ps).cycles == pytest.approx(256 * acc, rel=0.1)


def _loop_body(uid, trip, result_bytes):
    """A conv1d-like affine loop: a 3-element tensor_tensor of two SBUF tiles (12-byte
    product) then a reduce of the product into a fresh ``result_bytes`` tile."""
    out = []
    for k in range(trip):
        loop = [uid, trip, k, -1, 1]
        out.append(vec("tensor_tensor", 3, [whole(1), whole(2)], [(1000 + k, 0, 128, 0, 12)], op="multiply", loop=loop))
        out.append(vec("tensor_reduce", 3, [(1000 + k, 0, 128, 0, 12)], [(5000 + k, 0, 128, 0, result_bytes)], op="add",
                       loop=loop))
    return out


def test_loop_vectorization_widens_each_instruction_whose_widened_result_fits():
    # NKI docs (affine_range): the compiler may vectorize the loop. Each instruction of the
    # body is widened on its own when trip x its result's bytes per partition fits in
    # vectorize_max_bytes (conv1d step 4: 512 x 4-byte sums widened, 512 x 12-byte products
    # not); the rest stays one instruction per iteration.
    from autocomp.backends.nki.cost import vectorized_groups

    trip = 512
    assert trip <= P["vectorize_max_trip"] and trip * 4 <= P["vectorize_max_bytes"] < trip * 12
    narrow, wide = _loop_body(7, trip, 4), _loop_body(8, trip, 16)
    fused = vectorized_groups(narrow, int(P["vectorize_max_trip"]), P["vector_min_ii"], P["vectorize_max_bytes"])
    assert fused[1] == trip and all(fused[2 * k + 1] == 0 for k in range(1, trip))  # every reduce folded into one
    assert not any(2 * k in fused for k in range(trip))  # the products stay per iteration
    assert not vectorized_groups(wide, int(P["vectorize_max_trip"]), P["vector_min_ii"], P["vectorize_max_bytes"])
    # The ranking it decides: the loop with 4-byte sums saves one SBUF read request per iteration.
    pre = _loaded(1, 2)
    acc = P["access_overhead_cycles"]
    a, b = estimate(pre + narrow).cycles, estimate(pre + wide).cycles
    assert a < b
    assert b - a == pytest.approx(trip * acc, rel=0.1)
    # A 64-iteration loop of the same body fits whole: both positions widen.
    small = _loop_body(9, 64, 4)
    assert sorted(vectorized_groups(small, int(P["vectorize_max_trip"]), P["vector_min_ii"],
                                    P["vectorize_max_bytes"]).values()).count(64) == 2


def _dma(reads, writes, nbytes=65536):
    return Instr("dma_copy", "dma", 1, 128, nbytes // 512, 4, tuple(reads), tuple(writes), {"bytes": nbytes})


def test_a_store_waiting_for_its_data_does_not_hold_back_later_loads():
    # Arch guide, Data Movement: 16 DMA engines run transfers in parallel on one shared
    # bandwidth, and the compiler orders DMAs by their data, not by the program: AWS's Mamba
    # tutorial keeps VectorE 99.6% busy while the next channel tile loads behind a store.
    # So a load whose data is ready takes the bandwidth left idle before a store whose result
    # is still being computed, and transfers interleave where one does not fit a gap whole.
    load0 = _dma([(-1, 0, 1, 0, 65536)], [whole(1, 512)])
    compute = vec("tensor_scalar", 20000, [whole(1, 512)], [whole(2, 512)])  # long
    store0 = _dma([whole(2, 512)], [(-2, 0, 1, 0, 65536)])
    load1 = _dma([(-1, 0, 1, 65536, 131072)], [whole(3, 512)])
    use1 = Instr("activation", "scalar", 1, 128, 10, 4, (whole(3, 512),), (whole(4, 512),), {"func": "copy"})
    timeline: list = []
    estimate([load0, compute, store0, load1, use1], timeline=timeline)
    starts = {i: t[3] for i, t in enumerate(timeline)}
    assert starts[3] < starts[2], timeline  # load1 ran while store0 waited for the compute
    assert timeline[4][3] < timeline[1][4], timeline  # and its consumer did not wait for the store
    # A DMA-only trace keeps its total: interleaving never creates bandwidth.
    many = [_dma([(-1, 0, 1, i * 65536, (i + 1) * 65536)], [whole(10 + i, 512)]) for i in range(40)]
    one = estimate(many[:1]).cycles
    per = instr_cost(many[0], P, [None])
    assert estimate(many).cycles == pytest.approx(one + 39 * per, rel=0.01)


def test_the_estimate_of_gappy_dma_traffic_stays_linear():
    # Stores waiting on compute leave idle stretches in the bandwidth; only the newest few are
    # kept, so each DMA costs O(1) and a long trace estimates in time linear in its length.
    import time

    def trace(n):
        out = []
        for i in range(n):
            out += [_dma([(-1, 0, 1, i * 4096, (i + 1) * 4096)], [whole(2 * i + 1, 512)], 4096),
                    vec("tensor_scalar", 2000, [whole(2 * i + 1, 512)], [whole(2 * i + 2, 512)]),
                    _dma([whole(2 * i + 2, 512)], [(-2, 0, 1, i * 4096, (i + 1) * 4096)], 4096)]
        return out
    small, big = trace(2000), trace(16000)
    t0 = time.process_time()
    estimate(small)
    t1 = time.process_time()
    estimate(big)
    t2 = time.process_time()
    assert (t2 - t1) < 20 * max(t1 - t0, 1e-3), (t1 - t0, t2 - t1)  # 8x the trace, far from 64x


def _pipeline(tile_bytes: int, iterations: int = 6) -> list[Instr]:
    """Per iteration: load a fresh (128, tile_bytes) tile, one VectorE pass writes a fresh
    result tile, a store reads it (the loads of later iterations only wait for SBUF room)."""
    trace = []
    n = tile_bytes // 4
    for i in range(iterations):
        a, b = 2 * i + 1, 2 * i + 2
        trace.append(Instr("dma_copy", "dma", 1, 128, n, 4, ((-1, 0, 1, 0, tile_bytes * 128),), ((a, 0, 128, 0, tile_bytes),),
                           {"bytes": tile_bytes * 128}))
        trace.append(vec("tensor_scalar", n, [(a, 0, 128, 0, tile_bytes)], [(b, 0, 128, 0, tile_bytes)]))
        trace.append(Instr("dma_copy", "dma", 1, 128, n, 4, ((b, 0, 128, 0, tile_bytes),), ((-2, 0, 1, 0, tile_bytes * 128),),
                           {"bytes": tile_bytes * 128}))
    return trace


def _starts(trace: list[Instr], params: dict) -> list[float]:
    timeline: list = []
    estimate(trace, params, timeline=timeline)
    return [row[3] for row in timeline]


def test_a_tile_waits_for_sbuf_room_only_when_earlier_tiles_hold_it():
    # Arch guide: 192 KiB of SBUF per partition, placed statically by the compiler. Small
    # tiles: nothing changes. Tiles of 80 KiB (two per iteration, 160 KiB) leave no room for
    # the next iteration's load until the first iteration's loaded tile has been read.
    assert P["sbuf_bytes_per_partition"] == 192 * 1024
    no_room = dict(P, sbuf_bytes_per_partition=0)
    small = _pipeline(4096)
    assert _starts(small, P) == _starts(small, no_room)
    big = _pipeline(80 * 1024)
    with_room: list = []
    without: list = []
    estimate(big, P, timeline=with_room)
    estimate(big, no_room, timeline=without)
    first_read_done = with_room[1][4]  # the VectorE pass that last reads the first tile
    assert without[3][3] < first_read_done  # without the capacity model the next load runs ahead
    assert with_room[3][3] >= first_read_done  # with it, it waits for those bytes
    assert estimate(big, P).cycles > estimate(big, no_room).cycles


def test_the_sbuf_room_model_stays_linear():
    import time

    def seconds(n):
        trace = _pipeline(64 * 1024, n)
        t = time.perf_counter()
        estimate(trace)
        return time.perf_counter() - t

    seconds(200)
    small, large = min(seconds(1000) for _ in range(3)), min(seconds(8000) for _ in range(3))
    assert large < 8 * small * 2.5  # linear, with room for noise
