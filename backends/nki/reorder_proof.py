"""Proof, from one traced run, that a kernel's ``nl.affine_range`` iterations are independent.

``affine_range`` promises the compiler that iterations do not depend on each other, so it may
reorder, pipeline or interleave them. The harness checks the promise by running the kernel a
second time with every ``affine_range`` reversed and comparing outputs: at published shapes
that second run costs nearly as much as the first (13 CPU seconds untraced against 16 traced
for the 4096x8192x8192 GEMM, this machine).

What the compiler reorders is the traced instruction stream, not Python: so the promise holds
when no two iterations of one ``affine_range`` loop instance touch the same bytes with at least
one of them writing, apart from accumulations that commute (TensorE's matmul accumulation into
PSUM, a DMA with ``dst_rmw_op=nl.add``). The interpreter knows every instruction's regions and
its loop iterations, so :class:`AccessLog` collects them during the first input set's traced
run and :meth:`AccessLog.conflict` looks for such a pair. None found: the iterations commute,
the reversed run could only give the same outputs (up to the order of the additions, which
its comparison tolerates), and the harness skips it. One found (or anything the log cannot
follow: fixed SBUF placements, too many overlapping accesses): the reversed run goes ahead as
before and decides, so the proof never makes a verdict stricter and never passes a kernel the
reversed run would fail on memory grounds.

Python state is the proof's blind spot: with the older API (``neuronxcc.nki``) the compiler
traces a loop body once, so a Python counter carried across iterations (``off += 128``) means
something else on hardware than in the interpreter's per-iteration run. Such kernels get no
proof (:func:`autocomp.backends.nki.tracer_rules.python_state_across_iterations`): the reversed
run still meets them. NKI 0.7+ (``import nki``) unrolls Python loops in order, as the
interpreter's first run does, so there the trace is the whole story.
"""

from __future__ import annotations

from typing import Any


READ, WRITE, ACC = 0, 1, 2
# Instructions whose read-and-write of one region is an addition into it (they commute with
# each other in any order): TensorE accumulating into PSUM, a DMA with dst_rmw_op=nl.add, an
# nl.atomic_rmw (op=np.add, the only one NKI supports).
ACCUMULATING = frozenset({"nc_matmul", "dma_copy", "atomic_rmw"})
# Pairs of overlapping accesses compared before the proof gives up (then the reversed run
# decides): a bound on the proof's own time for kernels whose accesses all overlap.
MAX_COMPARISONS = 2_000_000
# Accesses logged before the proof gives up (then the reversed run decides): a bound on its
# memory, about 150 bytes an access, for traces far longer than the published shapes' 100k
# instructions (3 accesses an instruction).
MAX_ROWS = 3_000_000


