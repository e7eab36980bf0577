"""Convolution and DMA timing on the Gemmini model, each against the RTL behaviour it follows:

- first-layer packing: with max_pixels_per_row (loop_conv_ws rs1 bits 15:8), one compute covers
  that many kernel columns (LoopConv.scala: K = pixels x channels; kcol advances by
  max_pixels_per_row), so a 3-channel 3x3 layer needs a third of the execute steps, while each
  loaded pixel is written that many times (PixelRepeater.scala, one write per cycle); the
  library passes it as Gemmini's does (DIM / channels, at most the kernel width), depthwise
  calls (one channel each) included;
- an image built without first-layer optimisations (GEMMINI_NO_FIRST_LAYER_OPTIMIZATIONS)
  packs nothing;
- loop_conv_ws's loads go through the same DMA engine and L2 as move-ins, and the DMA byte
  counter sees them;
- a request to a line whose fill is in flight waits for the fill (InclusiveCache queues it
  behind the line's MSHR), holding its DMA slot: narrow rows that share lines are latency bound;
- the DMA's requests in flight come from the configuration (`dma_inflight`; defaultConfig 16,
  leanConfig 64), and an out-of-range value is refused.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from simkit import PRELUDE, assert_ok, run_c, timing_param, toolchain  # noqa: E402

from autocomp.backends import get_backend  # noqa: E402
from autocomp.backends.base import BackendError  # noqa: E402

# One loop_conv_ws call: a 3-channel 3x3 stride-1 layer over a 16x16 image, 16 output channels.
# MPR (max_pixels_per_row) and IN_STRIDE (bytes between pixels) come from the test.
FIRST_LAYER = r"""
#define R 16
#define K 3
#define ICH 3
#define OCH 16
static elem_t img[R * R * IN_STRIDE] row_align(1);
static elem_t w[K][K][ICH][OCH] row_align(1), out[R][R][OCH] row_align(1);
static int32_t ref[R][R][OCH];
#define CFG(idx, ev, ext) ((((uint64_t)(idx) & 7) << 4) | 8 | (((uint64_t)(ev) & 0x3f) << 12) | ((uint64_t)(ext) << 31))
static uint64_t counter(uint64_t rs1) {
  uint64_t rd;
  __asm__ volatile(".insn r 0x7b, 7, 126, %0, %1, x0" : "=r"(rd) : "r"(rs1) : "memory");
  return rd;
}
AUTOCOMP_HARNESS_FN int main(void) {
  for (int p = 0; p < R * R; p++) for (int ch = 0; ch < ICH; ch++) img[p * IN_STRIDE + ch] = (elem_t)(rnd() % 7) - 3;
  for (int kr = 0; kr < K; kr++) for (int kc = 0; kc < K; kc++) for (int ch = 0; ch < ICH; ch++)
    for (int o = 0; o < OCH; o++) w[kr][kc][ch][o] = (elem_t)(rnd() % 5) - 2;
  for (int r = 0; r < R; r++) for (int c = 0; c < R; c++) for (int o = 0; o < OCH; o++) {
    int32_t s = 0;
    for (int kr = 0; kr < K; kr++) for (int kc = 0; kc < K; kc++) for (int ch = 0; ch < ICH; ch++) {
      int ir = r + kr - 1, ic = c + kc - 1;
      if (ir >= 0 && ic >= 0 && ir < R && ic < R) s += img[(ir * R + ic) * IN_STRIDE + ch] * w[kr][kc][ch][o];
    }
    ref[r][c][o] = s;
  }
  gemmini_extended_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0, 1, false, false);
  gemmini_config_st(OCH);
#ifdef WARM
  for (int pass = 0; pass < 2; pass++) {  /* the first pass brings the image into the L2 */
    if (pass == 1) {
#endif
  counter(CFG(0, 4, 1));  /* RDMA_BYTES_REC: bytes the read DMA brought in */
  AUTOCOMP_MEASURE_BEGIN();
#ifdef WARM
    }
#endif
  gemmini_loop_conv_ws(1, R, R, ICH, OCH, R, R, R, R,
                       1, 1, K, 1, 1, 1, 0,
                       1, R, R, OCH, K, K, ICH,
                       1, 1, 1, 1, 0, 0, 0, 0, R, R,
                       (const elem_t *)w, (elem_t *)out, NULL, (const elem_t *)img,
                       true, true, false, false, false, NO_ACTIVATION, false, false, false, false, MPR,
                       IN_STRIDE, OCH, OCH, false, 0, 0);
  gemmini_fence();
#ifdef WARM
  }
