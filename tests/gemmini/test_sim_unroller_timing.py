"""Timing of the hardware loop unrollers on the Gemmini model, each against the RTL it follows:

- LoopConv computes a row of output pixels DIM pixels at a time, and the last step takes only
  the pixels left (LoopConv.scala LoopConvExecute: I = min(block_size, ocols - ocol)), which
  ExecuteController streams in max(rows, 4) cycles: 17 columns cost 16 + 4 rows, not 2 x 16;
- a row narrower than DIM is one short step, and a run of short steps waits for the mesh's six
  tags (MeshWithDelays.scala tagqlen), so 4-pixel rows are not twice as fast as 8-pixel rows;
- LoopMatmul's loaders, execute unroller and store unroller are separate state machines
  (LoopMatmul.scala LdA / LdB / Ex / StC), so the next tile's move-ins are issued while this
  tile computes, and a call's time is not the sum of its load and execute time;
- the calibration line that sets the two memory latencies (bench/gemmini_calibrate.py) refuses
  values that make no sense, with a message that says which;
- LoopConv frees a loop's slot only when its store unit is done, so the host's third loop
  waits for the first loop's move-outs;
- zero-bias move-ins are written one row per cycle by the ZeroWriter;
- the load controller's command tracker limits how many move-ins are in flight;
- a zero-stride move-in writes its row into each local row, one per cycle;
- LoopMatmul's store unroller walks the rows of one 64-column block before the next block
  (LoopMatmul.scala LoopMatmulStC), so a wide output's first block moves out while the last
  columns are still computed.
These were found by setting the model beside 67 FireSim-timed layers of Gemmini's own library
(DOSA; bench/gemmini_dosa_layers.py).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from simkit import PRELUDE, assert_ok, run_c, toolchain  # noqa: E402

# One loop_conv_ws call: a 1x1 convolution of ROWS x COLS pixels, 16 channels in and out, both
# operands brought into the L2 by a first, unmeasured pass, so execution dominates.
ONE_BY_ONE = r"""
#define ROWS 8
#define CH 16
static elem_t img[ROWS][COLS][CH] row_align(1), w[CH][CH] row_align(1), out[ROWS][COLS][CH] row_align(1);
AUTOCOMP_HARNESS_FN int main(void) {
  for (int r = 0; r < ROWS; r++) for (int c = 0; c < COLS; c++) for (int ch = 0; ch < CH; ch++) img[r][c][ch] = (elem_t)(rnd() % 7) - 3;
  for (int i = 0; i < CH; i++) for (int o = 0; o < CH; o++) w[i][o] = (elem_t)(rnd() % 5) - 2;
  gemmini_extended_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0, 1, false, false);
  gemmini_config_st(CH);
  for (int pass = 0; pass < 2; pass++) {
    if (pass == 1) AUTOCOMP_MEASURE_BEGIN();
    gemmini_loop_conv_ws(1, ROWS, COLS, CH, CH, ROWS, COLS, ROWS, COLS,
                         1, 0, 1, 1, 1, 1, 0,
                         1, ROWS, COLS, CH, 1, 1, CH,
                         0, 0, 0, 0, 0, 0, 0, 0, ROWS, COLS,
                         (const elem_t *)w, (elem_t *)out, NULL, (const elem_t *)img,
                         true, true, false, false, false, NO_ACTIVATION, false, false, false, false, 1,
                         CH, CH, CH, false, 0, 0);
    gemmini_fence();
  }
  AUTOCOMP_MEASURE_END();
  for (int r = 0; r < ROWS; r++) for (int c = 0; c < COLS; c++) for (int o = 0; o < CH; o++) {
    int32_t s = 0;
    for (int i = 0; i < CH; i++) s += img[r][c][i] * w[i][o];
    elem_t want = s > 127 ? 127 : (s < -128 ? -128 : (elem_t)s);
    CHECK(out[r][c][o] == want, "out[%d][%d][%d] = %d, want %d", r, c, o, out[r][c][o], want);
  }
  return failures;
}
"""


def _one_by_one(tmp_path: Path, cols: int):
    sub = tmp_path / f"cols{cols}"
    sub.mkdir()
    run = run_c(sub, f"#define COLS {cols}\n" + ONE_BY_ONE)
    assert_ok(run)
    return run.queue_busy["execute"]


def test_conv_last_column_step_takes_only_the_pixels_left(tmp_path):
    sixteen, seventeen, thirty_two = (_one_by_one(tmp_path, c) for c in (16, 17, 32))
    # 8 rows x 16 pixels: 128 rows of the array; 17 columns add one 4-row step per output row
    # (+25%); charging the last step a full 16 rows would double it, as 32 columns do.
    assert 1.15 < seventeen / sixteen < 1.45, (sixteen, seventeen, thirty_two)
    assert 1.8 < thirty_two / sixteen < 2.2, (sixteen, seventeen, thirty_two)


def test_conv_rows_of_four_pixels_wait_for_mesh_tags(tmp_path):
    # Rows narrower than DIM are one step each: 8 steps per weight block, the first DIM rows
    # (the weights shift in). There are 6 mesh tags (MeshWithDelays.scala tagqlen), and a
    # step's tag is held until the next step's results are out: rows + next rows + 2*DIM+1,
    # free a cycle later. 8 pixels: (8 + 8 + 34) / 6 = 8.3 cycles a step, so about 74 rather
    # than 16 + 7 x 8 = 72. 4 pixels: (4 + 4 + 34) / 6 = 7 a step, about 68 rather than 44.
    four, eight = (_one_by_one(tmp_path, c) for c in (4, 8))
    assert eight > 72, (four, eight)
    assert 0.86 < four / eight < 0.96, (four, eight)


# One tiled_matmul_auto over a BERT-sized GEMM (128 x 768 x 768, one of the DOSA layers): 20
# loop_ws tiles, each moving in about 120 KiB from DRAM and computing for about 19k cycles.
BERT_GEMM = r"""
static elem_t A[128][768] row_align(1), B[768][768] row_align(1), C[128][768] row_align(1);
AUTOCOMP_HARNESS_FN int main(void) {
  gemmini_flush(0);
  AUTOCOMP_MEASURE_BEGIN();
  tiled_matmul_auto(128, 768, 768, (elem_t *)A, (elem_t *)B, NULL, (elem_t *)C, 768, 768, 768, 768,
                    MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY, NO_ACTIVATION,
                    ACC_SCALE_IDENTITY, 0, false, false, false, false, false, 0, WS);
  gemmini_fence();
  AUTOCOMP_MEASURE_END();
  return C[3][5] == 0 ? 0 : 1;  /* zero operands, zero product */
}
"""


def test_next_tiles_loads_overlap_this_tiles_computes(tmp_path):
    run = run_c(tmp_path, BERT_GEMM, max_instructions=20_000_000)
    assert_ok(run)
    load, execute = run.queue_busy["load"], run.queue_busy["execute"]
    # Issued in one order through one cursor, each tile's loads waited for the previous
    # tile's computes to be issued and the call took longer than load + execute (780k cycles
    # against 331k + 325k); with the unrollers' own cursors it takes little more than the
    # longer of the two.
    assert run.cycles < 0.8 * (load + execute), (run.cycles, run.queue_busy)
    assert run.cycles < 1.25 * max(load, execute), (run.cycles, run.queue_busy)


def _latency_run(tmp_path: Path, latency: tuple[int, ...]):
    src = tmp_path / "prog.c"
    src.write_text(PRELUDE + BERT_GEMM)
    elf = tmp_path / "prog.elf"
    tc = toolchain()

    async def go():
        built = await tc.compile([str(src)], str(elf), str(tmp_path))
        assert built.ok, built.tail()
        return await tc.run(str(elf), str(tmp_path), {}, timeout=60, max_instructions=20_000_000,
                            memory_latency=latency)

    return asyncio.run(go())


def test_memory_latency_calibration_line(tmp_path):
    slow, fast = _latency_run(tmp_path, (400, 50, 50)), _latency_run(tmp_path, (100, 50, 50))
    assert_ok(slow)
    assert_ok(fast)
    assert slow.cycles > fast.cycles, (slow.cycles, fast.cycles)
    refused = _latency_run(tmp_path, (0, 50, 50))
    assert "memory_latency 0 50 50: each must be 1..100000 cycles" in refused.error, refused.error



def _run_variants(tmp_path: Path, program: str, macro: str, values) -> dict:
    """Run ``program`` once per value of ``macro``, each in its own folder; every run must pass."""
    runs = {}
    for value in values:
        sub = tmp_path / f"{macro.lower()}{value}"
        sub.mkdir()
        runs[value] = run_c(sub, f"#define {macro} {value}\n" + program, max_instructions=5_000_000)
        assert_ok(runs[value])
    return runs


# Three 1x1 loop_conv_ws calls over 512 pixels, 16 channels (LOOP_CALL), then host work that
# outlasts the accelerator. The first call writes its output only when OUT1 is 1.
THREE_LOOPS = r"""
#define ROWS 8
#define COLS 64
#define CH 16
static elem_t img[ROWS][COLS][CH] row_align(1), w[CH][CH] row_align(1), out[ROWS][COLS][CH] row_align(1);
#define LOOP_CALL(OUTPUT, BIAS, NO_BIAS) \
  gemmini_loop_conv_ws(1, ROWS, COLS, CH, CH, ROWS, COLS, ROWS, COLS, 1, 0, 1, 1, 1, 1, 0, \
                       1, ROWS, COLS, CH, 1, 1, CH, 0, 0, 0, 0, 0, 0, 0, 0, ROWS, COLS, \
                       (const elem_t *)w, (elem_t *)(OUTPUT), (const acc_t *)(BIAS), (const elem_t *)img, \
                       NO_BIAS, true, false, false, false, NO_ACTIVATION, false, false, false, false, 1, \
                       CH, CH, CH, false, 0, 0)
