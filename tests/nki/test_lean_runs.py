"""What makes a candidate's evaluation cheaper must not change what it computes:

- the reversed-loop run records no regions (``execute(traced=False)``) and still gives the
  traced run's outputs, bit for bit;
- the older API's matmul result is the product array itself, never shared with another tile;
- the kernel process writes its requests with orjson where it can, and with json where
  orjson would change them (non-finite floats, integers beyond 64 bits), with or without
  orjson installed.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest

from autocomp.backends.nki import remote, tracer
from autocomp.backends.nki.interp import install
from autocomp.backends.nki.interp.install import execute
from autocomp.backends.nki.remote import KernelProcess
from autocomp.backends.nki.runner import fork_kernel_processes

ROOT = Path(__file__).resolve().parents[2]

OLD_GEMM = '''import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def gemm(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // 128):
        for n in nl.affine_range(N // 512):
            acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // 128):
                a = nl.ndarray((128, 128), dtype=lhsT.dtype, buffer=nl.sbuf)
                b = nl.ndarray((128, 512), dtype=rhs.dtype, buffer=nl.sbuf)
                a[...] = nl.load(lhsT[k * 128:(k + 1) * 128, m * 128:(m + 1) * 128])
                b[...] = nl.load(rhs[k * 128:(k + 1) * 128, n * 512:(n + 1) * 512])
                acc += nl.matmul(a[...], b[...], transpose_x=True)
            out = nl.copy(acc, dtype=result.dtype)
            nl.store(result[m * 128:(m + 1) * 128, n * 512:(n + 1) * 512], value=out)
    return result


@nki.jit
def two_products(x, y):
    """Two matmul results, then the first one changed: the second must not see it."""
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.load(x)
    b = nl.load(y)
    p = nl.matmul(a, b, transpose_x=True)
    q = nl.matmul(a, b, transpose_x=True)
    p[...] = nl.multiply(p, 3.0)
    nl.store(out, value=nl.subtract(q, nl.copy(p, dtype=nl.float32)))
    return out
'''

NON_FINITE = '''import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def fill(a):
    out = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=float("-inf"))
    nisa.dma_copy(dst=out, src=t)
    big = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    u = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=u, value=2 ** 70)
    nisa.dma_copy(dst=big, src=u)
    return out, big
'''


def _module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _gemm_inputs():
    rng = np.random.default_rng(3)
    import ml_dtypes

    return [rng.standard_normal((256, 256)).astype(ml_dtypes.bfloat16),
            rng.standard_normal((256, 1024)).astype(ml_dtypes.bfloat16)]


@pytest.mark.parametrize("name", ["gemm", "rmsnorm", "layernorm", "softmax"])
def test_untraced_reversed_run_gives_the_traced_runs_outputs(name):
    install()
    path = ROOT / "examples" / "nki" / f"{name}.py"
    mod = _module(path, f"lean_{name}")
    fn = getattr(mod, [n for n in dir(mod) if n.endswith("_kernel")][0])
    args = mod.get_inputs(np.random.default_rng(0))
    traced = execute(fn, args, kernel_file=str(path), reverse_affine=True)
    untraced = execute(fn, args, kernel_file=str(path), reverse_affine=True, traced=False)
    assert traced.trace and untraced.trace == []
    assert len(traced.outputs) == len(untraced.outputs)
    for a, b in zip(traced.outputs, untraced.outputs):
        np.testing.assert_array_equal(a, b)


def test_untraced_run_of_the_older_api_accumulation_and_named_loads(tmp_path):
    """The paths that amend earlier instructions (``tile[...] = nl.load``, ``acc += matmul``)
    add nothing when untraced, and the values are the traced run's."""
    install()
    path = tmp_path / "old_gemm.py"
    path.write_text(OLD_GEMM)
    mod = _module(path, "lean_old_gemm")
    args = _gemm_inputs()
    traced = execute(mod.gemm, args, kernel_file=str(path), reverse_affine=True)
    untraced = execute(mod.gemm, args, kernel_file=str(path), reverse_affine=True, traced=False)
    assert any(len(i.writes) > 1 for i in traced.trace)  # amended (the load named by a[...] =)
    assert untraced.trace == []
    np.testing.assert_array_equal(traced.outputs[0], untraced.outputs[0])
    want = args[0].astype(np.float32).T @ args[1].astype(np.float32)
    np.testing.assert_allclose(traced.outputs[0].astype(np.float32), want, rtol=2e-2, atol=2e-1)


