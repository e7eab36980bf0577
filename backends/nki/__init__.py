"""NKI target: Autocomp's NumPy interpreter of AWS NKI kernels with NeuronCore constraint
checks and a per-engine cycle estimate, plus a thin adapter to the real Neuron tools.

``NkiBackend`` is imported on first use, so the sandboxed child that runs a kernel
(``python -m autocomp.backends.nki.runner``) starts without the parent's machinery."""

from __future__ import annotations

from typing import Any

__all__ = ["NkiBackend"]


def __getattr__(name: str) -> Any:
    if name == "NkiBackend":
        from autocomp.backends.nki.backend import NkiBackend

        return NkiBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
