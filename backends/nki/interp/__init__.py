"""Autocomp's NumPy interpreter of the NKI API (both the current ``nki`` API and the older
``neuronxcc.nki`` one), with NeuronCore constraint checks and an instruction trace."""

from autocomp.backends.nki.interp.errors import NkiError
from autocomp.backends.nki.interp.install import RunResult, execute, install

__all__ = ["NkiError", "RunResult", "execute", "install"]