#endif
  AUTOCOMP_MEASURE_END();
  printf("rdma %llu\n", (unsigned long long)counter(0 << 4));
  CHECK(counter(0 << 4) > 0, "the read DMA counter saw no loop_conv_ws traffic");
  for (int r = 0; r < R; r++) for (int c = 0; c < R; c++) for (int o = 0; o < OCH; o++) {
    int32_t v = ref[r][c][o];
    elem_t want = v > 127 ? 127 : (v < -128 ? -128 : (elem_t)v);
    CHECK(out[r][c][o] == want, "out[%d][%d][%d] = %d, want %d", r, c, o, out[r][c][o], want);
  }
  return failures;
}
"""


def _first_layer(tmp_path: Path, mpr: int, in_stride: int, warm: bool = False, inflight: int | None = None):
    sub = tmp_path / f"mpr{mpr}_stride{in_stride}_warm{int(warm)}_inflight{inflight}"
    sub.mkdir()
    body = f"#define MPR {mpr}\n#define IN_STRIDE {in_stride}\n" + ("#define WARM 1\n" if warm else "") + FIRST_LAYER
    if inflight is None:
        run = run_c(sub, body)
    else:
        (sub / "prog.c").write_text(PRELUDE + body)
        tc = toolchain()

        async def go():
            built = await tc.compile([str(sub / "prog.c")], str(sub / "prog.elf"), str(sub))
            assert built.ok, built.tail()
            return await tc.run(str(sub / "prog.elf"), str(sub), {}, timeout=60, max_instructions=50_000_000,
                                dma_inflight=inflight)

        run = asyncio.run(go())
    assert_ok(run)
    return run


def test_first_layer_packing_covers_kernel_columns_per_compute(tmp_path):
    one = _first_layer(tmp_path, 1, 3)
    packed = _first_layer(tmp_path, 3, 3)
    # Same results (the programs check them); a third of the weight blocks, so about a third of
    # the array's busy cycles (each block streams the same 16 x 16 output rows).
    ratio = one.queue_busy["execute"] / packed.queue_busy["execute"]
    assert 2.7 < ratio < 3.3, (one.queue_busy, packed.queue_busy)


def test_packed_pixels_are_written_once_per_repeat(tmp_path):
    # PixelRepeater.scala writes each loaded pixel row pixel_repeats times, one per cycle, before
    # taking the next: with the image in the L2, the 256 pixel rows packed three to a row take at
    # least 3 cycles each; with 64 requests in flight (so the L2's latency does not bound the
    # loads) unpacked rows take about 1.
    packed16 = _first_layer(tmp_path, 3, 3, warm=True)
    assert packed16.queue_busy["load"] >= 3 * 256, packed16.queue_busy
    one = _first_layer(tmp_path, 1, 3, warm=True, inflight=64)
    packed = _first_layer(tmp_path, 3, 3, warm=True, inflight=64)
    assert packed.queue_busy["load"] > 1.5 * one.queue_busy["load"], (one.queue_busy, packed.queue_busy)


def test_loop_conv_loads_use_the_dma_engine_and_its_slots(tmp_path):
    # The same 256 three-byte pixel rows, one per 64-byte line (every request misses), take
    # longer than packed ones (21 per line) only by what the extra misses cost the DMA's 16
    # slots: requests queued behind a line's fill hold their slot until it returns.
    packed = _first_layer(tmp_path, 1, 3)
    spread = _first_layer(tmp_path, 1, 64)
    assert packed.queue_busy["load"] < spread.queue_busy["load"], (packed.queue_busy, spread.queue_busy)


# tiled_conv_auto on a 3-channel 3x3 layer, checked against a CPU convolution.
FIRST_LAYER_LIB = r"""
#define B 1
#define R 32
#define ICH 3
#define OCH 16
#define K 3
static elem_t in[B][R][R][ICH] row_align(1), w[K][K][ICH][OCH] row_align(1), out[B][R][R][OCH] row_align(1);
AUTOCOMP_HARNESS_FN int main(void) {
  for (int r = 0; r < R; r++) for (int c = 0; c < R; c++) for (int ch = 0; ch < ICH; ch++) in[0][r][c][ch] = (elem_t)(rnd() % 7) - 3;
  for (int kr = 0; kr < K; kr++) for (int kc = 0; kc < K; kc++) for (int ch = 0; ch < ICH; ch++)
    for (int o = 0; o < OCH; o++) w[kr][kc][ch][o] = (elem_t)(rnd() % 5) - 2;
  AUTOCOMP_MEASURE_BEGIN();
  tiled_conv_auto(B, R, R, ICH, OCH, R, R, 1, 1, 1, 1, K, false, false, false, false, false,
                  (const elem_t *)in, (const elem_t *)w, NULL, (elem_t *)out, NO_ACTIVATION, ACC_SCALE_IDENTITY, 0, 0, 0, WS);
  AUTOCOMP_MEASURE_END();
  for (int r = 0; r < R; r++) for (int c = 0; c < R; c++) for (int o = 0; o < OCH; o++) {
    int32_t s = 0;
    for (int kr = 0; kr < K; kr++) for (int kc = 0; kc < K; kc++) for (int ch = 0; ch < ICH; ch++) {
      int ir = r + kr - 1, ic = c + kc - 1;
      if (ir >= 0 && ic >= 0 && ir < R && ic < R) s += in[0][ir][ic][ch] * w[kr][kc][ch][o];
    }
    elem_t want = s > 127 ? 127 : (s < -128 ? -128 : (elem_t)s);
    CHECK(out[0][r][c][o] == want, "out %d %d %d = %d, want %d", r, c, o, out[0][r][c][o], want);
  }
  return failures;
}
"""


def test_library_packs_first_layer_pixels_like_gemmini(tmp_path):
    # tiled_conv_auto on a 3-channel layer: correct, and with first-layer packing its execute
    # busy cycles are close to one step per output row per kernel row (not per kernel column).
    run = run_c(tmp_path, FIRST_LAYER_LIB)
    assert_ok(run)
    rows_per_kernel_row = 32 * 2  # 32 output rows x two 16-pixel column blocks, DIM cycles each
    unpacked = 3 * 3 * rows_per_kernel_row * 16
    assert run.queue_busy["execute"] < 0.5 * unpacked, run.queue_busy


def test_images_without_first_layer_optimisations_pack_no_pixels(tmp_path):
    # GemminiConfigs has_first_layer_optimizations: defaultConfig packs DIM / channels pixels per
    # scratchpad row; an image built without it (DOSA's "nofirstlayer") does not. The program
    # says which by defining GEMMINI_NO_FIRST_LAYER_OPTIMIZATIONS; the results are the same.
    (tmp_path / "packed").mkdir()
    (tmp_path / "plain").mkdir()
    packed = run_c(tmp_path / "packed", FIRST_LAYER_LIB)
    plain = run_c(tmp_path / "plain", "#define GEMMINI_NO_FIRST_LAYER_OPTIMIZATIONS\n" + PRELUDE + FIRST_LAYER_LIB,
                  prelude=False)
    assert_ok(packed)
    assert_ok(plain)
    assert plain.queue_busy["execute"] > 2.5 * packed.queue_busy["execute"], (packed.queue_busy, plain.queue_busy)


STREAM = r"""
/* 256 four-byte rows packed 16 to a line (16 lines the L2 holds: an unmeasured move-in brought
 * them in): every request holds a DMA slot for an L2 hit's round trip. */
