"""The wire between the GPU runner (the timer, trusted) and its model children.

One message = an 8-byte big-endian header length, a JSON header, then the raw bytes of the
tensors the header describes (``{"tensors": [{"dtype", "shape", "nbytes"}...]}``). No
pickle in either direction: the runner never unpickles anything a candidate's process
wrote, and a malformed or oversized message is an error, not code.
"""

from __future__ import annotations

import json
import struct
from typing import Any, BinaryIO

MAX_HEADER = 1 << 20
MAX_PAYLOAD = 8 << 30


class WireError(Exception):
    pass


def send(stream: BinaryIO, header: dict[str, Any], payload: list[bytes] | None = None) -> None:
    data = json.dumps(header).encode()
    stream.write(struct.pack(">Q", len(data)))
    stream.write(data)
    for chunk in payload or ():
        stream.write(chunk)
    stream.flush()


def _read_exact(stream: BinaryIO, n: int) -> bytes:
    parts = []
    while n > 0:
        chunk = stream.read(n)
        if not chunk:
            raise WireError("the other side closed the pipe")
        parts.append(chunk)
        n -= len(chunk)
    return b"".join(parts)


def receive(stream: BinaryIO) -> tuple[dict[str, Any], list[bytes]]:
    (size,) = struct.unpack(">Q", _read_exact(stream, 8))
    if size > MAX_HEADER:
        raise WireError(f"header of {size} bytes is too large")
    try:
        header = json.loads(_read_exact(stream, size))
    except ValueError as exc:
        raise WireError(f"unreadable header: {exc}") from None
    if not isinstance(header, dict):
        raise WireError("the header is not an object")
    tensors = header.get("tensors") or []
    if not isinstance(tensors, list):
        raise WireError("`tensors` is not a list")
    total = 0
    payload = []
    for t in tensors:
        n = int(t.get("nbytes", -1)) if isinstance(t, dict) else -1
        total += n
        if n < 0 or total > MAX_PAYLOAD:
            raise WireError("bad tensor sizes")
        payload.append(_read_exact(stream, n))
    return header, payload


# -- tensors <-> bytes (torch imported lazily: the host process never loads it) ----------------
DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")


def describe(tensors: list[Any]) -> tuple[list[dict[str, Any]], list[bytes]]:
    """CPU copies of ``tensors`` as (descriptors, raw bytes). Non-tensors travel as JSON."""
    import torch

    descs, chunks = [], []
    for t in tensors:
        if isinstance(t, torch.Tensor):
            c = t.detach().to("cpu").contiguous()
            dtype = str(c.dtype).replace("torch.", "")
            if dtype not in DTYPES:
                raise WireError(f"unsupported dtype {dtype}")
            raw = c.view(torch.uint8).numpy().tobytes() if c.numel() else b""
            descs.append({"dtype": dtype, "shape": list(c.shape), "nbytes": len(raw)})
            chunks.append(raw)
        elif isinstance(t, (int, float, bool)) or t is None:
            descs.append({"value": t, "nbytes": 0})
            chunks.append(b"")
        else:
            raise WireError(f"cannot send a {type(t).__name__}")
    return descs, chunks


def rebuild(descs: list[dict[str, Any]], chunks: list[bytes], device: str = "cpu") -> list[Any]:
    import torch

    out = []
    for d, raw in zip(descs, chunks):
        if "dtype" not in d:
            out.append(d.get("value"))
            continue
        dtype = d["dtype"]
        if dtype not in DTYPES:
            raise WireError(f"unsupported dtype {dtype}")
        shape = [int(s) for s in d["shape"]]
        t = torch.frombuffer(bytearray(raw), dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
        t = t.view(getattr(torch, dtype)).reshape(shape)
        out.append(t.to(device))
    return out
