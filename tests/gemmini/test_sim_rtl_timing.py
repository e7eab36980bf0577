"""Timing behaviour read from Gemmini's RTL (see sim/MODEL.md): a queued compute overlaps the
next preload (about DIM cycles per pair, not 2*DIM); short steps wait for the mesh's six tags;
operands in the same scratchpad bank serialise; narrow move-outs are latency bound and ordered,
and accumulator rows take AccumulatorScale's pipeline on the way out;
the DMA writer takes a row's blocks before writing it, and loop_conv_ws moves its output out
DIM channels per request; the performance counters follow CounterFile semantics; depthwise
loop_conv_ws computes the depthwise convolution."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from simkit import assert_ok, run_c  # noqa: E402

PAIRS = r"""
#define PAIRS 256
static elem_t A[DIM][DIM] row_align(1), W[DIM][DIM] row_align(1);
/* PAIRS preload/compute pairs on resident operands; A in bank 0 and the weights at `w_row`. */
static void pairs(uint32_t w_row) {
  for (int k = 0; k < PAIRS; k++) {
    gemmini_preload(w_row, (1u << 31) | (1u << 30));
    gemmini_compute_preloaded(0, GARBAGE_ADDR);
  }
  gemmini_fence();
}
static uint64_t timed(uint32_t w_row) {
  uint64_t t0 = read_cycles(); pairs(w_row); return read_cycles() - t0;
}
AUTOCOMP_HARNESS_FN int main(void) {
  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_config_ld(DIM);
  gemmini_mvin(A, 0); gemmini_mvin(W, BANK_ROWS); gemmini_mvin(W, DIM);
  gemmini_fence();
  uint64_t other_bank = timed(BANK_ROWS), same_bank = timed(DIM);
  printf("other %llu same %llu\n", (unsigned long long)other_bank, (unsigned long long)same_bank);
  /* overlapped: ~DIM per pair (the host issues faster than the array drains) */
  CHECK(other_bank < PAIRS * DIM * 5 / 4, "pairs on different banks took %llu cycles", (unsigned long long)other_bank);
  CHECK(other_bank >= PAIRS * DIM, "below the compute floor: %llu", (unsigned long long)other_bank);
  /* A and the next weights in one bank take turns: about twice as long */
  CHECK(same_bank > other_bank * 3 / 2, "same bank %llu vs other bank %llu", (unsigned long long)same_bank, (unsigned long long)other_bank);
  return failures;
}
"""


def test_compute_overlaps_next_preload_and_same_bank_operands_serialise(tmp_path):
    run = run_c(tmp_path, PAIRS)
    assert_ok(run)


STORES = r"""
static elem_t In[DIM][4 * DIM] row_align(1), Out[8][DIM][DIM] row_align(1);
AUTOCOMP_HARNESS_FN int main(void) {
  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_config_ld(4 * DIM); gemmini_config_st(DIM);
  gemmini_extended_mvin(In, 0, 4 * DIM, DIM);
  gemmini_fence();
  uint64_t t0 = read_cycles();
  gemmini_mvout(Out[0], 0);
  gemmini_fence();
  uint64_t one = read_cycles() - t0;
  t0 = read_cycles();
  for (int i = 0; i < 8; i++) gemmini_mvout(Out[i], 0);
  gemmini_fence();
  uint64_t eight = read_cycles() - t0;
  printf("one %llu eight %llu\n", (unsigned long long)one, (unsigned long long)eight);
  /* a 16-row move-out of 16-byte rows waits for its acknowledgements (memory latency) ... */
  CHECK(one > 16 + 40, "one narrow move-out took only %llu cycles", (unsigned long long)one);
  /* ... and each store waits for the previous one to complete: no overlap between them
   * (overlapped, 8 x 16 requests with 16 in flight would take about 2 x one) */
  CHECK(eight > 5 * one, "8 move-outs took %llu cycles, one %llu", (unsigned long long)eight, (unsigned long long)one);
  return failures;
}
"""


def test_narrow_moveouts_are_latency_bound_and_ordered(tmp_path):
    assert_ok(run_c(tmp_path, STORES))


COUNTERS = r"""
#define CFG(idx, ev, ext) ((((uint64_t)(idx) & 7) << 4) | 8 | (((uint64_t)(ev) & 0x3f) << 12) | ((uint64_t)(ext) << 31))
static uint64_t counter(uint64_t rs1) {
  uint64_t rd;
  __asm__ volatile(".insn r 0x7b, 7, 126, %0, %1, x0" : "=r"(rd) : "r"(rs1) : "memory");
  return rd;
}
static elem_t In[8][DIM][DIM] row_align(1), Out[8][DIM][DIM] row_align(1);
AUTOCOMP_HARNESS_FN int main(void) {
  counter(CFG(0, 9, 0));           /* LOAD_ACTIVE_CYCLE */
  CHECK(counter(0 << 4) == 0, "a configured counter starts at 0");
  gemmini_config_ld(DIM); gemmini_config_st(DIM);
  for (int i = 0; i < 8; i++) gemmini_mvin(In[i], i * DIM);   /* 128 requests: loads run a while */
  uint64_t running = counter(0 << 4);
  CHECK(running > 0, "load-active cycles grow while loads run");
  counter(4);                      /* take a snapshot */
  uint64_t snap = counter(0 << 4);
  for (int i = 0; i < 8; i++) gemmini_mvout(Out[i], i * DIM);
  gemmini_fence();
  CHECK(counter(0 << 4) == snap, "reads return the snapshot while it is held");
  counter(2);                      /* clear the snapshot */
  CHECK(counter(0 << 4) > snap, "the counter kept counting behind the snapshot");
  counter(1);                      /* reset all */
  CHECK(counter(0 << 4) == 0, "global reset zeroes the counter");
  counter(CFG(1, 4, 1));           /* external RDMA_BYTES_REC */
  uint64_t before = counter(1 << 4);
  gemmini_mvin(In[0], 0); gemmini_fence();
  CHECK(counter(1 << 4) - before == DIM * DIM, "read-DMA bytes grow by one tile: %llu", (unsigned long long)(counter(1 << 4) - before));
  counter(CFG(2, 17, 0));          /* DMA_TLB_TOTAL_REQ */
  gemmini_mvin(In[1], 0); gemmini_fence();
  CHECK(counter(2 << 4) == DIM, "one request per 16-byte row: %llu", (unsigned long long)counter(2 << 4));
  return failures;
}
"""


def test_performance_counters_follow_counterfile_semantics(tmp_path):
    assert_ok(run_c(tmp_path, COUNTERS))


TLB = r"""
#define CFG(idx, ev, ext) ((((uint64_t)(idx) & 7) << 4) | 8 | (((uint64_t)(ev) & 0x3f) << 12) | ((uint64_t)(ext) << 31))
static uint64_t counter(uint64_t rs1) {
  uint64_t rd;
  __asm__ volatile(".insn r 0x7b, 7, 126, %0, %1, x0" : "=r"(rd) : "r"(rs1) : "memory");
  return rd;
}
#define PAGE 4096
static elem_t Far[DIM][PAGE] row_align(1), Near[DIM][DIM] row_align(1);
static uint64_t timed_mvin(const void *src, uint64_t stride) {
  gemmini_config_ld(stride);
  gemmini_fence();
  uint64_t t0 = read_cycles();
  gemmini_mvin(src, 0);
  gemmini_fence();
  return read_cycles() - t0;
}
AUTOCOMP_HARNESS_FN int main(void) {
  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  timed_mvin(Far, PAGE); timed_mvin(Near, DIM);   /* bring both into the L2 */
  counter(CFG(0, 15, 0));          /* DMA_TLB_MISS_CYCLE */
  counter(CFG(1, 16, 0));          /* DMA_TLB_HIT_REQ: requests that reach the shared TLB */
  uint64_t far = timed_mvin(Far, PAGE);           /* 16 rows on 16 pages */
  uint64_t near = timed_mvin(Near, DIM);          /* 16 rows on one or two pages */
  printf("far %llu near %llu tlb %llu %llu\n", (unsigned long long)far, (unsigned long long)near,
         (unsigned long long)counter(0 << 4), (unsigned long long)counter(1 << 4));
  CHECK(counter(0 << 4) == 0, "machine mode: the TLB never misses (%llu miss cycles)", (unsigned long long)counter(0 << 4));
  CHECK(counter(1 << 4) >= 16 && counter(1 << 4) <= 19, "one filter miss per page change: %llu", (unsigned long long)counter(1 << 4));
  /* a page change costs one cycle (the filter register), not a page-table walk */
  CHECK(far <= near + 2 * DIM, "16 page changes cost %llu cycles against %llu", (unsigned long long)far, (unsigned long long)near);
  return failures;
}
"""


def test_dma_translation_is_a_register_filter_in_machine_mode(tmp_path):
    """FrontendTLB.scala: each client keeps its last page in a register; another page costs a
    cycle on the way to the shared TLB, which in machine mode never misses (no page walk)."""
    assert_ok(run_c(tmp_path, TLB))


DEPTHWISE = r"""
#define CH 5
#define IN 9
#define K 3
#define OUT 9
static elem_t in_[IN][IN][CH] row_align(1), w[CH][K][K] row_align(1), out[OUT][OUT][CH] row_align(1);
static acc_t bias[CH];
AUTOCOMP_HARNESS_FN int main(void) {
  for (int r = 0; r < IN; r++) for (int c = 0; c < IN; c++) for (int ch = 0; ch < CH; ch++) in_[r][c][ch] = (elem_t)(rnd() % 7 - 3);
  for (int ch = 0; ch < CH; ch++) { bias[ch] = (acc_t)(rnd() % 21 - 10); for (int i = 0; i < K; i++) for (int j = 0; j < K; j++) w[ch][i][j] = (elem_t)(rnd() % 5 - 2); }
  gemmini_config_st(CH);
  gemmini_extended3_config_ex(WEIGHT_STATIONARY, 0, 0, 0, 1, 1, false, false, false);
  for (int ch = 0; ch < CH; ch++)
    gemmini_loop_conv_ws(1, IN, IN, CH, CH, OUT, OUT, OUT, OUT, 1, 1, K, 1, 1, 1, 0,
                         1, OUT, OUT, 1, K, K, 1, 1, 1, 1, 1, 0, 0, 0, 0, OUT, OUT,
                         &w[ch][0][0], &out[0][0][ch], bias + ch, &in_[0][0][ch], false, true, false, false, false,
                         NO_ACTIVATION, false, false, false, false, 1, CH, 1, CH, true, 0, 0);
  gemmini_fence();
  for (int r = 0; r < OUT; r++) for (int c = 0; c < OUT; c++) for (int ch = 0; ch < CH; ch++) {
    int32_t s = bias[ch];
    for (int i = 0; i < K; i++) for (int j = 0; j < K; j++) {
      int ir = r + i - 1, ic = c + j - 1;
      if (ir >= 0 && ic >= 0 && ir < IN && ic < IN) s += in_[ir][ic][ch] * w[ch][i][j];
    }
    elem_t want = s > 127 ? 127 : (s < -128 ? -128 : (elem_t)s);
    CHECK(out[r][c][ch] == want, "out[%d][%d][%d] = %d, want %d", r, c, ch, out[r][c][ch], want);
  }
  return failures;
}
"""


def test_depthwise_loop_conv_ws(tmp_path):
    assert_ok(run_c(tmp_path, DEPTHWISE))


LIMIT = r"""
static volatile int sink;
AUTOCOMP_HARNESS_FN int main(void) {
  for (int i = 0; i < 200000; i++) sink += i;   /* setup outside the measured call */
  AUTOCOMP_MEASURE_BEGIN();
  for (int i = 0; i < 20000; i++) sink += i;    /* the measured call */
  AUTOCOMP_MEASURE_END();
  return 0;
}
"""


def test_instruction_limit_counts_only_the_measured_call(tmp_path):
    import asyncio

    from simkit import PRELUDE, toolchain

    src = tmp_path / "prog.c"
    src.write_text(PRELUDE + LIMIT)
    elf = tmp_path / "prog.elf"
    tc = toolchain()

    async def go(limit: int):
        res = await tc.compile([str(src)], str(elf), str(tmp_path))
        assert res.ok, res.tail()
        return await tc.run(str(elf), str(tmp_path), {}, timeout=60, max_instructions=50_000_000,
                            region_instruction_limit=limit)

    ok = asyncio.run(go(1_000_000))  # setup (>1M instructions) does not count against the limit
    assert_ok(ok)
    assert ok.instructions is not None and ok.instructions < 1_000_000
    stopped = asyncio.run(go(10_000))
    assert "more than its limit of 10,000".replace(",", "") in stopped.error
    assert "max_instructions" in stopped.error


CONV_LIB = r"""
#define B 2
#define H 12
#define W 12
#define IC 20
#define OC 24
#define K 3
#define OH 12
#define OW 12
static elem_t in_nhwc[B][H][W][IC], in_chwn[IC][H][W][B], w_hwio[K][K][IC][OC], w_ihwo[IC][K][K][OC];
static elem_t out_a[B][OH][OW][OC], out_b[OH][OW][B][OC];
static acc_t bias[OC];
static int32_t ref[B][OH][OW][OC];
int main(void) {
  for (int b = 0; b < B; b++) for (int r = 0; r < H; r++) for (int c = 0; c < W; c++) for (int i = 0; i < IC; i++)
    in_nhwc[b][r][c][i] = in_chwn[i][r][c][b] = (elem_t)(rnd() % 9 - 4);
  for (int kr = 0; kr < K; kr++) for (int kc = 0; kc < K; kc++) for (int i = 0; i < IC; i++) for (int o = 0; o < OC; o++)
    w_hwio[kr][kc][i][o] = w_ihwo[i][kr][kc][o] = (elem_t)(rnd() % 5 - 2);
  for (int o = 0; o < OC; o++) bias[o] = (acc_t)(rnd() % 41 - 20);
  for (int b = 0; b < B; b++) for (int r = 0; r < OH; r++) for (int c = 0; c < OW; c++) for (int o = 0; o < OC; o++) {
    int32_t s = bias[o];
    for (int kr = 0; kr < K; kr++) for (int kc = 0; kc < K; kc++) {
      int ir = r + kr - 1, ic = c + kc - 1;
      if (ir < 0 || ic < 0 || ir >= H || ic >= W) continue;
      for (int i = 0; i < IC; i++) s += in_nhwc[b][ir][ic][i] * w_hwio[kr][kc][i][o];
    }
    ref[b][r][c][o] = s;
  }
  uint64_t i0 = read_instret();
  tiled_conv_auto(B, H, W, IC, OC, OH, OW, 1, 1, 1, 1, K, false, false, false, false, false,
                  (elem_t *)in_nhwc, (elem_t *)w_hwio, bias, (elem_t *)out_a, NO_ACTIVATION, 0.25f, 0, 0, 0, WS);
  uint64_t host = read_instret() - i0;
  printf("host instructions in tiled_conv_auto: %llu\n", (unsigned long long)host);
  /* loop_conv_ws does the work: no im2col on the host (that would be >= B*OH*OW*K*K*IC bytes) */
  CHECK(host < 5000, "tiled_conv_auto ran %llu host instructions", (unsigned long long)host);
  tiled_conv_auto(B, H, W, IC, OC, OH, OW, 1, 1, 1, 1, K, false, true, true, true, false,
                  (elem_t *)in_chwn, (elem_t *)w_ihwo, bias, (elem_t *)out_b, NO_ACTIVATION, 0.25f, 0, 0, 0, WS);
  for (int b = 0; b < B; b++) for (int r = 0; r < OH; r++) for (int c = 0; c < OW; c++) for (int o = 0; o < OC; o++) {
    elem_t want = ref_scale(ref[b][r][c][o], 0.25f);
    CHECK(out_a[b][r][c][o] == want, "NHWC out[%d][%d][%d][%d] = %d, want %d", b, r, c, o, out_a[b][r][c][o], want);
    CHECK(out_b[r][c][b][o] == want, "transposed out[%d][%d][%d][%d] = %d, want %d", r, c, b, o, out_b[r][c][b][o], want);
  }
  return failures;
}
"""


def test_tiled_conv_auto_runs_on_loop_conv_ws_without_host_im2col(tmp_path):
    run = run_c(tmp_path, CONV_LIB)
    assert_ok(run)


HOST = r"""
static volatile int64_t v[4096];
static inline int64_t mul_rs1(int64_t a, int64_t b) {
  int64_t r;
  __asm__ volatile("mul %0, %1, %2" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
AUTOCOMP_HARNESS_FN int main(void) {
  uint64_t c0 = read_cycles(), i0 = read_instret();
  int64_t s = 1;
  for (int i = 1; i < 1000; i++) s = s * (int64_t)v[i] + (s / i) + 1;   /* iterative multiplier and divider */
  uint64_t c1 = read_cycles(), i1 = read_instret();
  for (int r = 0; r < 4; r++) for (int i = 0; i < 4096; i += 8) s += v[i];   /* 32 KiB > L1 */
  uint64_t c2 = read_cycles(), i2 = read_instret();
  /* the same 1000 multiplies with a negative and with a small non-negative multiplier (rs1) */
  int64_t neg = -3 - v[0], pos = 3 + v[0];
  for (int i = 0; i < 1000; i++) s += mul_rs1(neg, i);
  uint64_t c3 = read_cycles();
  for (int i = 0; i < 1000; i++) s += mul_rs1(pos, i);
  uint64_t c4 = read_cycles();
  printf("%llu %llu %llu %llu %llu %llu %lld\n", (unsigned long long)(c1 - c0), (unsigned long long)(i1 - i0),
         (unsigned long long)(c2 - c1), (unsigned long long)(i2 - i1), (unsigned long long)(c3 - c2),
         (unsigned long long)(c4 - c3), (long long)s);
  return 0;
}
"""


def test_host_core_costs_per_instruction_class_and_dcache(tmp_path):
    import asyncio

    from simkit import PRELUDE, toolchain

    src = tmp_path / "prog.c"
    src.write_text(PRELUDE + HOST)
    elf = tmp_path / "prog.elf"
    tc = toolchain()

    async def go(dcache: bool):
        res = await tc.compile([str(src)], str(elf), str(tmp_path))
        assert res.ok, res.tail()
        return await tc.run(str(elf), str(tmp_path), {}, timeout=60, max_instructions=50_000_000, host_dcache=dcache)

    plain, cached = asyncio.run(go(False)), asyncio.run(go(True))
    assert_ok(plain)
    assert_ok(cached)
    md_c, md_i, ld_c, ld_i, neg_c, pos_c, _ = (int(x) for x in plain.stdout.split())
    # 999 iterations of one multiply and one divide; the dividend is a full 64-bit value, so
    # the divider's early-out skips little and each divide takes about 60 cycles
    assert md_c > 999 * 60 and md_c > 5 * md_i
    # Rocket's multiplier stops early (mulEarlyOut): a small non-negative multiplier takes 2
    # of the 8 iterations, a negative one all 8 (1000 multiplies, 6 cycles apart each)
    assert 5500 <= neg_c - pos_c <= 6500, (neg_c, pos_c)
    # loads cost their load-use bubble, nothing more, without the cache model ...
    assert ld_i < ld_c < 2 * ld_i
    # ... and (nearly) every strided load misses the 16 KiB L1 with it
    ld_c2 = int(cached.stdout.split()[2])
    assert ld_c2 > ld_c + 2048 * 20  # each miss refills from the L2 (L2_HIT_LATENCY + replay)


DIVIDES = r"""
static inline int64_t div_asm(int64_t a, int64_t b) {
  int64_t r;
  __asm__ volatile("div %0, %1, %2" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
static volatile int64_t seed[3] = {1000, (int64_t)1 << 62, -1000};
AUTOCOMP_HARNESS_FN int main(void) {
  const int64_t small = seed[0], large = seed[1], negative = seed[2];
  int64_t s = 0;
  uint64_t c0 = read_cycles();
  for (int i = 0; i < 1000; i++) s += div_asm(small, 7);      /* quotient of 8 bits */
  uint64_t c1 = read_cycles();
  for (int i = 0; i < 1000; i++) s += div_asm(large, 3);      /* quotient of 61 bits */
  uint64_t c2 = read_cycles();
  for (int i = 0; i < 1000; i++) s += div_asm(negative, 7);   /* as the first, signs to fix */
  uint64_t c3 = read_cycles();
  printf("%llu %llu %llu %lld\n", (unsigned long long)(c1 - c0), (unsigned long long)(c2 - c1),
         (unsigned long long)(c3 - c2), (long long)s);
  return 0;
}
"""


def test_divider_skips_the_dividends_leading_zeros(tmp_path):
    """Rocket's divider (Multiplier.scala, divEarlyOut) starts at the dividend's top bit: a
    small quotient takes about 11 cycles, a 61-bit one about 65, and a negative operand adds
    the negation cycles on the way in and out."""
    from simkit import run_c

    run = run_c(tmp_path, DIVIDES)
    assert_ok(run)
    small, large, negative, _ = (int(x) for x in run.stdout.split())
    # 1000 divides each: s_div takes 66 - eOutPos cycles (eOutPos = 63 - (msb(a) - msb(b)))
    assert 50_000 <= large - small <= 56_000, (small, large)
    assert 1_800 <= negative - small <= 2_200, (small, negative)  # s_neg_inputs + s_neg_output
    assert small < 20_000, small


def test_backend_limit_is_per_measured_call_and_reported_as_timeout():
    """max_instructions bounds the measured call (not the harness's filling of the arrays), and
    a call over it is a TIMEOUT that names the setting."""
    import asyncio

    from backend_support import backend as make_backend
    from autocomp.model import Verdict
    from test_backend_verdicts import ORIGINAL, kernel

    backend = make_backend(max_instructions=2_000_000, run_timeout=60)
    problem = backend.make_problem("gemm32.c", ORIGINAL)
    slow = kernel("  for (volatile int i = 0; i < 1000000; i++) { }\n  (void)A; (void)B; (void)C;\n}\n")
    orig, over = asyncio.run(backend.evaluate(problem, [problem.code, slow]))
    assert orig.verdict is Verdict.CORRECT, orig.feedback  # harness work is not counted against 2M
    assert over.verdict is Verdict.TIMEOUT, over.feedback
    assert "autocomp.target.gemmini.max_instructions" in over.feedback


PORTS = r"""
static elem_t A[DIM][DIM] row_align(1), W[DIM][DIM] row_align(1), D[64][DIM][DIM] row_align(1);
/* 256 preload/compute pairs (A at `a_row`, weights in bank 1) while move-ins keep writing
 * scratchpad bank 0 (rows 2048..), one 16-row move-in every 4 pairs. */
static uint64_t run(uint32_t a_row) {
  gemmini_mvin(A, a_row); gemmini_fence();
  uint64_t t0 = read_cycles();
  for (int k = 0; k < 256; k++) {
    if (k % 4 == 0) gemmini_mvin(D[k / 4], 2048 + (k / 4) * DIM);
    gemmini_preload(BANK_ROWS, (1u << 31) | (1u << 30));
    gemmini_compute_preloaded(a_row, GARBAGE_ADDR);
  }
  gemmini_fence();
  return read_cycles() - t0;
}
AUTOCOMP_HARNESS_FN int main(void) {
  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_config_ld(DIM);
  gemmini_mvin(W, BANK_ROWS);
  run(3 * BANK_ROWS);  /* warm-up: the move-in data is in the L2 for both measured runs */
  uint64_t quiet = run(2 * BANK_ROWS), written = run(0);
  printf("A in an idle bank %llu, A in the bank being written %llu\n", (unsigned long long)quiet, (unsigned long long)written);
  CHECK(written > quiet + 256, "move-in writes to A's bank did not slow the computes (%llu vs %llu)",
        (unsigned long long)written, (unsigned long long)quiet);
  return failures;
}
"""


def test_movein_writes_take_the_port_of_a_bank_being_read(tmp_path):
    assert_ok(run_c(tmp_path, PORTS))


CONV_FLAGS = r"""
#define MAXE 12000
static elem_t in_[MAXE], w_[MAXE], out_[MAXE], ref_[MAXE];
static acc_t bias_[64];
/* Reference convolution with every layout and flag tiled_conv_auto takes. */
static int conv_case(int batch, int rows, int ich, int och, int k, int stride, int idil, int kdil, int pad,
                     bool rot, bool t_out, bool t_in, bool t_w1203, bool t_w0132, int psize, int pstride, int ppad, int act) {
  const int drows = (rows - 1) * idil + 1;
  const int orows = (drows + 2 * pad - kdil * (k - 1) - 1) / stride + 1;
  for (int i = 0; i < batch * rows * rows * ich; i++) in_[i] = (elem_t)(rnd() % 11 - 5);
  for (int i = 0; i < k * k * ich * och; i++) w_[i] = (elem_t)(rnd() % 7 - 3);
  for (int i = 0; i < och; i++) bias_[i] = (acc_t)(rnd() % 301) - 150;
  static int32_t acc[MAXE];
  for (int b = 0; b < batch; b++) for (int r = 0; r < orows; r++) for (int c = 0; c < orows; c++) for (int o = 0; o < och; o++) {
    int32_t s = bias_[o];
    for (int kr = 0; kr < k; kr++) for (int kc = 0; kc < k; kc++) for (int ch = 0; ch < ich; ch++) {
      int ir = r * stride + kr * kdil - pad, ic = c * stride + kc * kdil - pad;
      if (ir < 0 || ic < 0 || ir % idil || ic % idil) continue;
      ir /= idil; ic /= idil;
      if (ir >= rows || ic >= rows) continue;
      int wr = rot ? k - 1 - kr : kr, wc = rot ? k - 1 - kc : kc;
      elem_t x = t_in ? in_[((ch * rows + ir) * rows + ic) * batch + b] : in_[((b * rows + ir) * rows + ic) * ich + ch];
      elem_t wv = t_w1203 ? w_[((ch * k + wr) * k + wc) * och + o]
                : t_w0132 ? w_[((wr * k + wc) * och + o) * ich + ch]
                          : w_[((wr * k + wc) * ich + ch) * och + o];
      s += x * wv;
    }
    acc[((b * orows + r) * orows + c) * och + o] = s;
  }
  int prows = orows;
  if (psize > 1) prows = (orows + 2 * ppad - psize) / pstride + 1;
  for (int b = 0; b < batch; b++) for (int pr = 0; pr < prows; pr++) for (int pc = 0; pc < prows; pc++) for (int o = 0; o < och; o++) {
    elem_t best = -128;
    const int n = psize > 1 ? psize : 1, st = psize > 1 ? pstride : 1, pp = psize > 1 ? ppad : 0;
    for (int wr = 0; wr < n; wr++) for (int wc = 0; wc < n; wc++) {
      int r = pr * st + wr - pp, c = pc * st + wc - pp;
      elem_t v = 0;
      if (r >= 0 && c >= 0 && r < orows && c < orows) {
        v = ref_scale(acc[((b * orows + r) * orows + c) * och + o], 0.05f);
        if (act == RELU && v < 0) v = 0;
      }
      if (v > best) best = v;
    }
    ref_[t_out ? ((pr * prows + pc) * batch + b) * och + o : ((b * prows + pr) * prows + pc) * och + o] = best;
  }
  memset(out_, 0x5a, sizeof out_);
  tiled_conv_auto(batch, rows, rows, ich, och, orows, orows, stride, idil, kdil, pad, k, rot, t_out, t_in, t_w1203, t_w0132,
                  in_, w_, bias_, out_, act, 0.05f, psize, pstride, ppad, WS);
  int bad = 0;
  for (int i = 0; i < batch * prows * prows * och; i++) bad += out_[i] != ref_[i];
  CHECK(bad == 0, "conv b%d r%d ich%d och%d k%d s%d idil%d kdil%d p%d rot%d tout%d tin%d w1203 %d w0132 %d pool %d/%d/%d: %d wrong",
        batch, rows, ich, och, k, stride, idil, kdil, pad, rot, t_out, t_in, t_w1203, t_w0132, psize, pstride, ppad, bad);
  return bad;
}
int main(void) {
  conv_case(1, 7, 5, 18, 3, 1, 2, 1, 1, true, false, false, false, false, 0, 0, 0, NO_ACTIVATION);   /* input dilation + rot180 */
  conv_case(1, 11, 20, 12, 3, 2, 1, 2, 2, false, false, false, false, true, 0, 0, 0, RELU);          /* kernel dilation, stride, 0132 */
  conv_case(2, 9, 6, 20, 3, 1, 1, 1, 1, false, false, false, true, false, 3, 2, 1, RELU);            /* 1203 weights + pooling */
  conv_case(2, 8, 17, 9, 3, 1, 1, 1, 1, false, true, true, false, false, 0, 0, 0, NO_ACTIVATION);   /* CHWN in, HWNC out */
  conv_case(1, 6, 3, 16, 1, 2, 1, 1, 0, false, false, false, false, false, 0, 0, 0, NO_ACTIVATION);  /* 1x1, stride 2 */
  return failures;
}
"""


def test_tiled_conv_auto_layouts_dilations_rotation_and_pooling(tmp_path):
    """Every flag the suite's convolution tests exercise, through tiled_conv_auto (and so
    loop_conv_ws), against a CPU convolution written here."""
    assert_ok(run_c(tmp_path, CONV_FLAGS, max_instructions=200_000_000))


SHORT_STEPS = r"""
#define STEPS 512
static elem_t A[DIM][DIM] row_align(1), W[DIM][DIM] row_align(1);
/* STEPS weight-stationary steps of `rows` rows on resident weights: each a preload that only
   names the output (garbage weights) and a compute on `rows` rows of A. */
#define STEP(rows) do { \
    gemmini_extended_preload(GARBAGE_ADDR, (1u << 31) | (1u << 30), DIM, DIM, DIM, rows); \
    gemmini_extended_compute_accumulated(0, GARBAGE_ADDR, DIM, rows, DIM, DIM); } while (0)
static uint64_t timed(int rows) {
  uint64_t t0 = read_cycles();
  for (int k = 0; k < STEPS; k += 4) { STEP(rows); STEP(rows); STEP(rows); STEP(rows); }
  gemmini_fence();
  return read_cycles() - t0;
}
AUTOCOMP_HARNESS_FN int main(void) {
  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_config_ld(DIM);
  gemmini_mvin(A, 0); gemmini_mvin(W, BANK_ROWS);
  gemmini_preload(BANK_ROWS, (1u << 31));
  gemmini_compute_preloaded(0, GARBAGE_ADDR);
  gemmini_fence();
  uint64_t full = timed(DIM), short4 = timed(4);
  printf("16-row steps %llu, 4-row steps %llu\n", (unsigned long long)full, (unsigned long long)short4);
  /* DIM-row steps stream back to back: the tags are never the limit. */
  CHECK(full < STEPS * DIM * 9 / 8, "16-row steps took %llu cycles", (unsigned long long)full);
  /* 4-row steps: 6 tags, each held from its step's first row until the NEXT step's last
     result row leaves (4 + 4 + 2*DIM+1 cycles) and free one cycle later, so one step starts
     every (8 + 34) / 6 = 7 cycles, not every 4 (nor every (4 + 34) / 6 = 6.3). */
  CHECK(short4 >= STEPS * 7 * 97 / 100, "4-row steps took %llu cycles: faster than the mesh's 6 tags allow",
        (unsigned long long)short4);
  CHECK(short4 < STEPS * 8, "4-row steps took %llu cycles", (unsigned long long)short4);
  return failures;
}
"""


def test_short_steps_wait_for_the_meshs_six_tags(tmp_path):
    """MeshWithDelays.scala: a step holds one of tagqlen = 6 tags from entering the mesh until
    the next step's last result row leaves (in WS its tag is queued under the next request's
    matmul id), so short steps cannot issue every `rows` cycles."""
    run = run_c(tmp_path, SHORT_STEPS)
    assert_ok(run)


DEEP_1X1 = r"""
static elem_t in[7 * 7 * 512] __attribute__((aligned(64)));
static elem_t w[512 * 2048] __attribute__((aligned(64)));
static elem_t out[7 * 7 * 2048] __attribute__((aligned(64)));
AUTOCOMP_HARNESS_FN int main(void) {
  AUTOCOMP_MEASURE_BEGIN();
  tiled_conv_auto(1, 7, 7, 512, 2048, 7, 7, 1, 1, 1, 0, 1, false, false, false, false, false,
                  in, w, NULL, out, NO_ACTIVATION, ACC_SCALE_IDENTITY, 0, 0, 0, WS);
  gemmini_fence();
  AUTOCOMP_MEASURE_END();
  return out[5] != 0;
}
"""


def test_tiled_conv_auto_pays_for_its_tile_search_on_the_host(tmp_path):
    """Gemmini's library picks a conv tile by trial: from the whole layer down, then up one
    step at a time, sizing a fresh copy of the tile for the scratchpad and the accumulator at
    every trial. On a deep 1x1 layer that is ~2,500 trials, most of the call's host time (the
    DOSA FireSim figures include it: ResNet's 7x7 512->2048 took 580,950 cycles). Compiled as
    the suite builds it, Gemmini's own search retires about 144k instructions here."""
    run = run_c(tmp_path, DEEP_1X1, max_instructions=20_000_000)
    assert_ok(run)
    assert 110_000 <= run.instructions <= 180_000, run.instructions


# 32-byte rows, one per 64-byte line of a buffer the L2 holds, moved in twice: from the start of
# each line (one 32-byte Get, 2 beats) and from 16 bytes in (bytes 16..47: no aligned 16- or
# 32-byte block holds them, so the StreamReader asks for the whole 64-byte line, 4 beats).
# With 16 requests in flight the first stream is bound by the requests' round trip, the second
# by the bus (one 16-byte beat a cycle).
REQUEST_SIZES = r"""
#define ROWS 1024
static elem_t Lines[ROWS][64] __attribute__((aligned(64)));
static uint64_t stream(int offset) {
  uint64_t t0 = read_cycles();
  for (int r = 0; r < ROWS; r += DIM)
    gemmini_extended_mvin(&Lines[r][offset], (r % (4 * DIM)) * 2, 2 * DIM, DIM);
  gemmini_fence();
  return read_cycles() - t0;
}
AUTOCOMP_HARNESS_FN int main(void) {
  gemmini_config_ld(64);
  stream(0);                                   /* bring the lines into the L2 */
  uint64_t aligned = stream(0), straddling = stream(16);
  printf("from the line start %llu, from 16 bytes in %llu\n", (unsigned long long)aligned, (unsigned long long)straddling);
  /* 4 beats a row on the bus: at least ROWS * 4 cycles */
  CHECK(straddling >= ROWS * 4, "rows needing a 64-byte request took %llu cycles", (unsigned long long)straddling);
  CHECK(straddling > aligned * 5 / 4, "a 64-byte request per row (%llu) vs a 32-byte one (%llu)",
        (unsigned long long)straddling, (unsigned long long)aligned);
  return failures;
}
"""


def test_dma_requests_are_sized_as_the_stream_reader_sizes_them(tmp_path):
    """RTL: DMA.scala StreamReaderCore picks, of the aligned 16/32/64-byte blocks holding the next
    byte, the one carrying the most wanted bytes (the smallest on a tie), and all its beats come
    back: 32 bytes from 16 bytes into a line cost a 4-beat request."""
    assert_ok(run_c(tmp_path, REQUEST_SIZES))


# 256 rows of 64 bytes moved out of the accumulator to whole aligned lines, twice: as int8 rows of
# 64 columns (four DIM-column blocks) and as int32 rows of DIM columns (one block). Same bytes,
# same requests (one whole line each).
WRITER_BLOCKS = r"""
static elem_t Out8[16][DIM][4 * DIM] __attribute__((aligned(64)));
static acc_t Out32[16][DIM][DIM] __attribute__((aligned(64)));
AUTOCOMP_HARNESS_FN int main(void) {
  const uint32_t acc = 1u << 31, full = 1u << 29;
  gemmini_config_st(4 * DIM);
  uint64_t t0 = read_cycles();
  for (int i = 0; i < 16; i++) gemmini_extended_mvout(Out8[i], acc | (i * 4 * DIM), 4 * DIM, DIM);
  gemmini_fence();
  uint64_t narrow_elems = read_cycles() - t0;
  gemmini_config_st(DIM * sizeof(acc_t));
  t0 = read_cycles();
  for (int i = 0; i < 16; i++) gemmini_extended_mvout(Out32[i], acc | full | (i * DIM), DIM, DIM);
  gemmini_fence();
  uint64_t wide_elems = read_cycles() - t0;
  printf("int8 x 4 blocks %llu, int32 x 1 block %llu\n", (unsigned long long)narrow_elems, (unsigned long long)wide_elems);
  /* 4 blocks + 4 beats - 1 = 7 cycles a row against 4 (1,969 cycles against 1,217; one cycle a
     block would make them equal) */
  CHECK(narrow_elems * 10 > wide_elems * 14, "int8 rows of four blocks %llu, int32 rows of one %llu",
        (unsigned long long)narrow_elems, (unsigned long long)wide_elems);
  CHECK(narrow_elems < wide_elems * 2, "int8 rows of four blocks %llu, int32 rows of one %llu",
        (unsigned long long)narrow_elems, (unsigned long long)wide_elems);
  return failures;
}
"""


def test_writer_takes_a_rows_blocks_before_writing_it(tmp_path):
    """RTL: StoreController.scala hands the DMA one request per DIM-column block of a row
    (`store_en` on the last); DMA.scala StreamWriter accepts a request only while idle and starts
    writing at the last block, so a 64-byte row of four int8 blocks takes 4 + 4 - 1 = 7 cycles
    where a 64-byte int32 row (one block) takes its 4 beats."""
    assert_ok(run_c(tmp_path, WRITER_BLOCKS))


# One 1x1 loop_conv_ws call over 16 pixels, 16 input channels and OCH output channels, its DMA
# requests counted (DMA_TLB_TOTAL_REQ: reads and writes) with every buffer on 64-byte lines.
CONV_STORE_REQUESTS = r"""
#define PIX 16
#define ICH 16
static elem_t img[PIX][ICH] __attribute__((aligned(64))), w[ICH][OCH] __attribute__((aligned(64)));
static elem_t out[PIX][OCH] __attribute__((aligned(64)));
static uint64_t counter(uint64_t rs1) {
  uint64_t rd;
  __asm__ volatile(".insn r 0x7b, 7, 126, %0, %1, x0" : "=r"(rd) : "r"(rs1) : "memory");
  return rd;
}
AUTOCOMP_HARNESS_FN int main(void) {
  gemmini_extended_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0, 1, false, false);
  gemmini_config_st(OCH);
  counter((17ull << 12) | 8);  /* counter 0 counts DMA_TLB_TOTAL_REQ */
  uint64_t before = counter(0);
  gemmini_loop_conv_ws(1, 1, PIX, ICH, OCH, 1, PIX, 1, PIX, 1, 0, 1, 1, 1, 1, 0,
                       1, 1, PIX, OCH, 1, 1, ICH, 0, 0, 0, 0, 0, 0, 0, 0, 1, PIX,
                       (const elem_t *)w, (elem_t *)out, NULL, (const elem_t *)img,
                       true, true, false, false, false, NO_ACTIVATION, false, false, false, false, 1,
                       ICH, OCH, OCH, false, 0, 0);
  gemmini_fence();
  printf("requests %llu\n", (unsigned long long)(counter(0) - before));
  return 0;
}
"""


def _conv_requests(tmp_path: Path, och: int) -> int:
    sub = tmp_path / f"och{och}"
    sub.mkdir()
    run = run_c(sub, f"#define OCH {och}\n" + CONV_STORE_REQUESTS)
    assert_ok(run)
    return int(run.stdout.split("requests")[1].split()[0])


def test_loop_conv_moves_out_dim_channels_per_request(tmp_path):
    """RTL: LoopConv.scala LoopConvSt issues move-outs of at most DIM pixels by DIM channels
    (J = min(block_size, ochs - och)), so each pixel's 64 output channels leave as four 16-byte
    write requests, not one 64-byte line: 16 pixels take 48 more requests at 64 channels than
    at 16 (the loads grow by none: the weights' rows are one request either way)."""
    wide, narrow = _conv_requests(tmp_path, 64), _conv_requests(tmp_path, 16)
    assert wide - narrow == 48, (wide, narrow)


ACC_READ_PATH = r"""
static elem_t In[DIM][DIM] row_align(1), Out[DIM][DIM] row_align(1);
/* Cycles for one move-out of `rows` int8 rows from `addr`, after a warm-up of the same. */
static uint64_t moveout(uint32_t addr, int rows) {
  gemmini_extended_mvout(Out, addr, DIM, rows); gemmini_fence();
  uint64_t t0 = read_cycles();
  gemmini_extended_mvout(Out, addr, DIM, rows); gemmini_fence();
  return read_cycles() - t0;
}
AUTOCOMP_HARNESS_FN int main(void) {
  gemmini_config_ld(DIM); gemmini_config_st(DIM);
  gemmini_mvin(In, 0);
  gemmini_extended3_config_ld(DIM, MVIN_SCALE_IDENTITY, true, 0);
  gemmini_extended_mvin(In, (1u << 31), DIM, DIM);
  gemmini_fence();
  uint64_t sp = moveout(0, 1), acc = moveout(1u << 31, 1);
  printf("scratchpad %llu accumulator %llu\n", (unsigned long long)sp, (unsigned long long)acc);
  /* the accumulator row goes through the bank read, the Normalizer's passthru queue and the
   * 8-stage AccumulatorScale pipeline (10 cycles) where a scratchpad row takes the bank read
   * and the DMA read pipe's one cycle (2) */
  CHECK(acc == sp + 8, "accumulator move-out %llu vs scratchpad %llu: want 8 cycles more",
        (unsigned long long)acc, (unsigned long long)sp);
  return failures;
}
"""


def test_accumulator_moveouts_take_the_scale_pipeline(tmp_path):
    assert_ok(run_c(tmp_path, ACC_READ_PATH))


# Weight-stationary steps back to back (the weights at scratchpad row 0, A at row DIM), for the
# port tests below: the array writes a result row every cycle while they run.
BACK_TO_BACK_STEPS = r"""
static elem_t A[DIM][DIM] row_align(1), B[DIM][DIM] row_align(1);
/* A (i - j) at scratchpad row DIM and the identity weights B at row 0; WS, no activation. */
static void setup_steps(void) {
  for (int i = 0; i < DIM; i++)
    for (int j = 0; j < DIM; j++) { A[i][j] = (elem_t)(i - j); B[i][j] = (elem_t)(i == j); }
  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_config_ld(DIM * sizeof(elem_t)); gemmini_config_st(DIM * sizeof(elem_t));
  gemmini_mvin(B, 0); gemmini_mvin(A, DIM);
}
/* Steps s0..s1-1 of a run: step 0 preloads the weights and writes its results to `c_first`,
 * the others reuse the weights and write theirs to `c`. */
static void steps(int s0, int s1, uint32_t c_first, uint32_t c) {
  for (int s = s0; s < s1; s++) {
    gemmini_preload(s == 0 ? 0 : GARBAGE_ADDR, s == 0 ? c_first : c);
    if (s == 0) gemmini_compute_preloaded(DIM, GARBAGE_ADDR);
    else gemmini_compute_accumulated(DIM, GARBAGE_ADDR);
  }
}
"""

ACC_PORT = BACK_TO_BACK_STEPS + r"""
static elem_t Out[DIM][DIM] row_align(1);
#define ACC(row) ((1u << 31) | (uint32_t)(row))
#define ACCUMULATE (1u << 30)
#define BANK1 (ACC_ROWS / 2)
/* Cycles from issuing `n` back-to-back computes with the same weights into accumulator
 * rows 0..15 (accumulating or not: the array writes a row every cycle) and then a move-out of 16
 * other accumulator rows at `moveout_row`, to their completion. */
static uint64_t run(int n, uint32_t accumulate, uint32_t moveout_row) {
  gemmini_fence();
  uint64_t t0 = read_cycles();
  steps(0, n, ACC(0), ACC(0) | accumulate);
  gemmini_extended_mvout(Out, ACC(moveout_row), DIM, DIM);
  gemmini_fence();
  return read_cycles() - t0;
}
AUTOCOMP_HARNESS_FN int main(void) {
  setup_steps();
  run(4, 0, 32); run(4, 0, BANK1 + 32);  /* warm-up: caches, the output buffer's lines */
  uint64_t same_bank = run(32, ACCUMULATE, 32), other_bank = run(32, ACCUMULATE, BANK1 + 32),
           overwriting = run(32, 0, 32);
  printf("move-out while accumulating: same bank %llu, other bank %llu, same bank overwriting %llu\n",
         (unsigned long long)same_bank, (unsigned long long)other_bank, (unsigned long long)overwriting);
  /* AccumulatorMem.scala: an accumulating write takes the bank's read port (read.req.ready is
   * low while write.valid && write.acc), so the move-out waits for the array's last write into
   * its bank and all of it (DIM reads, the scale pipeline, the writes) comes after the computes;
   * from the other bank it overlaps them and ends before they do. */
  CHECK(same_bank > other_bank + 2 * DIM, "same bank %llu vs other bank %llu: want the move-out behind the computes",
        (unsigned long long)same_bank, (unsigned long long)other_bank);
  /* an overwriting write uses only the write port */
  CHECK(overwriting == other_bank, "overwriting %llu vs other bank %llu: want no stall",
        (unsigned long long)overwriting, (unsigned long long)other_bank);
  return failures;
}
"""


def test_moveouts_wait_while_the_array_accumulates_into_their_bank(tmp_path):
    assert_ok(run_c(tmp_path, ACC_PORT))


WRITE_PORT = BACK_TO_BACK_STEPS + r"""
static acc_t D[DIM][DIM] row_align_acc(1);
#define ACC(row) ((1u << 31) | (uint32_t)(row))
#define BANK1 (ACC_ROWS / 2)
/* Cycles from issuing `n` back-to-back computes whose results the array writes into `c`
 * (16 rows, one a cycle: accumulator or scratchpad) and a move-in of 16 rows into `dst`, to
 * their completion; the move-in is issued after the computes, or (`mid`) halfway through them,
 * so that the later half is timed after it. `acc_dst` says whether `dst` is an accumulator
 * address (then the move-in carries int32 rows). */
static uint64_t run(int n, uint32_t c, uint32_t dst, int acc_dst, int mid) {
  gemmini_fence();
  gemmini_extended3_config_ld(acc_dst ? DIM * sizeof(acc_t) : DIM * sizeof(elem_t), MVIN_SCALE_IDENTITY, false, 0);
  uint64_t t0 = read_cycles();
  const int first = mid ? n / 2 : n;  /* the steps issued before the move-in */
  steps(0, first, c, c);
  gemmini_mvin(acc_dst ? (void*)D : (void*)A, dst);
  steps(first, n, c, c);
  gemmini_fence();
  return read_cycles() - t0;
}
AUTOCOMP_HARNESS_FN int main(void) {
  for (int i = 0; i < DIM; i++)
    for (int j = 0; j < DIM; j++) D[i][j] = i * j;
  setup_steps();
  gemmini_fence();
  const uint32_t sp_c = 2 * BANK_ROWS, sp_same = 2 * BANK_ROWS + 32, sp_other = 3 * BANK_ROWS + 32;
  for (int first = 0; first < 2; first++) {
    run(8, ACC(0), ACC(32), 1, first); run(8, ACC(0), ACC(BANK1 + 32), 1, first);  /* warm-up */
    run(8, sp_c, sp_same, 0, first); run(8, sp_c, sp_other, 0, first);
    uint64_t acc_same = run(32, ACC(0), ACC(32), 1, first), acc_other = run(32, ACC(0), ACC(BANK1 + 32), 1, first);
    uint64_t sp_same_t = run(32, sp_c, sp_same, 0, first), sp_other_t = run(32, sp_c, sp_other, 0, first);
    printf("move-in %s the array's writes: accumulator same bank %llu other bank %llu, scratchpad same bank %llu "
           "other bank %llu\n", first ? "amid" : "after", (unsigned long long)acc_same,
           (unsigned long long)acc_other, (unsigned long long)sp_same_t, (unsigned long long)sp_other_t);
    /* Scratchpad.scala: the ExecuteController's write to a bank goes before a move-in's, so a
     * move-in into the bank the array is writing every cycle holds its rows until the array's
     * last write and then writes them one a cycle (about DIM cycles after it); into the other
     * bank it is done long before. The margin is DIM / 2: where the buffers sit in a line (the
     * program's own layout) moves either figure by a few cycles. */
    CHECK(acc_same >= acc_other + DIM / 2, "accumulator: same bank %llu vs other bank %llu",
          (unsigned long long)acc_same, (unsigned long long)acc_other);
    CHECK(sp_same_t >= sp_other_t + DIM / 2, "scratchpad: same bank %llu vs other bank %llu",
          (unsigned long long)sp_same_t, (unsigned long long)sp_other_t);
  }
  /* the data still lands: row 5 of D in accumulator row 37, of A in scratchpad bank 3 */
  static acc_t back[DIM][DIM] row_align_acc(1);
  static elem_t back8[DIM][DIM] row_align(1);
  gemmini_config_st(DIM * sizeof(acc_t));
  gemmini_extended_mvout(back, ACC(32) | (1u << 29), DIM, DIM);
  gemmini_config_st(DIM * sizeof(elem_t));
  gemmini_mvout(back8, sp_other);
  gemmini_fence();
  CHECK(back[5][3] == 15 && back8[5][3] == 2, "moved-in data %d %d", (int)back[5][3], (int)back8[5][3]);
  return failures;
}
"""


def test_moveins_wait_while_the_array_writes_their_bank(tmp_path):
    assert_ok(run_c(tmp_path, WRITE_PORT))


SP_SINGLE_PORT = BACK_TO_BACK_STEPS + r"""
static elem_t Out[DIM][DIM] row_align(1);
/* Cycles from issuing `n` back-to-back computes that stream A from scratchpad bank 0 (row
 * DIM; the weights B at row 0) and write their results into scratchpad row `c`, then (if
 * `out` is not ~0) a move-out of 16 scratchpad rows at `out`, to their completion. */
static uint64_t run(int n, uint32_t c, uint32_t out) {
  gemmini_fence();
  uint64_t t0 = read_cycles();
  steps(0, n, c, c);
  if (out != ~0u) gemmini_mvout(Out, out);
  gemmini_fence();
  return read_cycles() - t0;
}
AUTOCOMP_HARNESS_FN int main(void) {
  setup_steps();
  gemmini_mvin(A, 2 * BANK_ROWS + 64); gemmini_mvin(A, 3 * BANK_ROWS + 64);
  gemmini_fence();
  run(4, BANK_ROWS, ~0u); run(4, 64, ~0u); run(4, 2 * BANK_ROWS, 2 * BANK_ROWS + 64);  /* warm-up */
  run(4, 2 * BANK_ROWS, 3 * BANK_ROWS + 64);
  /* ScratchpadBank is single ported: read.req.ready is low while a write fires, the array's
   * result writes included. Results written into the bank A streams from (row 64 of bank 0)
   * take its port while the next steps read A, so every step waits; into bank 1 they do not. */
  uint64_t reads_same = run(32, 64, ~0u), reads_other = run(32, BANK_ROWS, ~0u);
  /* A move-out of other rows of the bank the array is writing waits for the array's last write
   * there; from another bank it overlaps the computes. */
  uint64_t out_same = run(32, 2 * BANK_ROWS, 2 * BANK_ROWS + 64), out_other = run(32, 2 * BANK_ROWS, 3 * BANK_ROWS + 64);
  printf("scratchpad single port: operand reads with results into the same bank %llu, another bank %llu; "
         "move-out from the bank written %llu, another bank %llu\n", (unsigned long long)reads_same,
         (unsigned long long)reads_other, (unsigned long long)out_same, (unsigned long long)out_other);
  CHECK(reads_same > reads_other + 8 * DIM, "reads: same bank %llu vs other bank %llu",
        (unsigned long long)reads_same, (unsigned long long)reads_other);
  CHECK(out_same >= out_other + DIM, "move-out: same bank %llu vs other bank %llu",
        (unsigned long long)out_same, (unsigned long long)out_other);
  /* the results still land: row 5 of A x I, written to row 64 + 5 */
  gemmini_mvout(Out, 64);
  gemmini_fence();
  CHECK(Out[5][3] == A[5][3], "result %d, want %d", (int)Out[5][3], (int)A[5][3]);
  return failures;
}
"""


def test_scratchpad_banks_refuse_reads_while_the_array_writes_them(tmp_path):
    assert_ok(run_c(tmp_path, SP_SINGLE_PORT))


LOOP_SHARED_BANK = r"""
static elem_t A[512 * 128] row_align(1), B[256][DIM] row_align(1), C[512][DIM] row_align(1);
/* One loop_ws over a rows x 16 x k product (A is rows x k, k bytes a row), tiles of rows/16 x 1 x
 * k/16 blocks: its loaders move all of A (rows/16 * k/16 blocks of DIM rows) into scratchpad bank
 * 0, from the start of the loop's half, while its steps read A there, one row a cycle each.
 * Cycles from the call to its completion. */
static uint64_t run(int rows, int k) {
  gemmini_fence();
  uint64_t t0 = read_cycles();
  tiled_matmul(rows, DIM, k, (elem_t*)A, (elem_t*)B, NULL, (elem_t*)C, k, DIM, DIM, DIM,
               MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY, NO_ACTIVATION, ACC_SCALE_IDENTITY, 0,
               false, rows / DIM, 1, k / DIM, false, false, false, false, 0, WS);
  gemmini_fence();
  return read_cycles() - t0;
}
AUTOCOMP_HARNESS_FN int main(void) {
  for (int i = 0; i < 512 * 128; i++) A[i] = (elem_t)((i / 128 + 3 * (i % 128)) % 9 - 4);
  for (int k = 0; k < 256; k++) for (int j = 0; j < DIM; j++) B[k][j] = (elem_t)(k == j);
  const int shapes[3][2] = {{384, 128}, {512, 128}, {256, 256}};
  for (int s = 0; s < 3; s++) {
    const int rows = shapes[s][0], k = shapes[s][1];
    run(rows, k);  /* warm-up: A and B in the caches */
    const uint64_t t = run(rows, k), accesses = 2ull * rows * (k / DIM);  /* A's rows written once, read once */
    printf("loop over %d x 16 x %d: %llu cycles; bank 0 takes %llu writes and reads\n", rows, k,
           (unsigned long long)t, (unsigned long long)accesses);
    /* ScratchpadBank is single ported (a write or a read a cycle, the write first), so the loop
     * cannot end before bank 0 has taken every write and every read of A. The model met this
     * bound only once every bank kept enough write windows (with 16, the windows of the first
     * move-ins were gone by the time the steps reading the bank were timed: 8,089 cycles for
     * 512 x 128), and, for 256 x 256, once a step stretched by the writes it meets is checked
     * again for the writes its stretch then meets (7,665 cycles without). */
    CHECK(t >= accesses, "%d x %d: %llu cycles, below the %llu accesses bank 0 serves one a cycle", rows, k,
          (unsigned long long)t, (unsigned long long)accesses);
    CHECK(C[rows - 1][7] == A[(rows - 1) * k + 7] && C[5][3] == A[5 * k + 3], "result %d %d, want %d %d",
          (int)C[rows - 1][7], (int)C[5][3], (int)A[(rows - 1) * k + 7], (int)A[5 * k + 3]);
  }
  return failures;
}
"""


def test_loop_steps_and_moveins_share_a_single_ported_bank(tmp_path):
    assert_ok(run_c(tmp_path, LOOP_SHARED_BANK))


WRITE_PATH = BACK_TO_BACK_STEPS + r"""
/* Never touched before: every 16-byte move-out row misses the L2, which fetches its line first. */
static elem_t Cold[2][DIM][4 * DIM] row_align(1);
#define ACC(row) ((1u << 31) | (uint32_t)(row))
/* A 16-row move-out to cold lines (its 16 writes fill the writer's 16 slots until the lines
 * arrive), then an 8-row move-out of accumulator rows 16..23 into the same lines, then a zeroing
 * move-in and 32 steps writing accumulator rows from `target` on. Cycles to completion. */
static uint64_t run(int buffer, uint32_t target) {
  gemmini_fence();
  uint64_t t0 = read_cycles();
  gemmini_config_st(4 * DIM * sizeof(elem_t));
  gemmini_extended_mvout(&Cold[buffer][0][0], ACC(0), DIM, DIM);
  gemmini_extended_mvout(&Cold[buffer][0][DIM], ACC(16), DIM, 8);
  gemmini_extended_mvin(0, ACC(target), DIM, 8);
  steps(0, 32, ACC(target), ACC(target) | (1u << 30));
  gemmini_fence();
  return read_cycles() - t0;
}
AUTOCOMP_HARNESS_FN int main(void) {
  setup_steps();
  steps(0, 2, ACC(0), ACC(16));  /* something in accumulator rows 0..31 */
  uint64_t over = run(0, 16), apart = run(1, ACC_ROWS / 2);  /* the other bank: its port is not the reads' */
  printf("zeroing the rows just moved out %llu, other rows %llu\n", (unsigned long long)over, (unsigned long long)apart);
  /* Scratchpad.scala answers a move-out's row (io.dma.write.resp, what frees it in the
   * reservation station) when its SRAM read fires, and the queues behind the read hold more than
   * 8 rows: the second move-out is done once read, long before the writer, waiting on the first
   * one's lines, takes its rows. So overwriting its rows costs no more than writing others. */
  CHECK(over <= apart + 8, "overwriting the moved-out rows %llu vs other rows %llu: want no wait for the writer",
        (unsigned long long)over, (unsigned long long)apart);
  return failures;
}
"""


def test_moveout_rows_are_free_once_read_not_once_written(tmp_path):
    assert_ok(run_c(tmp_path, WRITE_PATH))
