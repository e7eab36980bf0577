"""Gemmini model fidelity: modelled cycles against published figures.

    python bench/gemmini_fidelity.py
    python bench/gemmini_fidelity.py --pair-image lean [--dma-inflight 16]   # only the 12544x64x256 pair

Runs, on Spike with Autocomp's Gemmini model (the backend's default settings, host L1 data
cache on), kernels written here (our code) that follow the schedules whose cycle counts or
speed-ups were published, and prints model against published figure with the ratio error of
each, plus whether each published ranking is reproduced. Targets (issue 11): every published
ratio within +-15%, every published ranking reproduced. The exit status is 1 when a target is
missed; the output says which.

Published figures used (every one we could find and check here):
- ucb-bar/autocomp, autocomp/agents/gemmini/prompts/if_example_matmul.py: a 12544x64x256 int8
  GEMM (C = A*B, A 12544x64, B 64x256) on Gemmini (DIM 16, FireSim). "before": per (16-row
  block i, 64-column block j) the accumulator tile is zeroed by move-ins of zeros, A's 16x64
  block and B's 64x64 block are moved in (wide, 4-block rows), 16 preload/compute pairs run,
  4 move-outs; one accumulator region is reused, 3,435,455 cycles. "after": A's block is
  moved in once per i, all of B once and kept resident, four accumulator regions (one per j),
  1,519,076 cycles. Ratio after/before 0.442. The "after" schedule is the expert (Exo-
  optimised) schedule of this shape in ucb-bar/autocomp's sols/exo/ (sol1_exo_opt.c).
- Autocomp paper (Hong et al., arXiv 2505.18574 v2, abstract): on the GEMM benchmarks
  Autocomp's code is 5.6x faster than Gemmini's software library and 1.4x faster than expert
  hand-tuned code, so expert code is 5.6 / 1.4 = 4.0x faster than the library (a geometric
  mean). What was compared, from ucb-bar/autocomp (read, not copied): the GEMM benchmarks are
  the six Exo-paper shapes (`exo` problems, int8, Gemmini's default 16x16 configuration,
  Chipyard dbc082e, FireSim target firesim_rocket_singlecore_gemmini_no_nic_l2_llc4mb_ddr3);
  the library baseline is one call of tiled_matmul_auto(..., WEIGHT_STATIONARY) from
  gemmini-rocc-tests branch auto-comp-v2 (sols/exo/sol*_gemmini_baseline.c); the expert code
  is the Exo-optimised schedule (sols/exo/sol*_exo_opt.c); each is timed once, between
  gemmini_flush(0); fence(); rdcycle and fence(); rdcycle (search/prob.py), after the
  harness fills A and B and computes the reference, and FireSim runs candidates in batches of
  up to 20 in one binary (backend/gemmini/gemmini_eval.py), each writing the same C: so our
  programs fill A and B, run the kernel once unmeasured (the candidate before it in the
  batch) and then time one call. The per-shape cycle counts are in the
  paper's body, which was not retrievable here, so the one shape whose FireSim pair is
  published stands in for the geometric mean: this compares the library against the 'after'
  program (the expert schedule of 12544x64x256) on the same shape and harness conditions.
  Ranking: expert faster than the library.
- FireSim F2 runs of gemmini-rocc-tests on the public Lean Gemmini image (lorikjashari/OpenASDx,
  llm/fpga/f2, 2026-09-26): tiled_matmul_ws (64^3, Gemmini and the Rocket core),
  tiled_matmul_ws_perf (128x256x256), conv_perf and conv_dw_perf; what each times, and how the
  model is configured to match the image (64 requests in flight, no bias operand), is in
  gemmini_firesim_f2.py, which holds our programs for them.
- DOSA artifact (Hong et al., MICRO 2023; ucb-bar/dosa): Gemmini's own library timed on FireSim
  over 67 layers of ResNet-50, BERT, U-Net and RetinaNet on an image with defaultConfig's DMA
  and FASED DDR3 with a 4 MiB LLC; shapes, cycle counts and how the model is run to match are
  in gemmini_dosa_layers.py. Each layer is a published figure; the two memory latencies are
  fitted to these and the pair by gemmini_calibrate.py.
- DOSA artifact again: its own mapping of every layer (explicit tiles, a loop permutation),
  timed right after the library call, 222 FireSim figures over varied schedules and whether each
  beat the library. They are read at run time from a clone of gemmini-rocc-tests (branch dosa),
  so they have their own bench: `python bench/gemmini_dosa_mapped.py --suite CLONE` (about 20
  minutes); its figures are in MODEL.md.
- Autocomp paper, abstract again: 5.6x (GEMM) and 2.7x (conv) over the library bound the
  library's utilisation on the paper's shapes (gemmini_autocomp_shapes.py) from above.
- Gemmini paper (Genc et al., arXiv 1911.09925 v1, abstract): selected design points run DNN
  inference two to three orders of magnitude faster than the host processor alone. Checked on
  one 256^3 int8 GEMM: the library on Gemmini (tiled_matmul_auto, WS) against the host alone
  running our C GEMM with the loop structure of the library's own CPU path (gemmini.h
  matmul_cpu: 4x4 outputs held in registers per pass over K, -O2 as the suite builds it; the
  scale multiplies matmul_cpu applies are left out, which only makes the host faster). The published figure is for whole networks,
  whose non-GEMM work (im2col, pooling, residual adds, requantisation) stays on the host
  and dilutes the speed-up; a single large GEMM is the accelerator's best case, so for it the
  published range is a lower bound (at least two orders of magnitude), not a ratio to match.
  The bench checks that bound and prints the modelled figure; it is not counted as a ratio
  within +-15%.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autocomp.backends.gemmini.backend import DEFAULTS  # noqa: E402
from autocomp.backends.gemmini.images import DEFAULT as DEFAULT_IMAGE, IMAGES, Image  # noqa: E402
from autocomp.backends.gemmini.toolchain import GemminiToolchain  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
import gemmini_autocomp_shapes as shapes  # noqa: E402
import gemmini_dosa_layers as dosa  # noqa: E402
import gemmini_firesim_f2 as f2  # noqa: E402

PRELUDE = r"""
#include "gemmini.h"
#include "autocomp_harness.h"
#define M 12544
#define K 64
#define N 256
/* Every array starts on a 64-byte line, so that no move-in row straddles two lines (the
 * published harness declares them row_align(1) / row_align_acc(1); where its linker put them
 * is not published, and straddling rows would double the DMA requests). */
