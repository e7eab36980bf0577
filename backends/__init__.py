"""Target registry. Backends are imported lazily so a missing optional dependency of one
target (numpy for NKI, say) never breaks the others."""

from __future__ import annotations

import importlib
import os
from typing import Any

from autocomp.backends.base import Backend, BackendError, TierInfo, ToolCheck

# name -> "module:Class". The scripted double is registered for the engine's own tests;
# it detects nothing in real files so it never shows up in an editor.
_REGISTRY: dict[str, str] = {
    "gemmini": "autocomp.backends.gemmini:GemminiBackend",
    "nki": "autocomp.backends.nki:NkiBackend",
    "cuda": "autocomp.backends.cuda:CudaBackend",
    "scripted": "autocomp.testing.scripted_backend:ScriptedBackend",
}

REAL_TARGETS: tuple[str, ...] = ("gemmini", "nki", "cuda")


def target_names() -> list[str]:
    return list(REAL_TARGETS)


def get_backend(name: str, settings: dict[str, Any] | None = None) -> Backend:
    """Instantiate the backend for ``name``; a clear error if it is unknown or broken."""
    try:
        ref = _REGISTRY[name]
    except KeyError:
        raise BackendError(f"unknown target {name!r}; choose one of {', '.join(REAL_TARGETS)}") from None
    module_name, class_name = ref.split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise BackendError(f"target {name!r} cannot load: {exc}. Run `autocomp doctor`.") from exc
    cls = getattr(module, class_name)
    return cls(settings)


def register(name: str, ref: str) -> None:
    """Add a target from outside the package (``module:Class``)."""
    _REGISTRY[name] = ref


def detect_target(path: str, text: str, settings: dict[str, dict[str, Any]] | None = None) -> list[Backend]:
    """Backends that find at least one kernel in this file, most specific first."""
    found: list[Backend] = []
    suffix = os.path.splitext(path)[1].lower()
    for name in REAL_TARGETS:
        try:
            backend = get_backend(name, (settings or {}).get(name))
        except BackendError:
            continue
        if backend.file_suffixes and suffix not in backend.file_suffixes:
            continue
        try:
            if backend.detect(path, text):
                found.append(backend)
        except Exception:  # detection must never take the caller down
            continue
    return found


__all__ = ["Backend", "BackendError", "TierInfo", "ToolCheck", "get_backend", "detect_target", "register", "target_names"]
