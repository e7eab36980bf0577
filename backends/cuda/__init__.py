"""The CUDA target: ``.cu``/``.cuh`` kernels with a host launcher, and KernelBench-style
Python (``Model``/``get_inputs``; candidates define ``ModelNew``). See docs/cuda.md."""

from autocomp.backends.cuda.backend import CudaBackend

__all__ = ["CudaBackend"]
