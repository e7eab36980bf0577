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
    the moving tile's free size); ``reads``/``writes`` are ids of the allocations touched
    (negative ids are HBM tensors, which carry no on-chip hazards in the cost model);
    ``info`` holds op-specific figures (``stationary_free``, ``bytes``, ``chunk_bytes``,
    ``func``, …).
    """

    op: str
    engine: str
    line: int
    partitions: int
    free: int
    dtype_bytes: int
    reads: tuple[int, ...] = ()
    writes: tuple[int, ...] = ()
    info: dict[str, Any] = field(default_factory=dict)

    def to_list(self) -> list[Any]:
        return [self.op, self.engine, self.line, self.partitions, self.free, self.dtype_bytes,
                list(self.reads), list(self.writes), self.info]

    @classmethod
    def from_list(cls, row: list[Any]) -> "Instr":
        op, engine, line, partitions, free, dtype_bytes, reads, writes, info = row
        if engine not in ENGINES:
            raise ValueError(f"unknown engine {engine!r} in trace")
        return cls(str(op), str(engine), int(line), int(partitions), int(free), int(dtype_bytes),
                   tuple(int(r) for r in reads), tuple(int(w) for w in writes), dict(info))


def trace_to_json(trace: list[Instr]) -> list[list[Any]]:
    return [i.to_list() for i in trace]


def trace_from_json(rows: list[list[Any]]) -> list[Instr]:
    return [Instr.from_list(r) for r in rows]
