"""How much of AWS's NKI samples Autocomp's NKI interpreter runs correctly.

aws-neuron/nki-samples cannot be committed here: check it out twice, at 7af4e4d (the last
commit with the ``neuronxcc.nki`` tutorials and the reference kernels) and at HEAD (the
``import nki`` matmul and MX tutorials), e.g. from a clone::

    git -C nki-samples archive 7af4e4d | tar -x -C /tmp/nki-old
    git -C nki-samples archive HEAD | tar -x -C /tmp/nki-head
    python bench/nki_coverage.py --old /tmp/nki-old --head /tmp/nki-head [--only NAME] [--tests]

Each kernel runs on the interpreter (in this process) on inputs of its tutorial's shapes and
its output is compared with a NumPy reference written here (or the sample's own NumPy/CPU
golden). ``--tests`` also runs the reference kernels' own unit tests (``test/unit`` of the
old checkout, which need scipy) under pytest with the interpreter installed, and counts
each test file as one kernel when its numerical tests pass (perf tests that read
``benchmark_result`` or need a Neuron device are deselected). Prints one line per kernel
and the total.
"""
import argparse, importlib.util, os, subprocess, sys, tempfile, time, traceback

import numpy as np

_ap = argparse.ArgumentParser(description="NKI samples coverage")
_ap.add_argument("--old", required=True, help="nki-samples checkout at 7af4e4d")
_ap.add_argument("--head", required=True, help="nki-samples checkout at HEAD")
_ap.add_argument("--only", nargs="*", default=[], help="run kernels whose name contains one of these")
_ap.add_argument("--tests", action="store_true", help="also run the reference kernels' unit tests under pytest")
_ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per unit-test file")
ARGS = _ap.parse_args() if __name__ == "__main__" else _ap.parse_args(["--old", ".", "--head", "."])

from autocomp.backends.nki.interp.install import install  # noqa: E402

install()
import ml_dtypes  # noqa: E402

ROOT = os.path.abspath(ARGS.old)
HEAD = os.path.abspath(ARGS.head)
WORK = tempfile.mkdtemp(prefix="nki-coverage-")
rng = np.random.default_rng(0)


