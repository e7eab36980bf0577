"""Arrays across the process boundary without pickle.

``np.savez`` cannot describe ml_dtypes types (bfloat16, fp8) portably, so each array is
stored as raw unsigned bytes plus a dtype name; :func:`load_arrays` refuses pickled data.
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


def load_arrays(path: str | Path, dtypes: dict[str, str]) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    with np.load(path, allow_pickle=False) as data:
        for key, name in dtypes.items():
            if key not in data.files:
                raise ValueError(f"{path}: array {key!r} missing")
            raw = data[key]
            if name in ("bool", "bool_"):
                out[key] = raw.astype(bool)
                continue
            dt = DTYPES.get(name) or np.dtype(name)
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
