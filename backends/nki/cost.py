"""Per-engine cycle estimate from an instruction trace.

Model: each engine (TensorE, VectorE, ScalarE, GpSimdE, DMA) is an in-order queue. An
instruction starts when its engine is free and its operands are ready (read-after-write),
and the tiles it overwrites are no longer being read or written (write-after-read/write).
Engines therefore overlap wherever the kernel's data flow allows. DMAs occupy the DMA
queue for their transfer time (bytes over HBM bandwidth, small contiguous runs rounded up)
and land after a fixed latency, with a bounded number in flight. Instruction costs follow
the public rules of thumb in the NKI docs; every parameter lives in ``params/cost_params.toml``
with its source. The result is an *estimate* and is always labelled so.
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


def instr_cost(ins: Instr, p: dict[str, float], last_func: list[str | None]) -> float:
    """Cycles an instruction occupies its engine (DMA latency is added separately)."""
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
        return p["dma_fixed_cycles"] + effective / p["hbm_bytes_per_cycle"]
    if e == "scalar":
        cycles = max(p["scalar_min_ii"], ins.free * p["scalar_cycles_per_element"]) + p["instr_overhead_cycles"]
        func = ins.info.get("func")
        if func is not None:
            if last_func[0] is not None and func != last_func[0] and not _table_free(func, last_func[0]):
                cycles += p["scalar_table_switch_cycles"]
            last_func[0] = func
        return cycles
    if e == "gpsimd":
        return max(p["gpsimd_min_ii"], ins.free * p["gpsimd_cycles_per_element"]) + p["instr_overhead_cycles"]
    return max(p["vector_min_ii"], ins.free * p["vector_cycles_per_element"]) + p["instr_overhead_cycles"]


_FUSIBLE = ("vector", "scalar", "gpsimd")


def vectorized_groups(trace: list[Instr], max_trip: int, short: float = 64) -> dict[int, int]:
    """The compiler's loop vectorization (NKI docs, ``nl.affine_range``: it "allows Neuron
    compiler to perform additional loop-level optimizations, such as loop vectorization"):
    the iterations of an innermost ``affine_range`` loop of at most ``max_trip`` iterations
    whose bodies issue the same compute instructions (same op, engine and shape, in the same
    order) run as one instruction per body position, ``trip`` times as wide, when that pays:
    the body's instructions are short (fewer than ``short`` elements per partition, below
    the engines' minimum initiation interval, so fixed costs dominate them) and no two
    iterations write the same bytes (no accumulation across iterations). Returns, for the
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
        if any(trace[i].writes and trace[i].writes == trace[j].writes for i, j in zip(body[0], body[1])):
            continue  # the iterations accumulate into the same tile
        if any((trace[i].op, trace[i].engine, trace[i].partitions, trace[i].free, trace[i].dtype_bytes) != sig[k]
               for b in body[1:] for k, i in enumerate(b)):
            continue
        for k in range(len(sig)):
            first = min(b[k] for b in body)
            for b in body:
                fused[b[k]] = 0
            fused[first] = trips[uid]
    return fused


def psum_spills(trace: list[Instr], banks: int, bank_bytes: int = 2048) -> dict[int, list[tuple[int, int]]]:
    """PSUM holds ``banks`` banks of 2 KiB per partition. Each 2 KiB slot of a PSUM tile is
    live from its first to its last access (the compiler's allocation follows live ranges);
    a slot that becomes live while every bank is taken is spilled: its value is copied to
    SBUF (a VectorE copy) before it is read. Returns, per instruction index, the spilled
    slots (allocation, byte offset) it is the first to read. PSUM tiles are the results of
    TensorE instructions. One pass over the trace plus a bucketed sweep (linear)."""
    if banks <= 0:
        return {}
    psum = {w[0] for ins in trace if ins.engine == "tensor" for w in ins.writes}
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


def _table_free(a: str, b: str) -> bool:
    """Functions that need no table (copy/identity) never force a reload."""
    return a in ("copy", "identity") or b in ("copy", "identity")


def _latest(entries: list[tuple[int, int, int, int, float]] | None, box: list[int]) -> float:
    """Latest completion among recorded accesses overlapping the region ``box``."""
    if not entries:
        return 0.0
    plo, phi, flo, fhi = box
    return max((e[4] for e in entries if e[0] < phi and plo < e[1] and e[2] < fhi and flo < e[3]), default=0.0)


def _covers(box: list[int], e: tuple[int, int, int, int, float]) -> bool:
    return box[0] <= e[0] and e[1] <= box[1] and box[2] <= e[2] and e[3] <= box[3]


_MAX_ENTRIES = 48