AUTOCOMP_HARNESS_FN int main(void) {
  gemmini_extended_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0, 1, false, false);
  gemmini_config_st(CH);
  volatile uint32_t spin = 0;
  AUTOCOMP_MEASURE_BEGIN();
  LOOP_CALL(OUT1 ? (uintptr_t)out : 0, 0, true);
  LOOP_CALL(0, 0, true);
  LOOP_CALL(0, 0, true);
  for (int i = 0; i < 40000; i++) spin += (uint32_t)i;
  gemmini_fence();
  AUTOCOMP_MEASURE_END();
  return 0;
}
"""


def test_third_conv_loop_waits_for_the_first_loops_stores(tmp_path):
    """LoopConv.scala holds two loops; a loop's slot is freed (head_loop.all_completed) only
    once its store unit has issued its last move-out, so the host's third loop command stalls
    until then. With the host's own work after it outlasting the accelerator, the first loop's
    512 move-out rows show up in the total; freeing the slot when the loop starts executing
    (the model before the DOSA comparison) hid them behind the host's work."""
    runs = _run_variants(tmp_path, THREE_LOOPS, "OUT1", (0, 1))
    # 512 rows of 16 bytes through the write DMA: at least one cycle each.
    assert runs[1].cycles - runs[0].cycles > 500, (runs[0].cycles, runs[1].cycles)


