"""Per-engine cycle estimate from an instruction trace (a model of a trn1 NeuronCore-v2).

Model: each engine (TensorE, VectorE, ScalarE, GpSimdE, DMA) is an in-order queue. An
instruction starts when its engine is free and its operands are ready (read-after-write),
and the tiles it overwrites are no longer being read or written (write-after-read/write).
Engines therefore overlap wherever the kernel's data flow allows, except where they share an
on-chip RAM interface (VectorE/GpSimdE on SBUF, VectorE/ScalarE on PSUM: arch guide). Each
compute instruction streams its elements at its engine's documented rate and clock (VectorE
1.12 GHz, ScalarE/GpSimdE 1.4, TensorE 2.8) and makes one tensor access request per input and
output tile, each holding that read/write interface of the engine (SBUF or PSUM) for a fixed
time: small instructions are bound by their requests, large ones by their elements. DMAs
occupy the shared HBM bandwidth for their transfer time (bytes over bandwidth, small contiguous
runs rounded up) and land after a fixed latency, with a bounded number in flight. The
compiler's loop vectorization, PSUM spills, the lowering of partition broadcasts to TensorE
(through SBUF when larger than PSUM) and SBUF capacity (a tile waits for room) are modelled. Every parameter lives in ``params/cost_params.toml`` with its source; MODEL.md
describes the mechanisms and the measurements they were checked against. The result is an
*estimate* and is always labelled so.
"""

from __future__ import annotations

import heapq
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autocomp.backends.nki.trace import ENGINE_LABELS, ENGINES, Instr

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

# One PSUM bank per partition: 512 fp32 values (arch guide). A PSUM tile cannot cross a bank
# boundary (direct-allocation guide), so no PSUM tile is larger.
PSUM_BANK_BYTES = 2048

# Under params/ so the package-data glob "*/*/*.toml" ships it in wheels too.
PARAMS_FILE = Path(__file__).resolve().parent / "params" / "cost_params.toml"


def load_params(path: Path | None = None) -> dict[str, float]:
    """Parameter values by name; the file also carries unit and source for each."""
    data = tomllib.loads((path or PARAMS_FILE).read_text(encoding="utf-8"))
    params: dict[str, float] = {}
    for name, entry in data.items():
        if not isinstance(entry, dict) or "value" not in entry or "source" not in entry or "unit" not in entry:
            raise ValueError(f"{path or PARAMS_FILE}: [{name}] needs value, unit and source")
        params[name] = float(entry["value"])
    return params


PARAMS = load_params()


@dataclass
class EngineStats:
    instructions: int = 0
    busy: float = 0.0


@dataclass
class Estimate:
    """Total cycles plus where they went."""

    cycles: float
    engines: dict[str, EngineStats]
    by_line: list[tuple[int, str, str, float, int]] = field(default_factory=list)  # line, op, engine, busy, count
    instructions: int = 0
    params: dict[str, float] = field(default_factory=dict)

    @property
    def microseconds(self) -> float:
        return self.cycles / (self.params.get("clock_ghz", 1.4) * 1e3)

    def bottleneck(self) -> str:
        name, stats = max(self.engines.items(), key=lambda kv: kv[1].busy)
        return ENGINE_LABELS[name] if stats.busy > 0 else "none"

    def report(self, top: int = 6) -> str:
        """The per-engine breakdown fed back to the plan prompt."""
        total = max(self.cycles, 1.0)
        lines = [
            f"Estimated {self.cycles:,.0f} cycles (nki estimate: Autocomp's analytic model of a trn1 NeuronCore at "
            f"{self.params.get('clock_ghz', 1.4)} GHz, about {self.microseconds:,.2f} us; not a measurement).",
            f"{self.instructions} instructions. Per engine (busy cycles / share of the total; engines overlap):",
        ]
        for name in ENGINES:
            s = self.engines[name]
            if s.instructions:
                lines.append(f"  {ENGINE_LABELS[name]:<8} {s.instructions:>6} instr  {s.busy:>12,.0f} busy  {100 * s.busy / total:5.1f}%")
        lines.append(f"Busiest engine: {self.bottleneck()}.")
        if self.by_line:
            lines.append("Costliest source lines (busy cycles):")
            for line, op, eng, busy, count in self.by_line[:top]:
                lines.append(f"  line {line}: {op} on {ENGINE_LABELS[eng]} x{count}: {busy:,.0f}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "cycles": self.cycles,
            "instructions": self.instructions,
            "engines": {k: {"instructions": v.instructions, "busy": v.busy} for k, v in self.engines.items()},
            "by_line": [list(x) for x in self.by_line],
        }