static elem_t src[256][4] row_align(4);
AUTOCOMP_HARNESS_FN int main(void) {
  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_config_ld(64);
  gemmini_extended_mvin(&src[0][0], 0, 64, DIM);
  gemmini_fence();
  gemmini_config_ld(4);
  AUTOCOMP_MEASURE_BEGIN();
  for (int i = 0; i < 256; i += DIM) gemmini_extended_mvin(&src[i][0], i, 4, DIM);
  gemmini_fence();
  AUTOCOMP_MEASURE_END();
  return 0;
}
"""


def _stream(tmp_path: Path, inflight: int | None):
    src = tmp_path / f"stream{inflight}.c"
    src.write_text(PRELUDE + STREAM)
    elf = tmp_path / f"stream{inflight}.elf"
    tc = toolchain()

    async def go():
        built = await tc.compile([str(src)], str(elf), str(tmp_path))
        assert built.ok, built.tail()
        return await tc.run(str(elf), str(tmp_path), {}, timeout=60, max_instructions=50_000_000, dma_inflight=inflight)

    return asyncio.run(go())


def test_requests_in_flight_follow_the_configuration(tmp_path):
    default, lean = _stream(tmp_path, None), _stream(tmp_path, 64)
    assert_ok(default)
    assert_ok(lean)
    # 16 slots hold one line's 16 requests, so the 16 lines' round trips happen one after
    # another (L2_HIT_LATENCY cycles each); 64 slots overlap four of them at a time, and the
    # engine's one request a cycle (256 of them) then bounds the call.
    hit = timing_param("L2_HIT_LATENCY")
    assert default.cycles >= 16 * hit, default.cycles
    assert lean.cycles < 256 + 3 * hit, lean.cycles
    assert default.cycles > 1.5 * lean.cycles, (default.cycles, lean.cycles)
    refused = _stream(tmp_path, 65)
    assert "dma_inflight 65 is outside 1..64" in refused.error, refused.error


@pytest.mark.parametrize("bad", [0, 65, "16", True])
def test_backend_refuses_a_bad_dma_inflight_setting(bad):
    backend = get_backend("gemmini", {"dma_inflight": bad})
    path = Path(__file__).resolve().parents[2] / "examples" / "gemmini" / "gemm_64.c"
    problem = backend.make_problem(str(path), path.read_text())
    with pytest.raises(BackendError, match="dma_inflight must be an integer from 1 to 64"):
        asyncio.run(backend.evaluate(problem, [problem.code]))


DEPTHWISE = r"""
#define B 2
#define R 11
#define CH 5
#define K 3
#define OUT ((R + 2 * PAD - K) / STRIDE + 1)
#define POUT ((OUT + 2 * PPAD - PSIZE) / PSTRIDE + 1)
static elem_t in[B][R][R][CH] row_align(1), w[CH][K][K] row_align(1), out[B][POUT][POUT][CH] row_align(1);
static acc_t bias[CH];
AUTOCOMP_HARNESS_FN int main(void) {
  for (int b = 0; b < B; b++) for (int r = 0; r < R; r++) for (int c = 0; c < R; c++) for (int ch = 0; ch < CH; ch++)
    in[b][r][c][ch] = rnd_elem();
  for (int ch = 0; ch < CH; ch++) for (int kr = 0; kr < K; kr++) for (int kc = 0; kc < K; kc++) w[ch][kr][kc] = rnd_elem();
  for (int ch = 0; ch < CH; ch++) bias[ch] = (int32_t)(rnd() % 2001) - 1000;
  AUTOCOMP_MEASURE_BEGIN();
  tiled_conv_dw_auto(B, R, R, CH, OUT, OUT, STRIDE, PAD, K, (const elem_t *)in, (const elem_t *)w, BIAS, (elem_t *)out,
                     RELU, 0.05f, PSIZE, PSTRIDE, PPAD, WS);
  AUTOCOMP_MEASURE_END();
  for (int b = 0; b < B; b++) for (int pr = 0; pr < POUT; pr++) for (int pc = 0; pc < POUT; pc++) for (int ch = 0; ch < CH; ch++) {
    int best = -129;
    for (int wr = 0; wr < PSIZE; wr++) for (int wc = 0; wc < PSIZE; wc++) {
      int orow = pr * PSTRIDE - PPAD + wr, ocol = pc * PSTRIDE - PPAD + wc;
      int v = 0;  /* pooling padding counts as 0 */
      if (orow >= 0 && ocol >= 0 && orow < OUT && ocol < OUT) {
        int32_t s = BIAS == NULL ? 0 : bias[ch];
        for (int kr = 0; kr < K; kr++) for (int kc = 0; kc < K; kc++) {
          int ir = orow * STRIDE - PAD + kr, ic = ocol * STRIDE - PAD + kc;
          if (ir >= 0 && ic >= 0 && ir < R && ic < R) s += in[b][ir][ic][ch] * w[ch][kr][kc];
        }
        elem_t e = ref_scale(s, 0.05f);
        v = e < 0 ? 0 : e;
      }
      if (v > best) best = v;
    }
    CHECK(out[b][pr][pc][ch] == best, "out[%d][%d][%d][%d] = %d, want %d", b, pr, pc, ch, out[b][pr][pc][ch], best);
  }
  return failures;
}
"""


@pytest.mark.parametrize(
    "stride,pad,bias,pool",
    [(1, 1, "bias", None), (2, 1, "NULL", None), (1, 0, "bias", (2, 2, 0)), (2, 1, "bias", (3, 2, 1))],
)
def test_tiled_conv_dw_auto_matches_a_cpu_depthwise_convolution(tmp_path, stride, pad, bias, pool):
    psize, pstride, ppad = pool or (1, 1, 0)
    defines = (f"#define STRIDE {stride}\n#define PAD {pad}\n#define BIAS {'bias' if bias == 'bias' else 'NULL'}\n"
               f"#define PSIZE {psize}\n#define PSTRIDE {pstride}\n#define PPAD {ppad}\n")
    run = run_c(tmp_path, defines + DEPTHWISE)
    assert_ok(run)
    assert run.queue_busy["execute"] > 0, run.queue_busy


def test_gemmini_h_counter_helpers_use_the_suites_numbering(tmp_path):
    # counter_configure(i, 44 + 4) is gemmini-rocc-tests' RDMA_BYTES_REC (an external level):
    # a 16-row, 64-byte-wide move-in brings in 1,024 bytes; counter_reset zeroes the counters.
    run = run_c(tmp_path, r"""
