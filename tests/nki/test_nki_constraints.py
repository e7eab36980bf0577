"""Hardware-limit and API-misuse checks: each names the file, line, call and limit."""

from __future__ import annotations

import numpy as np
import pytest

from nki_testlib import run  # installs the interpreter modules first

import nki
import nki.isa as nisa
import nki.language as nl
import neuronxcc.nki.language as onl
from autocomp.backends.nki.interp.errors import NkiError


X = np.zeros((128, 64), np.float32)


def _error(kernel, *arrays) -> NkiError:
    with pytest.raises(NkiError) as info:
        run(kernel, *(arrays or (X,)))
    err = info.value
    assert err.file.endswith("test_nki_constraints.py") and err.line > 0, err
    return err


def test_partition_dimension_over_128():
    @nki.jit
    def k(a):
        nl.ndarray((256, 4), dtype=nl.float32, buffer=nl.sbuf)

    err = _error(k)
    assert err.kind == "partition-limit" and "<= 128" in err.limit and err.call == "nl.ndarray"


def test_matmul_stationary_and_moving_limits():
    @nki.jit
    def wide_stationary(a):
        s = nl.ndarray((128, 256), dtype=nl.bfloat16, buffer=nl.sbuf)
        m = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.memset(dst=s, value=1.0)
        nisa.memset(dst=m, value=1.0)
        p = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=p, stationary=s, moving=m)

    @nki.jit
    def wide_moving(a):
        s = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
        m = nl.ndarray((128, 1024), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.memset(dst=s, value=1.0)
        nisa.memset(dst=m, value=1.0)
        p = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=p, stationary=s, moving=m)

    e1, e2 = _error(wide_stationary), _error(wide_moving)
    assert e1.kind == e2.kind == "matmul-limit"
    assert "stationary" in e1.limit and "moving" in e2.limit and e1.call == "nisa.nc_matmul"


def test_matmul_operands_in_sbuf_and_result_in_psum():
    @nki.jit
    def psum_operand(a):
        s = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
        nisa.memset(dst=s, value=1.0)
        p = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=p, stationary=s, moving=s)

    @nki.jit
    def sbuf_result(a):
        s = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=s, value=1.0)
        r = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
        nisa.nc_matmul(dst=r, stationary=s, moving=s)

    assert "PSUM" in str(_error(psum_operand))
    assert "psum" in str(_error(sbuf_result)).lower()


def test_psum_tile_and_capacity_limits():
    @nki.jit
    def big_psum_tile(a):
        nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.psum)

    @nki.jit
    def psum_full(a):
        tiles = [nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum) for _ in range(9)]
        for t in tiles:
            nisa.memset(dst=t, value=0.5)
        for t in tiles:  # all nine are live at once
            u = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=u, src=t)

    @nki.jit
    def sbuf_full(a):
        keep = [nl.ndarray((128, 16384), dtype=nl.float32, buffer=nl.sbuf) for _ in range(4)]
        for t in keep:
            nisa.memset(dst=t, value=1.0)
        for t in keep:
            nisa.memset(dst=t, value=2.0)

    @nki.jit
    def sbuf_in_turn(a):
        # the same four tiles used one after another: each dies before the next is used
        keep = [nl.ndarray((128, 16384), dtype=nl.float32, buffer=nl.sbuf) for _ in range(4)]
        for t in keep:
            nisa.memset(dst=t, value=1.0)
            u = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=u, op=nl.add, data=t, axis=1)

    assert _error(big_psum_tile).kind == "psum-tile-limit"
    err = _error(psum_full)
    assert err.kind == "capacity" and "PSUM 16 KiB" in err.limit and "live at once" in err.message
    err = _error(sbuf_full)
    assert err.kind == "capacity" and "SBUF 192 KiB" in err.limit and "largest live" in err.message
    run(sbuf_in_turn, X)  # Python holds all four; the compiler's liveness does not


def test_capacity_is_released_when_tiles_die():
    @nki.jit
    def loop(a):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(40):  # 40 x 64 KiB would never fit at once
            t = nl.ndarray((128, 16384), dtype=nl.float32, buffer=nl.sbuf)
            nisa.memset(dst=t[:, 0:64], value=1.0)
            if i == 0:
                nisa.dma_copy(dst=out, src=t[:, 0:64])
        return out

    assert run(loop, X).outputs[0].sum() == 128 * 64


