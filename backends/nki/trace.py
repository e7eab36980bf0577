"""The instruction trace: what the interpreter saw each NKI instruction do.

The interpreter appends one :class:`Instr` per hardware instruction (DMA, matmul, vector
op, …). The cost model reads only this trace, so it never needs to re-run a kernel, and
the trace travels from the child process to the parent as plain JSON lists.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ENGINES: tuple[str, ...] = ("tensor", "vector", "scalar", "gpsimd", "dma")
ENGINE_LABELS: dict[str, str] = {
    "tensor": "TensorE",
    "vector": "VectorE",
    "scalar": "ScalarE",
    "gpsimd": "GpSimdE",
    "dma": "DMA",
}


@dataclass
class Instr:
    """One instruction.

    ``free`` is the number of elements per partition the engine streams (for a matmul:
    the moving tile's free size); ``reads``/``writes`` are the regions of the views touched,
    (allocation id, first partition, end partition, first free byte, end free byte)
    (negative ids are HBM tensors, which carry no write-after hazards in the cost model);
    ``info`` holds op-specific figures (``stationary_free``, ``bytes``, ``chunk_bytes``,
    ``func``, …).
    """

    op: str
    engine: str
    line: int
    partitions: int
    free: int
    dtype_bytes: int
    reads: tuple[tuple[int, int, int, int, int], ...] = ()
    writes: tuple[tuple[int, int, int, int, int], ...] = ()
    info: dict[str, Any] = field(default_factory=dict)

    def to_list(self) -> list[Any]:
        return [self.op, self.engine, self.line, self.partitions, self.free, self.dtype_bytes,
                [list(r) for r in self.reads], [list(w) for w in self.writes], self.info]

    @classmethod
    def from_list(cls, row: list[Any]) -> "Instr":
        op, engine, line, partitions, free, dtype_bytes, reads, writes, info = row
        if engine not in ENGINES:
            raise ValueError(f"unknown engine {engine!r} in trace")
        return cls(str(op), str(engine), int(line), int(partitions), int(free), int(dtype_bytes),
                   tuple([_region(r) for r in reads]), tuple([_region(w) for w in writes]), dict(info))


def _region(r: Any) -> tuple[int, int, int, int, int]:
    if not isinstance(r, (list, tuple)) or len(r) != 5:
        raise ValueError(f"bad region {r!r} in trace")
    t = tuple(r)
    # Five exact ints (what the interpreter sends): taken as they are, the same values the
    # conversion below gives; anything else is converted (or refused) one by one.
    if type(t[0]) is int and type(t[1]) is int and type(t[2]) is int and type(t[3]) is int and type(t[4]) is int:
        return t
    return (int(r[0]), int(r[1]), int(r[2]), int(r[3]), int(r[4]))


def region_from_json(r: Any) -> tuple[int, int, int, int, int]:
    """A region as sent by the child (checked: five integers)."""
    return _region(r)


def trace_to_json(trace: list[Instr]) -> list[list[Any]]:
    return [i.to_list() for i in trace]


def trace_from_json(rows: list[list[Any]]) -> list[Instr]:
    return [Instr.from_list(r) for r in rows]