def test_untraced_run_leaves_the_capacity_check_to_the_traced_run(tmp_path):
    """A run past SBUF capacity fails when traced; the untraced run (only ever the second run
    of a kernel the traced run accepted) does not decide it."""
    install()
    path = tmp_path / "big.py"
    path.write_text('''import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def big(a):
    out = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    tiles = []
    for i in range(16):
        t = nl.ndarray((128, 4096), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=t, value=1.0)
        tiles.append(t)
    for t in tiles:
        nisa.dma_copy(dst=out, src=t[:, 0:4])
    return out
''')
    mod = _module(path, "lean_big")
    from autocomp.backends.nki.interp.errors import NkiError

    with pytest.raises(NkiError, match="SBUF"):
        execute(mod.big, [np.zeros((128, 4), np.float32)], kernel_file=str(path))
    res = execute(mod.big, [np.zeros((128, 4), np.float32)], kernel_file=str(path), traced=False)
    assert (res.outputs[0] == 1.0).all()


def test_older_api_matmul_results_are_separate_arrays(tmp_path):
    install()
    path = tmp_path / "two.py"
    path.write_text(OLD_GEMM)
    mod = _module(path, "lean_two")
    rng = np.random.default_rng(5)
    x = rng.standard_normal((128, 128)).astype(np.float32)
    y = rng.standard_normal((128, 512)).astype(np.float32)
    res = execute(mod.two_products, [x, y], kernel_file=str(path))
    product = x.T @ y
    # q - 3p = -2 * product: had p and q shared one array, q would read 3p and give 0.
    np.testing.assert_allclose(res.outputs[0], -2 * product, rtol=1e-4, atol=1e-3)
    matmuls = [i for i in res.trace if i.op == "nc_matmul"]
    assert len(matmuls) == 2 and matmuls[0].writes[0][0] != matmuls[1].writes[0][0]


def _run_remote(path: Path, function: str, args):
    (spawned,) = fork_kernel_processes(1)
    proc = KernelProcess(str(path), function, spawned=spawned, source=path.read_text())
    try:
        proc.load()
        return execute(proc.kernel, args, kernel_file=str(path), names=proc.names)
    finally:
        proc.close()


@pytest.mark.parametrize("with_orjson", [True, False])
def test_kernel_process_sends_non_finite_floats_and_huge_ints_as_json_does(tmp_path, monkeypatch, with_orjson):
    if not with_orjson:  # (the kernel process is forked from here: it inherits the patch)
        monkeypatch.setattr(tracer, "_orjson", None)
        monkeypatch.setattr(remote, "_orjson", None)
    install()
    path = tmp_path / "fill.py"
    path.write_text(NON_FINITE)
    res = _run_remote(path, "fill", [np.zeros((128, 4), np.float32)])
    assert np.isneginf(res.outputs[0]).all()
    assert (res.outputs[1] == np.float32(2 ** 70)).all()


@pytest.mark.parametrize("with_orjson", [True, False])
def test_kernel_process_runs_the_older_api_gemm_the_same_either_way(tmp_path, monkeypatch, with_orjson):
    if not with_orjson:
        monkeypatch.setattr(tracer, "_orjson", None)
        monkeypatch.setattr(remote, "_orjson", None)
    install()
    path = tmp_path / "old_gemm.py"
    path.write_text(OLD_GEMM)
    args = _gemm_inputs()
    local = execute(_module(path, f"lean_local_{with_orjson}").gemm, args, kernel_file=str(path))
    far = _run_remote(path, "gemm", args)
    assert [i.to_list() for i in far.trace] == [i.to_list() for i in local.trace]
    np.testing.assert_array_equal(far.outputs[0], local.outputs[0])