# One 1x1 loop_conv_ws call; the output tile starts from a zero bias (a bias pointer with
# no_bias, as Gemmini's library passes it) or accumulates on what is there (no bias pointer).
ZERO_BIAS = r"""
#define ROWS 8
#define COLS 64
#define CH 16
static elem_t img[ROWS][COLS][CH] row_align(1), w[CH][CH] row_align(1), out[ROWS][COLS][CH] row_align(1);
AUTOCOMP_HARNESS_FN int main(void) {
  gemmini_extended_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0, 1, false, false);
  gemmini_config_st(CH);
  AUTOCOMP_MEASURE_BEGIN();
  gemmini_loop_conv_ws(1, ROWS, COLS, CH, CH, ROWS, COLS, ROWS, COLS, 1, 0, 1, 1, 1, 1, 0,
                       1, ROWS, COLS, CH, 1, 1, CH, 0, 0, 0, 0, 0, 0, 0, 0, ROWS, COLS,
                       (const elem_t *)w, (elem_t *)out, (const acc_t *)(uintptr_t)BIAS, (const elem_t *)img,
                       true, true, false, false, false, NO_ACTIVATION, false, false, false, false, 1,
                       CH, CH, CH, false, 0, 0);
  gemmini_fence();
  AUTOCOMP_MEASURE_END();
  return 0;
}
"""


