"""A real local Ray head on loopback for the executor tests: two CPUs (the CI machine's),
plus one of each device resource a target asks for (``GPU``, ``trainium``, ``gemmini_sim``)
so the tests see tasks scheduled with them. The GPU is declared, not real: no CUDA work
runs on it here (the CUDA backend finds no driver and uses its compile tier).
Started once for the module that asks for it, and shut down after it."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="module")
def ray_head():
    ray = pytest.importorskip("ray", reason="the Ray extra is not installed (pip install 'autocomp[ray]', .ci/install-ray.sh)")
    if ray.is_initialized():
        ray.shutdown()
    ray.init(
        address="local",
        num_cpus=2,
        num_gpus=1,
        resources={"gemmini_sim": 2, "trainium": 1},
        object_store_memory=256 * 1024 * 1024,  # evaluations move kilobytes; keep /dev/shm free
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
        _node_ip_address="127.0.0.1",
    )
    try:
        yield ray
    finally:
        ray.shutdown()
