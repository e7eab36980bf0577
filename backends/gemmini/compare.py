"""Host-side comparison of a candidate's memory snapshots with the original kernel's.

This is where correctness is decided, on the host, from bytes the Spike extension copied
out of target memory at the harness's snapshot points. Nothing the target printed or
returned takes part.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .signature import ArrayParam, Signature

_FORMATS = {(1, "int"): "b", (1, "uint"): "B", (2, "int"): "h", (2, "uint"): "H", (4, "int"): "i",
            (4, "uint"): "I", (4, "float"): "f", (8, "int"): "q", (8, "uint"): "Q", (8, "float"): "d"}


def first_difference(a: bytes, b: bytes) -> int:
    """Index of the first differing byte of two equal-length byte strings (-1 if equal)."""
    if a == b:
        return -1
    step = 4096
    for start in range(0, min(len(a), len(b)), step):
        if a[start : start + step] != b[start : start + step]:
            for k in range(start, min(start + step, len(a), len(b))):
                if a[k] != b[k]:
                    return k
    return min(len(a), len(b))


def element(data: bytes, index: int, size: int, kind: str) -> str:
    """Element ``index`` of ``data`` rendered for a message."""
    fmt = _FORMATS.get((size, kind))
    chunk = data[index * size : (index + 1) * size]
    if fmt is None or len(chunk) < size:
        return chunk.hex() or "(missing)"
    (value,) = struct.unpack("<" + fmt, chunk)
    return repr(value) if kind == "float" else str(value)


@dataclass(frozen=True)
class Mismatch:
    """Why a candidate's snapshots are not the original's; ``message`` is feedback text."""

    message: str


def _describe(p: ArrayParam, expected: bytes, got: bytes, what: str) -> str:
    if len(expected) != len(got):
        return f"{what} `{p.name}`: snapshot is {len(got)} bytes, expected {len(expected)}"
    byte = first_difference(expected, got)
    idx = byte // p.elem_size
    count = sum(
        1
        for k in range(0, len(expected), p.elem_size)
        if expected[k : k + p.elem_size] != got[k : k + p.elem_size]
    ) if len(expected) <= (1 << 22) else None
    total = len(expected) // p.elem_size
    counted = f"; {count:,} of {total:,} elements differ" if count is not None else ""
    return (
        f"{what} `{p.name}` differs at {p.name}{p.index_of(idx)}: expected "
        f"{element(expected, idx, p.elem_size, p.kind)}, got {element(got, idx, p.elem_size, p.kind)}{counted}"
    )


def compare_function_runs(
    sig: Signature, seeds: tuple[int, ...], modes: tuple[str, ...], ref: list[dict[str, bytes]], cand: list[dict[str, bytes]]
) -> Mismatch | None:
    """Check a candidate run (2 snapshots per seed: before and after the call) against the
    original's. Returns the first problem found, or None when everything matches."""
    for i, seed in enumerate(seeds):
        # Seed values are secret: name the input set by position only.
        label = f"input set {i + 1} ({modes[i % len(modes)]} inputs{', the measured call' if i == 0 else ''})"
        ref_pre, ref_post = ref[2 * i], ref[2 * i + 1]
        pre, post = cand[2 * i], cand[2 * i + 1]
        for p in sig.inputs:
            if pre.get(p.name) != ref_pre.get(p.name):
                return Mismatch(
                    f"{label}: input `{p.name}` was not what the harness wrote before the kernel ran; code outside "
                    f"the kernel call (constructors, static initialisers) must not touch the harness's data"
                )
            if post.get(p.name) != pre.get(p.name):
                return Mismatch(
                    f"{label}: the kernel modified its input: "
                    + _describe(p, pre.get(p.name, b""), post.get(p.name, b""), "input")
                    + " (inputs must be left unchanged)"
                )
        for p in sig.outputs:
            expected, got = ref_post.get(p.name, b""), post.get(p.name, b"")
            if expected != got:
                untouched = got == pre.get(p.name)
                hint = " (the output still holds the poison the harness wrote: the kernel never wrote it)" if untouched else ""
                return Mismatch(f"{label}: " + _describe(p, expected, got, "output") + hint)
    return None


def changed_inputs(sig: Signature, snapshots: list[dict[str, bytes]], n_seeds: int) -> set[str]:
    """Inputs whose bytes the (original) kernel changed during any seed's call."""
    changed = set()
    for i in range(n_seeds):
        pre, post = snapshots[2 * i], snapshots[2 * i + 1]
        for p in sig.inputs:
            if pre.get(p.name) != post.get(p.name):
                changed.add(p.name)
    return changed


def compare_globals(ref: dict[str, bytes], cand: dict[str, bytes]) -> Mismatch | None:
    """Harness-file mode: every global array of the test program must end up identical."""
    for name, expected in ref.items():
        got = cand.get(name)
        if got is None:
            return Mismatch(f"global array `{name}` was not found in the candidate's program")
        if got != expected:
            byte = first_difference(expected, got)
            return Mismatch(
                f"global array `{name}` differs from the original program's at byte offset {byte}: expected "
                f"0x{expected[byte]:02x}, got 0x{got[byte]:02x}" if byte < min(len(expected), len(got)) else
                f"global array `{name}` has {len(got)} bytes, expected {len(expected)}"
            )
    return None