# VectorE instructions whose documented cost is a multiple of N, the elements per partition
# (NKI ISA reference, "Estimated instruction cost" of each API; arch guide, VectorE "Cost Model":
# one input tile ~N cycles, two input tiles ~2N).
_VECTOR_PASSES = {"tensor_tensor_scan": 2.0, "scalar_tensor_tensor": 2.0, "reciprocal": 8.0, "bn_aggr": 13.0 / 3.0}
_BF16_FAST_TT = ("add", "multiply", "subtract")
_BF16_FAST_REDUCE = ("add", "max", "maximum")


def _touches(ins: Instr, allocs: set[int] | frozenset[int]) -> int:
    """How many of the instruction's read operands live in ``allocs``."""
    return sum(1 for r in ins.reads if r[0] in allocs)


def vector_elements(ins: Instr, psum: set[int] | frozenset[int] = frozenset()) -> float:
    """VectorE cycles an instruction streams (before the MIN_II floor), per the NKI ISA
    reference: tensor_tensor reads both inputs through SBUF in 2N cycles, N when one input is in
    PSUM or when all tiles are bf16 and the operator is add/multiply/subtract; tensor_reduce
    of bf16 with add/max takes N/2; tensor_copy_predicated 2N, N when its source or predicate
    is in PSUM; tensor_tensor_scan and scalar_tensor_tensor 2N;
    reciprocal 8N; bn_aggr 13N/3; every other VectorE instruction N."""
    n = float(ins.free)
    op = ins.info.get("op")
    if ins.op == "tensor_tensor":
        if _touches(ins, psum) or (ins.dtype_bytes == 2 and op in _BF16_FAST_TT):
            return n
        return 2.0 * n
    if ins.op == "tensor_copy_predicated":  # 2N with src and predicate in SBUF, N with one in PSUM
        return n if _touches(ins, psum) else 2.0 * n
    if ins.op == "tensor_reduce" and ins.dtype_bytes == 2 and op in _BF16_FAST_REDUCE:
        return n / 2.0
    if ins.op == "scalar_tensor_tensor" and ins.dtype_bytes == 2:
        return n
    return _VECTOR_PASSES.get(ins.op, 1.0) * n


def is_partition_broadcast(ins: Instr) -> bool:
    """A copy whose output spans more partitions than its input: a partition broadcast. The
    arch guide (TensorE, "Alternative Use Case") says NKI lowers ``broadcast_to`` along
    partitions to a TensorE matmul of a ones vector with the input, written to PSUM."""
    if ins.op != "tensor_copy" or not ins.reads or not ins.writes:
        return False
    src, dst = ins.reads[0], ins.writes[0]
    return src[0] > 0 and (src[2] - src[1]) < (dst[2] - dst[1]) and (src[2] - src[1]) <= 1


