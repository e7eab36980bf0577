"""Fixtures for the NKI target tests; helpers live in nki_testlib."""

from __future__ import annotations

import numpy as np
import pytest

import nki_testlib  # noqa: F401  (installs the interpreter's modules before test modules import nki)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