def load(path, name=None):
    d = os.path.dirname(path)
    if d not in sys.path:
        sys.path.insert(0, d)
    spec = importlib.util.spec_from_file_location(name or os.path.basename(path)[:-3] + str(abs(hash(path)) % 1000), path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def close(a, b, tol=1e-2):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert np.allclose(a, b, atol=tol, rtol=tol), float(np.max(np.abs(a - b)))


CASES = []


def case(name):
    def deco(fn):
        CASES.append((name, fn))
        return fn
    return deco


T = ROOT + "/src/nki_samples/tutorials"
@case("tensor_add")
def _():
    m = load(T + "/tensor_addition/tensor_addition_nki_kernels.py")
    a = rng.random((256, 1024)).astype(np.float16); b = rng.random((256, 1024)).astype(np.float16)
    close(m.nki_tensor_add(a, b), a + b)
@case("spmd_tensor_add")
def _():
    m = load(T + "/tensor_addition/spmd_tensor_addition_nki_kernels.py")
    a = rng.random((256, 1024)).astype(np.float16); b = rng.random((256, 1024)).astype(np.float16)
    close(m.nki_tensor_add(a, b), a + b)
@case("spmd_multiple_nc_tensor_add")
def _():
    m = load(T + "/tensor_addition/spmd_multiple_nc_tensor_addition_nki_kernels.py")
    a = rng.random((512, 2048)).astype(np.float16); b = rng.random((512, 2048)).astype(np.float16)
    close(m.nki_tensor_add_nc2(a, b), a + b)
@case("transpose2d")
def _():
    m = load(T + "/transpose2d/transpose2d_nki_kernels.py")
    P, X, Y = 5, 3, 4
    a = np.arange(P*X*Y, dtype=np.int8).reshape((P, X*Y))
    close(m.tensor_transpose2D_kernel_(a, (X, Y)), np.transpose(a.reshape(P, X, Y), (0, 2, 1)).reshape(P, X*Y))
@case("avgpool2d")
def _():
    m = load(T + "/average_pool2d/average_pool2d_nki_kernels.py")
    x = rng.random((2, 6, 6)).astype(np.float32)
    close(m.tensor_avgpool_kernel(x, 2), m.np_average_pool_2D(x, 2))
for _k in ["nki_matmul_basic_", "nki_matmul_tiled_", "nki_matmul_hoist_load_", "nki_matmul_block_free_dimension_", "nki_matmul_fully_optimized_"]:
    def _mk(k):
        def f():
            m = load(T + "/matrix_multiplication/matrix_multiplication_nki_kernels.py")
            if k == "nki_matmul_basic_": K, M, N = 128, 64, 512
            elif k == "nki_matmul_fully_optimized_": K, M, N = 4096, 2048, 2048
            else: K, M, N = 1024, 1024, 2048
            a = rng.random((K, M)).astype(np.float16); b = rng.random((K, N)).astype(np.float16)
            close(getattr(m, k)(a, b), a.astype(np.float32).T @ b.astype(np.float32), 0.05)
        return f
    case("matmul/" + _k)(_mk(_k))
for _v in ["v1","v2","v3","v4","v5","v6","v7","v8","v8a","v9","v10","v11"]:
    def _mk(v):
        def f():
            m = load(T + "/attention_fwd_performance/attention_kernels.py", "attention_kernels")
            seq = 128 if v in ("v1", "v2") else 4096
            q, k, vv = [((rng.random((128, seq)) - 0.5) * 2).astype(np.float32) for _ in range(3)]
            qk = q.T @ k; e = np.exp(qk - qk.max(1, keepdims=True)); s = e / e.sum(1, keepdims=True)
            close(getattr(m, "attn_fwd_" + v)(q, k, vv), s @ vv.T)
        return f
    case("attention/" + _v)(_mk(_v))
for _v in ["mamba_v1", "mamba_v2", "mamba_v3"]:
    def _mk(v):
        def f():
            m = load(T + "/fused_mamba/mamba_nki_kernels.py", "mamba_nki_kernels")
            bs, ch, sl, st = 1, 256, 512, 16
            delta = rng.random((bs, ch, sl)).astype(np.float32); u = rng.random((bs, ch, sl)).astype(np.float32)
            A = -rng.random((ch, st)).astype(np.float32); B = rng.random((bs, st, sl)).astype(np.float32); C = rng.random((bs, st, sl)).astype(np.float32)
            out = np.zeros((bs, ch, sl))
            for b in range(bs):
                for s_ in range(st):
                    dA = np.exp(delta[b] * A[:, s_:s_+1]); dBu = delta[b] * B[b, s_][None, :] * u[b]
                    h = np.zeros(ch)
                    hs = np.zeros((ch, sl))
                    for t in range(sl):
                        h = dA[:, t] * h + dBu[:, t]; hs[:, t] = h
                    out[b] += hs * C[b, s_][None, :]
            close(getattr(m, v)(delta, u, A, B, C), out, 2e-2)
        return f
    case("mamba/" + _v)(_mk(_v))
C = ROOT + "/contributed"
def _interp_ref(x, axes):
    # torch interpolate scale 2, align_corners False, along given axes
    for ax in axes:
        n = x.shape[ax]
        o = np.arange(2 * n)
        src = np.maximum((o + 0.5) / 2 - 0.5, 0)
        i0 = np.floor(src).astype(int); i1 = np.minimum(i0 + 1, n - 1); w = src - i0
        a = np.take(x, i0, axis=ax); b = np.take(x, i1, axis=ax)
        sh = [1] * x.ndim; sh[ax] = -1
        x = a * (1 - w.reshape(sh)) + b * w.reshape(sh)
    return x
@case("contributed/bilinear")
def _():
    m = load(C + "/interpolate_bilinear_fwd.py")
    x = rng.random((2, 64, 32, 32)).astype(np.float32)
    close(m.interpolate_bilinear_2x_fwd(x), _interp_ref(x.astype(np.float64), (2, 3)), 1e-4)
@case("contributed/trilinear")
def _():
    import types
    for n in ("torch_xla", "torch_xla.core", "torch_xla.core.xla_model"):
        sys.modules.setdefault(n, types.ModuleType(n))
    sys.modules["torch_xla.core"].xla_model = sys.modules["torch_xla.core.xla_model"]
    sys.modules["torch_xla"].core = sys.modules["torch_xla.core"]
    m = load(C + "/interpolate_trilinear_fwd.py")
    x = rng.random((2, 64, 23, 23, 23)).astype(np.float32)
    close(m.interpolate_trilinear_2x_fwd(x), _interp_ref(x.astype(np.float64), (2, 3, 4)), 1e-4)
@case("contributed/matmul")
def _():
    m = load(C + "/matmul.py")
    A = rng.random((1024, 1024)).astype(np.float16); B = rng.random((1024, 2048)).astype(np.float16)
    import neuronxcc.nki as onki
    close(onki.jit(m.matmul)(A, B), A.astype(np.float32).T @ B.astype(np.float32), 1e-2)
@case("contributed/maxpooling")
def _():
    m = load(C + "/maxpooling.py")
    x = rng.random((448, 448)).astype(np.float32); p = 3
    ref = np.lib.stride_tricks.sliding_window_view(x, (p, p)).max(axis=(2, 3))
    close(m.max_pooling_2d_stride_1(x, p), ref, 1e-6)
@case("contributed/pipelined_attention")
def _():
    src = open(C + "/pipelined_attention.py").read().split("\nbs=1")[0]
    path = os.path.join(WORK, "pipelined_attention_defs.py"); open(path, "w").write(src)
    m = load(path)
    bs, d, sq = 1, 128, 16384
    q = rng.random((bs, d, sq)).astype(ml_dtypes.bfloat16); k = rng.random((bs, d, sq)).astype(ml_dtypes.bfloat16)
    v = rng.random((bs, sq, d)).astype(ml_dtypes.bfloat16)
    o = m.flash_fwd(q, k, v, mixed_precision=True, softmax_scale=0.125, use_causal_mask=False)
    ref, _s = m.cpu_attention_forward(q, k, v, 0.125, use_causal_mask=False, mixed_precision=True)
    close(o, ref, 2e-2)
@case("reference/tutorial_add")
def _():
    m = load(ROOT + "/src/nki_samples/reference/tutorial.py")
    a = rng.random((2, 8, 128, 512)).astype(np.float32); b = rng.random((2, 8, 128, 512)).astype(np.float32)
    close(m.add_kernel_nx8x128x512[2](a, b, 2 * 8 * 128 * 512), a + b)
@case("tutorial/softmax")
def _():
    import types
    for n in ("torch_xla", "torch_xla.core", "torch_xla.core.xla_model"):
        sys.modules.setdefault(n, types.ModuleType(n))
    m = load(ROOT + "/src/nki_samples/tutorials/softmax/softmax_nki_kernels.py")
    x = rng.standard_normal((300, 512)).astype(np.float32)
    e = np.exp(x - x.max(1, keepdims=True))
    close(m.nki_softmax_kernel(x), e / e.sum(1, keepdims=True), 1e-4)
@case("tutorial/rotary")
def _():
    import types
    for n in ("torch", "torch_neuronx", "loguru", "torch.profiler", "torch_xla", "torch_xla.core", "torch_xla.core.xla_model",
              "transformers", "transformers.models", "transformers.models.llama", "transformers.models.llama.modeling_llama"):
        mod = sys.modules.setdefault(n, types.ModuleType(n))
    sys.modules["torch"].tensor = object; sys.modules["loguru"].logger = None
    sys.modules["torch.profiler"].ProfilerActivity = sys.modules["torch.profiler"].profile = sys.modules["torch.profiler"].record_function = None
    sys.modules["torch_xla.core"].xla_model = sys.modules["torch_xla.core.xla_model"]
    sys.modules["transformers.models.llama.modeling_llama"].apply_rotary_pos_emb = None
    m = load(ROOT + "/src/nki_samples/tutorials/rotary/rotary_nki_kernels.py")
    b, h, s, d = 1, 2, 200, 64
    q = rng.standard_normal((b, h, s, d)).astype(np.float32); k = rng.standard_normal((b, h, s, d)).astype(np.float32)
    inv = 1.0 / (10000 ** (np.arange(0, d, 2) / d)); fr = np.arange(s)[:, None] * inv[None]
    emb = np.concatenate([fr, fr], -1)[None]; cos = np.cos(emb).astype(np.float32); sin = np.sin(emb).astype(np.float32)
    def rot(x): return np.concatenate([-x[..., d // 2:], x[..., :d // 2]], -1)
    ref = np.stack([q * cos[:, None] + rot(q) * sin[:, None], k * cos[:, None] + rot(k) * sin[:, None]])
    close(m.nki_apply_rotary_embedding[b, h](q, k, cos, sin), ref, 1e-4)

@case("reference/double_row_matmul")
def _():
    sys.path.insert(0, ROOT + "/src"); sys.path.insert(0, ROOT + "/test/unit")
    t = load(ROOT + "/test/unit/test_double_row_matmul.py")
    from nki_samples.reference.double_row_matmul import quantized_double_row_matmul
    import neuronxcc.nki as onki, neuronxcc.nki.language as onl
    M, K, N = 512, 4096, 1024
    lhs = rng.random((M, K)); rhs = rng.random((K, N))
    sc, q = t.column_wise_quantize(rhs); qr = t.reshape(q)
    out = onki.jit(quantized_double_row_matmul)(onl.static_cast(lhs, onl.bfloat16), onl.static_cast(qr, onl.float8_e4m3), onl.static_cast(sc, onl.bfloat16), 2, 2, 16)
    assert np.allclose(lhs @ rhs, np.asarray(out, np.float32), rtol=2e-2)

for _k in ["nki_matmul_basic_", "nki_matmul_tiled_", "nki_matmul_hoist_load_", "nki_matmul_block_free_dimension_", "nki_matmul_fully_optimized_"]:
    def _mk(k):
        def f():
            m = load(HEAD + "/src/nki_samples/tutorials/matrix_multiplication/matrix_multiplication_nki_kernels.py", "head_mm")
            if k == "nki_matmul_basic_": K, M, N = 128, 64, 512
            elif k == "nki_matmul_fully_optimized_": K, M, N = 4096, 2048, 2048
            else: K, M, N = 1024, 1024, 2048
            a = rng.random((K, M)).astype(np.float16); b = rng.random((K, N)).astype(np.float16)
            close(getattr(m, k)(a, b), a.astype(np.float32).T @ b.astype(np.float32), 0.05)
        return f
    case("head/matmul/" + _k)(_mk(_k))

MX = HEAD + "/src/nki_samples/tutorials/mxfp-matmul"
def _mx():
    if MX not in sys.path: sys.path.insert(0, MX)
    import mx_cpu_utils as cu, mx_kernels as mk, nki.language as nnl
    return cu, mk, nnl
@case("head/mx/offline_quantized")
def _():
    cu, mk, nnl = _mx()
    for qd, x4 in ((ml_dtypes.float8_e5m2, nnl.float8_e5m2_x4), (ml_dtypes.float4_e2m1fn, nnl.float4_e2m1fn_x4)):
        np.random.seed(0)
        _, _, st, sts = cu.generate_stabilized_mx_data(qd, (128, 512))
        _, _, mv, mvs = cu.generate_stabilized_mx_data(qd, (128, 2048))
        out = mk.kernel_offline_quantized_mx_matmul(st, sts, mv, mvs, x4)
        gold = cu.nc_matmul_mx_golden(st, mv, sts, mvs, qd, qd)
        close(np.asarray(out, np.float32), gold, 5e-2)
@case("head/mx/on_device_quantize")
def _():
    cu, mk, nnl = _mx()
    for sq, sx4, mq, mx4 in ((ml_dtypes.float4_e2m1fn, nnl.float4_e2m1fn_x4, ml_dtypes.float8_e5m2, nnl.float8_e5m2_x4),
                             (ml_dtypes.float8_e5m2, nnl.float8_e5m2_x4, ml_dtypes.float8_e5m2, nnl.float8_e5m2_x4)):
        np.random.seed(1)
        _, _, st, sts = cu.generate_stabilized_mx_data(sq, (128, 512))
        mvd, _, _, _ = cu.generate_stabilized_mx_data(mq, (128, 2048))
        out = mk.kernel_on_device_quantize_matmul_mx(st, sts, mvd.astype(ml_dtypes.bfloat16), sx4, mx4)
        mq_d, mq_s = cu.quantize_mx_golden(mvd, mq)
        gold = cu.nc_matmul_mx_golden(st, mq_d, sts, mq_s, sq, mq)
        close(np.asarray(out, np.float32), gold, 5e-2)
@case("head/mx/copy_strided")
def _():
    cu, mk, nnl = _mx()
    for use_tc in (True, False):
        np.random.seed(2)
        st, _, _, _ = cu.generate_stabilized_mx_data(ml_dtypes.float8_e5m2, (512, 128))
        mv, _, _, _ = cu.generate_stabilized_mx_data(ml_dtypes.float8_e5m2, (512, 512))
        out = mk.kernel_copy_strided_quantize_matmul_mx(st.astype(ml_dtypes.bfloat16), mv.astype(ml_dtypes.bfloat16), nnl.float8_e5m2_x4, use_tc)
        close(np.asarray(out, np.float32), st.T @ mv, 5e-2)

@case("reference/rmsnorm_quant")
def _():
    sys.path.insert(0, ROOT + "/src")
    from nki_samples.reference.rmsnorm_quant.rmsnorm_quant import rmsnorm_quant_kernel, RmsNormQuantKernelArgs
    B, S, H = 2, 160, 512
    x = rng.standard_normal((B, S, H)).astype(ml_dtypes.bfloat16); w = (rng.random((H,)) + 0.5).astype(ml_dtypes.bfloat16)
    out = np.asarray(rmsnorm_quant_kernel(x, w, RmsNormQuantKernelArgs(lower_bound=0.0)))
    xf = x.astype(np.float64); y = xf / np.sqrt((xf ** 2).mean(-1, keepdims=True) + 1e-6) * w.astype(np.float64)
    q = out[..., :H].astype(np.float64)
    dq = np.ascontiguousarray(out[..., H:]).view(np.uint8).view(np.float32).astype(np.float64)
    assert dq.shape == (B, S, 1), dq.shape
    np.testing.assert_allclose(dq[..., 0], np.abs(y).max(-1) / 240, rtol=2e-2)
    np.testing.assert_allclose(q * dq, y, atol=np.abs(y).max() / 240 * 1.5 + 1e-3, rtol=7e-2)


# The reference kernels' own unit tests (old checkout): file -> kernel.
UNIT_TESTS = {
    "test_SD_attention_small_head.py": "reference/fused_self_attn_for_SD_small_head_size",
    "test_allocated_SD_attention_small_head.py": "reference/allocated_fused_self_attn_for_SD_small_head_size",
    "test_flash_attn_fwd.py": "reference/flash_fwd",
    "test_flash_attn_bwd.py": "reference/flash_attn_bwd",
    "test_resize_nearest.py": "reference/resize_nearest_fixed_dma_kernel",
    "test_select_and_scatter.py": "reference/select_and_scatter_kernel",
    "test_adaptive_avg_pool2d.py": "reference/adaptive_avg_pool2d",
    "test_rmsnorm_qkv.py": "reference/allocated_fused_rms_norm_qkv",
}
PLUGIN = """
import sys
sys.path.insert(0, %r)
from autocomp.backends.nki.interp.install import install
install()
"""


def run_unit_tests() -> list[tuple[str, bool, str]]:
    plugin_dir = tempfile.mkdtemp(prefix="nki-coverage-plugin-")
    with open(os.path.join(plugin_dir, "autocomp_nki_plugin.py"), "w") as fh:
        fh.write(PLUGIN % (ROOT + "/src"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([plugin_dir] + [p for p in sys.path if p]))
    out = []
    for test, kernel in UNIT_TESTS.items():
        if ARGS.only and not any(o in kernel for o in ARGS.only):
            continue
        t0 = time.time()
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "autocomp_nki_plugin", "-p", "no:cacheprovider", "--simulation-only",
               "-k", "not perf and not latency", os.path.join(ROOT, "test/unit", test)]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=ARGS.timeout, env=env,
                               cwd=os.path.join(ROOT, "test/unit"))
            last = (r.stdout.strip().splitlines() or ["?"])[-1]
            ok = r.returncode == 0
        except subprocess.TimeoutExpired:
            ok, last = False, f"timeout after {ARGS.timeout:.0f} s"
        print(f"{'PASS' if ok else 'FAIL'} {kernel} ({time.time() - t0:.1f}s): {last}", flush=True)
        out.append((kernel, ok, last))
    return out


def main() -> int:
    ok = n = 0
    for name, fn in CASES:
        if ARGS.only and not any(o in name for o in ARGS.only):
            continue
        n += 1
        t0 = time.time()
        try:
            fn()
            ok += 1
            print(f"PASS {name} ({time.time() - t0:.1f}s)", flush=True)
        except Exception as e:  # noqa: BLE001 - every failure is reported
            tb = traceback.extract_tb(e.__traceback__)
            where = [f"{os.path.basename(f.filename)}:{f.lineno}" for f in tb][-1:]
            print(f"FAIL {name} ({time.time() - t0:.1f}s): {type(e).__name__}: {str(e)[:300]} {where}", flush=True)
    if ARGS.tests:
        for _kernel, passed, _ in run_unit_tests():
            n += 1
            ok += passed
    print(f"{ok} of {n} kernels evaluate correct")
    return 0 if ok == n else 1


if __name__ == "__main__":
    sys.exit(main())