class AccessLog:
    """Every access to memory inside ``affine_range`` loops during one traced run.

    A row is (kind, first partition, end partition, first byte, end byte, HBM geometry, loop
    path, instruction index), kept per allocation. The loop path names the ``affine_range``
    loop instances around the instruction and its iteration in each, outermost first: ((loop
    id, iteration), ...); loop ids are unique per loop instance, so two accesses that share a
    loop id agree on every loop around it. HBM regions are one flat byte range; the geometry
    (the view's shape and strides and the tensor's shape) makes them exact boxes when needed.
    """

    def __init__(self) -> None:
        self.rows: dict[int, list[tuple]] = {}
        self.paths: dict[int, tuple] = {}  # instruction index -> loop path (for amendments)
        self.ops: dict[int, str] = {}
        self.unprovable: str | None = None
        self.logged = 0
        # Views whose values the interpreter read since the last instruction was recorded
        # (core.read): they join that instruction's reads, so an operand an instruction
        # forgets to list is still seen.
        self.pending: list[Any] = []
        self.last_index, self.last_allocs = -1, []  # the latest instruction logged and the allocations it touched

    def give_up(self, reason: str) -> None:
        if self.unprovable is None:
            self.unprovable = reason

    def instr(self, index: int, op: str, read_tensors: list[Any], write_tensors: list[Any],
              reads: tuple, writes: tuple, path: tuple) -> None:
        """One recorded instruction: its operands (views) and their regions, aligned."""
        pending = self.pending
        if pending:
            self.pending = []
        if not path or self.unprovable is not None:
            return  # outside every affine_range loop: ordered against everything
        self.logged += len(reads) + len(writes)
        if self.logged > MAX_ROWS:
            self.give_up("too many accesses to prove independence")
            self.rows.clear()
            self.paths.clear()
            return
        self.paths[index] = path
        self.ops[index] = op
        self._log(index, op, read_tensors, write_tensors, reads, writes, path, pending)

    def amend(self, index: int, read_tensors: tuple, write_tensors: tuple, reads: tuple, writes: tuple) -> None:
        """Views added to an instruction already recorded (``psum += nl.matmul(...)``
        folds the accumulation into the matmul; ``t[...] = x`` names x's result)."""
        pending = self.pending
        if pending:
            self.pending = []
        path = self.paths.get(index)
        if path is not None:
            self._log(index, self.ops[index], read_tensors, write_tensors, reads, writes, path, pending)

    def _log(self, index: int, op: str, read_tensors: Any, write_tensors: Any, reads: tuple, writes: tuple,
             path: tuple, pending: list[Any]) -> None:
        """The rows of one instruction's operands (runs once per instruction: kept tight)."""
        if pending:
            extra = [t for t in pending if not any(t is r for r in read_tensors)]
            if extra:
                from autocomp.backends.nki.interp.core import region

                read_tensors = list(read_tensors) + extra
                reads = tuple(reads) + tuple(region(t) for t in extra)
        acc = op in ACCUMULATING and any(w in reads for w in writes)
        rows_of = self.rows
        if self.last_index != index:
            self.last_index, self.last_allocs = index, []
        touched = self.last_allocs
        for kinds, tensors, regions in ((0, read_tensors, reads), (1, write_tensors, writes)):
            for t, r in zip(tensors, regions):
                if kinds == 0:
                    if acc and r in writes:
                        continue  # the accumulation's own read of its destination
                    kind = READ
                else:
                    kind = ACC if acc and r in reads else WRITE
                alloc, p0, p1, f0, f1 = r
                geometry = _geometry(t, r) if alloc < 0 else None  # (negative ids: HBM)
                rows = rows_of.get(alloc)
                if rows is None:
                    rows = rows_of[alloc] = []
                rows.append((kind, p0, p1, f0, f1, geometry, path, index))
                touched.append(alloc)

    def accumulates(self, index: int) -> None:
        """Instruction ``index`` (just recorded) adds into what it writes, in any order."""
        if self.last_index != index:
            return
        for alloc in set(self.last_allocs):
            rows = self.rows[alloc]
            k = len(rows) - 1
            while k >= 0 and rows[k][7] == index:
                if rows[k][0] == WRITE:
                    rows[k] = (ACC,) + rows[k][1:]
                k -= 1

    def conflict(self) -> str | None:
        """None when no two iterations of an affine_range loop instance touch the same bytes
        with one of them writing (accumulations aside); else what stands in the way."""
        if self.unprovable is not None:
            return self.unprovable
        budget = [MAX_COMPARISONS]
        for alloc, rows in self.rows.items():
            if all(r[0] == READ for r in rows):
                continue
            first = rows[0][6]
            if all(r[6] is first or r[6] == first for r in rows):
                continue  # every access in the same iteration of every loop around it
            found = _conflict_in(alloc, rows, budget)
            if found is not None:
                return found
        return None


def _geometry(t: Any, region: tuple) -> Any:
    """For a view of an HBM tensor that is not the whole tensor: (shape, strides, the
    tensor's shape, item size), from which :func:`_box` makes its exact box."""
    if region[2] != 1 or region[1] != 0:
        return None  # on-chip: partitions x bytes is already a box
    data = t._data
    if t._key is not None:
        from autocomp.backends.nki.interp.core import basic_key

        key = basic_key(t)
        if key is None:
            return None
        data = data[key]
    base = t._alloc._phys
    if data.size == base.size or not base.flags.c_contiguous:
        return None
    return (data.shape, data.strides, base.shape, base.itemsize)


def _box(lo: int, geometry: Any) -> tuple | None:
    """The index box ((first, end) per axis of the tensor) a basic-sliced view covers, or
    None when its strides are not the tensor's own (a step, a reshape): then the flat byte
    range stands."""
    shape, strides, base_shape, item = geometry
    if lo % item:
        return None
    start, rem = [], lo // item
    sizes = []
    for n in reversed(base_shape):
        rem, i = divmod(rem, n)
        start.append(i)
        sizes.append(n)
    start.reverse()
    sizes.reverse()
    base_strides, acc = [], item
    for n in reversed(base_shape):
        base_strides.append(acc)
        acc *= n
    base_strides.reverse()
    ext = [1] * len(base_shape)
    for n, st in zip(shape, strides):
        if n == 1:
            continue
        axis = next((d for d, bs in enumerate(base_strides) if bs == st and sizes[d] > 1 and ext[d] == 1), None)
        if axis is None or start[axis] + n > sizes[axis]:
            return None
        ext[axis] = n
    return tuple((s, s + e) for s, e in zip(start, ext))


