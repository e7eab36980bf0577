"""The memory system under Gemmini's DMA, as the FireSim images the model is fitted to have it:
the L2's MSHRs, the 8-byte memory bus, and FASED's last-level cache model (128-byte blocks,
requests taken in order, a request to a set with a refill in flight holding the queue).

Each test runs variants of one program on the real model and compares their modelled cycles;
the behaviours are read from the RTL (see timing_params.h), so a test fails when the model
loses one, whatever the fitted latencies are."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from simkit import assert_ok, run_c, timing_param  # noqa: E402

# Move-ins of 16 rows of 64 bytes over 1 MiB, STRIDE bytes apart (64: every line; 128: one
# line per 128-byte LLC block), optionally after an unmeasured sweep that leaves the data in
# the LLC (1 MiB is twice the L2, so the measured sweep misses the L2 either way).
SWEEP = r"""
#define BYTES (1 << 20)
static elem_t buf[BYTES] __attribute__((aligned(128)));
static void sweep(unsigned stride) {
  gemmini_extended3_config_ld(stride, MVIN_SCALE_IDENTITY, false, 0);
  for (unsigned off = 0; off + 15 * stride + 64 <= BYTES; off += 16 * stride)
    gemmini_extended_mvin(&buf[off], (off / stride / 16 % 64) * 64, 64, 16);
  gemmini_fence();
}
AUTOCOMP_HARNESS_FN int main(void) {
  if (WARM) sweep(STRIDE);
  AUTOCOMP_MEASURE_BEGIN();
  sweep(STRIDE);
  AUTOCOMP_MEASURE_END();
  return 0;
}
"""
BLOCKS = (1 << 20) // 128


def _sweep(tmp_path: Path, stride: int, warm: int, memory_latency: tuple[int, int, int] | None = None,
           memory_pipe: tuple[int, int, int] | None = None) -> int:
    work = tmp_path / f"s{stride}w{warm}p{'-'.join(map(str, memory_pipe or ()))}"
    work.mkdir()
    run = run_c(work, f"#define STRIDE {stride}\n#define WARM {warm}\n" + SWEEP, max_instructions=50_000_000,
                memory_latency=memory_latency, memory_pipe=memory_pipe)
    assert_ok(run)
    assert run.cycles is not None
    return run.cycles


def test_cold_lines_of_one_llc_block_wait_for_its_refill(tmp_path):
    """A 128-byte LLC block is refilled once; the request for its second 64-byte line finds the
    refill in flight, waits at the head of the LLC's read queue, and holds every later request
    behind it. A cold contiguous sweep therefore pays about one DRAM round trip per block, and
    touching one line per block (no second request to wait) is several times faster per block,
    with the LLC's MSHRs letting refills overlap."""
    contiguous = _sweep(tmp_path, 64, 0)
    one_line_per_block = _sweep(tmp_path, 128, 0)
    assert contiguous / BLOCKS >= timing_param("DMA_LATENCY")
    assert one_line_per_block * 2 < contiguous


def test_a_read_miss_holds_the_llc_state_machine_only_for_its_tag_access(tmp_path):
    """LastLevelCache.scala: a read that misses leaves llc_r_mdaccess for llc_idle after the tag
    access; its data comes with the refill, which takes the state machine for the block's 16
    beats (llc_refill) when DRAM answers. So cold blocks touched once each take the state
    machine for 17 cycles, not 25 (tag access + the line's 8 beats + the refill's 16, as the
    model had it). With a short DRAM round trip (20 cycles) the MSHRs are no limit and the
    state machine sets the pace: about 18 cycles a block."""
    one_line_per_block = _sweep(tmp_path, 128, 0, memory_latency=(20, 45, 50))
    assert one_line_per_block < BLOCKS * 21, one_line_per_block / BLOCKS
    assert one_line_per_block >= BLOCKS * 17, one_line_per_block / BLOCKS


def test_llc_hits_stream_at_the_memory_bus_rate(tmp_path):
    """Data the LLC holds comes back at the LLC state machine's and the 8-byte memory bus's
    pace (a 64-byte line in about 9 cycles), far faster than the cold sweep, and no faster
    than the bus allows for the lines the 512 KiB L2 cannot have kept."""
    cold = _sweep(tmp_path, 64, 0)
    warm = _sweep(tmp_path, 64, 1)
    lines, l2_lines = (1 << 20) // 64, (512 << 10) // 64
    assert warm * 3 < cold
    assert warm >= (lines - l2_lines) * 8  # 64 bytes over an 8-byte bus