def test_no_compute_on_hbm_and_no_dma_to_psum():
    @nki.jit
    def hbm_compute(a):
        t = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=t, data1=a, data2=a, op=nl.add)

    @nki.jit
    def dma_psum(a):
        p = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.psum)
        nisa.dma_copy(dst=p, src=a)

    err = _error(hbm_compute)
    assert err.kind == "compute-on-hbm" and err.limit == "no compute directly on HBM"
    assert _error(dma_psum).kind == "dma-psum"


def test_read_of_unwritten_memory():
    @nki.jit
    def k(a):
        t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[:, 0:32], src=a[:, 0:32])
        u = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=u, src=t[:, 32:64])  # nothing of it was ever written

    err = _error(k)
    assert err.kind == "unwritten-read" and "4096 of 4096" in err.message


def test_out_of_bounds_slices_and_index_expressions():
    @nki.jit
    def slice_oob(a):
        t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[0:128, 32:96])

    @nki.jit
    def arange_oob(a):
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(64)[None, :]
        t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[i_p, i_f + 1])  # no mask covers column 64

    @nki.jit
    def arange_all_outside(a):
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(64)[None, :]
        t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[i_p, i_f + 64])

    assert _error(slice_oob).kind == "out-of-bounds"
    err = _error(arange_oob)
    assert err.kind == "out-of-bounds" and "128 elements outside" in err.message and "mask=" in err.message
    err = _error(arange_all_outside)
    assert err.kind == "out-of-bounds" and "8192 elements outside" in err.message


def test_mixing_api_styles_is_a_static_error():
    @nki.jit
    def k(a):
        t = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        onl.exp(t)

    @nki.jit
    def missing_dst(a):
        t = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        nisa.tensor_copy(src=t)

    for kernel in (k, missing_dst):
        err = _error(kernel)
        assert err.static, err
    assert "mixes API styles" in str(_error(k))


def test_functional_language_forms_run_under_import_nki():
    """NKI 2.29 put the functional forms back into ``nki.language`` (nl.load, nl.add,
    nl.matmul, nl.copy, nl.store …): an `import nki` kernel may use them beside nisa."""

    @nki.jit
    def k(a, b):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        at = nl.load(a)
        bt = nl.load(b)
        ps = nl.matmul(at, bt, transpose_x=True)
        s = nl.add(nl.copy(ps), 1.0)
        t = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=t, op=nl.exp, data=s)
        nl.store(out, value=nl.maximum(t, nl.sum(t, axis=1, keepdims=True)))
        return out

    rng = np.random.default_rng(0)
    a = rng.standard_normal((128, 128)).astype(np.float32) * 0.1
    b = rng.standard_normal((128, 512)).astype(np.float32) * 0.1
    res = run(k, a, b)
    t = np.exp(a.T @ b + 1.0)
    np.testing.assert_allclose(res.outputs[0], np.maximum(t, t.sum(1, keepdims=True)), rtol=2e-5)


def test_reduction_over_partitions_is_refused():
    @nki.jit
    def k(a):
        t = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        r = nl.ndarray((1, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=r, op=nl.add, data=t, axis=0)

    assert _error(k).kind == "reduce-axis"


def test_affine_range_reversal_exposes_loop_carried_dependency(rng):
    @nki.jit
    def prefix(a):
        out = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(4):
            nisa.dma_copy(dst=acc[:, i:i + 1], src=a[:, i:i + 1])
            if i > 0:
                nisa.tensor_tensor(dst=acc[:, i:i + 1], data1=acc[:, i:i + 1], data2=acc[:, i - 1:i], op=nl.add)
        nisa.dma_copy(dst=out, src=acc)
        return out

    a = rng.standard_normal((128, 4)).astype(np.float32)
    forward = run(prefix, a).outputs[0]
    np.testing.assert_allclose(forward, np.cumsum(a, axis=1), rtol=1e-5)
    with pytest.raises(NkiError) as info:  # in reverse, iteration 3 reads column 2 before it is written
        run(prefix, a, reverse=True)
    assert info.value.kind == "unwritten-read"


def test_error_render_names_file_line_call_and_limit():
    @nki.jit
    def k(a):
        nl.ndarray((129, 1), dtype=nl.float32, buffer=nl.sbuf)

    text = str(_error(k))
    assert "test_nki_constraints.py:" in text and "in nl.ndarray:" in text and "[limit: partition dimension" in text
