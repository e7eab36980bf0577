"""Kernels called from PyTorch code: torch tensors in, torch tensors out.

Under ``torch_xla`` a real ``@nki.jit`` kernel takes device tensors and returns them, so
harness code written for a Neuron device (``torch.randn(...).to(device)``, then
``out.detach().cpu().numpy()``) expects tensors back. The interpreter works on NumPy
arrays: :func:`to_host` turns a torch tensor into one (bfloat16 through its bits, which
NumPy cannot take directly) and :func:`to_torch` turns results back. torch is never imported
here unless the caller already passed a torch tensor, so an install without PyTorch pays
nothing.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np


def is_torch(x: Any) -> bool:
    """Whether ``x`` is a torch tensor (without importing torch)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def to_host(x: Any) -> Any:
    """A torch tensor as the NumPy array it holds (on the CPU); anything else unchanged."""
    if not is_torch(x):
        return x
    import ml_dtypes
    import torch

    x = x.detach().cpu().contiguous()
    if x.dtype == torch.bfloat16:
        return x.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return x.numpy()


def to_torch(x: Any) -> Any:
    """NumPy results (alone, or in a tuple/list) as CPU torch tensors."""
    if isinstance(x, (tuple, list)):
        return type(x)(to_torch(e) for e in x)
    if not isinstance(x, np.ndarray):
        return x
    import ml_dtypes
    import torch

    x = np.ascontiguousarray(x)
    if x.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(x.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(x)
