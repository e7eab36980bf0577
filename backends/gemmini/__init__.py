"""Gemmini target: C kernels on Spike with Autocomp's Gemmini functional and timing model."""

from autocomp.backends.gemmini.backend import GemminiBackend

__all__ = ["GemminiBackend"]