# One cold line from each of 64 LLC blocks, the blocks STRIDE bytes apart: 128 puts them side by
# side in one DRAM row; 256 KiB + 128 puts each in the next row of the same bank (bank and rank
# bits are bits 13-17) and in its own LLC set, so only the DRAM bank sets them apart.
ROWS = r"""
static elem_t buf[64 * STRIDE] __attribute__((aligned(8192)));  /* one DRAM row */
AUTOCOMP_HARNESS_FN int main(void) {
  gemmini_extended3_config_ld(STRIDE, MVIN_SCALE_IDENTITY, false, 0);
  AUTOCOMP_MEASURE_BEGIN();
  for (unsigned n = 0; n < 64; n += 16)
    gemmini_extended_mvin(&buf[n * STRIDE], n * 4, 64, 16);
  gemmini_fence();
  AUTOCOMP_MEASURE_END();
  return 0;
}
"""


def test_dram_serves_an_open_row_faster_than_rows_of_one_bank(tmp_path):
    """FASED's DDR3 model (open-page policy, DramCommon.scala's address mapping): blocks of the
    row a bank holds open skip the activation, while blocks in different rows of one bank each
    wait for the bank to close its row (no earlier than tRAS after opening it, then tRP) and
    open the next (tRCD): one row cycle per block, however many LLC MSHRs are free."""
    cycles = {}
    for stride in (128, (256 << 10) + 128):
        work = tmp_path / f"stride{stride}"
        work.mkdir()
        run = run_c(work, f"#define STRIDE {stride}u\n" + ROWS, max_instructions=500_000_000, timeout=300)
        assert_ok(run)
        cycles[stride] = run.cycles
    same_row, one_bank = cycles[128], cycles[(256 << 10) + 128]
    row_cycle = timing_param("DRAM_T_RAS") + timing_param("DRAM_T_RP")
    assert one_bank >= 63 * row_cycle, cycles
    assert 2 * same_row < one_bank, cycles


# Move-outs of 16 whole 64-byte lines each: 1 MiB of writes, either to 1 MiB of distinct cold
# lines (SPAN 1 MiB: past 512 KiB every new line evicts a dirty one) or four times over the
# same 256 KiB (SPAN 256 KiB: the lines stay in the L2).
WRITES = r"""
#define BYTES (1 << 20)
static elem_t dst[BYTES] __attribute__((aligned(128)));
AUTOCOMP_HARNESS_FN int main(void) {
  gemmini_config_st(64);
  AUTOCOMP_MEASURE_BEGIN();
  for (unsigned n = 0; n < BYTES; n += 16 * 64)
    gemmini_extended_mvout(&dst[n % SPAN], (n / 1024 % 64) * 64, 64, 16);
  gemmini_fence();
  AUTOCOMP_MEASURE_END();
  return 0;
}
"""


def test_dirty_lines_evicted_from_the_l2_are_written_back_to_the_llc(tmp_path):
    """A whole-line DMA write that misses the L2 is only granted permission (no fetch), but the
    dirty line it evicts goes back over the memory bus to the LLC, where a 64-byte write into a
    cold 128-byte block first refills the block from DRAM (FASED's write-triggered refill). The
    same megabyte written over lines the L2 keeps costs no write-backs at all."""
    cycles = {}
    for span in (1 << 18, 1 << 20):
        work = tmp_path / f"span{span}"
        work.mkdir()
        run = run_c(work, f"#define SPAN {span}u\n" + WRITES, max_instructions=50_000_000)
        assert_ok(run)
        cycles[span] = run.cycles
    assert cycles[1 << 20] > 1.5 * cycles[1 << 18], cycles