def instr_cost(ins: Instr, p: dict[str, float], last_func: list[str | None],
               psum: set[int] | frozenset[int] = frozenset()) -> float:
    """Cycles (at ``clock_ghz``) an instruction occupies its engine (DMA latency is added
    separately)."""
    e = ins.engine
    if e == "tensor":
        stationary = ins.info.get("stationary_free", ins.partitions)
        cycles = max(min(p["tensor_min_cycles"], stationary), ins.free * p["tensor_cycles_per_moving_column"])
        if ins.dtype_bytes >= 4:
            cycles *= p["tensor_fp32_factor"]
        return cycles + p["instr_overhead_cycles"]
    if e == "dma":
        nbytes = float(ins.info.get("bytes", ins.partitions * ins.free * ins.dtype_bytes))
        chunk = max(1.0, float(ins.info.get("chunk_bytes", nbytes)))
        chunks = max(1.0, nbytes / chunk)
        effective = chunks * max(chunk, p["dma_efficient_chunk_bytes"])
        return p["dma_fixed_cycles"] + effective / max(p["hbm_bytes_per_cycle"], 1e-9)
    # With the tensor-access model on (access_overhead_cycles > 0) the floor of a small
    # instruction is the access requests it makes (see estimate), not MIN_II.
    floor = p.get("access_overhead_cycles", 0.0) <= 0
    if e == "scalar":
        cycles = max(p["scalar_min_ii"] if floor else 0.0, ins.free * p["scalar_cycles_per_element"]) \
            + p["instr_overhead_cycles"]
        if len(ins.writes) > 1:  # activation with reduce_res: an ActReadAccumulator follows
            cycles += p["scalar_min_ii"]
        func = ins.info.get("func")
        if func is not None:
            if last_func[0] is not None and func != last_func[0] and not _table_free(func, last_func[0]):
                cycles += p["scalar_table_switch_cycles"]
            last_func[0] = func
        return cycles
    if e == "gpsimd":
        return (p["gpsimd_start_cycles"] + ins.free * p["gpsimd_cycles_per_element"]) * _clock_ratio(p, "gpsimd_clock_ghz") \
            + p["instr_overhead_cycles"]
    cycles = max(p["vector_min_ii"] if floor else 0.0, vector_elements(ins, psum) * p["vector_cycles_per_element"])
    return cycles * _clock_ratio(p, "vector_clock_ghz") + p["instr_overhead_cycles"]


def _clock_ratio(p: dict[str, float], key: str) -> float:
    """Model cycles (at clock_ghz) per cycle of an engine clocked at ``p[key]``."""
    own = p.get(key, 0.0)
    return p["clock_ghz"] / own if own > 0 and p["clock_ghz"] > 0 else 1.0


_FUSIBLE = ("vector", "scalar", "gpsimd")
_COMPUTE = _FUSIBLE
_NO_REQUESTS: dict[tuple[str, str, bool], int] = {}


def _result_bytes(ins: Instr) -> float:
    """Bytes per partition of an instruction's own result (its first write): a tile recorded
    partition-major spans its bytes in every partition; a one-dimensional result (one
    element per partition, recorded flat) is spread over the instruction's partitions."""
    if not ins.writes:
        return 0.0
    _a, plo, phi, flo, fhi = ins.writes[0]
    nbytes = float(fhi - flo)
    if phi - plo < ins.partitions:
        nbytes /= max(1, ins.partitions)
    return nbytes


def vectorized_groups(trace: list[Instr], max_trip: int, short: float = 64,
                      max_bytes: float | None = None) -> dict[int, int]:
    """The compiler's loop vectorization (NKI docs, ``nl.affine_range``: it "allows Neuron
    compiler to perform additional loop-level optimizations, such as loop vectorization"):
    the iterations of an innermost ``affine_range`` loop of at most ``max_trip`` iterations
    whose bodies issue the same compute instructions (same op, engine and shape, in the same
    order) run as one instruction per body position, ``trip`` times as wide, when that pays:
    the body's instructions are short (fewer than ``short`` elements per partition, below
    the engines' minimum initiation interval, so fixed costs dominate them) and no two
    iterations write the same bytes (no accumulation across iterations). With ``max_bytes``,
    each body position is vectorized on its own (the loop distributed over its instructions)
    only when its widened result, ``trip`` times its result's bytes per partition, fits in
    ``max_bytes``; the other positions stay one instruction per iteration. Returns, for the
    first instance of each fused instruction, the trip count it stands for; the other
    instances are folded into it (index -> 0). One pass over the trace."""
    if max_trip < 2:
        return {}
    loops: dict[int, list[list[int]]] = {}
    trips: dict[int, int] = {}
    outer: set[int] = set()  # loops with a loop inside: not straight-line bodies
    for idx, ins in enumerate(trace):
        loop = ins.info.get("loop")
        if not loop or len(loop) != 5:
            continue
        outer.add(int(loop[3]))
        if ins.engine not in _FUSIBLE or not loop[4]:
            continue
        uid, trip, it = int(loop[0]), int(loop[1]), int(loop[2])
        if trip < 2 or trip > max_trip or not 0 <= it < trip:
            continue
        body = loops.get(uid)
        if body is None:
            body = loops[uid] = [[] for _ in range(trip)]
            trips[uid] = trip
        body[it].append(idx)
    fused: dict[int, int] = {}
    for uid, body in loops.items():
        if uid in outer:
            continue
        sig = [(trace[i].op, trace[i].engine, trace[i].partitions, trace[i].free, trace[i].dtype_bytes) for i in body[0]]
        if not sig or any(len(b) != len(sig) for b in body) or any(x[3] >= short for x in sig):
            continue
        if any((trace[i].op, trace[i].engine, trace[i].partitions, trace[i].free, trace[i].dtype_bytes) != sig[k]
               for b in body[1:] for k, i in enumerate(b)):
            continue
        # The iterations accumulate into the same tile: that position cannot be widened.
        same = [bool(trace[i].writes) and trace[i].writes == trace[j].writes for i, j in zip(body[0], body[1])]
        if max_bytes is None:
            if any(same):
                continue
            positions = range(len(sig))
        else:
            positions = [k for k in range(len(sig))
                         if not same[k] and trips[uid] * _result_bytes(trace[body[0][k]]) <= max_bytes]
        for k in positions:
            first = min(b[k] for b in body)
            for b in body:
                fused[b[k]] = 0
            fused[first] = trips[uid]
    return fused


