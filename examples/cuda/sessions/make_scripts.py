"""Build the authored-session scripts (SCRIPT.json for autocomp.testing.author_session) from
the hand-written improved kernels in ../improved/.

Each example gets two iterations of two plans: the plan we believe in (step 1, then step 2)
and a block-size variant of it, so the beam has a real choice to make. Plans are matched on
the current code's kernel names, implementations on a phrase unique to each plan.

    python examples/cuda/sessions/make_scripts.py      # rewrites examples/cuda/sessions/*.script.json
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent

# name: (start kernel marker, step-1 kernel marker, plans, variant edits)
PLANS = {
    "softmax": (
        "softmax_rows_kernel", "softmax_block_kernel",
        ["Give each row a whole thread block (plan: block per row, 256 threads). The starting kernel assigns one thread "
         "per row, so a warp reads 32 addresses a row apart and nothing coalesces. With 256 threads striding over the "
         "row, each warp reads consecutive floats. Reduce the max and the sum with __shfl_xor_sync inside warps and one "
         "shared slot per warp; use __expf (well within the 1e-4 tolerance for arguments <= 0).",
         "Same decomposition with smaller blocks (plan: block per row, 128 threads): one 128-thread block per row, "
         "warp-shuffle reductions for the max and the sum, so more blocks are resident per SM."],
        ["Read the row once (plan: row in registers, float4). Each thread loads its share of the row with float4 loads "
         "into registers (1024 columns / 256 threads = one float4 each), and the max, the exponentials, the sum and "
         "the normalised write all work from registers: one read and one write of global memory instead of three "
         "reads. Template the kernel on the number of float4 per thread and keep a scalar kernel for widths that are "
         "not a multiple of 4.",
         "Keep the three passes but vectorise them (plan: float4 passes): float4 loads in each pass, same reductions."],
        [("<<<rows, 256>>>", "<<<rows, 128>>>"), ("__launch_bounds__(256)", "__launch_bounds__(128)")],
    ),
    "matmul": (
        "matmul_naive_kernel", "matmul_tiled_kernel",
        ["Tile through shared memory (plan: 32x32 shared tiles). Each block computes a 32x32 tile of C; per step of "
         "K it loads a 32x32 tile of A and of B into shared memory (B padded to 33 columns against bank conflicts) and "
         "every thread does 32 FMAs from shared memory, so each global element is read once per block instead of "
         "once per output.",
         "Shared-memory tiling with 16x16 tiles (plan: 16x16 shared tiles): smaller blocks, more of them resident."],
        ["Register tiling (plan: 64x64 block tile, 4x4 per thread). Each 256-thread block computes a 64x64 tile of C "
         "with BK=16 slices; the A slice is stored transposed in shared memory, and each thread keeps a 4x4 tile of "
         "accumulators in registers, loading 4 values of A and 4 of B per k step for 16 FMAs. This raises arithmetic "
         "intensity per shared-memory load fourfold; keep bounds checks for sizes that are not multiples of 64.",
         "Keep 32x32 tiles but compute two outputs per thread (plan: 2 outputs per thread)."],
        [("#define TILE 32", "#define TILE 16")],
    ),
    "layernorm": (
        "layernorm_rows_kernel", "layernorm_block_kernel",
        ["Give each row a thread block (plan: block per row, 256 threads). The starting kernel runs one thread per "
         "row, so loads do not coalesce and only 4096 threads exist. With 256 threads per row striding over the "
         "columns, loads coalesce; the sums for the mean and the variance use warp shuffles plus one shared slot per "
         "warp. Keep the exact two-pass variance.",
         "Block per row with 128 threads (plan: block per row, 128 threads), same reductions."],
        ["Read each row once (plan: row in registers, float4). 2048 columns / 256 threads = two float4 per thread: "
         "load them into registers, compute the mean, then the two-pass variance from registers, then normalise, "
         "scale and shift with float4 weight and bias loads. Template on the float4 count; keep a scalar fallback.",
         "Single pass with sum and sum of squares (plan: one-pass moments)."],
        [("<<<rows, 256>>>", "<<<rows, 128>>>"), ("__launch_bounds__(256)", "__launch_bounds__(128)")],
    ),
    "row_mean": (
        "row_mean_kernel", "row_mean_block_kernel",
        ["One thread block per row (plan: block per row, 256 threads). One thread per row means each warp touches "
         "32 rows 32 KB apart per load. Let 256 threads stride over a row so each warp reads 128 contiguous bytes, "
         "then reduce with __shfl_xor_sync and one shared slot per warp.",
         "Block per row with 128 threads (plan: block per row, 128 threads)."],
        ["More bytes in flight (plan: float4 with four accumulators). Use 512 threads per row, float4 loads, and "
         "unroll by four with independent accumulators so each thread has four 16-byte loads outstanding; keep a "
         "scalar path for widths that are not a multiple of 4.",
         "Split each row across two blocks with atomicAdd (plan: split rows)."],
        [("<<<rows, 256>>>", "<<<rows, 128>>>"), ("__launch_bounds__(256)", "__launch_bounds__(128)")],
    ),
    "bias_gelu": (
        "bias_gelu_kernel", "bias_gelu_vec_kernel",
        ["Vectorise (plan: float4 loads and stores). The chain is memory bound: use float4 loads of x and bias and "
         "float4 stores, compute the bias index once per vector, and use fmaf for x*2+bias. Keep erff (the reference "
         "is the exact erf GELU). Scalar kernel when the width is not a multiple of 4.",
         "Grid-stride scalar loop (plan: grid-stride loop) with the grid sized to the SM count."],
        ["Remove the 64-bit modulo (plan: 2-D launch, 4 rows per block). Launch a 2-D grid: x covers float4 columns, "
         "y covers groups of 4 rows; each thread loads its bias float4 once into registers and processes the same "
         "columns of 4 rows, which removes the per-element 64-bit modulo and gives four independent loads per thread.",
         "Use 512 threads per block (plan: 512-thread blocks)."],
        [("const int threads = 256;", "const int threads = 512;")],
    ),
}


def section(name: str, step: int) -> str:
    """The improved kernel section (the span's replacement) from ../improved/NAME_stepN.py."""
    text = (EXAMPLES / "improved" / f"{name}_step{step}.py").read_text()
    marker = text.index("\n# Step ")
    return text[marker + 1:]


def fenced(code: str) -> str:
    return "Here is the complete replacement for the kernel section.\n\n```python\n" + code.rstrip("\n") + "\n```\n"


def plan_tag(plan: str) -> str:
    return plan[plan.index("(plan: ") + 1: plan.index(")", plan.index("(plan: ")) + 1]


def script(name: str) -> dict:
    start_marker, step1_marker, plans1, plans2, edits = PLANS[name]
    step1, step2 = section(name, 1), section(name, 2)
    variant = step1
    for old, new in edits:
        assert old in variant, (name, old)
        variant = variant.replace(old, new)
    variant = variant.replace("# Step 1:", "# Step 1 (variant):", 1)
    rules = [
        {"role": "implement", "match": [plan_tag(plans1[0])], "reply": fenced(step1)},
        {"role": "implement", "match": [plan_tag(plans1[1])], "reply": fenced(variant)},
        {"role": "implement", "match": [plan_tag(plans2[0])], "reply": fenced(step2)},
        # the second plan of iteration 2 is only a sketch: answer it with the step-1 code, a duplicate the engine drops
        {"role": "implement", "match": [plan_tag(plans2[1])], "reply": fenced(step1)},
        {"role": "plan", "match": [step1_marker], "replies": plans2},
        {"role": "plan", "match": [start_marker], "replies": plans1},
        {"role": "repair", "match": [], "reply": fenced(step1)},
    ]
    return {"rules": rules}


if __name__ == "__main__":
    for name in PLANS:
        out = HERE / f"{name}.script.json"
        out.write_text(json.dumps(script(name), indent=1) + "\n")
        print(out)
