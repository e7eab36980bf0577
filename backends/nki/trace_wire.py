"""The trace on the result channel in binary batches: what the interpreter child sends and
the parent rebuilds, instruction for instruction.

JSON lists cost about 17 µs per instruction to write in the child and 26 µs to read in the
parent (a 131k-instruction run: 2.2 s and 3.4 s). Here a batch is one JSON line
``["tb", templates, nbytes]`` followed by ``nbytes`` bytes of native-endian int64: every
instruction names a *template* (op, engine, kernel line and its ``info`` without the loop
position, defined once per channel in some batch's ``templates`` as ``[id, op, engine,
line, info]``) and carries only its numbers. The loop position and the PSUM operand ids
change from one instruction to the next (every matmul of a large kernel accumulates into a
fresh PSUM tile), so they travel with the instruction, not in its template: as part of a
template they made one template per instruction, and a 100k-instruction GEMM sent 3 MB of
templates (read again each time a batch's payload arrived in pieces).

* instruction: ``0, template, partitions, free, dtype_bytes, n, n regions of 5, m, m
  regions of 5``, then ``0`` (no loop) or ``1, loop[5]`` (``info["loop"]``), then ``0`` or
  ``k, k ids`` (``info["psum"]``: the ids of its PSUM operands, when it names any);
* amendment of an instruction sent in an earlier batch: ``1, index, n, n regions, m, m
  regions`` (regions it reads, regions it writes).

The parent accepts only that: templates defined once, known engines, counts that fit the
batch, amendments of instructions it holds, at most ``max_trace`` instructions; anything
else is a malformed channel. Both ends run on the same machine (native byte order).
"""

from __future__ import annotations

import json
from array import array
from typing import Any

from autocomp.backends.nki.trace import ENGINES, Instr

TAG = "tb"
LINE_START = b'["tb",'
INSTR, AMEND = 0, 1
MAX_TEMPLATES = 1 << 20
MAX_PSUM_IDS = 64  # PSUM operands of one instruction (a handful in practice)