def psum_spills(trace: list[Instr], banks: int, bank_bytes: int = PSUM_BANK_BYTES) -> dict[int, list[tuple[int, int]]]:
    """PSUM holds ``banks`` banks of 2 KiB per partition. Each 2 KiB slot of a PSUM tile is
    live from its first to its last access (the compiler's allocation follows live ranges);
    a slot that becomes live while every bank is taken is spilled: its value is copied to
    SBUF (a VectorE copy) before it is read. Returns, per instruction index, the spilled
    slots (allocation, byte offset) it is the first to read. PSUM tiles are the results of
    TensorE instructions. One pass over the trace plus a bucketed sweep (linear)."""
    if banks <= 0:
        return {}
    psum = {w[0] for ins in trace if ins.engine == "tensor" and not ins.info.get("sbuf") for w in ins.writes}
    # Only tiles whose every access names one slot are followed (an index-array view is
    # recorded as the whole tile, which says nothing about which slot it touches).
    psum -= {a for ins in trace for a, _plo, _phi, flo, fhi in ins.reads + ins.writes
             if a in psum and (fhi - 1) // bank_bytes != flo // bank_bytes}
    first: dict[tuple[int, int], int] = {}
    last: dict[tuple[int, int], int] = {}
    first_read: dict[tuple[int, int], int] = {}
    for idx, ins in enumerate(trace):
        for kind, regions in (("r", ins.reads), ("w", ins.writes)):
            for a, _plo, _phi, flo, fhi in regions:
                if a not in psum:
                    continue
                key = (a, flo // bank_bytes)
                first.setdefault(key, idx)
                last[key] = idx
                if kind == "r" and key not in first_read and first[key] < idx and ins.engine != "tensor":
                    first_read[key] = idx
    if len(first) <= banks:
        return {}
    starts: dict[int, list[tuple[int, int]]] = defaultdict(list)
    ends: dict[int, int] = defaultdict(int)
    for key, i in first.items():
        starts[i].append(key)
        ends[last[key] + 1] += 1
    live = 0
    out: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for idx in range(len(trace) + 1):
        live -= ends.get(idx, 0)
        for key in starts.get(idx, ()):
            live += 1
            if live > banks and key in first_read:
                out[first_read[key]].append(key)
    return dict(out)


_SBUF_VG = ("sbuf_vector_gpsimd",)
_PSUM_VS = ("psum_vector_scalar",)
_BOTH = _SBUF_VG + _PSUM_VS


def _interfaces(ins: Instr, psum: set[int]) -> tuple[dict[tuple[str, str, bool], int], tuple[str, ...]]:
    """The tensor access requests a compute instruction makes, per interface of its engine,
    and the on-chip RAM ports it holds that another engine shares.

    Requests (arch guide, Data Movement, 'Tensor access overhead'): initiating a tensor access
    request on an engine's SBUF/PSUM read or write interface costs a static ~60 cycles, which
    instruction-level parallelism hides only across different interfaces. Each input tile is
    one request on the read interface of its memory and the output tile one on the write
    interface, so an instruction with two SBUF inputs holds the SBUF read interface twice as
    long (as the ISA reference's 2N for tensor_tensor with both inputs in SBUF, against N with
    one in PSUM). A result also assigned into a view is one write.

    Shared ports (arch guide, Data Movement): on NeuronCore-v2 'VectorE and GpSimdE cannot
    access SBUF in parallel' and 'VectorE and ScalarE cannot access PSUM in parallel'; the
    compiler serialises them."""
    e = ins.engine
    requests: dict[tuple[str, str, bool], int] = {}
    sbuf = in_psum = False
    for r in ins.reads:
        a = r[0]
        if a > 0:
            k = (e, "r", a in psum)
            if k[2]:
                in_psum = True
            else:
                sbuf = True
            requests[k] = requests.get(k, 0) + 1
    out_sbuf = out_psum = False
    for w in ins.writes:
        a = w[0]
        if a > 0:
            if a in psum:
                out_psum = True
            else:
                out_sbuf = True
    if out_sbuf or out_psum:
        k = (e, "w", out_psum)
        requests[k] = requests.get(k, 0) + 1
    sbuf = sbuf or out_sbuf
    in_psum = in_psum or out_psum
    if e == "vector":
        ports = _BOTH if sbuf and in_psum else _SBUF_VG if sbuf else _PSUM_VS if in_psum else ()
    elif e == "gpsimd":
        ports = _SBUF_VG if sbuf else ()
    else:
        ports = _PSUM_VS if in_psum else ()
    return requests, ports


def _as_tensor_broadcast(ins: Instr) -> Instr:
    """A partition broadcast as the TensorE matmul NKI lowers it to (arch guide): the source
    row is the moving tile (free size N), a ones vector the stationary one."""
    info = dict(ins.info)
    info["stationary_free"] = ins.partitions
    info["broadcast"] = True
    return Instr("broadcast_to", "tensor", ins.line, ins.partitions, ins.free, ins.dtype_bytes, ins.reads, ins.writes,
                 info)


def _lower_broadcasts(trace: list[Instr], psum_bytes: int) -> list[Instr]:
    """Partition broadcasts as NKI lowers them: a TensorE matmul into PSUM (arch guide). A
    result larger than one PSUM tile (``psum_bytes`` per partition: a PSUM tile cannot cross a
    bank boundary, so 2 KiB, 512 fp32 values; direct-allocation guide) cannot stay there:
    nl.broadcast_to's result is an SBUF tile (NKI API reference), so the product is copied out,
    a VectorE pass over it, and its readers read SBUF. AWS's Mamba tutorial measures it: its
    (128, seq_len) fp32 broadcasts cost nothing extra at seq_len 512 (one bank; mamba_v2 ties
    the seq_len-tiled mamba_v3 at 1.6 ms) and 33-35% from seq_len 1024 on."""
    if not any(ins.engine == "gpsimd" and is_partition_broadcast(ins) for ins in trace):
        return trace
    out: list[Instr] = []
    for ins in trace:
        if not (ins.engine == "gpsimd" and is_partition_broadcast(ins)):
            out.append(ins)
            continue
        lowered = _as_tensor_broadcast(ins)
        dst = ins.writes[0]
        if psum_bytes and dst[4] - dst[3] > psum_bytes:
            info = dict(lowered.info, sbuf=True)
            out.append(Instr(lowered.op, lowered.engine, lowered.line, lowered.partitions, lowered.free,
                             lowered.dtype_bytes, lowered.reads, lowered.writes, info))
            out.append(Instr("tensor_copy", "vector", ins.line, ins.partitions, ins.free, ins.dtype_bytes,
                             ins.writes, ins.writes, {"psum_evacuation": True}))
        else:
            out.append(lowered)
    return out


def psum_allocations(trace: list[Instr]) -> set[int]:
    """Allocations that live in PSUM: those the trace marks (``info["psum"]``: the ids of an
    instruction's PSUM operands, where the tracer records them), every allocation TensorE
    writes (TensorE writes only to PSUM: arch guide), and every on-chip allocation read before
    any instruction wrote it (a zeroed PSUM tile costs no instruction: its zeroing is folded
    into the first accumulation; an SBUF tile read unwritten is an error, and ``nl.zeros`` in
    SBUF records a memset). One pass."""
    out: set[int] = set()
    written: set[int] = set()
    for ins in trace:
        marked = ins.info.get("psum")
        if marked:
            out.update(int(a) for a in marked)
        if ins.engine != "tensor":  # TensorE reads only SBUF
            for r in ins.reads:
                if r[0] > 0 and r[0] not in written:
                    out.add(r[0])
        for w in ins.writes:
            written.add(w[0])
            if ins.engine == "tensor" and not ins.info.get("sbuf"):
                out.add(w[0])
    return out


def sbuf_lifetimes(trace: list[Instr], psum: set[int] | frozenset[int]) -> tuple[dict[int, list[int]], dict[int, list[int]], dict[int, int]]:
    """The SBUF allocations by the instruction that first touches each (opens), by the one
    that last touches it in program order (closes), and the bytes per partition each spans
    (the furthest byte any access reaches). One pass."""
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    size: dict[int, int] = {}
    setfirst, getsize = first.setdefault, size.get
    for idx, ins in enumerate(trace):
        for r in ins.reads + ins.writes:
            a = r[0]
            setfirst(a, idx)
            last[a] = idx
            if r[4] > getsize(a, 0):
                size[a] = r[4]
    opens: dict[int, list[int]] = defaultdict(list)
    closes: dict[int, list[int]] = defaultdict(list)
    sbuf = {a: n for a, n in size.items() if a > 0 and a not in psum}  # (HBM ids are negative)
    for a in sbuf:
        opens[first[a]].append(a)
        closes[last[a]].append(a)
    return opens, closes, sbuf


def _table_free(a: str, b: str) -> bool:
    """Functions that need no table (copy/identity) never force a reload."""
    return a in ("copy", "identity") or b in ("copy", "identity")


def _latest(entries: list[tuple[int, int, int, int, float]] | None, box: list[int]) -> float:
    """Latest completion among recorded accesses overlapping the region ``box``."""
    if not entries:
        return 0.0
    plo, phi, flo, fhi = box
    # (a plain loop: most lists hold one or two records, where a generator's set-up was most
    # of the cost; completion times are never negative, so 0.0 is the same default)
    best = 0.0
    for e in entries:
        if e[4] > best and e[0] < phi and plo < e[1] and e[2] < fhi and flo < e[3]:
            best = e[4]
    return best


_MAX_ENTRIES = 48


def _compact(entries: list[tuple[int, int, int, int, float]]) -> list[tuple[int, int, int, int, float]]:
    """Bound the access records of one tile (so each instruction costs O(1)): keep the newest
    records and fold the older ones into one record of their bounding box and latest time.
    Folding only ever makes a later access wait longer (never less)."""
    old, new = entries[:-_MAX_ENTRIES // 2], entries[-_MAX_ENTRIES // 2:]
    merged = (min(e[0] for e in old), max(e[1] for e in old), min(e[2] for e in old), max(e[3] for e in old),
              max(e[4] for e in old))
    return [merged] + new


_MAX_GAPS = 32


def _bandwidth_slot(gaps: list[list[float]], free: float, ready: float, occ: float) -> tuple[float, float, float]:
    """Serve a transfer ready at ``ready`` that needs the HBM bandwidth for ``occ`` cycles:
    it takes the idle stretches left before ``free`` (the end of the reservations) from
    ``ready`` on, in order, and whatever remains at the end. Returns (when it starts, when
    its last byte moves, the new ``free``). A transfer still waiting for its data (a store of
    a result not yet computed) therefore does not hold back later transfers whose data is
    ready, and those interleave with it: the compiler spreads DMAs over 16 engines that run
    in parallel on one shared bandwidth (arch guide, Data Movement), which is how AWS's
    Mamba tutorial keeps VectorE 99.6% busy while the next channel tile loads
    (fused_mamba, mamba_v2). ``gaps`` is updated in place and keeps the newest
    ``_MAX_GAPS`` stretches (older ones only make a transfer wait longer)."""
    start = -1.0
    left = occ
    i = 0
    while i < len(gaps) and left > 0:
        g0, g1 = gaps[i]
        if g1 <= ready:
            i += 1
            continue
        s0 = ready if ready > g0 else g0
        take = min(left, g1 - s0)
        if start < 0:
            start = s0
        left -= take
        end = s0 + take
        # what stays idle of this stretch: before s0 and after end
        rest = ([[g0, s0]] if s0 > g0 + 1 else []) + ([[end, g1]] if end + 1 < g1 else [])
        gaps[i:i + 1] = rest
        i += len(rest)
        if left <= 0:
            if len(gaps) > _MAX_GAPS:
                del gaps[:len(gaps) - _MAX_GAPS]
            return start, end, free
    begin = ready if ready > free else free
    if begin > free + 1:
        gaps.append([free, begin])
    if len(gaps) > _MAX_GAPS:
        del gaps[:len(gaps) - _MAX_GAPS]
    if start < 0:
        start = begin
    return start, begin + left, begin + left


def estimate(trace: list[Instr], params: dict[str, float] | None = None,
             timeline: list[tuple[int, str, str, float, float]] | None = None) -> Estimate:
    """Schedule ``trace`` on the engine model. ``timeline``, when given, receives
    (line, op, engine, start, done) per instruction (for debugging and the bench)."""
    p = dict(PARAMS if params is None else params)
    engine_free: dict[str, float] = defaultdict(float)
    writes: dict[int, list[tuple[int, int, int, int, float]]] = defaultdict(list)  # alloc -> (plo, phi, flo, fhi, done)
    reads: dict[int, list[tuple[int, int, int, int, float]]] = defaultdict(list)
    dma_done: list[float] = []  # heap of completion times of transfers in flight
    dma_bw_free = 0.0  # when the shared HBM bandwidth is free for good
    bw_gaps: list[list[float]] = []  # idle stretches [start, end) of it before dma_bw_free
    port_free: dict[str, float] = defaultdict(float)  # on-chip RAM interfaces two engines share
    iface_free: dict[tuple[str, str, bool], float] = defaultdict(float)  # an engine's own read/write interfaces
    access = p.get("access_overhead_cycles", 0.0)
    queues = int(p["dma_queues"])
    stats = {e: EngineStats() for e in ENGINES}
    per_line: dict[tuple[int, str, str], list[float]] = {}
    last_func: list[str | None] = [None]
    finish = 0.0
    trace = _lower_broadcasts(trace, PSUM_BANK_BYTES if p.get("psum_banks", 0) else 0)
    psum = psum_allocations(trace)
    fused = vectorized_groups(trace, int(p.get("vectorize_max_trip", 0)), p["vector_min_ii"],
                              p.get("vectorize_max_bytes"))
    spills = psum_spills(trace, int(p.get("psum_banks", 0)))
    # SBUF room: the compiler places tiles statically, so a tile can take bytes only once the
    # tiles that held them before are done with them, however early its data could arrive.
    sbuf_cap = float(p.get("sbuf_bytes_per_partition", 0))
    opens, closes, sizes = sbuf_lifetimes(trace, psum) if sbuf_cap else ({}, {}, {})
    sbuf_live = 0.0  # bytes per partition of tiles still to be used, in program order
    sbuf_leaving = 0.0  # bytes of tiles used for the last time whose accesses are still running
    sbuf_release: list[tuple[float, int]] = []  # heap of (when those bytes are free, bytes)
    for idx, ins in enumerate(trace):
        for a, slot in spills.get(idx, ()):
            # A spilled PSUM slot: copied to SBUF on VectorE once its value is complete; the
            # reader waits for the copy.
            box = [0, 1 << 30, slot * PSUM_BANK_BYTES, (slot + 1) * PSUM_BANK_BYTES]
            start = max(engine_free["vector"], _latest(writes.get(a), box))
            copy = max(p["vector_min_ii"], 512 * p["vector_cycles_per_element"]) * _clock_ratio(p, "vector_clock_ghz") \
                + p["instr_overhead_cycles"]
            engine_free["vector"] = start + copy
            writes[a].append((0, 1 << 30, slot * PSUM_BANK_BYTES, (slot + 1) * PSUM_BANK_BYTES, start + copy))
            stats["vector"].busy += copy
            finish = max(finish, start + copy)
        width = fused.get(idx)
        if width is None:
            occ = instr_cost(ins, p, last_func, psum)
        elif width:  # one instruction for the whole vectorized loop
            occ = instr_cost(Instr(ins.op, ins.engine, ins.line, ins.partitions, ins.free * width, ins.dtype_bytes,
                                   ins.reads, ins.writes, info=ins.info), p, last_func, psum)
        else:  # folded into the first instance
            occ = 0.0
        # Compute engines run their streams in order; DMAs are gated only by data and bandwidth.
        ready = engine_free[ins.engine] if ins.engine != "dma" else 0.0
        for r in ins.reads:  # read after write
            entries = writes.get(r[0])
            if entries:
                t = _latest(entries, r[1:])
                if t > ready:
                    ready = t
        for r in ins.writes:
            if r[0] > 0:  # on-chip: wait until earlier readers and writers of the bytes are done
                box = r[1:]
                for entries in (reads.get(r[0]), writes.get(r[0])):
                    if entries:
                        t = _latest(entries, box)
                        if t > ready:
                            ready = t
        for a in opens.get(idx, ()):
            need = sizes[a]
            while sbuf_release and sbuf_live + sbuf_leaving + need > sbuf_cap:
                t, freed = heapq.heappop(sbuf_release)
                sbuf_leaving -= freed
                if t > ready:
                    ready = t
            sbuf_live += need
        if ins.engine in _COMPUTE:
            requests, ports = _interfaces(ins, psum)
            for port in ports:
                if port_free[port] > ready:
                    ready = port_free[port]
            if access and occ and ins.engine != "gpsimd":
                for k in requests:
                    if iface_free[k] > ready:
                        ready = iface_free[k]
            else:
                requests = _NO_REQUESTS
        else:
            requests, ports = _NO_REQUESTS, ()
        if ins.engine == "dma":
            # A bounded number of transfers in flight (a min-heap of their completions), and
            # the shared HBM bandwidth: a transfer takes the first idle stretch of it from
            # when its data is ready (see _bandwidth_slot). O(log queues + gaps) per DMA, so
            # the estimate stays linear in the trace length.
            if len(dma_done) >= queues:
                ready = max(ready, heapq.heappop(dma_done))
            ready, moved, dma_bw_free = _bandwidth_slot(bw_gaps, dma_bw_free, ready, occ)
            done = moved + p["dma_latency_cycles"]
            heapq.heappush(dma_done, done)
        else:
            engine_free[ins.engine] = ready + occ
            hold = 0.0
            for k, count in requests.items():
                iface_free[k] = ready + count * access
                hold = max(hold, count * access)
            occ = max(occ, hold)  # busy while its access requests hold the interfaces
            done = ready + occ
        for port in ports:
            port_free[port] = done
        for r in ins.reads:
            entries = reads[r[0]]
            entries.append((r[1], r[2], r[3], r[4], done))
            if len(entries) > _MAX_ENTRIES:
                reads[r[0]] = _compact(entries)
        for r in ins.writes:
            # Later accesses to these bytes are ordered after this write, so older records
            # the write covers can go.
            a, plo, phi, flo, fhi = r
            kept = [e for e in writes[a] if not (plo <= e[0] and e[1] <= phi and flo <= e[2] and e[3] <= fhi)]
            kept.append((plo, phi, flo, fhi, done))
            writes[a] = kept if len(kept) <= _MAX_ENTRIES else _compact(kept)
            if a in reads:
                reads[a] = [e for e in reads[a] if not (plo <= e[0] and e[1] <= phi and flo <= e[2] and e[3] <= fhi
                                                        and e[4] <= done)]
        for a in closes.get(idx, ()):
            # The tile's bytes are free once its last access is done: the latest completion
            # its access records hold (records dropped on the way were covered by later ones).
            free_at = done
            for entries in (reads.pop(a, None), writes.pop(a, None)):
                if entries:
                    for e in entries:
                        if e[4] > free_at:
                            free_at = e[4]
            sbuf_live -= sizes[a]
            sbuf_leaving += sizes[a]
            heapq.heappush(sbuf_release, (free_at, sizes[a]))
        finish = max(finish, done)
        if timeline is not None:
            timeline.append((ins.line, ins.op, ins.engine, ready, done))
        st = stats[ins.engine]
        st.instructions += 1
        st.busy += occ
        key = (ins.line, ins.op, ins.engine)
        acc = per_line.setdefault(key, [0.0, 0])
        acc[0] += occ
        acc[1] += 1
    by_line = sorted(((k[0], k[1], k[2], v[0], int(v[1])) for k, v in per_line.items()), key=lambda x: -x[3])
    return Estimate(cycles=round(finish), engines=stats, by_line=by_line, instructions=len(trace), params=p)
