// Timing parameters of the Gemmini timing model, in one table, each with where it comes from.
//
// The model is ours (see gemmini_ext.cc and MODEL.md); the numbers describe Gemmini's default
// configuration (GemminiConfigs.scala / Configs.scala `defaultConfig` in ucb-bar/gemmini: DIM 16,
// int8 inputs, int32 accumulator, 256 KiB scratchpad in 4 banks, 64 KiB accumulator in 2 banks)
// and the Rocket host it is attached to. "RTL:" names the Chisel file and behaviour a value is
// read from; "Fit:" marks the one value fitted to published FireSim figures (and how). Changing
// any value changes every modelled cycle count, so bump GemminiBackend.evaluator_version when
// editing this file (the extension's build hash already covers it).
#pragma once
#include <cstdint>

namespace gemmini_timing {

// Systolic array width/height. RTL: Configs.scala defaultConfig meshRows = meshColumns = 16,
// tileRows = tileColumns = 1.
constexpr int DIM = 16;

// ---- host core (Rocket, in order, single issue) -------------------------------------------
// One modelled cycle per retired instruction (Spike's instret): Rocket is a single-issue,
// in-order, 5-stage pipeline with a 1-cycle ALU. Per-class extra costs are below.
constexpr uint64_t HOST_CYCLES_PER_INSN = 1;
// A RoCC command costs one extra cycle to hand to the accelerator. RTL: Gemmini's
// Controller.scala takes commands through a decoupled queue (one per cycle), and Rocket's
// RoCC interface sends at most one command per cycle from the writeback stage.
constexpr uint64_t ROCC_ISSUE_CYCLES = 1;

// Per-class extra cycles of the Rocket host (Chipyard's default big Rocket core):
// - loads: Rocket's load-to-use latency is 2 cycles, so a load costs one bubble when the next
//   instruction consumes it (counted for every load: -O2 code rarely hides it on a 5-stage core).
constexpr uint64_t HOST_LOAD_USE_CYCLES = 1;
// - L1 data cache (the `host_dcache` configuration line; backend setting
//   autocomp.target.gemmini.host_dcache, on by default): Rocket DCacheParams defaults
//   nSets 64, nWays 4, 64-byte blocks (16 KiB), write-back, write-allocate, LRU here; Chipyard's
//   big core sets nMSHRs = 0 (WithNBigCores), a blocking cache, so a miss stalls the pipeline
//   for the refill through the shared L2 model (L2_HIT_LATENCY or DMA_LATENCY below) plus a
//   few cycles to replay the access. A DMA write to a line the L1 holds invalidates it (the
//   inclusive L2 probes the L1 copy away), so the host's next access misses.
constexpr uint64_t L1D_SETS = 64;
constexpr uint64_t L1D_WAYS = 4;
constexpr uint64_t L1D_LINE_BYTES = 64;
constexpr uint64_t L1D_MISS_OVERHEAD = 2;
// - a DMA read of a line the L1 holds: the L2 probes the L1 (see l1_probe in gemmini_ext.cc).
//   The probe leaves the L2 a few cycles after the request reaches it (its directory lookup:
//   L2_PROBE_ISSUE_CYCLES); the L1 takes L1_PROBE_CYCLES of control (s1/s2 metadata read,
//   s_probe_write_meta) plus one cycle for a clean ProbeAck or one per 16-byte beat of a dirty
//   line's ProbeAckData (rocket DCache.scala), one probe at a time; the L2 then writes the
//   data into its banks and answers (L2_PROBE_TO_DATA_CYCLES).
constexpr uint64_t L2_PROBE_ISSUE_CYCLES = 4;
constexpr uint64_t L1_PROBE_CYCLES = 3;
constexpr uint64_t L2_PROBE_TO_DATA_CYCLES = 10;
// - branches: Rocket's BHT (BHTParams nEntries = 512 two-bit counters by default) predicts; a
//   mispredicted conditional branch flushes the front end, resolved in execute: 3 cycles.
constexpr uint64_t BHT_ENTRIES = 512;
constexpr uint64_t BRANCH_MISPREDICT_CYCLES = 3;
// - multiply/divide: Chipyard's big Rocket core (WithNBigCores: MulDivParams(mulUnroll = 8,
//   mulEarlyOut = true, divEarlyOut = true)) has an iterative multiplier that consumes 8
//   multiplier bits per cycle (8 cycles for a 64-bit multiply) and stops early once the rest
//   of the multiplier operand is zero (rocket/Multiplier.scala `eOut`, never in the first
//   cycle). The unit takes the request in EX (MulDiv: s_ready -> s_mul), spends one cycle per
//   iteration in s_mul, then a cycle in s_done_mul whose response is written back through the
//   core's long-latency port (RocketCore.scala `ll_wen`), and only then is ready for the next
//   multiply or clears the scoreboard for a dependent instruction, which issues the cycle after:
//   a MUL holds the pipeline for its iterations plus MUL_RESPONSE_CYCLES (mul_iterations in
//   gemmini_ext.cc: 2 iterations for a small non-negative rs1, 8 for a negative one). Checked
//   against FireSim (lorikjashari/OpenASDx, tiled_matmul_ws's 64^3 CPU triple loop: a mulw and
//   its dependent add per MAC): 3,240,505 cycles measured, the model 3.35M with this charge and
//   2.83M without. The divider (divUnroll 1) does one quotient bit per cycle and skips the
//   dividend's leading zeros (divEarlyOut): a small quotient costs a few cycles, a full one 65
//   (div_extra_cycles in gemmini_ext.cc follows Multiplier.scala's state machine).
constexpr uint64_t MUL_UNROLL_BITS = 8;
constexpr uint64_t MUL_RESPONSE_CYCLES = 2;

// ---- reservation station (ReservationStation.scala) ----------------------------------------
// Entries per command type; the host (or the loop unroller) stalls when the type is full.
// RTL: Configs.scala defaultConfig reservation_station_entries_ld/ex/st = 8 / 16 / 4.
constexpr int LOAD_QUEUE_DEPTH = 8;
constexpr int EXECUTE_QUEUE_DEPTH = 16;
constexpr int STORE_QUEUE_DEPTH = 4;

// ---- loop unrollers (LoopMatmul.scala, LoopConv.scala) --------------------------------------
// The unrollers emit at most one command per cycle into the reservation station (their output
// is a single Decoupled port) and hold two loops at a time (concurrent_loops = 2).
constexpr uint64_t LOOP_ISSUE_CYCLES = 1;

// ---- DMA (DMA.scala StreamReader/StreamWriter, XactTracker.scala, FrontendTLB.scala) --------
// Bus beat: RTL: defaultConfig dma_buswidth = 128 bits.
constexpr uint64_t DMA_BEAT_BYTES = 16;
// Largest single TileLink request: RTL: defaultConfig dma_maxbytes = 64 (one cache line);
// requests never cross a 64-byte line.
constexpr uint64_t DMA_MAX_REQUEST_BYTES = 64;
// Requests in flight per engine (reader and writer each have their own tracker).
// RTL: defaultConfig max_in_flight_mem_reqs = 16 (Configs.scala; leanConfig, the FireSim Lean
// image, sets 64). The default of the run-time config line `dma_inflight N`.
constexpr uint64_t DMA_MAX_INFLIGHT = 16;
// The most a configuration line (`dma_inflight N`) may ask for: leanConfig's 64.
constexpr uint64_t MAX_DMA_INFLIGHT = 64;
// Move-in commands the load controller holds at once: RTL: LoadController.scala
// DMACommandTracker(nCmds = max_in_flight_mem_reqs / block_rows + 1); an entry is freed when all
// of its command's data has arrived. 2 for defaultConfig, 5 for leanConfig.
constexpr uint64_t dma_load_commands(uint64_t inflight) { return inflight / DIM + 1; }
// DRAM round trip of an LLC miss whose DRAM bank has no row open: from the LLC taking the
// request until its block is refilled, in core cycles (FASED's DDR3 model behind the LLC
// model; a block in the bank's open row comes DRAM_T_RCD sooner, one in another row of a busy
// bank later: see DRAM_* below). It cannot be less than DRAM_T_RCD + tCAS (14) = 28.
// Fit: the three fitted values of the Gemmini model are this, L2_HIT_LATENCY and
// LLC_HIT_LATENCY, fitted together against every FireSim figure at once by
// bench/gemmini_calibrate.py: the 12544x64x256 pair in ucb-bar/autocomp's prompts (two
// hand-scheduled programs) and the DOSA artifact's 67 layers run through Gemmini's library
// (ucb-bar/dosa; bench/gemmini_dosa_layers.py), both on F1/U250 images with defaultConfig's
// DMA (16 requests in flight) and FASED DDR3 + the 4 MiB LLC model. Rule: keep both programs of
// the pair, the pair's ratio and the F2 runs' ratios within 15%, then put the most DOSA layers
// within 15%, then the smallest spread, spreads within 0.5% of each other counting as a tie
// that the smaller pair error (the worse of its two programs) breaks, then the smaller spread.
// Current fit (after LoopConv's 64-channel loaders): grid DRAM 50..70 x L2 35..70 x LLC 40..50
// (bench/gemmini_calibrate.py, this model). 60 / 35 / 50 had 60 of 67 DOSA layers within 15%,
// spread x1.100. L2 45: 64 within at 60 / 45 / 50 (x1.091), 60 / 50 / 50 (x1.090) and 60 / 45 /
// 45 (x1.092), a tie on spread that the pair breaks (geometric mean of its two programs' ratios
// 1.093 at 60 / 45 / 45, 1.101 and 1.115 at the others); L2 40: 62; L2 55: 63 with the pair's
// 'before' outside 15%; L2 70: 60 with both outside; DRAM 50 / 70 at L2 45: 62 / 61; LLC 60 / 70
// / 90 at L2 45: 63 / 59 / 53 (the pair outside at 90), LLC 70 at L2 35: 59. Chosen
// 60 / 45 / 45: 64 of 67 within 15%, spread x1.092, geometric mean 0.96, the pair +11.8% /
// +6.8% (ratio -4.5%), every F2 run and ratio within 15%. A flat refit: the four layers it
// brings in (two large 3x3 layers, ResNet's 7x7 1024->2048 1x1/2, BERT's 128x768x3072) were
// within a point of the bound and moved by less than one; ResNet's strided 1x1 layers, the
// reason to look (load-bound in the model at 12.7-14.6 bytes a cycle, near the 16-byte bus),
// did not move, so what slows them on FireSim is not the L2's latency.
// That fit had every DOSA buffer on a line. With each run's buffers at the offset
// bench/gemmini_dosa_offsets.py infers (gemmini_dosa_layers.LINE_OFFSET), 60 / 45 / 45 gave 65 of
// 67 within 15%, spread x1.071, geometric mean 1.011 (bench/gemmini_fidelity.py), and DRAM 70 at
// 45 / 45 gave 60 of 67, x1.077.
// Refit with the offsets and the DMA writer's blocks (evaluator 16; the default grid of
// bench/gemmini_calibrate.py, every point with the pair, its ratio and the F2 runs within 15%):
// 60 / 45 / 45: 65 of 67, x1.066, pair ratio -4.5%; 60 / 45 / 50: 63, x1.072; 60 / 50 / 50: 61,
// x1.080; 50 / 45 / 50: 64, x1.071; 60 / 40 / 50: 66 of 67, x1.066, geometric mean 1.014, pair
// ratio -4.3%. Chosen 60 / 40 / 50 by the rule above. The L2 hit is weakly determined (35, 45 and
// now 40 have each led a grid by one or two layers), so DOSA's own mappings, never fitted, are
// the check: see MODEL.md.
// Then the DOSA matmul programs took DOSA's own host path (bench/gemmini_dosa_layers.py
// _DOSA_MATMUL; a bench change, not a model change): 60 / 40 / 50 gives 66 of 67, x1.06,
// geometric mean 1.017 (in: BERT's 128x128x64, -15.3% -> -7.5%; out: 128x768x3072, +14.7% ->
// +15.2%). It adds the same host cycles at every point, so only the runner-up could catch up:
// rerun (python bench/gemmini_calibrate.py 60,45,45 60,40,50), 60 / 45 / 45 gives 66 of 67,
// x1.064, pair mean 1.093; 60 / 40 / 50 66 of 67, x1.063, pair mean 1.086. The choice stands.
// Then the F2 programs were made to run as FireSim ran them (a bench change): cold caches and
// the Lean image's own memory, FireSim's latency pipe with no LLC (`memory_pipe`), so of the
// three only the L2 hit reaches them. 60 / 40 / 50: all four F2 runs within 15% (geometric
// mean 0.939), DOSA and the pair as before. (Cold on the LLC and DDR3 instead, conv_perf had
// read +29% at 60 / 40 / 50 and stayed outside at 40 / 40 / 50, where DOSA fell to 64 of 67.)
// Refit at evaluator 19, after the accumulator and scratchpad read paths were read from the RTL
// (python bench/gemmini_calibrate.py 60,40,50 60,35,50 60,45,50, evaluator 18's model):
// 60 / 40 / 50: 66 of 67, x1.063, pair mean 1.094; 60 / 35 / 50: 67 of 67, x1.060, pair mean
// 1.079, ratio -3.9%, the four F2 runs within 15%; 60 / 45 / 50: 64, x1.069. Chosen 60 / 35 / 50
// by the rule above (the one layer it brings in, BERT's 128x768x3072, was +15.2%).
// Rechecked at evaluator 20 (the accumulator's read port, ACC_BANKS below), python
// bench/gemmini_calibrate.py 60,35,50 60,30,50 60,30,45: 60 / 35 / 50 67 of 67, x1.061, pair
// ratio +0.3%; 60 / 30 / 50 66, x1.060; 60 / 30 / 45 66, x1.057. It stays.
// Rechecked at evaluator 24 (a move-out done once read, WRITE_PATH_ROWS_ACC below), python
// bench/gemmini_calibrate.py 60,35,50 60,30,50 60,35,45: 60 / 35 / 50 67 of 67, x1.061, pair
// mean 1.076, ratio +0.0%; 60 / 30 / 50 66, x1.060, pair mean 1.067; 60 / 35 / 45 66, x1.056,
// pair mean 1.068. It stays.
// Rechecked at evaluator 25 (an execute step's port stretch iterated, MODEL.md), python
// bench/gemmini_calibrate.py 60,35,50 60,30,50 60,30,45 60,35,45 50,35,50: 60 / 35 / 50 67 of
// 67, x1.061, pair mean 1.112, ratio -6.4%; 60 / 30 / 50 66, x1.061, pair mean 1.103; 60 / 30 / 45
// 66, x1.057, 1.096; 60 / 35 / 45 66, x1.057, 1.104; 50 / 35 / 50 66, x1.063, 1.112. It stays.
// With the DRAM banks and rows first modelled, the grid DRAM 32..70 x L2 35 x LLC 40..50 had
// chosen 60 / 35 / 50 (55 of 67 then, spread x1.131).
// Before the DRAM banks (a fixed 50-cycle round
// trip) the best was also 55 of 67, spread x1.139. Two variants of the banks' ordering were
// fitted and dropped: serving each bank's requests in booking order (a request waiting for the
// bank's latest booking however far in its future: the single "free at" time timeline.h
// exists to avoid) put 59 within; ordering by service time with a one-row-cycle window put 56
// within but let a bank serve queued requests to different rows in parallel (the bank test in
// tests/gemmini/test_sim_memory_timing.py fails). See MODEL.md for the layers still outside.
// Earlier fits: one 200-cycle miss latency before the LLC was modelled (37 of 67); 70 / 50 / 50
// before booking by time (41); 80 / 50 / 50 with each DOSA layer warmed by itself (43); 80 / 45
// / 50 with each layer's history replayed and the mesh's tags (50); 50 / 35 / 50 with the
// library's host work, the L1 probes and the WS tags' lag (55).
constexpr uint64_t DMA_LATENCY = 60;
// A request to a line whose fill is still in flight waits for the fill: InclusiveCache's
// Scheduler.scala queues a request whose set has an active MSHR in that MSHR's list, so it is
// answered no earlier than the line arrives (and holds its DMA tracker slot meanwhile).
// The L2 the DMA reads and writes through: Chipyard's default SiFive inclusive cache,
// 512 KiB, 8 ways, 64-byte lines (WithInclusiveCache defaults), shared with the host. A request
// to a line the L2 holds returns after L2_HIT_LATENCY core cycles (a few bus hops plus the
// cache's pipeline; fitted together with DMA_LATENCY, see there); a miss goes to the LLC.
// Partial-line writes (16-byte mvout rows) allocate and so miss like reads (AcquireBlock
// fetches the line). A write of one whole aligned line that misses pays only L2_HIT_LATENCY:
// the L2 acquires write permission without data (InclusiveCache MSHR.scala: PutFullData of a
// full block -> AcquirePerm) and the TLCacheCork under it grants that at once (CacheCork.scala).
// A miss evicts a random way (Directory.scala: a 16-bit LFSR picks the victim; there is no
// LRU state), so a buffer a little larger than the L2 swept twice still finds much of itself
// there, where LRU would have evicted each line just before its reuse.
// The caches start empty when the program starts; what the program touches before the
// measured call (the harness filling its inputs) is in them when it begins.
constexpr uint64_t L2_LINE_BYTES = 64;
constexpr uint64_t L2_WAYS = 8;
constexpr uint64_t L2_SETS = 512 * 1024 / L2_LINE_BYTES / L2_WAYS;
constexpr uint64_t L2_HIT_LATENCY = 35;
// Misses the L2 has outstanding at once. RTL: InclusiveCache Parameters.scala out_mshrs =
// max(2, ceil(memCycles / blockBeats)) with Chipyard's memCycles (outerLatencyCycles) 40 and
// 4 beats per 64-byte block on the 128-bit system bus: 10.
constexpr uint64_t L2_MSHRS = 10;
// The memory bus under the L2 moves 8 bytes a cycle (rocket-chip MemoryBusParams beatBytes =
// XLen/8; Gemmini's configs widen only the system bus), so a line takes 8 cycles to arrive.
constexpr uint64_t MEMORY_BUS_BYTES = 8;
constexpr uint64_t MEMORY_BUS_LINE_CYCLES = L2_LINE_BYTES / MEMORY_BUS_BYTES;
// FireSim's FASED last-level cache model (LastLevelCache.scala; the images' llc4mb setting:
// 4096 sets x 8 ways x 128-byte blocks = 4 MiB), at most 8 MSHRs (LLCParams mshrs max 8).
constexpr uint64_t LLC_BLOCK_BYTES = 128;
constexpr uint64_t LLC_WAYS = 8;
constexpr uint64_t LLC_SETS = 4096;
constexpr uint64_t LLC_MSHRS = 8;
constexpr uint64_t LLC_LINE_BEATS = L2_LINE_BYTES / MEMORY_BUS_BYTES;    // a 64-byte request
constexpr uint64_t LLC_BLOCK_BEATS = LLC_BLOCK_BYTES / MEMORY_BUS_BYTES;  // a refill or writeback
// FASED's DDR3 timing model (FireSim FASEDTargetConfigs.scala FRFCFS16GBQuadRank: 4 ranks of 8
// banks; DramCommon.scala: the DDR3 timings' runtime defaults, a DDR3-2133 14-14-14 part, and
// the default address map, bank bits from bit 13). FASED counts these in cycles of the clock
// its model runs at; the model takes them as core cycles (core and memory bus on one clock, as
// we assume the images run: an assumption, not read from their configuration).
constexpr uint64_t DRAM_RANKS = 4;
constexpr uint64_t DRAM_BANKS = 8;
constexpr uint64_t DRAM_BANK_SHIFT = 13;  // DramCommon bankAddr defaultOffset: 8 KiB rows
constexpr uint64_t DRAM_T_RCD = 14;
constexpr uint64_t DRAM_T_RP = 14;
constexpr uint64_t DRAM_T_RAS = 33;
constexpr uint64_t DRAM_T_CCD = 4;
// A 128-byte block on the 64-bit DDR data bus: 16 beats, two per clock.
constexpr uint64_t DRAM_BLOCK_BUS_CYCLES = 8;
// An LLC hit's answer, from the LLC taking the request until its first beat leaves (the L2's
// miss handling, the memory bus and FASED's pipeline; fitted with DMA_LATENCY, see there); the
// line's 8 beats follow on the memory bus.
constexpr uint64_t LLC_HIT_LATENCY = 50;
// Per-command decode and request-generation cost in the load/store controller (the command
// passes LoadController/StoreController's command queue and the DMA command tracker).
// RTL: LoadController.scala / StoreController.scala register the command, then issue.
constexpr uint64_t DMA_COMMAND_OVERHEAD = 2;
// Gemmini's FrontendTLB. RTL: defaultConfig tlb_size = 4 entries, use_shared_tlb = true,
// use_tlb_register_filter = true (FrontendTLB.scala: each client keeps the last page it
// translated in a register; a request to another page is registered, sent to the shared TLB
// the next cycle, and the client retries: one lost cycle). The harness runs bare metal in
// machine mode, where the Rocket TLB under it does not translate (rocket TLB.scala: vm is
// enabled only for S/U privilege with satp set), so it never misses and no page-table walk is
// charged; TLB_MISS_CYCLES (a walk through the PTW with the page table in the L2) would apply
// only to code run under virtual memory, which the harness does not do.
constexpr uint64_t TLB_ENTRIES = 4;
constexpr uint64_t TLB_FILTER_MISS_CYCLES = 1;
constexpr uint64_t TLB_MISS_CYCLES = 20;

// ---- execute controller and mesh (ExecuteController.scala, MeshWithDelays.scala) -----------
// A step streams total_rows rows, one per cycle. RTL: ExecuteController.scala sets total_rows
// to block_size (DIM) unless the dataflow is WS, the preload's D operand is garbage and no
// transposer is used; then it is max(A rows, B rows, 4): "two writes to the same accumulator
// address must occur at least 4 cycles apart".
constexpr uint64_t WS_MIN_STEP_ROWS = 4;
// Results leave the mesh about 2*DIM+1 cycles after the last row enters: RTL: MeshWithDelays
// skews inputs by up to DIM-1 cycles, the mesh is DIM PEs deep (tile_latency 0, one register
// per PE), then outputs are de-skewed (mesh_output_delay 1).
constexpr uint64_t MESH_FILL_LATENCY = 2 * DIM + 1;
// At most MESH_TAGS_IN_FLIGHT execute steps are inside the mesh at once: a step takes a tag
// when it enters and frees it when its last result row leaves, and a full tag queue holds the
// next step back. RTL: MeshWithDelays.scala tagqlen = max_simultaneous_matmuls + 1, where
// max_simultaneous_matmuls = ceil(5 * latency_per_pe) = 5 for defaultConfig (tile_latency 0,
// 1x1 tiles); io.req.ready needs tagq.io.enq.ready, and TagQueue.scala's enq.ready = !full, so
// a freed tag is usable the cycle after the dequeue. Short steps (4-row WS steps of small
// images, 1-row GEMMs) therefore issue one per (2 x rows + MESH_FILL_LATENCY + 1) / 6 cycles
// in WS (see MESH_TAG_LAG_WS), not one per `rows` cycles; DIM-row steps never reach the limit.
constexpr uint64_t MESH_TAGS_IN_FLIGHT = 6;
// A step's tag is freed by the results of a later step, not its own: MeshWithDelays.scala
// queues a request's tag with matmul_id_of_output = matmul_id + 2 in WS (+ 3 in OS), the id the
// request after it (two after it in OS) enters with, and dequeues it when that request's last
// result row leaves (the tag carries the preload's C address, whose results the next compute
// produces). So in WS a tag is held for its own rows, the next step's rows and the mesh's
// latency: with 6 tags, steps shorter than (MESH_FILL_LATENCY + 1) / 4 rows (7-pixel rows of a
// 7x7 image) wait for tags.
constexpr uint64_t MESH_TAG_LAG_WS = 1;
constexpr uint64_t MESH_TAG_LAG_OS = 2;
// Output-stationary results are shifted out of the mesh one row per cycle when the next
// step propagates. RTL: PE.scala `propagate` in OS mode.
constexpr uint64_t OS_DRAIN_CYCLES_PER_ROW = 1;
// Scratchpad read path for mvout, from the bank read to the data at the DMA writer. RTL: the
// ScratchpadBank's SyncReadMem answers the next cycle into a flow queue (Scratchpad.scala
// RegNext(ren)): 1; the DMA's read pipe is a Queue of spad_read_delay (4) entries with
// flow = false, which adds one cycle whatever its depth: 1. (The model had read the depth as
// the latency: 4.)
constexpr uint64_t SP_READ_LATENCY = 2;
// Accumulator read path for mvout (read, activation, scale), from the bank read to the data at
// the DMA writer (the write dispatch queue before the read is common to both paths). RTL: the
// bank's SyncReadMem answers the next cycle (AccumulatorMem.scala enqueues
// RegNext(read.req.fire) into its response queue): 1; the Normalizer, a passthru on
// defaultConfig (has_normalizations false), is a two-entry Queue (Normalizer.scala passthru): 1;
// AccumulatorScale with num_scale_units -1 is Pipeline(in, latency) (AccumulatorScale.scala)
// with defaultConfig's acc_scale_args latency 8 (Configs.scala; leanConfig copies it): 8.
constexpr uint64_t ACC_READ_LATENCY = 10;
// Block-rows a move-out's SRAM reads may run ahead of the DMA writer taking them. Scratchpad.scala
// counts a move-out's row as returned (io.dma.write.resp, what frees it in the reservation
// station) when the row's SRAM read fires, and the read fires while the path behind it has
// room. Accumulator rows: the bank's response (1), the Normalizer's two-entry queue (2), and
// AccumulatorScale's pipeline, whose rows are bounded by write_issue_q (spad_read_delay + 1 = 5
// entries, enqueued as a row enters the scale unit), then the writer's own request register (1):
// 9. Scratchpad rows: the bank's one-entry response queue (1), dma_read_pipe (spad_read_delay =
// 4), the writer's register (1): 6. (write_norm_q and write_scale_q, 6 entries each, hold only
// metadata and do not bind.)
constexpr uint64_t WRITE_PATH_ROWS_ACC = 9;
constexpr uint64_t WRITE_PATH_ROWS_SP = 6;
// Accumulator banks and their read port. RTL: Configs.scala defaultConfig acc_banks = 2 (a bank
// is acc rows / 2: the row's top bit, LocalAddr acc_bank()), acc_singleported = false (each
// AccumulatorMem bank is a TwoPortSyncMem: one read port, one write port). An accumulating write
// (the array's results to a C address with the accumulate bit, or an accumulating move-in) reads
// the old row through that read port for its read-modify-write, and AccumulatorMem.scala holds
// io.read.req.ready low while io.write.valid && io.write.bits.acc ("we aren't accumulating, which
// would take over both ports"): a move-out reading a bank loses every cycle in which the array
// accumulates into that bank; the write is never held back for it. Overwriting writes use only
// the write port. The hardware loops keep their two loops in the two halves, i.e. the two banks,
// so a loop's move-outs meet only its own last accumulating steps. The write port goes to the
// array first: Scratchpad.scala orders a bank's writes ExecuteController, then mvin_scale,
// mvin_scale_acc, zero_writer (and each scratchpad bank likewise), so a move-in's rows wait out
// the cycles in which the array writes results into their bank (MODEL.md "Write precedence").
constexpr uint32_t ACC_BANKS = 2;
// Config / flush / norm commands occupy their controller one cycle. RTL: ExecuteController /
// LoadController / StoreController handle a config in their waiting state and pop it in the
// same cycle. A config_ex additionally waits for the mesh to drain (it changes the dataflow
// or shift: RTL: ExecuteController goes to the flush state while a matmul is in progress).
constexpr uint64_t CONFIG_CYCLES = 1;

}  // namespace gemmini_timing