static elem_t src[DIM][4 * DIM] row_align(4);
AUTOCOMP_HARNESS_FN int main(void) {
  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_config_ld(4 * DIM);
  counter_configure(0, 44 + 4);
  counter_configure(1, 44 + 5);
  gemmini_extended_mvin(src, 0, 4 * DIM, DIM);
  gemmini_fence();
  CHECK(counter_read(0) == 1024, "bytes read: %u", counter_read(0));
  CHECK(counter_read(1) == 0, "bytes written: %u", counter_read(1));
  counter_reset();
  CHECK(counter_read(0) == 0, "after reset: %u", counter_read(0));
  return failures;
}
""")
    assert_ok(run)


def test_depthwise_calls_pack_pixels_like_gemminis_library(tmp_path):
    """Gemmini's sp_tiled_conv sets max_pixels_per_row = DIM / channels (at most the kernel
    width) for every loop_conv_ws it issues, depthwise ones (one channel) included: a 3x3
    depthwise call computes three kernel columns per step and writes each pixel row three times.
    Without packing (an image built without first-layer optimisations) it takes three times the
    execute steps; the results are the same either way. Not packing depthwise calls made the
    FireSim F2 `conv_dw_perf` read 28% fast."""
    defines = "#define STRIDE 1\n#define PAD 1\n#define BIAS bias\n#define PSIZE 1\n#define PSTRIDE 1\n#define PPAD 0\n"
    (tmp_path / "packed").mkdir()
    (tmp_path / "plain").mkdir()
    packed = run_c(tmp_path / "packed", defines + DEPTHWISE)
    plain = run_c(tmp_path / "plain", "#define GEMMINI_NO_FIRST_LAYER_OPTIMIZATIONS\n" + PRELUDE + defines + DEPTHWISE,
                  prelude=False)
    assert_ok(packed)
    assert_ok(plain)
    assert plain.queue_busy["execute"] > 2 * packed.queue_busy["execute"], (plain.queue_busy, packed.queue_busy)
    assert packed.queue_busy["load"] > plain.queue_busy["load"], (plain.queue_busy, packed.queue_busy)
