"""The interpreter's shortcuts for zero data change no bit of any result.

Two mechanisms (both in ``interp/``), each exact by construction, checked here against the
plain computation they replace:

- ``isa._product``: a matmul whose two fp32 operands are all +0.0 is zeros, without the
  multiplication (every product and every sum of +0.0 is +0.0). Anything else (-0.0, NaN,
  infinity, one zero operand) goes through ``sv.T @ mv``.
- ``core._host_copy``: a C-contiguous kernel argument whose bytes are all zero is copied as
  zeroed memory: the same bytes, shape, dtype and strides as ``np.array(a, copy=True)``.

A kernel overwriting its zero argument changes its own copy only, and the GEMM kernels
give the same outputs, traces and reorder verdicts with the matmul shortcut on and off.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from nki_testlib import run  # noqa: F401  (installs the interpreter's nki modules)

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

from autocomp.backends.nki.interp import core, isa  # noqa: E402
from autocomp.backends.nki.interp.install import execute  # noqa: E402


def _bits(a: np.ndarray) -> bytes:
    a = np.ascontiguousarray(a)
    return a.view(np.uint8).tobytes() if a.size else b""


def _trace_rows(res) -> list:
    return [(i.op, i.engine, i.line, i.partitions, i.free, i.dtype_bytes, i.reads, i.writes, i.info) for i in res.trace]


# ---------------------------------------------------------------------------- _product
OPERANDS = {
    "zeros": lambda shape, rng: np.zeros(shape, np.float32),
    "random": lambda shape, rng: rng.standard_normal(shape).astype(np.float32),
    "negative": lambda shape, rng: -np.abs(rng.standard_normal(shape)).astype(np.float32) - 1,
    "minus_zero": lambda shape, rng: np.full(shape, -0.0, np.float32),
    "one_minus_zero": lambda shape, rng: np.where(np.arange(np.prod(shape)).reshape(shape) == 7, np.float32(-0.0),
                                                  np.float32(0.0)).astype(np.float32),
    "last_nonzero": lambda shape, rng: np.where(np.arange(np.prod(shape)).reshape(shape) == np.prod(shape) - 1,
                                                np.float32(3.0), np.float32(0.0)).astype(np.float32),
    "nan_at_end": lambda shape, rng: np.where(np.arange(np.prod(shape)).reshape(shape) == np.prod(shape) - 1,
                                              np.float32(np.nan), np.float32(0.0)).astype(np.float32),
    "inf_at_end": lambda shape, rng: np.where(np.arange(np.prod(shape)).reshape(shape) == np.prod(shape) - 1,
                                              np.float32(np.inf), np.float32(0.0)).astype(np.float32),
}


@pytest.mark.parametrize("left", sorted(OPERANDS))
@pytest.mark.parametrize("right", sorted(OPERANDS))
def test_product_is_the_matmul_bit_for_bit(left: str, right: str) -> None:
    rng = np.random.default_rng(0)
    sv = OPERANDS[left]((128, 64), rng)
    mv = OPERANDS[right]((128, 96), rng)
    with np.errstate(all="ignore"):
        want = sv.T @ mv
        got = isa._product(sv, mv)
    assert got.dtype == want.dtype and got.shape == want.shape and got.flags.c_contiguous
    assert _bits(got) == _bits(want)


def test_product_of_strided_operands() -> None:
    """Operands that are views (a transposed or sliced tile) are tested and multiplied as such."""
    base = np.zeros((128, 256), np.float32)
    sv, mv = base[:, ::2], base.T[:128, :64]
    assert isa._all_plus_zero(sv) and isa._all_plus_zero(mv)
    assert _bits(isa._product(sv, mv)) == _bits(sv.T @ mv)
    base[5, 4] = -0.0
    assert not isa._all_plus_zero(sv)


@pytest.mark.parametrize("value", [-0.0, np.nan, -np.nan, np.inf, -np.inf, 1e-45, -1e-45])
def test_only_plus_zero_counts_as_zero(value: float) -> None:
    for where in (0, 17, -1):
        x = np.zeros((8, 8), np.float32)
        x.reshape(-1)[where] = value
        assert not isa._all_plus_zero(x)
    assert isa._all_plus_zero(np.zeros((8, 8), np.float32))


# ---------------------------------------------------------------------------- kernels
@pytest.fixture
def plain_matmul(monkeypatch):
    """Runs a kernel with the zero shortcut off: the reference every result is held to."""

    def run_plain(fn, arrays):
        with monkeypatch.context() as m:
            m.setattr(isa, "_all_plus_zero", lambda x: False)
            return execute(fn, arrays, kernel_file=__file__, prove_reorder=True)

    return run_plain


@nki.jit
def _old_api_gemm(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // 128):
        psum = nl.zeros((128, N), nl.float32, buffer=nl.psum)
        for k in nl.affine_range(K // 128):
            a = nl.load(lhsT[k * 128:(k + 1) * 128, m * 128:(m + 1) * 128])
            b = nl.load(rhs[k * 128:(k + 1) * 128, :])
            psum += nl.matmul(a, b, transpose_x=True)
        nl.store(out[m * 128:(m + 1) * 128, :], value=nl.copy(psum))
    return out


@nki.jit
def _accumulate_into_minus_zero(lhsT, rhs, start):
    """A PSUM tile holding -0.0 (and other values) accumulates a product of zero operands:
    -0.0 + +0.0 is +0.0, the same with or without the shortcut."""
    out = nl.ndarray(start.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray(start.shape, dtype=nl.float32, buffer=nl.psum)
    s = nl.load(start)
    acc[...] = nl.copy(s)
    a = nl.load(lhsT)
    b = nl.load(rhs)
    acc += nl.matmul(a, b, transpose_x=True)
    nl.store(out, value=nl.copy(acc))
    return out


CASES = {
    "zeros": (np.zeros((256, 256), ml_dtypes.bfloat16), np.zeros((256, 512), ml_dtypes.bfloat16)),
    "zero_lhs": (np.zeros((256, 256), ml_dtypes.bfloat16),
                 np.random.default_rng(1).standard_normal((256, 512)).astype(ml_dtypes.bfloat16)),
    "minus_zero_rhs": (np.zeros((256, 256), ml_dtypes.bfloat16), np.full((256, 512), -0.0, ml_dtypes.bfloat16)),
    "random": tuple(np.random.default_rng(2).standard_normal(s).astype(ml_dtypes.bfloat16) for s in ((256, 256), (256, 512))),
    "zero_then_random_block": (np.zeros((256, 256), ml_dtypes.bfloat16),
                               np.concatenate([np.zeros((128, 512)), np.ones((128, 512))]).astype(ml_dtypes.bfloat16)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_gemm_kernel_same_as_plain_matmul(case: str, plain_matmul) -> None:
    arrays = list(CASES[case])
    got = execute(_old_api_gemm, arrays, kernel_file=__file__, prove_reorder=True)
    want = plain_matmul(_old_api_gemm, arrays)
    assert [_bits(o) for o in got.outputs] == [_bits(o) for o in want.outputs]
    assert _trace_rows(got) == _trace_rows(want)
    assert got.reorder_conflict == want.reorder_conflict


def test_accumulation_onto_minus_zero(plain_matmul) -> None:
    start = np.full((128, 512), -0.0, np.float32)
    start[0, :5] = [1.0, -2.5, np.inf, -0.0, 0.0]
    arrays = [np.zeros((128, 128), ml_dtypes.bfloat16), np.zeros((128, 512), ml_dtypes.bfloat16), start]
    got = execute(_accumulate_into_minus_zero, arrays, kernel_file=__file__)
    want = plain_matmul(_accumulate_into_minus_zero, arrays)
    assert _bits(got.outputs[0]) == _bits(want.outputs[0])
    assert _trace_rows(got) == _trace_rows(want)
    # (-0.0 + +0.0 = +0.0: the accumulation happened; the values kept are start's others)
    assert not np.signbit(got.outputs[0][1, 0]) and got.outputs[0][0, 1] == -2.5


# ---------------------------------------------------------------------------- _host_copy
def _arrays_for(dtype: np.dtype) -> list[np.ndarray]:
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(3)
    zeros = np.zeros((6, 8 * dtype.itemsize), np.uint8).view(dtype)
    some = rng.integers(0, 256, size=(6, 8 * dtype.itemsize), dtype=np.uint8).view(dtype)
    last = np.zeros((6, 8 * dtype.itemsize), np.uint8)
    last[-1, -1] = 1
    first = np.zeros((6, 8 * dtype.itemsize), np.uint8)
    first[0, 0] = 0x80
    return [zeros, some, last.view(dtype), first.view(dtype), np.asfortranarray(zeros), zeros[:, ::2], zeros[:0]]


@pytest.mark.parametrize("name", sorted(core.DTYPES))
def test_host_copy_is_a_copy_of_the_same_bytes(name: str) -> None:
    for a in _arrays_for(core.DTYPES[name]):
        got, want = core._host_copy(a), np.array(a, copy=True)
        assert (got.dtype, got.shape, got.strides) == (want.dtype, want.shape, want.strides)
        assert got.flags.writeable and got.flags.c_contiguous == want.flags.c_contiguous
        assert _bits(got) == _bits(want)
        assert got.size == 0 or not np.shares_memory(got, a)


@nki.jit
def _writes_its_input(x):
    """Overwrites its own HBM argument: the argument's copy changes, the host array not."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out, value=t)
    ones = nl.full(x.shape, 1.0, dtype=x.dtype)
    nl.store(x, value=ones)
    return out


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_zero_argument_copy_is_private(dtype) -> None:
    host = np.zeros((128, 64), dtype)
    res = execute(_writes_its_input, [host], kernel_file=__file__)
    assert _bits(res.outputs[0]) == _bits(np.zeros((128, 64), dtype))
    assert not np.any(host.view(np.uint8)), "the host's array must not change"
    assert np.all(res.args_after[0].astype(np.float32) == 1.0)


@nki.jit
def _returns_its_result_twice(x):
    """The same HBM tensor returned twice: each output is a copy of its own."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.load(x))
    return out, out


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
@pytest.mark.parametrize("zero", [True, False])
def test_outputs_are_private_copies(dtype, zero: bool) -> None:
    host = np.zeros((128, 64), dtype) if zero else np.random.default_rng(5).standard_normal((128, 64)).astype(dtype)
    res = execute(_returns_its_result_twice, [host], kernel_file=__file__)
    a, b = res.outputs
    assert _bits(a) == _bits(host) and _bits(b) == _bits(host)
    assert a.flags.writeable and a.flags.c_contiguous and not np.shares_memory(a, b)
    assert not np.shares_memory(a, res.args_after[0]) and not np.shares_memory(a, host)
    a[0, 0] = 7
    assert _bits(b) == _bits(host) and _bits(res.args_after[0]) == _bits(host)
