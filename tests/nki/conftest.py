"""Shared helpers for the NKI target tests.

The interpreter's modules are installed into this test process (the same way the harness
child does it) so kernels can be written inline in the tests.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from autocomp.backends.nki.interp import install
from autocomp.backends.nki.interp.install import execute

INSTALLED = install()


def run(kernel, *arrays, reverse: bool = False):
    """Run an inline kernel on host arrays; returns the RunResult."""
    fn = getattr(kernel, "func", kernel)
    return execute(kernel, [np.asarray(a) for a in arrays], kernel_file=inspect.getsourcefile(fn), reverse_affine=reverse)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