def test_encoder_falls_back_to_json_exactly_where_orjson_would_differ():
    import json

    assert tracer._orjson is not None  # (the nki extra installs orjson; json alone is tested above)

    for value in (float("inf"), [1, float("-inf")], 2 ** 70, "é", [None, 1.5, -3], {"k": 0.1}):
        encoded = tracer._encode(value)  # (marks non-finite floats, as every request's values are)
        line = tracer._ENCODE({"v": encoded})
        assert json.loads(line) == json.loads(json.dumps({"v": encoded}))
        assert not tracer._NONFINITE[0]  # cleared once written
    line = tracer._ENCODE({"v": tracer._encode(float("nan"))})
    assert line == b'{"v":NaN}' and not tracer._NONFINITE[0]


def test_packed_arrays_come_back_as_they_went(tmp_path):
    import ml_dtypes

    from autocomp.backends.nki.portable import pack_arrays, unpack_arrays

    rng = np.random.default_rng(1)
    arrays = {"s0_in0": rng.standard_normal((4, 6)).astype(ml_dtypes.bfloat16),
              "s0_in1": rng.integers(0, 2, (3, 5)).astype(bool),
              "s0_in2": np.asfortranarray(rng.standard_normal((5, 3)).astype(np.float32)),
              "s0_in3": np.float32(2.5), "s0_in4": np.zeros((0, 4), np.int32)}
    raw, dtypes = pack_arrays(arrays)
    back = unpack_arrays(raw, dtypes)
    assert list(back) == list(arrays)
    for key, arr in arrays.items():
        arr = np.asarray(arr)
        assert back[key].dtype == arr.dtype and back[key].shape == arr.shape
        np.testing.assert_array_equal(back[key], arr)
    with pytest.raises(ValueError):  # the manifest decides which arrays and dtypes are read
        unpack_arrays(raw, {**dtypes, "s0_in0": "float32"})
    with pytest.raises(ValueError):
        unpack_arrays(raw, {**dtypes, "s0_in9": "float32"})
    with pytest.raises(ValueError):
        unpack_arrays(raw[:-3], dtypes)


VIEWS = '''import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def views(a, b):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    v = a[0:128, :]
    w = v
    t = nl.load(v)
    u = nl.load(w)
    a = None
    acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
    s = acc[...]
    s += nl.matmul(t[...], nl.load(b[0:128, :]), transpose_x=True)
    s += nl.matmul(u, nl.load(b[0:128, ...]), transpose_x=True)
    n = s.shape[0]
    r = nl.copy(acc, dtype=nl.float32)
    r2 = r[0:n, :]
    r2[0:1, 0:4] = nl.multiply(r2[0:1, 0:4], 2.0)
    nl.store(out[0:128, :], value=r2)
    return out
'''


def test_views_named_where_they_are_used_give_the_trace_and_values_of_requests(tmp_path, monkeypatch):
    """Views of plain keys travel inline (tracer.LazyView): used twice, after their parent's
    name is rebound, as a ``+=`` target, asked for their shape and assigned into, they give
    what one getitem request each gave."""
    install()
    path = tmp_path / "views.py"
    path.write_text(VIEWS)
    rng = np.random.default_rng(7)
    args = [rng.standard_normal((128, 128)).astype(np.float32), rng.standard_normal((128, 512)).astype(np.float32)]
    local = execute(_module(path, "lean_views").views, args, kernel_file=str(path))
    ops = []
    handle = KernelProcess._handle

    def counted(self, op, msg):
        ops.append(op)
        return handle(self, op, msg)

    monkeypatch.setattr(KernelProcess, "_handle", counted)
    far = _run_remote(path, "views", args)
    # Ten views in the kernel; asked for: s (+= target, then its shape) and r2 (assigned into).
    assert ops.count("getitem") == 2, ops
    assert [i.to_list() for i in far.trace] == [i.to_list() for i in local.trace]
    np.testing.assert_array_equal(far.outputs[0], local.outputs[0])
    want = 2 * (args[0].T @ args[1])
    want[0, :4] *= 2
    np.testing.assert_allclose(local.outputs[0], want, rtol=1e-4, atol=1e-3)
