"""Arrays across the process boundary without pickle.

``np.savez`` cannot describe ml_dtypes types (bfloat16, fp8) portably, so each array is
stored as raw unsigned bytes plus a dtype name; :func:`load_arrays` refuses pickled data.
:func:`pack_arrays` / :func:`unpack_arrays` do the same in memory without a zip archive (the
candidates' inputs on their stdin: hundreds of MB at published shapes, where writing and
checksumming an .npz took most of a second before a candidate could start).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from autocomp.backends.nki.interp.core import DTYPES, dtype_name

_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def save_arrays(path: str | Path, arrays: dict[str, np.ndarray]) -> dict[str, str]:
    """Write ``arrays`` to an .npz; returns {key: dtype name} for the manifest."""
    raw: dict[str, np.ndarray] = {}
    names: dict[str, str] = {}
    for key, arr in arrays.items():
        arr = np.array(arr, order="C", copy=True)  # keeps 0-d arrays 0-d (ascontiguousarray would not)
        names[key] = dtype_name(arr.dtype)
        if arr.dtype.kind == "b":
            raw[key] = arr.astype(np.uint8)
        else:
            raw[key] = arr.view(_UINT[arr.dtype.itemsize])
    np.savez(path, **raw)
    return names


def _stored_dtype(name: str) -> tuple[np.dtype, bool]:
    """(the dtype an array of dtype ``name`` is read as, whether it is a boolean array
    stored as one byte per element): one answer for both formats."""
    if name in ("bool", "bool_"):
        return np.dtype(np.uint8), True
    return DTYPES.get(name) or np.dtype(name), False


def load_arrays(path: str | Path, dtypes: dict[str, str]) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    with np.load(path, allow_pickle=False) as data:
        for key, name in dtypes.items():
            if key not in data.files:
                raise ValueError(f"{path}: array {key!r} missing")
            raw = data[key]
            dt, boolean = _stored_dtype(name)
            if boolean:
                out[key] = raw.astype(bool)
                continue
            if raw.dtype.itemsize != dt.itemsize or raw.dtype.kind != "u":
                raise ValueError(f"{path}: array {key!r} has raw dtype {raw.dtype}, expected {dt.itemsize}-byte unsigned")
            out[key] = raw.view(dt)
    return out


def dumps(obj: object) -> str:
    return json.dumps(obj, sort_keys=True)


def same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two arrays of one shape and dtype hold the same bytes, compared as the widest
    unsigned words the size allows (inputs at published shapes are hundreds of MB)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    x = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    y = np.ascontiguousarray(b).reshape(-1).view(np.uint8)
    for word in (np.uint64, np.uint32, np.uint16):
        if x.size % np.dtype(word).itemsize == 0:
            x, y = x.view(word), y.view(word)
            break
    return bool(np.array_equal(x, y))


def pack_arrays(arrays: dict[str, np.ndarray]) -> tuple[bytes, dict[str, str]]:
    """(bytes, {key: dtype name}): one JSON line ``[[key, dtype, shape, nbytes], ...]``,
    then each array's bytes in C order, in that order (booleans as one byte each)."""
    header: list[list[object]] = []
    parts: list[object] = []
    names: dict[str, str] = {}
    for key, arr in arrays.items():
        arr = np.asarray(arr)
        names[key] = dtype_name(arr.dtype)
        raw = arr.astype(np.uint8) if arr.dtype.kind == "b" else arr
        raw = np.ascontiguousarray(raw)
        header.append([key, names[key], list(arr.shape), int(raw.nbytes)])
        parts.append(memoryview(raw.reshape(-1).view(np.uint8)) if raw.size else b"")
    return b"".join([json.dumps(header).encode(), b"\n", *parts]), names


def unpack_arrays(raw: bytes, dtypes: dict[str, str]) -> dict[str, np.ndarray]:
    """The arrays :func:`pack_arrays` wrote, as read-only views of ``raw`` (no copy): exactly
    the keys and dtypes of ``dtypes`` (the request's manifest), each within ``raw``."""
    end = raw.index(b"\n")
    header = json.loads(raw[:end])
    out: dict[str, np.ndarray] = {}
    pos = end + 1
    buf = memoryview(raw)
    for key, name, shape, nbytes in header:
        if key not in dtypes or dtypes[key] != name or key in out:
            raise ValueError(f"array {key!r} is not the manifest's")
        dt, boolean = _stored_dtype(name)
        shape = tuple(int(n) for n in shape)
        if int(np.prod(shape, dtype=object)) * dt.itemsize != nbytes or pos + nbytes > len(raw):
            raise ValueError(f"array {key!r}: {nbytes} bytes do not hold {shape} {name}")
        arr = np.frombuffer(buf[pos:pos + nbytes], dtype=dt).reshape(shape)
        out[key] = arr.astype(bool) if boolean else arr
        pos += nbytes
    if set(out) != set(dtypes):
        raise ValueError(f"arrays missing: {sorted(set(dtypes) - set(out))}")
    return out
