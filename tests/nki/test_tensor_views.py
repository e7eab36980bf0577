"""NKI 2.31+'s NkiTensor view methods (``slice``, ``select``, ``permute``, ``expand_dim``,
``squeeze_dim``, ``broadcast``, ``flatten_dims``, ``reshape_dim``): views of the same memory,
here and through the kernel process, against NumPy; what they refuse (moving an on-chip
partition axis, a copy in disguise, out-of-range dimensions)."""

from __future__ import annotations

import numpy as np
import pytest

from nki_testlib import install, load_module, run_both_ways

from autocomp.backends.nki.interp.errors import NkiError
from autocomp.backends.nki.interp.install import execute

KERNELS = '''import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def views(a):
    # a: HBM (4, 128, 64)
    out = nl.ndarray((128, 4 * 64 + 64 + 32), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 4, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a.permute(1, 0, 2))        # HBM (4,128,64) viewed as (128,4,64)
    flat = t.flatten_dims(1, 2)                          # (128, 256), the same bytes
    nisa.dma_copy(dst=out[:, 0:256], src=flat)
    col = t.select(1, 2)                                 # (128, 64): block 2
    nisa.dma_copy(dst=out[:, 256:320], src=col)
    half = t.slice(2, 0, 64, 2).select(1, 0)             # every other element of block 0: (128, 32)
    nisa.dma_copy(dst=out[:, 320:352], src=half)
    return out


@nki.jit
def dims(a):
    # a: HBM (128, 64)
    out = nl.ndarray((128, 2, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    e = t.expand_dim(1)                                  # (128, 1, 64)
    b = e.broadcast(1, 2)                                # (128, 2, 64), read-only
    r = nl.ndarray((128, 2, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=r, src=b)
    s = r.reshape_dim(2, (8, 8)).flatten_dims(2, 3)      # split then merge back: (128, 2, 64)
    nisa.dma_copy(dst=out, src=s)
    return out


@nki.jit
def partition_select(a):
    out = nl.ndarray((64,), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.dma_copy(dst=out, src=t.select(0, 3))
    return out


@nki.jit
def partition_permute(a):
    out = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.dma_copy(dst=out, src=t.permute(1, 0))
    return out


@nki.jit
def copy_in_disguise(a):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 4, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a.permute(1, 0, 2))
    nisa.dma_copy(dst=out, src=t.slice(2, 0, 32).flatten_dims(1, 2)[:, 0:64])
    return out
'''


@pytest.fixture(scope="module")
def mod(tmp_path_factory):
    install()
    return load_module(tmp_path_factory.mktemp("views"), "views", KERNELS)


def test_views_move_no_data_and_read_what_numpy_reads(mod):
    m, path = mod
    a = np.random.default_rng(0).standard_normal((4, 128, 64)).astype(np.float32)
    res = run_both_ways(path, m, "views", [a])
    t = a.transpose(1, 0, 2)
    expect = np.concatenate([t.reshape(128, 256), t[:, 2, :], t[:, 0, 0:64:2]], axis=1)
    np.testing.assert_array_equal(res.outputs[0], expect)
    assert [i.op for i in res.trace].count("dma_copy") == 4  # views cost no instruction


def test_expand_broadcast_reshape_dim_and_flatten(mod):
    m, path = mod
    a = np.random.default_rng(1).standard_normal((128, 64)).astype(np.float32)
    res = run_both_ways(path, m, "dims", [a])
    np.testing.assert_array_equal(res.outputs[0], np.broadcast_to(a[:, None, :], (128, 2, 64)))


@pytest.mark.parametrize("name, message", [
    ("partition_select", "partition dimension"),
    ("partition_permute", "partition dimension"),
    ("copy_in_disguise", "would copy"),
])
def test_what_views_refuse(mod, name, message):
    m, path = mod
    a = np.ones((4, 128, 64) if name == "copy_in_disguise" else (128, 64), np.float32)
    with pytest.raises(NkiError, match=message):
        execute(getattr(m, name), [a], kernel_file=path)