def _conflict_in(alloc: int, rows: list[tuple], budget: list[int]) -> str | None:
    """Cross-iteration pairs among one allocation's accesses, loop instance by loop
    instance: a sweep over byte ranges per (loop, allocation). Accesses that differ only in
    their iteration are one entry holding (up to two of) their iterations, so a tile read the
    same way in every iteration costs one comparison, not one per iteration."""
    buckets: dict[int, dict[tuple, list[int]]] = {}
    for kind, p0, p1, f0, f1, geometry, path, index in rows:
        for loop_id, iteration in path:
            entries = buckets.get(loop_id)
            if entries is None:
                entries = buckets[loop_id] = {}
            key = (f0, f1, p0, p1, kind, geometry)
            seen = entries.get(key)
            if seen is None:
                entries[key] = [index, iteration]
            elif len(seen) == 2 and seen[1] != iteration:
                seen.append(iteration)
    boxes: dict[tuple, Any] = {}
    for entries in buckets.values():
        if not any(key[4] != READ for key in entries):
            continue  # only reads in this loop
        if all(len(v) == 2 for v in entries.values()) and len({v[1] for v in entries.values()}) < 2:
            continue  # one iteration only
        active: list[tuple] = []
        for key in sorted(entries):
            f0 = key[0]
            active = [a for a in active if a[1] > f0]
            mine = entries[key]
            for a in active:
                if key[4] == READ and a[4] == READ:
                    continue
                budget[0] -= 1
                if budget[0] < 0:
                    return "too many overlapping accesses to prove independence"
                if key[4] == ACC == a[4] or not (a[2] < key[3] and key[2] < a[3]):
                    continue
                theirs = entries[a]
                if not any(i != j for i in mine[1:] for j in theirs[1:]):
                    continue
                if a[5] is not None and key[5] is not None and not _boxes_meet(a, key, boxes):
                    continue
                return (f"instructions {theirs[0]} and {mine[0]} touch the same bytes of allocation {alloc} in "
                        f"different iterations of one affine_range loop")
            if len(mine) > 2 and key[4] != ACC:
                # (one access in two iterations: a plain write repeated, or a read beside one)
                if key[4] == WRITE:
                    return (f"instruction {mine[0]} writes the same bytes of allocation {alloc} in different "
                            f"iterations of one affine_range loop")
            active.append(key)
    return None


def _boxes_meet(a: tuple, b: tuple, cache: dict[tuple, Any]) -> bool:
    boxes = []
    for e in (a, b):
        key = (e[0], e[5])
        if key not in cache:
            cache[key] = _box(e[0], e[5])
        boxes.append(cache[key])
    x, y = boxes
    if x is None or y is None or len(x) != len(y):
        return True
    return all(s0 < t1 and t0 < s1 for (s0, s1), (t0, t1) in zip(x, y))


def proof_may_stand(file_text: str) -> bool:
    """Whether a proof from the trace may stand in for the reversed-loop run of this file's
    kernels: always for NKI 0.7+ (``import nki``: Python loops unroll in order, as the
    interpreter runs them); for the older API (``neuronxcc.nki``) only when no function of
    the file carries Python state across ``affine_range`` iterations
    (:func:`autocomp.backends.nki.tracer_rules.python_state_across_iterations`). A file that
    does not parse gets no proof."""
    import ast

    from autocomp.backends.nki.tracer_rules import python_state_across_iterations

    try:
        tree = ast.parse(file_text)
    except (SyntaxError, ValueError):
        return False
    aliases = _older_api_aliases(tree)
    if not aliases.pop("", False):
        return True  # not the older API
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    helpers = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}

    def nki_call(func: ast.expr) -> str | None:
        """The nki.language / nki.isa function a callee names, else None."""
        parts = []
        while isinstance(func, ast.Attribute):
            parts.append(func.attr)
            func = func.value
        if not isinstance(func, ast.Name):
            return None
        parts.append(func.id)
        parts.reverse()
        where = aliases.get(parts[0])
        if where is None:
            return None
        path = where.split(".") + parts[1:]
        if path[0] == "nki":
            path = path[1:]
        return path[-1] if len(path) == 2 and path[0] in ("language", "isa") else None

    return all(python_state_across_iterations(f, nki_call, helpers) is None for f in functions)


def _older_api_aliases(tree: Any) -> dict[str, Any]:
    """Names the file binds to the older API: alias -> "nki", "nki.language", "nki.isa" or
    "nki.language.<function>"; the key "" is True when the file imports ``neuronxcc`` at all."""
    import ast

    out: dict[str, Any] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] != "neuronxcc":
                    continue
                out[""] = True
                if a.asname and parts[1:2] == ["nki"]:
                    out[a.asname] = ".".join(parts[1:])
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "neuronxcc":
            out[""] = True
            parts = (node.module or "").split(".")[1:]
            for a in node.names:
                out[a.asname or a.name] = ".".join(parts + [a.name])
    return out
