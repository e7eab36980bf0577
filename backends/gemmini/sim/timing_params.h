// Timing parameters of the Gemmini timing model, in one table, each with where it comes from.
//
// The model is ours (see gemmini_ext.cc); these numbers are public facts about the default
// Gemmini configuration (DIM 16, int8 inputs, int32 accumulator, 256 KiB scratchpad, 64 KiB
// accumulator) or leads recorded in the project's FACTS.md. Where a figure is an assumption
// rather than a published number, the comment says so. Changing any value changes every
// modelled cycle count, so bump GemminiBackend.evaluator_version when editing this file
// (the extension's build hash already covers it).
#pragma once
#include <cstdint>

namespace gemmini_timing {

// Systolic array width/height. Source: Gemmini default config (gemmini_params.h, DIM 16).
constexpr int DIM = 16;

// Host core: one modelled cycle per retired instruction (Spike's instret), i.e. an ideal
// in-order single-issue core. Assumption: Rocket is single-issue; cache misses are not modelled.
constexpr uint64_t HOST_CYCLES_PER_INSN = 1;

// Extra host cycles to hand one RoCC command to the accelerator (command queue handshake).
// Assumption consistent with Rocket's RoCC interface (one command per cycle, decoupled).
constexpr uint64_t ROCC_ISSUE_CYCLES = 1;

// Reservation-station entries per queue; the host stalls when a queue is full.
// Source: Gemmini's default GemminiConfigs (reservation_station_entries_ld/ex/st = 8/16/4).
constexpr int LOAD_QUEUE_DEPTH = 8;
constexpr int EXECUTE_QUEUE_DEPTH = 16;
constexpr int STORE_QUEUE_DEPTH = 4;

// DMA: 128-bit (16-byte) bus beats. Source: Gemmini default dma_buswidth = 128 (FACTS.md).
constexpr uint64_t DMA_BEAT_BYTES = 16;
// Sustained L2/DRAM bandwidth seen by one DMA direction: about 8 bytes per cycle.
// Source: lead in FACTS.md (Berkeley's event-driven Gemmini performance model parameter table).
constexpr uint64_t DMA_BYTES_PER_CYCLE = 8;
// Round-trip memory latency for a DMA request: about 20 cycles (same source as above).
constexpr uint64_t DMA_LATENCY = 20;
// Largest single DMA request: 64 bytes (Gemmini dma_maxbytes = 64; FACTS.md).
constexpr uint64_t DMA_MAX_REQUEST_BYTES = 64;
// Per-command fixed cost in a load/store controller: decode, address translation (TLB hit),
// and request generation. Assumption (a few cycles; Gemmini's FrontendTLB hit is 1-2 cycles).
constexpr uint64_t DMA_COMMAND_OVERHEAD = 4;
// Per-request cost on top of data beats (request header / tag allocation). Assumption: 1 cycle.
constexpr uint64_t DMA_REQUEST_OVERHEAD = 1;

// Systolic array: one input row enters per cycle, so a compute over R rows streams for R
// cycles; results leave the mesh about 2*DIM+1 cycles later ("mesh fill ~33 cycles" for DIM 16,
// FACTS.md lead). A weight preload shifts one row of B per cycle (DIM cycles for a full tile).
constexpr uint64_t MESH_FILL_LATENCY = 2 * DIM + 1;
// Cycles for a preload whose B/D operand is GARBAGE_ADDR (only the output address changes).
// Assumption: one command slot.
constexpr uint64_t PRELOAD_GARBAGE_CYCLES = 1;
// Output-stationary results must be shifted out of the mesh: one row per cycle. Same source
// as the fill latency (the mesh moves one row per cycle).
constexpr uint64_t OS_DRAIN_CYCLES_PER_ROW = 1;
// Accumulator read path for mvout (scale + activation pipeline): one row per cycle plus a
// pipeline latency. Assumption: Gemmini's AccumulatorScale is pipelined, a few stages deep.
constexpr uint64_t ACC_READ_LATENCY = 4;
// Config / flush / norm commands occupy their queue for one cycle. Assumption. A config_ex
// additionally waits until earlier computes have left the mesh (MESH_FILL_LATENCY), since it
// changes the dataflow/shift/transposes the array applies (assumption, conservative).
constexpr uint64_t CONFIG_CYCLES = 1;

}  // namespace gemmini_timing