def test_zero_bias_rows_are_written_one_per_cycle(tmp_path):
    """LoopConv.scala LdBias moves in from DRAM address 0 when no_bias is set; the load
    controller sends such a move-in to the ZeroWriter (LoadController.scala all_zeros), which
    writes one accumulator row per cycle: 512 pixels cost the load queue 512 cycles, not one
    DRAM request per move-in."""
    busy = {bias: run.queue_busy["load"] for bias, run in _run_variants(tmp_path, ZERO_BIAS, "BIAS", (0, 1)).items()}
    assert busy[1] - busy[0] >= 512, busy


# 64 rows of 16 bytes, one per 64-byte line the L2 holds (an unmeasured move-in brought them
# in), moved in either as 64 one-row commands or as 4 commands of 16 rows.
MOVE_IN_COMMANDS = r"""
static elem_t src[64][64] row_align(1);
AUTOCOMP_HARNESS_FN int main(void) {
  gemmini_config_ld(64);
  for (int r = 0; r < 64; r += 16) gemmini_extended_mvin(&src[r][0], r, 16, 16);
  gemmini_fence();
  AUTOCOMP_MEASURE_BEGIN();
  for (int r = 0; r < 64; r += ROWS_PER_COMMAND) gemmini_extended_mvin(&src[r][0], r, 16, ROWS_PER_COMMAND);
  gemmini_fence();
  AUTOCOMP_MEASURE_END();
  return 0;
}
"""


def test_move_in_commands_in_flight_are_limited(tmp_path):
    """LoadController.scala tracks its move-ins in a DMACommandTracker of
    max_in_flight_mem_reqs / DIM + 1 entries (2 with defaultConfig's 16 requests), each held
    until all its data is back: one-row move-ins keep only two requests in flight, so the
    same 64 lines take several times longer than as four 16-row move-ins."""
    cycles = {rows: run.cycles for rows, run in _run_variants(tmp_path, MOVE_IN_COMMANDS, "ROWS_PER_COMMAND", (1, 16)).items()}
    assert cycles[1] > 3 * cycles[16], cycles


# 32 zero-stride move-ins of a bias row into the accumulator, each repeated into ROWS rows.
REPEATED_BIAS = r"""
static acc_t bias[DIM] row_align_acc(1);
AUTOCOMP_HARNESS_FN int main(void) {
  gemmini_extended4_config_ld(0, MVIN_SCALE_IDENTITY, false, DIM, 0);
  gemmini_extended_mvin((const elem_t *)bias, 0x80000000u, DIM, 1);  /* brings the line into the L2 */
  gemmini_fence();
  AUTOCOMP_MEASURE_BEGIN();
  for (int t = 0; t < 32; t++) gemmini_extended_mvin((const elem_t *)bias, 0x80000000u + t * DIM, DIM, ROWS);
  gemmini_fence();
  AUTOCOMP_MEASURE_END();
  return 0;
}
"""