def _compact(entries: list[tuple[int, int, int, int, float]]) -> list[tuple[int, int, int, int, float]]:
    """Bound the access records of one tile (so each instruction costs O(1)): keep the newest
    records and fold the older ones into one record of their bounding box and latest time.
    Folding only ever makes a later access wait longer (never less)."""
    old, new = entries[:-_MAX_ENTRIES // 2], entries[-_MAX_ENTRIES // 2:]
    merged = (min(e[0] for e in old), max(e[1] for e in old), min(e[2] for e in old), max(e[3] for e in old),
              max(e[4] for e in old))
    return [merged] + new


def estimate(trace: list[Instr], params: dict[str, float] | None = None,
             timeline: list[tuple[int, str, str, float, float]] | None = None) -> Estimate:
    """Schedule ``trace`` on the engine model. ``timeline``, when given, receives
    (line, op, engine, start, done) per instruction (for debugging and the bench)."""
    p = dict(PARAMS if params is None else params)
    engine_free: dict[str, float] = defaultdict(float)
    writes: dict[int, list[tuple[int, int, int, int, float]]] = defaultdict(list)  # alloc -> (plo, phi, flo, fhi, done)
    reads: dict[int, list[tuple[int, int, int, int, float]]] = defaultdict(list)
    dma_done: list[float] = []  # heap of completion times of transfers in flight
    dma_bw_free = 0.0  # when the shared HBM bandwidth is next free
    queues = int(p["dma_queues"])
    stats = {e: EngineStats() for e in ENGINES}
    per_line: dict[tuple[int, str, str], list[float]] = {}
    last_func: list[str | None] = [None]
    finish = 0.0
    fused = vectorized_groups(trace, int(p.get("vectorize_max_trip", 0)), p["vector_min_ii"])
    spills = psum_spills(trace, int(p.get("psum_banks", 0)))
    for idx, ins in enumerate(trace):
        for a, slot in spills.get(idx, ()):
            # A spilled PSUM slot: copied to SBUF on VectorE once its value is complete; the
            # reader waits for the copy.
            box = [0, 1 << 30, slot * 2048, (slot + 1) * 2048]
            start = max(engine_free["vector"], _latest(writes.get(a), box))
            copy = max(p["vector_min_ii"], 512 * p["vector_cycles_per_element"]) + p["instr_overhead_cycles"]
            engine_free["vector"] = start + copy
            writes[a].append((0, 1 << 30, slot * 2048, (slot + 1) * 2048, start + copy))
            stats["vector"].busy += copy
            finish = max(finish, start + copy)
        width = fused.get(idx)
        if width is None:
            occ = instr_cost(ins, p, last_func)
        elif width:  # one instruction for the whole vectorized loop
            occ = instr_cost(Instr(ins.op, ins.engine, ins.line, ins.partitions, ins.free * width, ins.dtype_bytes,
                                   info=ins.info), p, last_func)
        else:  # folded into the first instance
            occ = 0.0
        # Compute engines run their streams in order; DMAs are gated only by data and bandwidth.
        ready = engine_free[ins.engine] if ins.engine != "dma" else 0.0
        for a, *box in ins.reads:  # read after write
            ready = max(ready, _latest(writes.get(a), box))
        for a, *box in ins.writes:
            if a > 0:  # on-chip: wait until earlier readers and writers of the bytes are done
                ready = max(ready, _latest(reads.get(a), box), _latest(writes.get(a), box))
        if ins.engine == "dma":
            # A bounded number of transfers in flight (a min-heap of their completions), and
            # the shared HBM bandwidth served in issue order: O(log queues) per DMA, so the
            # estimate stays linear in the trace length.
            if len(dma_done) >= queues:
                ready = max(ready, heapq.heappop(dma_done))
            ready = max(ready, dma_bw_free)
            dma_bw_free = ready + occ
            done = ready + occ + p["dma_latency_cycles"]
            heapq.heappush(dma_done, done)
        else:
            done = ready + occ
            engine_free[ins.engine] = done
        for a, *box in ins.reads:
            reads[a].append((*box, done))
            if len(reads[a]) > _MAX_ENTRIES:
                reads[a] = _compact(reads[a])
        for a, *box in ins.writes:
            # Later accesses to these bytes are ordered after this write, so older records
            # the write covers can go.
            writes[a] = [e for e in writes[a] if not _covers(box, e)] + [(*box, done)]
            if len(writes[a]) > _MAX_ENTRIES:
                writes[a] = _compact(writes[a])
            if a in reads:
                reads[a] = [e for e in reads[a] if not (_covers(box, e) and e[4] <= done)]
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
