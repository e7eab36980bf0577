"""NKI target: Autocomp's NumPy interpreter of AWS NKI kernels with NeuronCore constraint
checks and a per-engine cycle estimate, plus a thin adapter to the real Neuron tools."""

from autocomp.backends.nki.backend import NkiBackend

__all__ = ["NkiBackend"]