def _frozen(value: Any) -> Any:
    """A hashable stand-in for an ``info`` value that tells apart what JSON tells apart
    (1 and 1.0, a list and a string)."""
    if isinstance(value, dict):
        return ("d",) + tuple((k, _frozen(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ("l",) + tuple(_frozen(v) for v in value)
    return (type(value).__name__, value)


def _plain_loop(loop: Any) -> bool:
    return type(loop) is list and len(loop) == 5 and all(type(v) is int for v in loop)


def _plain_ids(ids: Any) -> bool:
    return type(ids) is list and 0 < len(ids) <= MAX_PSUM_IDS and all(type(v) is int for v in ids)


class Encoder:
    """Instructions and amendments, in order, into batches (the child's side)."""

    def __init__(self) -> None:
        self.templates: dict[Any, int] = {}
        self.new: list[list[Any]] = []  # templates not sent yet
        self.ints = array("q")

    def instr(self, ins: Instr) -> None:
        info = ins.info
        loop = info.get("loop")
        if loop is not None and not _plain_loop(loop):
            loop = None
        psum = info.get("psum")
        if psum is not None and not _plain_ids(psum):
            psum = None
        if loop is None and psum is None:
            static = info
        else:
            static = {k: v for k, v in info.items() if not (k == "loop" and loop is not None
                                                           or k == "psum" and psum is not None)}
        key = (ins.op, ins.engine, ins.line, _frozen(static))
        tid = self.templates.get(key)
        if tid is None:
            tid = self.templates[key] = len(self.templates)
            self.new.append([tid, ins.op, ins.engine, ins.line, static])
        ints = self.ints
        ints.extend((INSTR, tid, ins.partitions, ins.free, ins.dtype_bytes, len(ins.reads)))
        for r in ins.reads:
            ints.extend(r)
        ints.append(len(ins.writes))
        for w in ins.writes:
            ints.extend(w)
        if loop is None:
            ints.append(0)
        else:
            ints.append(1)
            ints.extend(loop)
        if psum is None:
            ints.append(0)
        else:
            ints.append(len(psum))
            ints.extend(psum)

    def amend(self, index: int, reads: tuple, writes: tuple) -> None:
        ints = self.ints
        ints.extend((AMEND, index, len(reads)))
        for r in reads:
            ints.extend(r)
        ints.append(len(writes))
        for w in writes:
            ints.extend(w)

    def batch(self) -> tuple[bytes, bytes] | None:
        """(header line, payload) of what was added since the last batch, or None."""
        if not self.ints and not self.new:
            return None
        payload = self.ints.tobytes()
        header = (json.dumps([TAG, self.new, len(payload)], separators=(",", ":")) + "\n").encode()
        self.ints = array("q")
        self.new = []
        return header, payload


class Decoder:
    """Batches back into :class:`Instr` objects (the parent's side); raises ValueError (or
    KeyError, IndexError, TypeError) on anything a well-behaved child never sends."""

    def __init__(self) -> None:
        self.templates: dict[int, tuple[str, str, int, dict[str, Any]]] = {}

    def define(self, entries: Any) -> None:
        if not isinstance(entries, list):
            raise ValueError("bad templates")
        for entry in entries:
            tid, op, engine, line, static = entry
            if (type(tid) is not int or tid in self.templates or len(self.templates) >= MAX_TEMPLATES
                    or not isinstance(op, str) or engine not in ENGINES or type(line) is not int
                    or not isinstance(static, dict)):
                raise ValueError(f"bad template {str(entry)[:80]}")
            self.templates[tid] = (op, engine, line, static)

    def apply(self, payload: bytes | memoryview, trace: list[Instr], max_trace: int) -> bool:
        """Append the batch's instructions to ``trace`` and apply its amendments; False
        when the trace would exceed ``max_trace``."""
        if len(payload) % 8:
            raise ValueError("a trace batch of partial integers")
        ints = array("q")
        ints.frombytes(payload)
        v = ints.tolist()
        n, i = len(v), 0
        templates = self.templates
        while i < n:
            if v[i] == INSTR:
                if i + 6 > n:
                    raise ValueError("cut instruction")
                op, engine, line, static = templates[v[i + 1]]
                partitions, free, dtype_bytes = v[i + 2], v[i + 3], v[i + 4]
                reads, i = _regions(v, i + 5, n)
                writes, i = _regions(v, i, n)
                if i >= n:
                    raise ValueError("cut instruction")
                info = dict(static)
                if v[i] == 1:
                    if i + 6 > n:
                        raise ValueError("cut loop")
                    info["loop"] = v[i + 1:i + 6]
                    i += 6
                elif v[i] == 0:
                    i += 1
                else:
                    raise ValueError("bad loop flag")
                if i >= n:
                    raise ValueError("cut instruction")
                k = v[i]
                if k:
                    if not 0 < k <= MAX_PSUM_IDS or i + 1 + k > n:
                        raise ValueError("bad PSUM id count")
                    info["psum"] = v[i + 1:i + 1 + k]
                i += 1 + k
                if len(trace) >= max_trace:
                    return False
                trace.append(Instr(op, engine, line, partitions, free, dtype_bytes, reads, writes, info))
            elif v[i] == AMEND:
                if i + 2 > n:
                    raise ValueError("cut amendment")
                index = v[i + 1]
                if not 0 <= index < len(trace):
                    raise ValueError(f"amendment of instruction {index}, which was not sent")
                reads, i = _regions(v, i + 2, n)
                writes, i = _regions(v, i, n)
                ins = trace[index]
                ins.reads += reads
                ins.writes += writes
            else:
                raise ValueError("bad record in a trace batch")
        return True


def _regions(v: list[int], i: int, n: int) -> tuple[tuple[tuple[int, int, int, int, int], ...], int]:
    """The count at ``v[i]`` and that many 5-integer regions after it; the next position."""
    if i >= n:
        raise ValueError("cut regions")
    count = v[i]
    end = i + 1 + 5 * count
    if count < 0 or end > n:
        raise ValueError("bad region count")
    it = iter(v[i + 1:end])
    return tuple(zip(it, it, it, it, it)), end