# Two warm sweeps of move-ins over SPAN bytes: the first leaves the data in the LLC (and as much
# of it in the L2 as the L2 keeps), the second is measured.
WARM_SWEEP = r"""
static elem_t buf[SPAN] __attribute__((aligned(128)));
static void sweep(void) {
  gemmini_extended3_config_ld(64, MVIN_SCALE_IDENTITY, false, 0);
  for (unsigned off = 0; off < SPAN; off += 16 * 64)
    gemmini_extended_mvin(&buf[off], (off / 1024 % 64) * 64, 64, 16);
  gemmini_fence();
}
AUTOCOMP_HARNESS_FN int main(void) {
  sweep();
  AUTOCOMP_MEASURE_BEGIN();
  sweep();
  AUTOCOMP_MEASURE_END();
  return 0;
}
"""


def _warm_sweep_cycles_per_line(tmp_path: Path, span: int) -> float:
    work = tmp_path / f"warm{span}"
    work.mkdir()
    run = run_c(work, f"#define SPAN {span}u\n" + WARM_SWEEP, max_instructions=50_000_000)
    assert_ok(run)
    assert run.cycles is not None
    return run.cycles / (span // 64)


def test_the_l2_replaces_a_random_way(tmp_path):
    """The L2 (InclusiveCache Directory.scala) evicts a way an LFSR picks, not the least
    recently used one. Sweeping a buffer a little larger than the L2 twice therefore finds
    much of it still in the L2 the second time, where least-recently-used replacement would
    have evicted every line just before its reuse and served the whole sweep from the LLC, as
    for a buffer four times the L2."""
    l2_bytes = 512 * 1024
    slightly_larger = _warm_sweep_cycles_per_line(tmp_path, l2_bytes * 9 // 8)
    much_larger = _warm_sweep_cycles_per_line(tmp_path, l2_bytes * 4)
    assert slightly_larger < 0.7 * much_larger, (slightly_larger, much_larger)



# Two hardware loops (loop_ws, 4 x 4 x 64 blocks, about 16k cycles of computes each). The first
# one's operands are warm in the L2 and its results go to cold lines; the second one's operands
# are only in the LLC. The unroller takes the second loop while the first computes, so its
# loads run then; the model books them after the first loop's move-outs, which come later.
TWO_LOOPS = r"""
static elem_t A1[64][1024] __attribute__((aligned(64))), B1[1024][64] __attribute__((aligned(64)));
static elem_t A2[64][1024] __attribute__((aligned(64))), B2[1024][64] __attribute__((aligned(64)));
static elem_t C1[64][64] __attribute__((aligned(64))), C2[64][64] __attribute__((aligned(64)));
static elem_t Warm[64][64] __attribute__((aligned(64)));
static elem_t Other[1 << 20] __attribute__((aligned(64)));
static void loop(elem_t *A, elem_t *B, elem_t *C) {
  gemmini_loop_ws(4, 4, 64, 0, 0, 0, A, B, NULL, C, 1024, 64, 0, 64, false, false, false, false, false, 0, 0, 0, false);
}
AUTOCOMP_HARNESS_FN int main(void) {
  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_config_st(64);
  loop((elem_t *)A2, (elem_t *)B2, (elem_t *)Warm);  /* A2, B2 into the caches ... */
  gemmini_fence();
  gemmini_extended3_config_ld(64, MVIN_SCALE_IDENTITY, false, 0);
  for (unsigned off = 0; off < sizeof Other; off += 16 * 64)  /* ... and mostly out of the L2 */
    gemmini_extended_mvin(&Other[off], (off / 1024 % 64) * 16, 64, 16);
  gemmini_fence();
  loop((elem_t *)A1, (elem_t *)B1, (elem_t *)Warm);  /* A1, B1 into the L2 */
  gemmini_fence();
  AUTOCOMP_MEASURE_BEGIN();
  loop((elem_t *)A1, (elem_t *)B1, (elem_t *)C1);
  if (SECOND) loop((elem_t *)A2, (elem_t *)B2, (elem_t *)C2);
  gemmini_fence();
  AUTOCOMP_MEASURE_END();
  return 0;
}
"""


def test_loads_booked_after_later_stores_are_not_held_back_by_them(tmp_path):
    """The memory system serves requests in time order, whatever order the model books them
    in: the second loop's loads happen during the first loop's computes, before its move-outs,
    so they hide behind those computes and the second loop adds its own computes (1024 steps
    of 16 rows) and almost nothing for its loads. Booked in program order with a single "free
    at" time per resource (the L2's MSHRs, the memory bus, the LLC), part of them had waited
    for the first loop's move-outs (the second loop then added 10% more than its computes)."""
    cycles = {}
    for second in (0, 1):
        work = tmp_path / f"second{second}"
        work.mkdir()
        run = run_c(work, f"#define SECOND {second}\n" + TWO_LOOPS, max_instructions=50_000_000)
        assert_ok(run)
        cycles[second] = run.cycles
    computes = 4 * 4 * 64 * 16
    assert cycles[1] - cycles[0] < computes * 1.04, cycles


# 4 KiB (64 lines) moved in twice: just written by the host (dirty in its L1), then again (the
# first move-in's probes left clean copies there). Each measured region is the move-ins and a
# fence.
PROBES = r"""
static elem_t buf[64 * 64] __attribute__((aligned(64)));
AUTOCOMP_HARNESS_FN static void move_in(void) {
  AUTOCOMP_MEASURE_BEGIN();
  gemmini_extended3_config_ld(64, MVIN_SCALE_IDENTITY, false, 0);
  for (int r = 0; r < 64; r += 16) gemmini_extended_mvin(&buf[r * 64], r * 4, 64, 16);
  gemmini_fence();
  AUTOCOMP_MEASURE_END();
}
AUTOCOMP_HARNESS_FN int main(void) {
  for (int i = 0; i < 64 * 64; i++) buf[i] = (elem_t)i;
  move_in();
  move_in();
  return 0;
}
"""


def test_dma_reads_of_lines_the_host_holds_wait_for_its_l1_to_be_probed(tmp_path):
    """The inclusive L2 probes the host's L1 before answering a DMA read of a line the L1
    holds, one probe at a time in the L1 (rocket DCache.scala release_state): a dirty line
    sends its 4 beats back, a clean one a single ack. So data the host has just written reaches
    the accelerator more slowly than data it has only read (FireSim F2: tiled_matmul_ws 64^3,
    whose inputs the host fills just before, 2,597 cycles)."""
    run = run_c(tmp_path, PROBES, measure_limit=2, host_dcache=True)
    assert_ok(run)
    dirty, clean = run.region_cycles
    per_dirty = timing_param("L1_PROBE_CYCLES") + 64 // 16
    per_clean = timing_param("L1_PROBE_CYCLES") + 1
    # the 64 probes follow one another: the lines cannot all be back sooner
    assert dirty >= 64 * per_dirty and clean >= 64 * per_clean, (dirty, clean)
    # and the dirty lines' data beats make their probes longer
    assert dirty - clean >= 0.7 * 64 * (per_dirty - per_clean), (dirty, clean)


def test_latency_pipe_has_no_llc_and_bounds_reads_in_flight(tmp_path):
    """`memory_pipe` (the F2 image's memory: FireSim's default latency-bandwidth pipe, no LLC)
    answers every L2 miss after its latency with at most so many reads in flight: a sweep that
    would have warmed the LLC leaves only what the L2 kept, a longer latency slows a cold sweep, and
    fewer reads in flight slow it more."""
    cold = _sweep(tmp_path, 64, 0, memory_pipe=(300, 16, 16))
    warmed = _sweep(tmp_path, 64, 1, memory_pipe=(300, 16, 16))
    # 1 MiB is twice the L2: warming helps only by the lines its random replacement kept
    # (with the LLC it makes the sweep several times faster; the first test's setting).
    assert warmed > cold * 3 // 5, (cold, warmed)
    llc_cold, llc_warmed = _sweep(tmp_path, 64, 0), _sweep(tmp_path, 64, 1)
    assert llc_warmed < llc_cold * 2 // 5, (llc_cold, llc_warmed)
    fast = _sweep(tmp_path, 64, 0, memory_pipe=(30, 16, 16))
    assert cold > 2 * fast, (fast, cold)
    narrow = _sweep(tmp_path, 64, 0, memory_pipe=(300, 4, 4))
    assert narrow > 2 * cold, (cold, narrow)


def test_bad_memory_pipe_is_refused_with_what_is_allowed(tmp_path):
    run = run_c(tmp_path, "int main(void) { return 0; }\n", memory_pipe=(30, 0, 16))
    assert run.exit_code != 0
    text = run.error + run.stderr
    assert "memory_pipe 30 0 16" in text and "1..64" in text, text