def test_zero_stride_move_ins_write_each_repeated_row(tmp_path):
    """A move-in with DRAM stride 0 reads its row once (LoadController.scala: actual_rows_read
    is 1, the request carries rows - 1 repeats) but the mvin scaling unit writes it into each
    local row, one per cycle (VectorScalarMultiplier.scala counts `repeats` down a row per
    cycle). The load controller's two move-ins in flight overlap one's writes with the other's
    round trip, so of the 15 extra writes of each 16-row move-in at least a third shows;
    charged as one request, as the model had it, 16 rows cost what one does."""
    cycles = {rows: run.cycles for rows, run in _run_variants(tmp_path, REPEATED_BIAS, "ROWS", (1, 16)).items()}
    assert cycles[16] - cycles[1] >= 32 * 5, cycles


# One loop_ws call with one 16-deep reduction step: ROWS x 16 by 16 x COLS, both operands warm
# in the L2 from a first, unmeasured pass.
ONE_K_STEP = r"""
static elem_t A[ROWS][16] row_align(1), B[16][COLS] row_align(1), C[ROWS][COLS] row_align(1);
AUTOCOMP_HARNESS_FN int main(void) {
  for (int i = 0; i < ROWS; i++) for (int k = 0; k < 16; k++) A[i][k] = rnd_elem();
  for (int k = 0; k < 16; k++) for (int j = 0; j < COLS; j++) B[k][j] = rnd_elem();
  gemmini_extended_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0, 1, false, false);
  gemmini_extended_config_st(COLS, NO_ACTIVATION, 0.01f);
  gemmini_extended3_config_ld(16, MVIN_SCALE_IDENTITY, false, 0);
  gemmini_extended3_config_ld(COLS, MVIN_SCALE_IDENTITY, false, 1);
  for (int pass = 0; pass < 2; pass++) {
    if (pass == 1) AUTOCOMP_MEASURE_BEGIN();
    gemmini_loop_ws(ROWS / 16, COLS / 16, 1, 0, 0, 0, A, B, NULL, C, 16, COLS, 0, COLS,
                    false, false, false, false, false, NO_ACTIVATION, 0, 0, false);
    gemmini_fence();
  }
  AUTOCOMP_MEASURE_END();
  for (int i = 0; i < ROWS; i++) for (int j = 0; j < COLS; j++) {
    int32_t s = 0;
    for (int k = 0; k < 16; k++) s += A[i][k] * B[k][j];
    CHECK(C[i][j] == ref_scale(s, 0.01f), "%d,%d", i, j);
  }
  return failures;
}
"""


def _one_k_step(tmp_path: Path, rows: int, cols: int):
    sub = tmp_path / f"{rows}x{cols}"
    sub.mkdir()
    run = run_c(sub, f"#define ROWS {rows}\n#define COLS {cols}\n" + ONE_K_STEP)
    assert_ok(run)
    return run.cycles


def test_matmul_move_outs_walk_rows_of_one_column_block_first(tmp_path):
    # Both calls compute 32 steps and move out 8 KiB. 128 x 64 is one 64-column block, so every
    # move-out waits for the last column's computes. 64 x 128 is two: its first block's four
    # move-outs follow the computes of columns 0-3 and overlap those of columns 4-7 (1,613
    # cycles against 1,813). Walking each row's two blocks first, as the model did, holds row
    # 1's first block behind row 0's second, the call's last computes (1,741). (Before a step's
    # port stretch was iterated, evaluator 25, the three read 1,372, 1,667 and 1,529: A and B
    # share bank 0, so the steps now also wait out the move-ins streaming B there.)
    wide, narrow = _one_k_step(tmp_path, 64, 128), _one_k_step(tmp_path, 128, 64)
    assert wide < 0.925 * narrow, (wide, narrow)
