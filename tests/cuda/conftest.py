"""Fixtures for the CUDA backend tests: a private compile cache per test session, so
tests never read a developer's cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from autocomp.backends.cuda import CudaBackend


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cuda-cache")


@pytest.fixture
def backend(cache_dir) -> CudaBackend:
    """The backend as it runs on this machine (GPU tier when a GPU is present)."""
    return CudaBackend({"cache_dir": str(cache_dir)})


@pytest.fixture
def cpu_backend(cache_dir) -> CudaBackend:
    """The backend with the GPU tier turned off, so compile-tier expectations hold anywhere."""
    return CudaBackend({"cache_dir": str(cache_dir), "gpu": "off"})
