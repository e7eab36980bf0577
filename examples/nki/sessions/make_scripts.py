"""Build the authored-session scripts (``<name>.script.json``) from the step files.

Each example has hand-written improved versions in ``examples/nki/steps/<name>_<n>.py``
(checked correct and faster by tests/nki). This script pairs each step with the plan that
produces it, in the fake-LLM rule format of ``autocomp.testing.author_session``: plans are
matched on a line only the parent version contains, implementations on the plan's marker.

    python examples/nki/sessions/make_scripts.py      # writes sessions/<name>.script.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent
sys.path.insert(0, str(EXAMPLES.parent.parent))

from autocomp.backends.nki.detect import find_kernels  # noqa: E402

# name -> list of (marker, plan text). A marker is a line (or list of lines) that together
# occur in the parent version only; step n's parent is step n-1 (step 0 = the example).
PLANS: dict[str, list[tuple[str | list[str], str]]] = {
    "gemm": [
        ("rhs = nl.ndarray((128, 128), dtype=b.dtype, buffer=nl.sbuf)",
         "[gemm-step-1] Widen the moving tile to 512 columns.\n"
         "1. The n loop walks 128-column output tiles, so every nc_matmul streams only 128 moving columns and "
         "TensorE pays its fixed cost 4x more often than needed.\n"
         "2. Set TN = 512 (nl.tile_size.gemm_moving_fmax): the PSUM accumulator becomes (128, 512) fp32 = 2 KiB per "
         "partition, exactly one bank; the rhs tile and its DMA become (128, 512) (1 KiB contiguous runs instead of "
         "256 B), the result copy and the store (128, 512).\n"
         "3. Loop n over N // TN. Number of matmuls drops from 64 to 16 and rhs DMAs become 4x larger."),
        (["lhs = nl.ndarray((128, 128), dtype=a_t.dtype, buffer=nl.sbuf)", "TN = 512"],
         "[gemm-step-2] Load each operand once and reuse it from SBUF.\n"
         "1. DMA is the busiest engine: a_t tiles are reloaded for every (m, n) pair and b tiles for every m.\n"
         "2. Before the output loops, allocate a_sb (128, K//128, M) and b_sb (128, K//128, N) in SBUF (1 KiB + "
         "1 KiB per partition per k) and fill them with one full-width row-block DMA per k: "
         "a_t[k*128:(k+1)*128, :] and b[k*128:(k+1)*128, :] (long contiguous runs).\n"
         "3. In the k loop, call nc_matmul on slices: stationary=a_sb[:, k, m*128:(m+1)*128], "
         "moving=b_sb[:, k, n*TN:(n+1)*TN]. No DMA remains inside the output loops except the store."),
        (["a_sb = nl.ndarray", "nisa.tensor_copy(dst=res, src=acc)"],
         "[gemm-step-3] Take PSUM evacuation off VectorE and store whole row blocks.\n"
         "1. VectorE does both the accumulator memset and the PSUM->SBUF copy, and being in-order the next memset "
         "waits behind the previous copy, which waits for the matmuls: TensorE stalls between output tiles.\n"
         "2. Evacuate PSUM with nisa.activation(op=nl.copy) on ScalarE into a persistent SBUF result tensor "
         "res (128, M//128, N), so VectorE only issues memsets and can run ahead.\n"
         "3. Store each 128-row block with one DMA of res[:, m, :] after its n loop."),
    ],
    "rmsnorm": [
        ("nisa.tensor_scalar(dst=y, data=xt, op0=nl.multiply, operand0=rs)",
         "[rmsnorm-step-1] Fuse normalisation and gamma into one VectorE instruction.\n"
         "1. y = x * rs and yo = y * gamma are two full (128, D) VectorE passes.\n"
         "2. Use nisa.scalar_tensor_tensor(dst=yo, data=xt, op0=nl.multiply, operand0=rs, op1=nl.multiply, "
         "operand1=g_bc): (x * rs) * gamma in one pass, dropping the intermediate y tile."),
        (["nisa.tensor_reduce(dst=ss, op=nl.add, data=sq, axis=1)", "nisa.scalar_tensor_tensor(dst=yo"],
         "[rmsnorm-step-2] Square-and-sum on ScalarE, rsqrt on VectorE.\n"
         "1. VectorE squares, reduces, scales and multiplies per tile while ScalarE only runs one rsqrt per tile.\n"
         "2. Replace tensor_tensor(x*x) + tensor_reduce with one nisa.activation(op=nl.square, data=xt, "
         "reduce_op=nl.add, reduce_res=ss) on ScalarE.\n"
         "3. Compute rs = ms ** -0.5 with nisa.tensor_scalar(op0=nl.power, operand0=-0.5) on the (128, 1) tile so "
         "ScalarE keeps one activation table (no table reload between square and rsqrt)."),
        (["for r in nl.affine_range(R // 128):\n        # broadcast gamma", "reduce_res=ss"],
         "[rmsnorm-step-3] Hoist the gamma broadcast out of the row loop.\n"
         "1. Every row tile rebuilds the same (128, D) broadcast of gamma: a memset of the ones row, a DMA, a "
         "1-row matmul and a PSUM->SBUF copy on VectorE.\n"
         "2. Move ones, g_row, g_ps and g_bc (and their four instructions) above `for r in nl.affine_range(...)`; "
         "the loop body reads g_bc only. VectorE loses 2 instructions per tile and DMA one transfer per tile."),
    ],
    "layernorm": [
        ("sq = nl.multiply(xc, xc)",
         "[layernorm-step-1] Variance from ScalarE's activation reduction.\n"
         "1. VectorE runs mean, subtract, square, mean, add, multiply, multiply, add per tile; ScalarE only rsqrt.\n"
         "2. Compute the sum of squares with nisa.activation_reduce(op=nl.square, data=xc, reduce_op=nl.add, "
         "reduce_res=ssq) on ScalarE (ssq a (128, 1) fp32 SBUF tile).\n"
         "3. rstd = (ssq / D + eps) ** -0.5 with two tensor_scalar ops on the (128, 1) tile (multiply+add, then "
         "power -0.5), which also removes the ScalarE table switch."),
        ("sq = nisa.activation_reduce(",
         "[layernorm-step-2] Statistics with bn_stats/bn_aggr and fused scale-and-shift.\n"
         "1. VectorE still makes five full passes per tile (mean, subtract, normalise, * gamma, + beta).\n"
         "2. Get mean and variance from nisa.bn_stats(xt) (one pass, D = 512 fits one call) and nisa.bn_aggr "
         "(a (128, 6) -> (128, 2) aggregation); rstd = (var + eps) ** -0.5 with one tensor_scalar (add, power).\n"
         "3. Compute ((x - mean) * gamma) with scalar_tensor_tensor(op0=subtract, operand0=mean, op1=multiply, "
         "operand1=g), then (* rstd + beta) with a second scalar_tensor_tensor: three full VectorE passes "
         "instead of five, and no ScalarE work in the chain."),
        ("xg = nisa.scalar_tensor_tensor(",
         "[layernorm-step-3] Normalise on ScalarE; broadcast gamma and beta once.\n"
         "1. The two scalar_tensor_tensor passes cost 2N each on VectorE while ScalarE is idle, and every row "
         "tile re-broadcasts gamma and beta on TensorE.\n"
         "2. shift = -mean * rstd with one tensor_scalar on the (128, 1) tile; xn = nisa.activation(op=nl.copy, "
         "data=xt, scale=rstd, bias=shift) on ScalarE (per-partition scale and bias).\n"
         "3. y = (xn * g) + b with two tensor_tensor ops, each reading its broadcast row from PSUM (N instead "
         "of 2N); move the two nl.load(...).broadcast_to((128, D)) lines above the row loop."),
    ],
    "softmax": [
        ("shifted = nl.subtract(xt, mx)",
         "[softmax-step-1] Fold the shift and the row sum into the exponential.\n"
         "1. subtract, exp and sum are three full passes (VectorE, ScalarE, VectorE).\n"
         "2. Negate the max (a (128, 1) multiply) and call nisa.activation_reduce(op=nl.exp, data=xt, "
         "reduce_op=nl.add, reduce_res=s, bias=neg_mx): exp(x - max) and its row sum in one ScalarE instruction."),
        ("neg_mx = nl.multiply(mx, -1.0)",
         "[softmax-step-2] Negated max in the reduction; scalar-operand scaling.\n"
         "1. Use nisa.tensor_reduce(op=nl.maximum, data=xt, axis=1, negate=True, keepdims=True) to get -max "
         "directly (one instruction fewer).\n"
         "2. Scale with nisa.tensor_scalar(e, np.multiply, inv), using the (128, 1) reciprocal as a per-partition "
         "scalar operand."),
        ("y = nisa.tensor_scalar(e, np.multiply, inv)",
         "[softmax-step-3] Split the final normalisation between ScalarE and VectorE.\n"
         "1. The last full-width pass runs on VectorE alone while ScalarE waits for the next tile.\n"
         "2. Allocate y (128, C) in SBUF; fill y[:, :C//2] with nisa.activation(op=nl.copy, data=e[:, :C//2], "
         "scale=inv) on ScalarE and y[:, C//2:] with nisa.tensor_scalar on VectorE; store y."),
    ],
}


def kernel_code(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    span = find_kernels(text)[0]
    return span.text_of(text)


def build(name: str) -> dict:
    rules_plan: list[dict] = []
    rules_impl: list[dict] = []
    steps = PLANS[name]
    versions = [kernel_code(EXAMPLES / f"{name}.py")] + [
        kernel_code(EXAMPLES / f"steps/{name}_{n}.py") for n in range(1, len(steps) + 1)]
    for n, (marker, plan) in enumerate(steps, start=1):
        match = [marker] if isinstance(marker, str) else list(marker)
        hits = [v for v, code in enumerate(versions) if all(m in code for m in match)]
        if hits != [n - 1]:
            raise SystemExit(f"{name} step {n}: marker matches versions {hits}, expected only {n - 1}")
        tag = plan.split("]")[0] + "]"
        rules_plan.append({"role": "plan", "match": match, "reply": plan})
        rules_impl.append({"role": "implement", "match": [tag], "reply": f"Applying the plan.\n\n```python\n{versions[n]}```\n"})
    done = f"[{name}-done] No further change: keep the current version as it is."
    rules_plan.append({"role": "plan", "match": [], "reply": done})
    rules_impl.append({"role": "implement", "match": [f"[{name}-done]"], "reply": f"Unchanged.\n\n```python\n{versions[-1]}```\n"})
    return {"rules": rules_plan + rules_impl}


def main() -> int:
    for name in PLANS:
        out = HERE / f"{name}.script.json"
        out.write_text(json.dumps(build(name), indent=2) + "\n", encoding="utf-8")
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