static elem_t A[M][K] __attribute__((aligned(64))), B[K][N] __attribute__((aligned(64)));
static elem_t C[M][N] __attribute__((aligned(64)));
static const uint32_t ACC = 1u << 31, ACCUM = 1u << 30;
"""

# Per (i, j): zero 4 accumulator tiles, A block (16 x 64, wide), B block (64 x 64, 4 wide
# move-ins), 16 preload/compute pairs, 4 move-outs. One accumulator region for every (i, j).
BEFORE = r"""
static void kernel(void) {
  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_extended3_config_ld(K, MVIN_SCALE_IDENTITY, false, 0);
  gemmini_extended3_config_ld(K, MVIN_SCALE_IDENTITY, false, 1);
  gemmini_extended3_config_ld(N, MVIN_SCALE_IDENTITY, false, 2);
  gemmini_config_st(N);
  const uint32_t a_sp = 0, b_sp = 4 * DIM;
  for (int i = 0; i < M / DIM; i++)
    for (int j = 0; j < N / 64; j++) {
      for (int t = 0; t < 4; t++) gemmini_extended_mvin(0, ACC | (t * DIM), DIM, DIM);
      gemmini_extended_mvin2(&A[DIM * i][0], a_sp, 64, DIM);
      for (int k = 0; k < 4; k++) gemmini_extended_mvin3(&B[DIM * k][64 * j], b_sp + k * 64, 64, DIM);
      for (int k = 0; k < 4; k++)
        for (int t = 0; t < 4; t++) {
          gemmini_extended_preload(b_sp + k * 64 + t * DIM, ACC | ACCUM | (t * DIM), DIM, DIM, DIM, DIM);
          gemmini_extended_compute_preloaded(a_sp + k * DIM, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
        }
      for (int t = 0; t < 4; t++) gemmini_extended_mvout(&C[DIM * i][64 * j + DIM * t], ACC | (t * DIM), DIM, DIM);
    }
  gemmini_fence();
}
"""

# A's block moved in once per i (kept for the 4 j's), all of B moved in during i == 0 and kept
# resident, accumulator region j for column block j.
AFTER = r"""
static void kernel(void) {
  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_extended3_config_ld(K, MVIN_SCALE_IDENTITY, false, 0);
  gemmini_extended3_config_ld(K, MVIN_SCALE_IDENTITY, false, 1);
  gemmini_extended3_config_ld(N, MVIN_SCALE_IDENTITY, false, 2);
  gemmini_config_st(N);
  const uint32_t b_sp = (M / DIM / 4) * 4 * DIM;  /* after every A block */
  for (int i = 0; i < M / DIM; i++)
    for (int j = 0; j < N / 64; j++) {
      for (int t = 0; t < 4; t++) gemmini_extended_mvin(0, ACC | (j * 64 + t * DIM), DIM, DIM);
      const uint32_t a_sp = (i / 4) * 64;
      if (j == 0) gemmini_extended_mvin2(&A[DIM * i][0], a_sp, 64, DIM);
      if (i == 0)
        for (int k = 0; k < 4; k++) gemmini_extended_mvin3(&B[DIM * k][64 * j], b_sp + j * 256 + k * 64, 64, DIM);
      for (int k = 0; k < 4; k++)
        for (int t = 0; t < 4; t++) {
          gemmini_extended_preload(b_sp + j * 256 + k * 64 + t * DIM, ACC | ACCUM | (j * 64 + t * DIM), DIM, DIM, DIM, DIM);
          gemmini_extended_compute_preloaded(a_sp + k * DIM, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
        }
      for (int t = 0; t < 4; t++) gemmini_extended_mvout(&C[DIM * i][64 * j + DIM * t], ACC | (j * 64 + t * DIM), DIM, DIM);
    }
  gemmini_fence();
}
"""

LIBRARY = r"""
static void kernel(void) {
  tiled_matmul_auto(M, N, K, (elem_t *)A, (elem_t *)B, NULL, (elem_t *)C, K, N, N, N,
                    MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY, NO_ACTIVATION,
                    ACC_SCALE_IDENTITY, 0, false, false, false, false, false, 0, WS);
}
"""

def checking_main(m: str, n: str, k: str, row_step: int) -> str:
    """The program's main: fill A and B, measure one call of kernel(), spot-check C against
    a saturating int8 GEMM (every ``row_step``-th row, every 13th column)."""
    return (r"""
AUTOCOMP_HARNESS_FN int main(void) {
  for (int i = 0; i < @M; i++) for (int k = 0; k < @K; k++) A[i][k] = (elem_t)((i * 7 + k) % 5 - 2);
  for (int k = 0; k < @K; k++) for (int j = 0; j < @N; j++) B[k][j] = (elem_t)((k + j * 3) % 7 - 3);
  kernel();  /* the candidate before it in the batch: same buffers */
  AUTOCOMP_MEASURE_BEGIN();
  kernel();
  AUTOCOMP_MEASURE_END();
  for (int i = 0; i < @M; i += @STEP) for (int j = 0; j < @N; j += 13) {
    int32_t s = 0;
    for (int k = 0; k < @K; k++) s += A[i][k] * B[k][j];
    elem_t want = s > 127 ? 127 : (s < -128 ? -128 : s);
    if (C[i][j] != want) { printf("mismatch at %d %d: %d != %d\n", i, j, C[i][j], want); return 2; }
  }
  return 0;
}
""".replace("@M", m).replace("@N", n).replace("@K", k).replace("@STEP", str(row_step)))


MAIN = checking_main("M", "N", "K", 97)

PUBLISHED_BEFORE = 3_435_455
PUBLISHED_AFTER = 1_519_076
PUBLISHED_EXPERT_OVER_LIBRARY = 5.6 / 1.4  # Autocomp over library / Autocomp over expert
GEMMINI_OVER_HOST_AT_LEAST = 100  # "two to three orders of magnitude", for whole DNNs

# One 256^3 int8 GEMM through the library, on Gemmini (WS) and on the host CPU (CPU).
SMALL = r"""
#include "gemmini.h"
#include "autocomp_harness.h"
#define S 256
static elem_t A[S][S] __attribute__((aligned(64))), B[S][S] __attribute__((aligned(64))), C[S][S] __attribute__((aligned(64)));
#ifdef ON_HOST
/* The host alone: int8 GEMM in plain C, 4x4 outputs held in registers per pass over K (the
 * loop structure of the library's CPU path, matmul_cpu in gemmini.h). */
static void kernel(void) {
  for (int i = 0; i < S; i += 4)
    for (int j = 0; j < S; j += 4) {
      int32_t acc[4][4] = {{0}};
      for (int k = 0; k < S; k++) {
        const int32_t a0 = A[i][k], a1 = A[i + 1][k], a2 = A[i + 2][k], a3 = A[i + 3][k];
        const int32_t b0 = B[k][j], b1 = B[k][j + 1], b2 = B[k][j + 2], b3 = B[k][j + 3];
        acc[0][0] += a0 * b0; acc[0][1] += a0 * b1; acc[0][2] += a0 * b2; acc[0][3] += a0 * b3;
        acc[1][0] += a1 * b0; acc[1][1] += a1 * b1; acc[1][2] += a1 * b2; acc[1][3] += a1 * b3;
        acc[2][0] += a2 * b0; acc[2][1] += a2 * b1; acc[2][2] += a2 * b2; acc[2][3] += a2 * b3;
        acc[3][0] += a3 * b0; acc[3][1] += a3 * b1; acc[3][2] += a3 * b2; acc[3][3] += a3 * b3;
      }
      for (int x = 0; x < 4; x++)
        for (int y = 0; y < 4; y++) {
          int32_t v = acc[x][y];
          C[i + x][j + y] = (elem_t)(v > 127 ? 127 : (v < -128 ? -128 : v));
        }
    }
}
#else
static void kernel(void) {
  tiled_matmul_auto(S, S, S, (elem_t *)A, (elem_t *)B, NULL, (elem_t *)C, S, S, S, S,
                    MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY, NO_ACTIVATION,
                    ACC_SCALE_IDENTITY, 0, false, false, false, false, false, 0, WS);
  gemmini_fence();
}
#endif
""" + checking_main("S", "S", "S", 17)


async def cycles(tc: GemminiToolchain, name: str, kernel: str, work: Path, whole: str | None = None,
                 image: Image = DEFAULT_IMAGE, buffers_kib: tuple[int, int] | None = None,
                 dma_inflight: int | None = None) -> tuple[int, float]:
    d = work / name
    d.mkdir()
    src = d / "prog.c"
    src.write_text(whole if whole is not None else PRELUDE + kernel + MAIN)
    elf = d / "prog.elf"
    res = await tc.compile([str(src)], str(elf), str(d))
    if not res.ok:
        raise SystemExit(f"{name}: compile failed\n{res.tail()}")
    t0 = time.perf_counter()
    run = await tc.run(str(elf), str(d), {}, timeout=900, max_instructions=2_000_000_000,
                       host_dcache=bool(DEFAULTS["host_dcache"]), buffers_kib=buffers_kib, **image.run_options(dma_inflight))
    dt = time.perf_counter() - t0
    if run.error or run.exit_code != 0 or run.cycles is None:
        raise SystemExit(f"{name}: run failed: {run.error or run.stdout[-500:]}")
    return run.cycles, dt


def err(model: float, published: float) -> str:
    return f"{(model / published - 1) * 100:+.1f}%"


def print_row(name: str, model: float, published: float, decimals: int = 3) -> bool:
    """Prints one figure, model against published with the ratio error (cycle counts with
    thousands separators, ratios with `decimals`); True when within the +-15% target."""
    fmt = (lambda v: f"{v:,.0f}") if published > 100 else (lambda v: f"{v:.{decimals}f}")
    print(f"{name:54s} {fmt(model):>14s} {fmt(published):>14s} {err(model, published):>8s}")
    return abs(model / published - 1) <= 0.15


async def pair_on(tc: GemminiToolchain, image: Image, dma_inflight: int | None = None) -> int:
    """The 12544x64x256 pair and the library call on one build only: which build the published
    pair came from is itself a claim, and this checks it (exit 1 when a pair figure is outside 15%)."""
    with tempfile.TemporaryDirectory(prefix="gemmini-fidelity-pair-") as tmp:
        work = Path(tmp)
        before, _ = await cycles(tc, "before", BEFORE, work, image=image, dma_inflight=dma_inflight)
        after, _ = await cycles(tc, "after", AFTER, work, image=image, dma_inflight=dma_inflight)
        lib, _ = await cycles(tc, "library", LIBRARY, work, image=image, dma_inflight=dma_inflight)
    inflight = image.dma_inflight if dma_inflight is None else dma_inflight
    print(f"the 12544x64x256 pair on the {image.name} build ({image.title}), {inflight} DMA requests in flight:")
    ok = True
    for name, model, pub in (("  'before' (cycles)", before, PUBLISHED_BEFORE),
                             ("  'after' = expert (cycles)", after, PUBLISHED_AFTER),
                             ("  ratio after / before", after / before, PUBLISHED_AFTER / PUBLISHED_BEFORE)):
        ok &= print_row(name, model, pub)
    print(f"  library (tiled_matmul_auto): {lib:,} cycles, library / expert {lib / after:.3f}")
    return 0 if ok else 1


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pair-image", choices=sorted(IMAGES),
                    help="run only the 12544x64x256 pair and the library call, as this build")
    ap.add_argument("--dma-inflight", type=int, help="with --pair-image: the DMA's requests in flight "
                    "instead of the build's (to tell its memory from its queue depth)")
    args = ap.parse_args()
    if args.dma_inflight is not None and not args.pair_image:
        ap.error("--dma-inflight goes with --pair-image")
    tc = GemminiToolchain.discover({})
    if args.pair_image:
        return await pair_on(tc, IMAGES[args.pair_image], args.dma_inflight)
    with tempfile.TemporaryDirectory(prefix="gemmini-fidelity-") as tmp:
        work = Path(tmp)
        before, t1 = await cycles(tc, "before", BEFORE, work)
        after, t2 = await cycles(tc, "after", AFTER, work)
        lib, t3 = await cycles(tc, "library", LIBRARY, work)
        on_gemmini, t4 = await cycles(tc, "small-ws", "", work, SMALL)
        on_host, t5 = await cycles(tc, "small-cpu", "", work, "#define ON_HOST 1\n" + SMALL)
        lean = {}
        for name, program in (("mm64_gemmini", f2.MM64), ("mm64_cpu", "#define ON_HOST 1\n" + f2.MM64),
                              ("matmul_perf", f2.MATMUL_PERF), ("conv_perf", f2.CONV_PERF),
                              ("conv_dw_perf", f2.CONV_DW_PERF)):
            lean[name], _ = await cycles(tc, "f2-" + name, "", work, program, image=f2.LEAN)
        dosa_rows = []
        for layer in dosa.LAYERS:
            sources = dosa.programs(layer)  # one per run; runs laid out alike share a program
            timed = {}
            for n, source in enumerate(dict.fromkeys(sources)):
                timed[source], _ = await cycles(tc, f"dosa-{len(dosa_rows)}-{n}", "", work, source,
                                                buffers_kib=dosa.IMAGE_BUFFERS_KIB)
            dosa_rows.append((dosa.name(*layer[:7]), dosa.combine([timed[s] for s in sources]), *layer[7:]))
        gemm_util, conv_util = [], []
        for m, k, n in shapes.GEMM_SHAPES:
            c, _ = await cycles(tc, f"autocomp-gemm-{m}x{k}x{n}", "", work, shapes.gemm_program(m, k, n))
            gemm_util.append((f"{m}x{k}x{n}", shapes.gemm_ideal_cycles(m, k, n) / c))
        for shape in shapes.CONV_SHAPES:
            c, _ = await cycles(tc, "autocomp-conv-" + "x".join(map(str, shape)), "", work, shapes.conv_program(*shape))
            b, d, ci, co = shape
            conv_util.append((f"{b}x{d}x{d}x{ci}->{co}", shapes.conv_ideal_cycles(*shape) / c))
    ideal = 12544 * 64 * 256 // (16 * 16)
    rows = [
        ("FireSim 12544x64x256 'before' (cycles)", before, PUBLISHED_BEFORE),
        ("FireSim 12544x64x256 'after' = expert (cycles)", after, PUBLISHED_AFTER),
        ("FireSim ratio after / before", after / before, PUBLISHED_AFTER / PUBLISHED_BEFORE),
        ("Autocomp: expert speed-up over library (lib/after)", lib / after, PUBLISHED_EXPERT_OVER_LIBRARY),
    ]
    print(f"{'figure':54s} {'model':>14s} {'published':>14s} {'error':>8s}")
    ok = True
    for name, model, published in rows:
        ok &= print_row(name, model, published)
    pub = f2.PUBLISHED
    print("FireSim F2, FireSimLeanGemminiRocketConfig (lorikjashari/OpenASDx llm/fpga/f2; model with 64 requests in flight\n"
          "  and FireSim's default memory, a latency pipe with no LLC, from cold caches):")
    f2_rows = [
        ("  tiled_matmul_ws 64^3 on Gemmini (cycles)", lean["mm64_gemmini"], pub["mm64_gemmini"]),
        ("  the same product on the Rocket core (cycles)", lean["mm64_cpu"], pub["mm64_cpu"]),
        ("  ratio host / Gemmini, 64^3", lean["mm64_cpu"] / lean["mm64_gemmini"], pub["mm64_cpu"] / pub["mm64_gemmini"]),
        ("  tiled_matmul_ws_perf 128x256x256 (cycles)", lean["matmul_perf"], pub["matmul_perf"]),
        ("  conv_perf 4x224x224x3 -> 32, 3x3/2 (cycles)", lean["conv_perf"], pub["conv_perf"]),
        ("  ratio conv_perf / tiled_matmul_ws_perf", lean["conv_perf"] / lean["matmul_perf"], pub["conv_perf"] / pub["matmul_perf"]),
        ("  conv_dw_perf 3x112x112x17 depthwise, 3x3/2 (cycles)", lean["conv_dw_perf"], pub["conv_dw_perf"]),
    ]
    for name, model, published in f2_rows:
        ok &= print_row(name, model, published, decimals=1)
    util = f2.MATMUL_PERF_IDEAL / lean["matmul_perf"]
    print(f"  tiled_matmul_ws_perf utilisation: model {100 * util:.0f}%, published 82% (of the ideal {f2.MATMUL_PERF_IDEAL:,} cycles)")
    print("DOSA artifact: Gemmini's library on 67 DNN layers, FireSim (ucb-bar/dosa; gemmini_dosa_layers.py):")
    print(f"  {'layer':34s} {'model':>12s} {'FireSim':>12s} {'(min-max)':>23s} {'error':>8s}")
    for layer, model, median, lo, hi in dosa_rows:
        print(f"  {layer:34s} {model:>12,} {median:>12,} {f'({lo:,}-{hi:,})':>23s} {err(model, median):>8s}")
    mean, spread, within = dosa.summary([model / median for _, model, median, _, _ in dosa_rows])
    print(f"  model / FireSim: geometric mean {mean:.3f}, spread x{spread:.2f}, {within} of {len(dosa_rows)} within 15%")
    ok &= within == len(dosa_rows)
    speedup = on_host / on_gemmini
    lo = GEMMINI_OVER_HOST_AT_LEAST
    print(f"{'Gemmini paper: Gemmini over host CPU (256^3 GEMM)':54s} {speedup:>13.0f}x {f'>= {lo}x':>14s} "
          f"{'holds' if speedup >= lo else 'BELOW':>8s}")
    print("  (published: 100-1000x for whole-DNN inference, where non-GEMM layers stay on the host; for one\n"
          "   GEMM that range is a lower bound, so only the bound is checked, not a +-15% ratio)")
    ok &= speedup >= lo
    print("Autocomp paper, library on its own benchmarks: Autocomp's code ran 5.6x (GEMM) and 2.7x (conv) faster\n"
          "  than the library (geometric means), and no code beats the array's peak, so the library's geometric-mean\n"
          "  utilisation was at most 1/5.6 and 1/2.7. Model, library on the paper's shapes (default configuration):")
    for label, util, published_speedup in (("GEMM", gemm_util, shapes.PUBLISHED_AUTOCOMP_OVER_LIBRARY_GEMM),
                                           ("conv", conv_util, shapes.PUBLISHED_AUTOCOMP_OVER_LIBRARY_CONV)):
        per_shape = ", ".join(f"{name} {100 * u:.0f}%" for name, u in util)
        mean, bound = shapes.geomean([u for _, u in util]), 1 / published_speedup
        print(f"  {label}: {per_shape}")
        print(f"  {'  library utilisation, ' + label + ' geometric mean':52s} {100 * mean:>13.0f}% "
              f"{f'<= {100 * bound:.1f}%':>14s} {'holds' if mean <= bound else 'ABOVE':>8s}")
        ok &= mean <= bound
    # A ranking counts as reproduced only with a clear margin (5%): a near tie is not one.
    rankings = [
        ("after faster than before (by more than 5%)", after < 0.95 * before),
        ("expert ('after') faster than the library (by more than 5%)", after < 0.95 * lib),
        ("Gemmini faster than the host CPU", on_gemmini < on_host),
        ("nothing below the compute floor M*N*K/DIM^2 = " + f"{ideal:,}", min(before, after, lib) >= ideal),
    ]
    for name, holds in rankings:
        print(f"ranking: {name:62s} {'reproduced' if holds else 'NOT reproduced'}")
        ok &= holds
    if lib / after < PUBLISHED_EXPERT_OVER_LIBRARY * 0.85:
        print("  why the library figures are not reproduced: the model runs tiled_matmul_auto's loop_ws tiles and\n"
              "  tiled_conv_auto's loop_conv_ws with the execute unit busy as above; matching the published 4x on\n"
              f"  12544x64x256 would need the library at about {PUBLISHED_EXPERT_OVER_LIBRARY * PUBLISHED_AFTER:,.0f} cycles "
              f"({100 * (12544 * 64 * 256 // 256) / (PUBLISHED_EXPERT_OVER_LIBRARY * PUBLISHED_AFTER):.0f}% busy). The DOSA FireSim runs above\n"
              "  time that same library on the same kind of image (defaultConfig's DMA, FASED DDR3 with a 4 MiB LLC)\n"
              "  and find it fast: BERT GEMMs through tiled_matmul_auto at 75-80% of peak (128x768x768: 368,984\n"
              "  cycles, ideal 294,912), 3x3 layers of 52x52 and larger through tiled_conv_auto at 76-95%. At most 18%\n"
              "  (GEMM) or 37% (conv) busy is not what the hardware does with it; nor on the Lean image the FireSim\n"
              "  files Autocomp's guide links name (alveo_u250_firesim_gemmini_rocket_singlecore_no_nic, the F2\n"
              "  runs' target), where tiled_matmul_auto ran 128x256x256 at 82% of peak. The paper's baseline must\n"
              "  differ in a way it does not publish. Its per-shape cycle counts would settle it.")
    print(f"library (tiled_matmul_auto) 12544x64x256: {lib:,} cycles; 256^3 GEMM: {on_gemmini:,} cycles on Gemmini, "
          f"{on_host:,} on the host")
    print(f"simulation wall time {t1:.1f}s / {t2:.1f}s / {t3:.1f}s / {t4:.1f}s / {t5:.1f}s")
    print("all within targets" if ok else "OUTSIDE TARGETS")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
