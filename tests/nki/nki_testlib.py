"""Helpers for the NKI target tests (a uniquely named module, so it never collides with
other test folders' helpers).

Importing it installs the interpreter's ``nki`` / ``neuronxcc.nki`` modules into this
test process — the way the harness child does — so kernels can be written inline.
"""

from __future__ import annotations

import inspect

import numpy as np

from autocomp.backends.nki.interp import install
from autocomp.backends.nki.interp.install import execute

INSTALLED = install()


def run(kernel, *arrays, reverse: bool = False):
    """Run an inline kernel on host arrays; returns the RunResult."""
    fn = getattr(kernel, "func", kernel)
    return execute(kernel, [np.asarray(a) for a in arrays], kernel_file=inspect.getsourcefile(fn), reverse_affine=reverse)
