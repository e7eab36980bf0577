// Autocomp's Gemmini model for Spike: a bit-exact functional model of the Gemmini RoCC
// commands plus a queue-level timing model that makes `rdcycle` return modelled cycles.
//
// Loaded with `spike --extlib=<this .so> --extension=gemmini`. Commands are RoCC custom-3
// instructions (opcode 0x7b); funct7 selects the command (see gemmini.h in ../include).
//
// Why a timing model: in plain Spike `rdcycle == rdinstret`, and a whole loop_ws GEMM is a
// handful of instructions, so instruction counts reward the wrong things. Here the host core
// costs one cycle per retired instruction, and each Gemmini command flows through a load,
// execute or store queue whose start waits for its queue, for a free reservation-station slot,
// and for the scratchpad/accumulator rows it reads or overwrites. A `fence` (or the end of a
// measured region) makes the host wait for every queue. Parameters: timing_params.h.
//
// Trust boundary: measure and snapshot commands (funct7 120-123) are honoured only when the
// instruction's PC lies inside the harness code range that the host passes in the file named
// by $AUTOCOMP_GEMMINI_CONFIG (read once, when Spike loads the extension, before any target
// code runs). The host also passes every byte of that range as it is in the ELF file; target
// memory must still hold exactly those bytes at every harness command and at exit. The
// protocol is fixed: MEASURE_BEGIN exactly once, then MEASURE_END exactly once, which also
// takes the snapshot of the outputs (so jumping to it early snapshots unfinished work); plain
// snapshots only outside the measured region. The report and the snapshots go to the host on
// an inherited file descriptor (the "channel", fd 3), never to a file: the target reaches host
// files only through fesvr's syscall proxy, whose descriptor table never holds that fd. The
// counters the clock is made of (minstret, mcycle, mcountinhibit, their cfg CSRs) are
// replaced with read-only views: a write stops the run; Spike's own counting continues through
// its original objects. Model errors (out-of-range rows, illegal configurations) stop the run
// with a message naming the command.
#include "riscv/processor.h"
#include "riscv/extension.h"
#include "riscv/mmu.h"
#include "riscv/csrs.h"
#include "riscv/disasm.h"
#include "riscv/rocc.h"
#include "riscv/simif.h"

#include <algorithm>
#include <map>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cerrno>
#include <exception>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <array>
#include <utility>

#include "timeline.h"
#include "timing_params.h"

using autocomp_gemmini::Timeline;

// The caches' replacement choice (both RTL caches use an LFSR): a xorshift step, seeded per
// run so that every evaluation of the same program replaces the same ways.
static inline uint64_t next_random(uint64_t& state) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

namespace {

using namespace gemmini_timing;

constexpr uint32_t BANKS = 4;  // Configs.scala defaultConfig sp_banks
// Scratchpad and accumulator sizes: defaultConfig's (Configs.scala: sp_capacity 256 KiB in
// sp_banks = 4 banks of 16-byte rows, acc_capacity 64 KiB of 64-byte rows) unless the
// configuration line `buffers_kib SP ACC` names another image's (the DOSA artifact's
// dummy16Config: 4096 and 4096). Set before the model runs, never after.
constexpr uint32_t DEFAULT_SP_KIB = 256, DEFAULT_ACC_KIB = 64, MAX_BUFFER_KIB = 8192;
// At most this many reads (and writes) in flight in the `memory_pipe` model (FASED BaseParams maxReads/maxWrites).
constexpr uint32_t MAX_PIPE_REQUESTS = 64;
uint32_t g_bank_rows = DEFAULT_SP_KIB * 1024 / (BANKS * DIM);
uint32_t g_sp_rows = BANKS * g_bank_rows;
uint32_t g_acc_rows = DEFAULT_ACC_KIB * 1024 / (DIM * 4);
constexpr uint32_t MAX_BLOCK_LEN = 4;      // 64-byte DMA rows / DIM int8 elements
constexpr uint32_t MAX_BLOCK_LEN_ACC = 1;  // 64-byte DMA rows / DIM int32 elements
// Channels one move-in of LoopConv's input or weight loader carries (LoopConv.scala LdInput
// max_ichs_per_mvin, LdWeights max_chs_per_mvin: max_block_len * block_size).
constexpr int64_t CONV_MAX_CHS_PER_MVIN = MAX_BLOCK_LEN * DIM;
constexpr uint32_t GARBAGE = 0xFFFFFFFFu;
constexpr int OUTPUT_STATIONARY = 0;
constexpr int WEIGHT_STATIONARY = 1;
constexpr int ACT_NONE = 0;
constexpr int ACT_RELU = 1;

enum Funct : uint32_t {
  F_CONFIG = 0, F_MVIN2 = 1, F_MVIN = 2, F_MVOUT = 3, F_COMPUTE_PRELOADED = 4,
  F_COMPUTE_ACCUMULATED = 5, F_PRELOAD = 6, F_FLUSH = 7, F_LOOP_WS = 8,
  F_LOOP_WS_BOUNDS = 9, F_LOOP_WS_ADDRS_AB = 10, F_LOOP_WS_ADDRS_DC = 11,
  F_LOOP_WS_STRIDES_AB = 12, F_LOOP_WS_STRIDES_DC = 13, F_MVIN3 = 14, F_LOOP_CONV_WS = 15,
  F_LOOP_CONV_WS_CONFIG_1 = 16, F_LOOP_CONV_WS_CONFIG_6 = 21,
  F_HARNESS_MEASURE_BEGIN = 120, F_HARNESS_MEASURE_END = 121, F_HARNESS_SNAPSHOT = 122, F_HARNESS_EXIT = 123,
  F_COUNTER = 126, F_ABORT = 31,
};

struct LocalAddr {
  bool garbage = false;
  bool acc = false;         // bit 31: accumulator
  bool accumulate = false;  // bit 30: add into the accumulator on writes
  bool full = false;        // bit 29: read full int32 rows on accumulator reads
  uint32_t norm = 0;        // bits 28..26: normalization command (accumulator reads)
  uint32_t row = 0;
};

LocalAddr decode_local(uint32_t a) {
  LocalAddr l;
  if (a == GARBAGE) { l.garbage = true; return l; }
  l.acc = (a >> 31) & 1;
  l.accumulate = (a >> 30) & 1;
  l.full = (a >> 29) & 1;
  l.norm = (a >> 26) & 7;
  l.row = a & 0x03FFFFFFu;
  return l;
}

struct LoadConfig {
  uint64_t stride = 0;          // bytes between DRAM rows
  float scale = 1.0f;           // MVIN_SCALE factor (scratchpad mvins)
  bool shrunk = false;          // accumulator mvin reads int8 instead of int32
  uint32_t block_stride = DIM;  // scratchpad rows between blocks of DIM columns
  uint32_t pixel_repeats = 1;
};

struct ExecConfig {
  int dataflow = WEIGHT_STATIONARY;
  int act = ACT_NONE;
  uint32_t shift = 0;     // rounding right shift for results written to the scratchpad
  float acc_scale = 1.0f;
  uint32_t a_stride = 1;  // scratchpad rows between rows of A
  uint32_t c_stride = 1;  // rows between written rows of C
  bool a_transpose = false;
  bool b_transpose = false;
};

struct StoreConfig {
  uint64_t stride = 0;
  int act = ACT_NONE;
  float scale = 1.0f;
  uint32_t pool_stride = 0, pool_size = 0, pool_out_dim = 0, porows = 0, pocols = 0,
           orows = 0, ocols = 0, upad = 0, lpad = 0;
};

struct Operand {  // an address plus the rows/cols carried in the upper bits of rs1/rs2
  LocalAddr addr;
  uint32_t cols = 0, rows = 0;
  uint32_t raw = 0;
};

Operand decode_operand(uint64_t v) {
  Operand o;
  o.raw = (uint32_t)v;
  o.addr = decode_local((uint32_t)v);
  o.cols = (v >> 32) & 0xFFFF;
  o.rows = (v >> 48) & 0xFFFF;
  return o;
}

float bits_to_float(uint32_t b) { float f; std::memcpy(&f, &b, 4); return f; }

// x * scale in single precision, rounded to nearest even, saturated to int8 (MVIN_SCALE and
// ACC_SCALE in Gemmini's C reference are exactly this).
int8_t scale_to_int8(int64_t x, float scale) {
  float y = (float)x * scale;
  if (std::isnan(y)) return 0;
  if (y >= 127.0f) return 127;
  if (y <= -128.0f) return -128;
  float r = std::nearbyintf(y);  // default rounding mode: round to nearest, ties to even
  if (r > 127.0f) return 127;
  if (r < -128.0f) return -128;
  return (int8_t)r;
}

// An accumulator entry read out as elem_t (the int8 rows of a move-out, plain, pooled or from
// loop_conv_ws): AccumulatorScale.scala applies the activation first (ReLU), then the scale
// (acc_scale_func: float multiply, round to nearest even, saturate), then clips to elem_t. The
// order matters only for a negative scale; gemmini.h's C reference (scale_and_sat) scales first.
int8_t acc_to_elem(int64_t x, int act, float scale) {
  if (act == ACT_RELU && x < 0) x = 0;
  return scale_to_int8(x, scale);
}

// Why an activation other than NO_ACTIVATION / RELU stops the run: LAYERNORM (2), IGELU (3) and
// SOFTMAX (4) are computed by the Normalizer and AccumulatorScale only when the build has
// has_normalizations, which defaultConfig (and leanConfig, its copy) leave false
// (GemminiConfigs.scala); AccumulatorScale.scala asserts that none of them reaches it otherwise.
#define ACTIVATION_REFUSAL                                                                         \
  "activation %u is not on this build (only NO_ACTIVATION=0 and RELU=1: LAYERNORM, IGELU and SOFTMAX " \
  "need has_normalizations, which defaultConfig does not set); apply it on the host after the move-out"

// Rounding right shift, round half to even (Gemmini's ROUNDING_RIGHT_SHIFT).
int64_t rounding_shift(int64_t x, uint32_t s) {
  if (s == 0) return x;
  if (s > 62) s = 62;
  int64_t q = x >> s;
  int64_t half = (x >> (s - 1)) & 1;
  int64_t rest = (s <= 1) ? 0 : ((x & ((int64_t(1) << (s - 1)) - 1)) != 0);
  return q + (half & (rest | (q & 1)));
}

int8_t sat8(int64_t v) { return v > 127 ? 127 : (v < -128 ? -128 : (int8_t)v); }

// out[i][j] += sum_k a[i][k] * bt[j][k], wrapping in 32 bits, for one DIMxDIM step of the mesh.
// The operands are int8 values held as int16 (the scratchpad is int8), so every product fits
// 15 bits and every 16-term sum 19: the sums are exact and the result equals the element-wise
// wrapping loop. Why it is written this way: the functional multiply ran once per compute
// command and was the largest single cost of a 512^3 evaluation; SSE2's pmaddwd (x86-64's
// baseline) does eight of these products and four pairwise sums per instruction.
void mesh_multiply(const int16_t (&a)[DIM][DIM], const int16_t (&bt)[DIM][DIM], int32_t (&out)[DIM][DIM]) {
#if defined(__SSE2__)
  if constexpr (DIM % 8 == 0 && DIM % 4 == 0) {
    for (int i = 0; i < DIM; i++)
      for (int j = 0; j < DIM; j += 4) {
        __m128i part[4];
        for (int t = 0; t < 4; t++) {
          __m128i acc4 = _mm_setzero_si128();
          for (int k = 0; k < DIM; k += 8)
            acc4 = _mm_add_epi32(acc4, _mm_madd_epi16(_mm_loadu_si128((const __m128i*)&a[i][k]),
                                                      _mm_loadu_si128((const __m128i*)&bt[j + t][k])));
          part[t] = acc4;
        }
        // Four vectors of four partial sums -> the four sums (a 4x4 transpose, then adds).
        const __m128i lo01 = _mm_unpacklo_epi32(part[0], part[1]), hi01 = _mm_unpackhi_epi32(part[0], part[1]);
        const __m128i lo23 = _mm_unpacklo_epi32(part[2], part[3]), hi23 = _mm_unpackhi_epi32(part[2], part[3]);
        const __m128i s01 = _mm_add_epi32(lo01, hi01), s23 = _mm_add_epi32(lo23, hi23);
        const __m128i sums = _mm_add_epi32(_mm_unpacklo_epi64(s01, s23), _mm_unpackhi_epi64(s01, s23));
        __m128i* o = (__m128i*)&out[i][j];
        _mm_storeu_si128(o, _mm_add_epi32(_mm_loadu_si128(o), sums));
      }
    return;
  }
#endif
  for (int i = 0; i < DIM; i++)
    for (int j = 0; j < DIM; j++) {
      int32_t sum = 0;
      for (int k = 0; k < DIM; k++) sum += (int32_t)a[i][k] * (int32_t)bt[j][k];
      out[i][j] = (int32_t)((uint32_t)out[i][j] + (uint32_t)sum);
    }
}

struct Queue {
  const char* name;
  int depth;
  uint64_t free_at = 0;    // when the unit can start its next command
  uint64_t last_done = 0;  // latest completion of any command in this queue
  uint64_t busy = 0;       // total occupancy cycles
  uint64_t count = 0;
  uint64_t ring[32] = {0};  // completion times of the last `depth` commands
  Queue(const char* n, int d) : name(n), depth(d) {}
  uint64_t slot_free() const { return count >= (uint64_t)depth ? ring[count % depth] : 0; }
  void retire(uint64_t done) {
    ring[count % depth] = done;
    count++;
    if (done > last_done) last_done = done;
  }
};

struct Region {
  uint64_t cycles, instret, busy_ld, busy_ex, busy_st, sp_rows, acc_rows;
};

struct SnapRegion { std::string name; uint64_t addr, len; };

struct ConvOperand {  // a loop_conv_ws operand left in the scratchpad for reuse
  std::vector<int64_t> dims;
  std::vector<int8_t> data;
};

class gemmini_t;
gemmini_t* g_model = nullptr;

// ---- host core model: which base instructions cost more than one cycle ------------------
// The extension re-registers Spike's own implementation of every load, store, branch and
// multiply/divide as a custom instruction through a thin wrapper that calls the original and
// charges the Rocket-like costs in timing_params.h (D-cache hit/miss, branch misprediction,
// iterative multiplier). Spike's base instruction table is a private member of processor_t; it
// is read through the standard explicit-instantiation access idiom (no header is modified).
template <typename Tag, typename Tag::type M>
struct private_access { friend typename Tag::type get(Tag) { return M; } };
struct base_insns_tag {
  typedef std::vector<insn_desc_t> processor_t::*type;
  friend type get(base_insns_tag);
};
template struct private_access<base_insns_tag, &processor_t::instructions>;
// The simulator behind the processor (for the host address of target memory, as the DMA model
// reads and writes it without going through the core's MMU, TLB and PMP checks).
struct proc_sim_tag {
  typedef simif_t* processor_t::*type;
  friend type get(proc_sim_tag);
};
template struct private_access<proc_sim_tag, &processor_t::sim>;

enum HostClass { HC_LOAD, HC_STORE, HC_BRANCH, HC_MUL, HC_DIV };
enum AddrForm { AF_NONE, AF_I, AF_S, AF_CLW, AF_CLD, AF_CLWSP, AF_CLDSP, AF_CSWSP, AF_CSDSP,
                AF_MUL, AF_MULH, AF_MULW,  // multiplies (operand rs1 passed)
                AF_DIV, AF_DIVU, AF_DIVW, AF_DIVUW };  // divides and remainders (cycles passed)
struct HostWrap { insn_func_t orig; HostClass cls; AddrForm form; };
constexpr int MAX_HOST_WRAPS = 128;
HostWrap g_wraps[MAX_HOST_WRAPS];
bool g_dcache = false;  // the L1 data-cache model is on (stores are wrapped only then)
// Cleared once the program's last measured region has ended: nothing after it can change a
// reported figure, so the rest of the run (the harness's checking calls) is simulated for its
// results only, without the timing model.
bool g_timed = true;

inline uint64_t host_addr(AddrForm f, processor_t* p, insn_t insn) {
  const auto& x = p->get_state()->XPR;
  switch (f) {
    case AF_I: return x[insn.rs1()] + insn.i_imm();
    case AF_S: return x[insn.rs1()] + insn.s_imm();
    case AF_CLW: return x[insn.rvc_rs1s()] + insn.rvc_lw_imm();
    case AF_CLD: return x[insn.rvc_rs1s()] + insn.rvc_ld_imm();
    case AF_CLWSP: return x[2] + insn.rvc_lwsp_imm();
    case AF_CLDSP: return x[2] + insn.rvc_ldsp_imm();
    case AF_CSWSP: return x[2] + insn.rvc_swsp_imm();
    case AF_CSDSP: return x[2] + insn.rvc_sdsp_imm();
    case AF_MUL: case AF_MULH: case AF_MULW: return x[insn.rs1()];  // the multiplier operand
    default: return 0;
  }
}
void host_charge(const HostWrap& w, uint64_t addr, reg_t pc, reg_t next, insn_t insn);
// Extra cycles (beyond the instruction's own) a divide or remainder holds Rocket's iterative
// divider (rocket/Multiplier.scala MulDiv; Chipyard's big core: divUnroll 1, divEarlyOut, the
// default divEarlyOutGranularity 1). A request with a negative signed operand first spends a
// cycle in s_neg_inputs. In s_div the unit does one quotient bit per cycle until its counter
// reaches 64 (32-bit operations run on sign- or zero-extended 64-bit operands); in the first
// cycle the early-out jumps the counter to eOutPos = ~(dividendMSB - divisorMSB) (6 bits) when
// that is at least 1, skipping the dividend's leading zeros; a zero divisor gets no early-out.
// So s_div takes 66 - eOutPos cycles (65 without the early-out): a small dividend over a small
// divisor costs a handful, not 64. A negative result adds s_neg_output, and the response is
// written back like a multiply's (MUL_RESPONSE_CYCLES).
inline uint64_t div_extra_cycles(AddrForm form, bool rem, uint64_t a, uint64_t b) {
  const bool w32 = form == AF_DIVW || form == AF_DIVUW, is_signed = form == AF_DIV || form == AF_DIVW;
  if (w32) {
    a = is_signed ? (uint64_t)(int64_t)(int32_t)(uint32_t)a : (uint64_t)(uint32_t)a;
    b = is_signed ? (uint64_t)(int64_t)(int32_t)(uint32_t)b : (uint64_t)(uint32_t)b;
  }
  const bool lneg = is_signed && (int64_t)a < 0, rneg = is_signed && (int64_t)b < 0;
  const uint64_t dividend = lneg ? 0 - a : a, divisor = rneg ? 0 - b : b;
  auto msb = [](uint64_t v) -> uint64_t { return v == 0 ? 0 : 63 - (uint64_t)__builtin_clzll(v); };
  uint64_t start = 1;  // the counter after the first s_div cycle
  if (divisor != 0) {
    const uint64_t pos = ~(msb(dividend) - msb(divisor)) & 63;
    if (pos >= 1) start = pos;
  }
  const uint64_t s_div = 1 + (64 - start) + 1;
  // A negative result: div when the signs differ (not for a zero divisor), rem when the
  // dividend is negative (Multiplier.scala neg_out).
  const bool neg_out = rem ? lneg : (lneg != rneg && divisor != 0);
  return (lneg || rneg ? 1 : 0) + s_div + (neg_out ? 1 : 0) - 1 + MUL_RESPONSE_CYCLES;
}
// Cycles Rocket's iterative multiplier (rocket/Multiplier.scala, MulDivParams mulUnroll 8,
// mulEarlyOut) spends in s_mul for a multiply whose multiplier operand (rs1) is `lhs`: one
// iteration per MUL_UNROLL_BITS bits; a low-half multiply stops early, from its second
// iteration on, once the multiplier bits not yet consumed are all zero (so a small
// non-negative rs1 takes 2 iterations, a negative one all of them). MULW starts half-way
// (fastMulW: count = 4) and sees the operand's low 32 bits; MULH* never stop early.
inline uint64_t mul_iterations(AddrForm form, uint64_t lhs) {
  const uint64_t steps = 64 / MUL_UNROLL_BITS;  // 8
  if (form == AF_MULH || form == AF_NONE) return steps;
  uint64_t first = 0, v = lhs;
  if (form == AF_MULW) first = steps / 2, v = (uint64_t)(int64_t)(int32_t)(uint32_t)lhs;
  for (uint64_t c = first; c < steps - 1; c++) {
    const uint64_t consumed = (c - first) * MUL_UNROLL_BITS;
    if (c != 0 && (consumed >= 64 ? 0 : v >> consumed) == 0) return c - first + 1;
  }
  return steps - first;
}
template <int N>
reg_t host_wrap(processor_t* p, insn_t insn, reg_t pc) {
  const HostWrap& w = g_wraps[N];
  if (!g_timed) return w.orig(p, insn, pc);
  uint64_t addr = (g_dcache || w.cls == HC_MUL) ? host_addr(w.form, p, insn) : 0;
  if (w.cls == HC_DIV) {  // operands read before the instruction can overwrite them
    const auto& x = p->get_state()->XPR;
    addr = div_extra_cycles(w.form, ((insn.bits() >> 12) & 7) >= 6, x[insn.rs1()], x[insn.rs2()]);
  }
  const reg_t next = w.orig(p, insn, pc);
  host_charge(w, addr, pc, next, insn);
  return next;
}
template <int... N>
constexpr std::array<insn_func_t, sizeof...(N)> host_wrap_table(std::integer_sequence<int, N...>) {
  return {&host_wrap<N>...};
}
const std::array<insn_func_t, MAX_HOST_WRAPS> g_wrap_funcs = host_wrap_table(std::make_integer_sequence<int, MAX_HOST_WRAPS>{});

// Classify a base instruction by its match bits (RV64GC encodings).
bool classify(const insn_desc_t& d, HostClass& cls, AddrForm& form) {
  const uint32_t m = (uint32_t)d.match;
  if ((m & 3) == 3) {
    const uint32_t op = m & 0x7f, f3 = (m >> 12) & 7, f7 = m >> 25;
    switch (op) {
      case 0x03: case 0x07: cls = HC_LOAD; form = AF_I; return true;
      case 0x23: case 0x27: cls = HC_STORE; form = AF_S; return true;
      case 0x63: cls = HC_BRANCH; form = AF_NONE; return true;
      case 0x33: case 0x3b:
        if (f7 == 1 && ((d.mask >> 25) & 0x7f) == 0x7f) {
          cls = f3 < 4 ? HC_MUL : HC_DIV;
          if (f3 >= 4) form = op == 0x3b ? ((f3 & 1) ? AF_DIVUW : AF_DIVW) : ((f3 & 1) ? AF_DIVU : AF_DIV);
          else form = op == 0x3b ? AF_MULW : (f3 == 0 ? AF_MUL : AF_MULH);
          return true;
        }
        return false;
      default: return false;
    }
  }
  if ((d.mask & 0xe003) != 0xe003) return false;
  const uint32_t q = m & 3, f3 = (m >> 13) & 7;
  if (q == 0) {
    if (f3 == 2) { cls = HC_LOAD; form = AF_CLW; return true; }
    if (f3 == 1 || f3 == 3) { cls = HC_LOAD; form = AF_CLD; return true; }
    if (f3 == 6) { cls = HC_STORE; form = AF_CLW; return true; }
    if (f3 == 5 || f3 == 7) { cls = HC_STORE; form = AF_CLD; return true; }
  } else if (q == 1) {
    if (f3 == 6 || f3 == 7) { cls = HC_BRANCH; form = AF_NONE; return true; }
  } else if (q == 2) {
    if (f3 == 2) { cls = HC_LOAD; form = AF_CLWSP; return true; }
    if (f3 == 1 || f3 == 3) { cls = HC_LOAD; form = AF_CLDSP; return true; }
    if (f3 == 6) { cls = HC_STORE; form = AF_CSWSP; return true; }
    if (f3 == 5 || f3 == 7) { cls = HC_STORE; form = AF_CSDSP; return true; }
  }
  return false;
}

class cycle_csr_t : public csr_t {
 public:
  cycle_csr_t(processor_t* p, reg_t addr, gemmini_t* m) : csr_t(p, addr), model(m) {}
  reg_t read() const noexcept override;
 protected:
  bool unlogged_write(const reg_t) noexcept override;
 private:
  gemmini_t* model;
};

// A read-only view of one of Spike's counter CSRs (minstret, mcountinhibit, ...): reads show
// the original object's value, a write stops the run. Spike itself keeps bumping and reading
// the original objects (state.minstret, state.mcountinhibit), which only this view could
// reach through the CSR map.
class guard_csr_t : public csr_t {
 public:
  guard_csr_t(processor_t* p, reg_t addr, csr_t_p orig, gemmini_t* m, const char* n)
      : csr_t(p, addr), original(std::move(orig)), model(m), name(n) {}
  reg_t read() const noexcept override { return original ? original->read() : 0; }
 protected:
  bool unlogged_write(const reg_t) noexcept override;
 private:
  csr_t_p original;
  gemmini_t* model;
  const char* name;
};

class gemmini_t : public extension_t {
 public:
  gemmini_t()
      : ldq("load", LOAD_QUEUE_DEPTH), exq("execute", EXECUTE_QUEUE_DEPTH),
        stq("store", STORE_QUEUE_DEPTH) {
    g_model = this;
    read_config();
    sp.assign((size_t)g_sp_rows * DIM, 0);
    acc.assign((size_t)g_acc_rows * DIM, 0);
    sp_w.assign(g_sp_rows, 0);
    sp_r.assign(g_sp_rows, 0);
    acc_w.assign(g_acc_rows, 0);
    acc_r.assign(g_acc_rows, 0);
    sp_touched.assign(g_sp_rows, 0);
    acc_touched.assign(g_acc_rows, 0);
  }

  const char* name() const override { return "gemmini"; }

  std::vector<insn_desc_t> get_instructions(const processor_t& cp) override {
    // Called when Spike registers the extension, after the processor has built its CSR map
    // and before any target instruction runs: the only hook this Spike build calls for sure
    // (it never calls reset(processor_t&) after registration), so the counters are guarded
    // here. reset() re-installs them if a build does rebuild the map later.
    processor_t& p = const_cast<processor_t&>(cp);
    proc = &p;
    install_csrs(p);
    std::vector<insn_desc_t> v;
    v.push_back(insn_desc_t{0x7b, 0x7f, &custom3, &custom3, &custom3, &custom3,
                            &custom3, &custom3, &custom3, &custom3});
    // FENCE (funct3 000): Rocket waits for the accelerator to go idle on a fence.
    v.push_back(insn_desc_t{0x0f, 0x707f, &fence, &fence, &fence, &fence,
                            &fence, &fence, &fence, &fence});
    // csrrs rd, cycle/mcycle, x0 (rdcycle): modelled cycles instead of Spike's instret copy.
    v.push_back(insn_desc_t{0xC0002073, 0xFFFFF07F, &rdcycle, &rdcycle, &rdcycle, &rdcycle,
                            &rdcycle, &rdcycle, &rdcycle, &rdcycle});
    v.push_back(insn_desc_t{0xB0002073, 0xFFFFF07F, &rdcycle, &rdcycle, &rdcycle, &rdcycle,
                            &rdcycle, &rdcycle, &rdcycle, &rdcycle});
    // Host core model: loads, stores, branches, multiplies and divides through wrappers.
    int n = 0;
    for (const insn_desc_t& d : p.*get(base_insns_tag())) {
      HostClass cls;
      AddrForm form;
      if (n >= MAX_HOST_WRAPS || !classify(d, cls, form) || !d.fast_rv64i) continue;
      if (cls == HC_STORE && !host_dcache) continue;  // a store costs nothing extra without it
      g_wraps[n] = HostWrap{d.fast_rv64i, cls, form};
      insn_func_t f = g_wrap_funcs[n];
      v.push_back(insn_desc_t{d.match, d.mask, f, f, f, f, f, f, f, f});
      n++;
    }
    host_wrapped = n;
    return v;
  }

  std::vector<disasm_insn_t*> get_disasms(const processor_t*) override { return {}; }

  std::vector<csr_t_p> get_csrs(processor_t& p) const override {
    gemmini_t* self = const_cast<gemmini_t*>(this);
    std::vector<csr_t_p> v = {std::make_shared<cycle_csr_t>(&p, CSR_CYCLE, self),
                              std::make_shared<cycle_csr_t>(&p, CSR_MCYCLE, self)};
    // Counters the modelled clock is made of, and what stops them counting.
    static const std::pair<reg_t, const char*> guarded[] = {
        {CSR_MINSTRET, "minstret"}, {CSR_MCOUNTINHIBIT, "mcountinhibit"},
        {CSR_MINSTRETCFG, "minstretcfg"}, {CSR_MCYCLECFG, "mcyclecfg"}};
    auto& map = p.get_state()->csrmap;
    for (auto& g : guarded) {
      auto it = map.find(g.first);
      if (it == map.end()) continue;
      if (dynamic_cast<guard_csr_t*>(it->second.get())) continue;
      v.push_back(std::make_shared<guard_csr_t>(&p, g.first, it->second, self, g.second));
    }
    return v;
  }
  [[noreturn]] void counter_written(const char* name) {
    cur = "clock";
    fail("the program wrote the %s CSR; the counters behind the modelled clock are read-only", name);
  }

  // Spike calls reset() after rebuilding the CSR map, so the cycle CSRs are replaced here
  // (this Spike build never asks extensions for get_csrs()).
  void reset(processor_t& p) override {
    proc = &p;
    install_csrs(p);
  }
  void install_csrs(processor_t& p) {
    for (auto& c : get_csrs(p)) p.get_state()->add_csr(c->address, c);
    csrs_installed = true;
  }
  bool csrs_installed = false;

  int host_wrapped = 0;
  int host_dcache = 0;  // 1: model the host's L1 data cache (config line `host_dcache 1`)
  // L1 data cache (Rocket DCache: 64 sets x 4 ways x 64-byte lines = 16 KiB), LRU.
  uint64_t l1_tag[L1D_SETS * L1D_WAYS] = {0}, l1_use[L1D_SETS * L1D_WAYS] = {0}, l1_tick = 0;
  uint8_t l1_dirty[L1D_SETS * L1D_WAYS] = {0};  // written since it came in (or since a probe took the data)
  uint64_t l1_last = 0;  // line of the last access (0: none)
  int l1_last_k = 0;     // its slot in l1_tag
  // A DMA request to a line the host's L1 holds (TileLink coherence through Chipyard's
  // inclusive L2). The L2 keeps the L1's copy with write permission (a single core is granted
  // Tip), so before it answers a read it probes the L1 down to a shared copy (InclusiveCache
  // MSHR.scala: a Get from another client to a block a client holds in Tip sends a Probe toB),
  // and before it takes a write it probes the copy away (the host's next access then misses).
  // The L1 handles one probe at a time (rocket
  // DCache.scala release_state): the metadata read (s1, s2), then a ProbeAck (clean:
  // s_probe_rep_clean, one message) or a ProbeAckData with the line's beats (dirty:
  // s_probe_rep_dirty), then s_probe_write_meta. Returns when the L1's answer is back at the L2
  // (t when the L1 does not hold the line); after a read's probe the line stays, clean, in the
  // L1; a DMA write's probe (toN) takes it away.
  Timeline l1_probes;
  uint64_t host_probes = 0;
  uint64_t l1_probe(uint64_t addr, uint64_t t, bool to_n) {
    if (!host_dcache) return t;
    const uint64_t line = addr / L1D_LINE_BYTES + 1, set = line % L1D_SETS;
    for (int i = 0; i < (int)L1D_WAYS; i++) {
      const int k = (int)(set * L1D_WAYS + i);
      if (l1_tag[k] != line) continue;
      const uint64_t cycles = L1_PROBE_CYCLES + (l1_dirty[k] ? L1D_LINE_BYTES / DMA_BEAT_BYTES : 1);
      l1_dirty[k] = 0;
      if (to_n) {
        l1_tag[k] = 0, l1_use[k] = 0;
        if (l1_last == line) l1_last = 0;
      }
      host_probes++;
      return l1_probes.reserve(t + L2_PROBE_ISSUE_CYCLES, cycles) + cycles;
    }
    return t;
  }
  uint8_t bht[BHT_ENTRIES] = {0};
  uint64_t host_l1_misses = 0, host_mispredicts = 0;
  void host_cost(const HostWrap& w, uint64_t addr, reg_t pc, reg_t next, insn_t insn) {
    switch (w.cls) {
      case HC_LOAD: case HC_STORE: {
        if (w.cls == HC_LOAD) stall += HOST_LOAD_USE_CYCLES;
        if (!host_dcache) return;
        uint64_t line = addr / L1D_LINE_BYTES + 1;
        // The line touched last is the most recently used of its set: a hit that leaves the
        // LRU order as it is (exact, and most accesses of a streaming loop take this path).
        if (line == l1_last) {
          if (w.cls == HC_STORE) l1_dirty[l1_last_k] = 1;
          return;
        }
        l1_last = line;
        uint64_t set = line % L1D_SETS;
        uint64_t* tag = &l1_tag[set * L1D_WAYS];
        uint64_t* use = &l1_use[set * L1D_WAYS];
        int victim = 0;
        for (int i = 0; i < (int)L1D_WAYS; i++) {
          if (tag[i] == line) {
            use[i] = ++l1_tick;
            l1_last_k = (int)(set * L1D_WAYS + i);
            if (w.cls == HC_STORE) l1_dirty[l1_last_k] = 1;
            return;
          }
          if (use[i] < use[victim]) victim = i;
        }
        tag[victim] = line;
        use[victim] = ++l1_tick;
        l1_last_k = (int)(set * L1D_WAYS + victim);
        l1_dirty[l1_last_k] = w.cls == HC_STORE;
        host_l1_misses++;
        const uint64_t t = now();
        stall += L1D_MISS_OVERHEAD + (l2_response(addr, t, false, w.cls == HC_STORE) - t);  // blocking refill through the L2
        return;
      }
      case HC_BRANCH: {
        const uint64_t len = (insn.bits() & 3) == 3 ? 4 : 2;
        const bool taken = next != pc + len;
        uint8_t& c = bht[(pc >> 1) % BHT_ENTRIES];
        const bool predicted = c >= 2;
        if (predicted != taken) { stall += BRANCH_MISPREDICT_CYCLES; host_mispredicts++; }
        if (taken && c < 3) c++;
        if (!taken && c > 0) c--;
        return;
      }
      case HC_MUL: stall += mul_iterations(w.form, addr) - 1 + MUL_RESPONSE_CYCLES; return;
      case HC_DIV: stall += addr; return;  // div_extra_cycles(), computed before it ran
    }
  }

  // ---- time ------------------------------------------------------------------------
  uint64_t instret() const { return proc ? proc->get_state()->minstret->read() : 0; }
  // After the last measured region (g_timed false) the clock counts instructions only: stalls
  // still computed on the way are not charged.
  uint64_t now() const { return instret() * HOST_CYCLES_PER_INSN + (g_timed ? stall : untimed_stall); }
  uint64_t untimed_stall = 0;  // `stall` when timing stopped
  void wait_until(uint64_t t) {
    uint64_t n = now();
    if (t > n) stall += t - n;
  }
  uint64_t writes_acked = 0;  // when the last DMA write is acknowledged (fence waits for it)
  uint64_t drain_time() const {
    uint64_t t = ldq.last_done;
    if (writes_acked > t) t = writes_acked;
    if (exq.last_done > t) t = exq.last_done;
    if (stq.last_done > t) t = stq.last_done;
    return t;
  }

 private:
  processor_t* proc = nullptr;
  std::vector<int8_t> sp;
  std::vector<int32_t> acc;
  std::vector<uint64_t> sp_w, sp_r, acc_w, acc_r;  // row write-ready / read-done times
  std::vector<uint8_t> sp_touched, acc_touched;
  Queue ldq, exq, stq;
  uint64_t stall = 0;

  LoadConfig ld[3];
  ExecConfig ex;
  StoreConfig st;

  // Mesh state between preload and compute.
  Operand pre_bd, pre_c;
  bool have_preload = false;
  int8_t weights[DIM][DIM] = {};  // WS: B[k][j]
  int32_t os_acc[DIM][DIM] = {};  // OS: accumulators held in the PEs

  // loop_ws configuration
  struct {
    uint32_t max_i = 0, max_j = 0, max_k = 0, pad_i = 0, pad_j = 0, pad_k = 0;
    uint64_t a = 0, b = 0, d = 0, c = 0, a_stride = 0, b_stride = 0, d_stride = 0, c_stride = 0;
  } lw;
  uint64_t loop_count = 0;
  uint32_t loop_acc_base = 0;
  uint64_t loop_issue_end[2] = {0, 0};
  // LoopMatmul's loaders, execute unroller and store unroller: when each can take the next loop.
  uint64_t lw_ld_free = 0, lw_ex_free = 0, lw_st_free = 0;
  uint64_t last_loop_issue_end = 0;

  // loop_conv_ws configuration (raw rs1/rs2 pairs of configs 1..6)
  uint64_t conv_cfg[6][2] = {};
  uint32_t conv_c_row = 0, conv_d_row = 0;
  ConvOperand conv_w_cache[4], conv_in_cache[4];

  // Where the current command comes from (internal loop commands have no host cost).
  bool internal = false;
  uint64_t internal_issue = 0;
  const char* cur = "gemmini";

  // Harness / report
  std::vector<std::pair<uint64_t, uint64_t>> harness_ranges;
  std::vector<std::vector<uint8_t>> harness_bytes;  // expected content of each range
  std::vector<SnapRegion> snap_regions;
  int channel = -1;  // fd the host reads the report and snapshots from
  uint64_t mem_lo = 0x80000000ull, mem_hi = 0x100000000ull;
  bool measuring = false;
  int phase = 0;  // 0 before MEASURE_BEGIN, 1 measuring, 2 after MEASURE_END
  uint64_t measure_limit = 1;  // measured regions a program may have (the harness: exactly one)
  uint64_t region_insn_limit = 0;  // instructions the measured region may retire (0: no limit)
  uint64_t dma_inflight = DMA_MAX_INFLIGHT;  // config line `dma_inflight N` (see timing_params.h)
  // Config line `image lean`: FireSimLeanGemminiRocketConfig's array (Configs.scala leanConfig:
  // dataflow WS, acc_read_full_width, ex_read_from_acc and ex_write_to_spad false,
  // hardcode_d_to_garbage_addr). Commands that build does not carry out as written are refused
  // with the reason, where the hardware would silently compute something else.
  bool lean = false;
  bool lean_os_requested = false;  // the last config_ex asked a Lean build for OUTPUT_STATIONARY
  // Array operands read from the accumulator. leanConfig lacks them (ex_read_from_acc=false).
  // defaultConfig has the request side (ExecuteController.scala sends acc.read_req with
  // fromDMA=false), but Scratchpad.scala hands an accumulator bank's read responses to the
  // AccumulatorScale unit only while a move-out's entry waits in write_norm_q for that bank, and
  // AccumulatorScale's output is the only path back to the ExecuteController: with no move-out
  // pending the response is never taken (the array stalls for good), and with one pending it is
  // paired with the move-out's entry, so both get the wrong rows. No kernel can rely on it, so the
  // model refuses it on both builds and says why.
  [[noreturn]] void refuse_acc_operand(const char* which, uint32_t raw) {
    if (lean)
      fail("%s is accumulator address 0x%x, but the Lean image cannot feed the array from the accumulator "
           "(Configs.scala leanConfig ex_read_from_acc=false); move the data out and into the scratchpad", which, raw);
    fail("%s is accumulator address 0x%x: feeding the array from the accumulator does not work on this build "
         "(defaultConfig ex_read_from_acc: Scratchpad.scala passes an accumulator read back only alongside a "
         "pending move-out, so the array would stall or read a move-out's rows); move the data out and into "
         "the scratchpad", which, raw);
  }
  void refuse_lean_os() {
    if (lean_os_requested)
      fail("config_ex selected OUTPUT_STATIONARY, but the Lean image is built weight-stationary only "
           "(Configs.scala leanConfig dataflow=WS: the hardware ignores the choice and computes WS); use "
           "WEIGHT_STATIONARY");
  }
  uint64_t m_t0 = 0, m_i0 = 0, m_ld0 = 0, m_ex0 = 0, m_st0 = 0;
  std::vector<Region> regions;
  uint64_t snapshots = 0, snapshot_bytes = 0;
  std::string error;
  bool exited = false;
  int64_t exit_code = 0;

  // ---- configuration file and report -------------------------------------------------
  // The configuration is the variable's value itself when it holds several lines (what the
  // host passes), or else the name of a file holding it (for running Spike by hand).
  void read_config() {
    const char* path = std::getenv("AUTOCOMP_GEMMINI_CONFIG");
    if (!path || !*path) return;
    std::stringstream in;
    if (std::strchr(path, '\n')) {
      in << path;
    } else {
      std::ifstream file(path);
      if (!file) {
        std::fprintf(stderr, "gemmini: cannot read AUTOCOMP_GEMMINI_CONFIG file %s\n", path);
        std::_Exit(4);
      }
      in << file.rdbuf();
    }
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream ls(line);
      std::string key;
      ls >> key;
      if (key == "channel") ls >> channel;
      else if (key == "harness") {
        uint64_t lo, hi;
        std::string hex;
        ls >> std::hex >> lo >> hi >> hex;
        if (hi < lo || hex.size() != 2 * (hi - lo)) {
          std::fprintf(stderr, "gemmini: harness line in %s: %llu bytes of content for range 0x%llx..0x%llx\n",
                       path, (unsigned long long)hex.size() / 2, (unsigned long long)lo, (unsigned long long)hi);
          std::_Exit(4);
        }
        std::vector<uint8_t> bytes(hi - lo);
        for (size_t i = 0; i < bytes.size(); i++) bytes[i] = (uint8_t)std::stoul(hex.substr(2 * i, 2), nullptr, 16);
        harness_ranges.push_back({lo, hi});
        harness_bytes.push_back(std::move(bytes));
      } else if (key == "region") {
        SnapRegion r;
        ls >> r.name >> std::hex >> r.addr >> r.len;
        snap_regions.push_back(r);
      } else if (key == "mem") {
        ls >> std::hex >> mem_lo >> mem_hi;
      } else if (key == "measure_limit") {
        ls >> measure_limit;
      } else if (key == "region_insn_limit") {
        ls >> region_insn_limit;
      } else if (key == "host_dcache") {
        ls >> host_dcache;
        g_dcache = host_dcache != 0;
      } else if (key == "stats") {
        int level = 0;
        ls >> level;
        print_stats = level >= 1;
        print_timeline = level >= 2;
      } else if (key == "dma_inflight") {
        // Requests each DMA engine may hold in flight: max_in_flight_mem_reqs of the modelled
        // configuration (Configs.scala: defaultConfig 16, leanConfig 64).
        uint64_t n = 0;
        ls >> n;
        if (n < 1 || n > MAX_DMA_INFLIGHT) {
          std::fprintf(stderr, "gemmini: dma_inflight %llu is outside 1..%llu\n", (unsigned long long)n,
                       (unsigned long long)MAX_DMA_INFLIGHT);
          std::_Exit(4);
        }
        dma_inflight = n;
      } else if (key == "image") {
        std::string name;
        ls >> name;
        if (name != "default" && name != "lean") {
          std::fprintf(stderr, "gemmini: image %s: expected default or lean\n", name.c_str());
          std::_Exit(4);
        }
        lean = name == "lean";
      } else if (key == "buffers_kib") {
        // Another image's scratchpad and accumulator (KiB): the hardware loops split what the
        // hardware has, so the DOSA image's 4 MiB buffers place tiles in other banks.
        uint64_t sp_kib = 0, acc_kib = 0;
        ls >> sp_kib >> acc_kib;
        if (sp_kib < DEFAULT_SP_KIB || sp_kib > MAX_BUFFER_KIB || sp_kib % DEFAULT_SP_KIB != 0 ||
            acc_kib < DEFAULT_ACC_KIB || acc_kib > MAX_BUFFER_KIB || acc_kib % DEFAULT_ACC_KIB != 0) {
          std::fprintf(stderr, "gemmini: buffers_kib %llu %llu: the scratchpad must be a multiple of %u KiB and the "
                       "accumulator of %u KiB, each at most %u KiB\n", (unsigned long long)sp_kib,
                       (unsigned long long)acc_kib, DEFAULT_SP_KIB, DEFAULT_ACC_KIB, MAX_BUFFER_KIB);
          std::_Exit(4);
        }
        g_bank_rows = (uint32_t)(sp_kib * 1024 / (BANKS * DIM));
        g_sp_rows = BANKS * g_bank_rows;
        g_acc_rows = (uint32_t)(acc_kib * 1024 / (DIM * 4));
      } else if (key == "memory_latency") {
        // Calibration runs only (bench/gemmini_calibrate.py): the DRAM round trip, the L2 hit
        // round trip and (optionally) the LLC hit answer, in place of DMA_LATENCY,
        // L2_HIT_LATENCY and LLC_HIT_LATENCY.
        uint64_t dram = 0, l2 = 0, llc = LLC_HIT_LATENCY;
        ls >> dram >> l2;
        if (!(ls >> llc)) llc = LLC_HIT_LATENCY;
        if (dram < 1 || dram > 100000 || l2 < 1 || l2 > 100000 || llc < 1 || llc > 100000) {
          std::fprintf(stderr, "gemmini: memory_latency %llu %llu %llu: each must be 1..100000 cycles\n",
                       (unsigned long long)dram, (unsigned long long)l2, (unsigned long long)llc);
          std::_Exit(4);
        }
        dram_latency = dram;
        l2_hit_latency = l2;
        llc_hit_latency = llc;
      } else if (key == "memory_pipe") {
        // An image built with FireSim's default memory model (setting image = "lean", images.py)
        // (firesim.configs.WithDefaultMemModel: FASED's latency-bandwidth pipe, no LLC model,
        // BaseParams maxReads 16 and maxWrites 16; the latency is a runtime setting) in place
        // of the DOSA images' 4 MiB LLC and DDR3 (bench/gemmini_firesim_f2.py).
        uint64_t latency = 0, reads = 0, writes = 0;
        ls >> latency >> reads >> writes;
        if (latency < 1 || latency > 100000 || reads < 1 || reads > MAX_PIPE_REQUESTS || writes < 1 ||
            writes > MAX_PIPE_REQUESTS) {
          std::fprintf(stderr, "gemmini: memory_pipe %llu %llu %llu: the latency must be 1..100000 cycles and the "
                       "reads and writes in flight 1..%u\n", (unsigned long long)latency,
                       (unsigned long long)reads, (unsigned long long)writes, MAX_PIPE_REQUESTS);
          std::_Exit(4);
        }
        pipe_latency = latency;
        pipe_reads = reads;
        pipe_writes = writes;
      }
    }
  }

  // One frame on the channel: a tag byte ('R' report JSON, 'S' snapshot), the payload length
  // (8 bytes, little-endian), the payload. The host keeps the last report.
  void send(char tag, const void* data, uint64_t len) {
    if (channel < 0) return;
    uint8_t head[9];
    head[0] = (uint8_t)tag;
    for (int i = 0; i < 8; i++) head[1 + i] = (uint8_t)(len >> (8 * i));
    write_all(head, sizeof head);
    write_all(data, len);
  }
  void write_all(const void* data, uint64_t len) {
    const char* p = (const char*)data;
    while (len) {
      ssize_t n = ::write(channel, p, len);
      if (n < 0) {
        if (errno == EINTR) continue;
        std::fprintf(stderr, "gemmini: cannot write to the report channel (fd %d)\n", channel);
        std::_Exit(5);
      }
      p += n;
      len -= (uint64_t)n;
    }
  }

  bool print_stats = false;  // config line `stats 1`: memory-system counts and call traces on stderr (calibration)
  // `stats 2` adds the measured region's timeline: a line per command (when it entered its
  // queue, started, how long it held the unit, when it completed) and per loop_ws, in cycles
  // from the region's start, for finding where a layer's modelled time goes. Capped at
  // TIMELINE_LINES lines (Spike's captured stderr is bounded).
  bool print_timeline = false;
  static constexpr uint64_t TIMELINE_LINES = 8000;
  uint64_t timeline_lines = 0;
  uint64_t cmd_entered = 0;       // when the command being timed entered its queue
  char cmd_detail[64] = {0};      // its DMA shape (rows, columns, DRAM address), for the timeline
  bool timeline_line() {
    if (!print_timeline || !measuring) return false;
    if (timeline_lines == TIMELINE_LINES) std::fprintf(stderr, "TRACE timeline truncated after %llu lines\n",
                                                       (unsigned long long)TIMELINE_LINES);
    return timeline_lines++ < TIMELINE_LINES;
  }
  // Cumulative counts from the start of the run; printed at measure_begin as well, so a
  // calibration run can tell the measured call's share from the warm-up's.
  void print_memory_stats(const char* when) {
    if (print_stats)
      std::fprintf(stderr, "gemmini stats (%s): l2 hits %llu misses %llu writebacks %llu, llc hits %llu misses %llu, "
                   "dma read requests %llu write requests %llu, hardware loops %llu, mesh tag wait cycles %llu, "
                   "host L1 probes %llu, dram row hits %llu opens %llu conflicts %llu, "
                   "move-out read-port stall cycles %llu, move-in write-port stall cycles %llu\n", when,
                   (unsigned long long)l2_hits, (unsigned long long)l2_misses, (unsigned long long)l2_writebacks,
                   (unsigned long long)llc_hits, (unsigned long long)llc_misses,
                   (unsigned long long)dma_read_reqs, (unsigned long long)dma_write_reqs,
                   (unsigned long long)loop_count, (unsigned long long)mesh_tag_wait_cycles,
                   (unsigned long long)host_probes, (unsigned long long)dram_row_hits,
                   (unsigned long long)dram_row_opens, (unsigned long long)dram_row_conflicts,
                   (unsigned long long)moveout_port_stall_cycles, (unsigned long long)write_port_stall_cycles);
  }
  void write_report() {
    print_memory_stats("report");
    std::string esc;
    for (char c : error) {
      if (c == '"' || c == '\\') { esc += '\\'; esc += c; }
      else if ((unsigned char)c < 0x20) esc += ' ';
      else esc += c;
    }
    char buf[512];
    std::string out;
    std::snprintf(buf, sizeof buf, "{\"error\": \"");
    out += buf;
    out += esc;
    std::snprintf(buf, sizeof buf, "\", \"measuring\": %s, \"exited\": %s, \"exit_code\": %lld, \"snapshots\": %llu, \"regions\": [",
                  measuring ? "true" : "false", exited ? "true" : "false",
                  (long long)exit_code, (unsigned long long)snapshots);
    out += buf;
    for (size_t i = 0; i < regions.size(); i++) {
      const Region& r = regions[i];
      std::snprintf(buf, sizeof buf,
                    "%s{\"cycles\": %llu, \"instret\": %llu, \"busy\": {\"load\": %llu, "
                    "\"execute\": %llu, \"store\": %llu}, \"sp_rows\": %llu, \"acc_rows\": %llu}",
                    i ? ", " : "", (unsigned long long)r.cycles, (unsigned long long)r.instret,
                    (unsigned long long)r.busy_ld, (unsigned long long)r.busy_ex,
                    (unsigned long long)r.busy_st, (unsigned long long)r.sp_rows,
                    (unsigned long long)r.acc_rows);
      out += buf;
    }
    out += "]}\n";
    send('R', out.data(), out.size());
  }

  [[noreturn]] void fail(const char* fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    error = std::string(cur) + ": " + buf;
    std::fprintf(stderr, "gemmini model error: %s\n", error.c_str());
    std::fflush(stderr);
    std::fflush(stdout);
    write_report();
    std::_Exit(3);
  }

  // ---- memory ------------------------------------------------------------------------
  void check_dram(uint64_t addr, uint64_t len) {
    if (len == 0) return;
    if (addr < mem_lo || addr + len > mem_hi || addr + len < addr)
      fail("DRAM range 0x%llx..0x%llx is outside target memory (0x%llx..0x%llx)",
           (unsigned long long)addr, (unsigned long long)(addr + len),
           (unsigned long long)mem_lo, (unsigned long long)mem_hi);
  }
  // A row stride so large that row r's address wraps around 2^64 must not alias valid memory.
  void check_stride(uint64_t stride, uint32_t rows) {
    if (rows > 1 && stride > mem_hi - mem_lo)
      fail("DRAM row stride %llu bytes is larger than target memory", (unsigned long long)stride);
  }
  // Accelerator accesses to target memory (physical addresses, bare metal): straight to the
  // simulator's backing pages, one host pointer per 4 KiB page cached here. Addresses outside
  // target memory (callers check them first) take the core's MMU path instead.
  std::vector<char*> page_host;
  char* host_ptr(uint64_t a) {
    if (a < mem_lo || a >= mem_hi) return nullptr;
    const uint64_t first = mem_lo >> 12, pg = (a >> 12) - first;
    if (page_host.empty()) page_host.assign((((mem_hi - 1) >> 12) - first) + 1, nullptr);
    char*& h = page_host[pg];
    if (!h) h = (proc->*get(proc_sim_tag()))->addr_to_mem((first + pg) << 12);
    return h ? h + (a & 0xfff) : nullptr;
  }
  // n bytes of target memory from `a` (a row of a move-in), page by page.
  void ld_bytes(uint64_t a, uint8_t* out, uint64_t n) {
    while (n) {
      uint64_t chunk = 4096 - (a & 0xfff);
      if (chunk > n) chunk = n;
      if (char* h = host_ptr(a)) std::memcpy(out, h, chunk);
      else for (uint64_t i = 0; i < chunk; i++) out[i] = proc->get_mmu()->load<uint8_t>(a + i);
      a += chunk, out += chunk, n -= chunk;
    }
  }
  int8_t ld8(uint64_t a) {
    if (char* h = host_ptr(a)) return (int8_t)*h;
    return (int8_t)proc->get_mmu()->load<uint8_t>(a);
  }
  int32_t ld32(uint64_t a) {
    if ((a & 3) == 0) {
      if (char* h = host_ptr(a)) { int32_t v; std::memcpy(&v, h, 4); return v; }
      return (int32_t)proc->get_mmu()->load<uint32_t>(a);
    }
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)(uint8_t)ld8(a + i) << (8 * i);
    return (int32_t)v;
  }
  void st8(uint64_t a, int8_t v) {
    if (char* h = host_ptr(a)) { *h = (char)v; return; }
    proc->get_mmu()->store<uint8_t>(a, (uint8_t)v);
  }
  void st32(uint64_t a, int32_t v) {
    if ((a & 3) == 0) {
      if (char* h = host_ptr(a)) { std::memcpy(h, &v, 4); return; }
      proc->get_mmu()->store<uint32_t>(a, (uint32_t)v);
      return;
    }
    for (int i = 0; i < 4; i++) st8(a + i, (int8_t)(uint8_t)((uint32_t)v >> (8 * i)));
  }

  void check_sp(uint32_t row, uint32_t n, const char* what) {
    if (n == 0) return;
    if ((uint64_t)row + n > g_sp_rows)
      fail("%s: scratchpad rows %u..%u out of range (%u banks x %u rows = %u rows)", what, row,
           row + n - 1, BANKS, g_bank_rows, g_sp_rows);
  }
  void check_acc(uint32_t row, uint32_t n, const char* what) {
    if (n == 0) return;
    if ((uint64_t)row + n > g_acc_rows)
      fail("%s: accumulator rows %u..%u out of range (%u rows)", what, row, row + n - 1, g_acc_rows);
  }

  // ---- timing helpers ----------------------------------------------------------------
  // Time at which a command can enter queue q: host issue time (with host stalls for a full
  // reservation station), or the loop unroller's time for internal commands.
  uint64_t enter(Queue& q) {
    if (internal) {  // LoopMatmul / LoopConv: one command per cycle, blocked by a full station
      uint64_t t = internal_issue;
      if (q.slot_free() > t) t = q.slot_free();
      internal_issue = t + LOOP_ISSUE_CYCLES;
      return cmd_entered = t;
    }
    wait_until(last_loop_issue_end);
    if (q.slot_free() > now()) rs_full_cycles += q.slot_free() - now();
    wait_until(q.slot_free());
    stall += ROCC_ISSUE_CYCLES;
    return cmd_entered = now();
  }
  uint64_t start_after(Queue& q, uint64_t t) { return t > q.free_at ? t : q.free_at; }
  void occupy(Queue& q, uint64_t start, uint64_t cycles, uint64_t done) {
    if (timeline_line())
      std::fprintf(stderr, "TRACE cmd %s%s %s entered %llu start %llu busy %llu done %llu\n", cur, cmd_detail, q.name,
                   (unsigned long long)(cmd_entered - m_t0), (unsigned long long)(start - m_t0),
                   (unsigned long long)cycles, (unsigned long long)(done - m_t0));
    cmd_detail[0] = 0;
    q.free_at = start + cycles;
    q.busy += cycles;
    q.retire(done);
    if (&q == &exq) last_mul.valid = false;
    if (internal && start > loop_issue_cursor) loop_issue_cursor = start;
  }
  uint64_t loop_issue_cursor = 0;

  // DMA engine (DMA.scala StreamReader/StreamWriter + XactTracker): a DRAM row is split into
  // requests of at most DMA_MAX_REQUEST_BYTES that do not cross a 64-byte line; the engine
  // issues one request per cycle, holds at most dma_inflight of them (a transaction-tracker
  // slot each, released when the response/ack returns DMA_LATENCY cycles later) and moves one
  // DMA_BEAT_BYTES beat per cycle on the bus. Reads and writes have separate engines.
  struct DmaEngine {
    uint64_t slot[MAX_DMA_INFLIGHT] = {0};  // release time of each tracker slot
    uint64_t n = 0;           // requests issued so far
    uint64_t last_issue = 0, bus_free = 0;
    // The read data path into the scratchpad, one beat per cycle, taken in the order the answers
    // arrive, not the order the requests left (DMA.scala: responses carry their transaction id
    // and the BeatMerger takes whichever comes; a slow miss does not hold later hits back).
    Timeline returns;
    uint64_t tlb_page[1] = {0};  // the client's last translated page (FrontendTLB filter)
    // DMACommandTracker entries (LoadController.scala): when each move-in command's slot frees.
    uint64_t cmd_slot[MAX_DMA_INFLIGHT / DIM + 1] = {0};
    uint64_t ncmd = 0;
    // Writes: when the writer took each of the last block-rows handed to it (a ring, in order;
    // longer than any write path's depth).
    static constexpr uint32_t TAKEN = 64;
    uint64_t taken[TAKEN] = {0};
    uint64_t ntaken = 0;
    void take(uint64_t when) { taken[ntaken++ % TAKEN] = when; }
  };
  DmaEngine dma_rd, dma_wr;
  // Move-in commands the load controller holds at once. RTL: LoadController.scala sizes its
  // DMACommandTracker nCmds = max_in_flight_mem_reqs / block_rows + 1 (2 for defaultConfig's
  // 16 requests, 5 for leanConfig's 64); an entry is freed when all of its command's bytes have
  // arrived, so commands of a few rows each cannot keep all the request slots busy. (The store
  // controller's tracker is sized alike, but Scratchpad.scala answers a move-out's rows as their
  // SRAM reads fire, a few rows ahead of the writer, so its entries never outlast the writer's.)
  uint64_t dma_commands() const { return dma_load_commands(dma_inflight); }
  // The shared L2 (SiFive inclusive cache) as the DMA sees it: set-associative, 64-byte lines,
  // a random victim on a miss (InclusiveCache Directory.scala: an LFSR picks the way; no LRU);
  // a request to a line it holds returns after L2_HIT_LATENCY, else after the LLC's answer.
  // A line being filled is held by its MSHR until the fill returns, and requests to it queue
  // behind the MSHR (InclusiveCache Scheduler.scala: a request whose set has an active MSHR
  // waits in that MSHR's list): such a request is answered no earlier than the fill.
  // The MSHRs, the memory bus and the LLC below are booked as Timelines (timeline.h): requests
  // reach them in program order, not time order.
  std::vector<uint64_t> l2_tag = std::vector<uint64_t>(L2_SETS * L2_WAYS, 0);
  std::vector<uint64_t> l2_fill = std::vector<uint64_t>(L2_SETS * L2_WAYS, 0);  // when each line's data is in
  std::vector<uint8_t> l2_dirty = std::vector<uint8_t>(L2_SETS * L2_WAYS, 0);
  uint64_t l2_hits = 0, l2_misses = 0, l2_writebacks = 0;
  uint64_t l2_rng = 0x9E3779B97F4A7C15ull;  // replacement (InclusiveCache: an LFSR)
  Timeline l2_mshr[L2_MSHRS];               // when each of the L2's MSHRs is held
  Timeline outer_read, outer_write;         // the memory bus's two data channels
  // DMA_LATENCY, L2_HIT_LATENCY and LLC_HIT_LATENCY, unless a calibration run sets them
  // (`memory_latency`).
  uint64_t dram_latency = DMA_LATENCY, l2_hit_latency = L2_HIT_LATENCY, llc_hit_latency = LLC_HIT_LATENCY;
  // `whole_line_write`: a DMA write of one whole aligned line. On a miss the L2 then asks the
  // outer side for write permission only (InclusiveCache MSHR.scala: a full-block PutFullData
  // sends AcquirePerm, not AcquireBlock), which the TLCacheCork below it grants at once
  // (CacheCork.scala: "AcquirePerm => instant response"): no DRAM round trip.
  // Returns when the answer to a request that reaches the L2 at time `t` is back.
  uint64_t l2_response(uint64_t addr, uint64_t t, bool whole_line_write = false, bool dirty = false) {
    uint64_t line = addr / L2_LINE_BYTES + 1, set = line % L2_SETS;
    uint64_t* tag = &l2_tag[set * L2_WAYS];
    uint64_t* fill = &l2_fill[set * L2_WAYS];
    for (int w = 0; w < (int)L2_WAYS; w++)
      if (tag[w] == line) {
        l2_hits++;
        if (dirty) l2_dirty[set * L2_WAYS + w] = 1;
        return t + l2_hit_latency > fill[w] ? t + l2_hit_latency : fill[w];
      }
    l2_misses++;
    const int victim = (int)(next_random(l2_rng) % L2_WAYS);
    // A miss holds one of the L2's MSHRs until its line is in (and a dirty victim's writeback
    // is acknowledged: InclusiveCache MSHR.scala sends the Release, then the Acquire). It takes
    // the MSHR free soonest for a typical miss; the booking below records how long it held it.
    int m = 0;
    uint64_t start = ~0ull;
    for (int i = 0; i < (int)L2_MSHRS && start != t; i++) {
      const uint64_t e = l2_mshr[i].earliest(t, dram_latency + llc_hit_latency);
      if (e < start) start = e, m = i;
    }
    uint64_t done = start;
    if (tag[victim] && l2_dirty[set * L2_WAYS + victim]) {
      // The victim's 64 bytes go out on the memory bus's write channel to the LLC.
      const uint64_t sent = outer_write.reserve(start, MEMORY_BUS_LINE_CYCLES) + MEMORY_BUS_LINE_CYCLES;
      done = llc_access((tag[victim] - 1) * L2_LINE_BYTES, sent, true);
      l2_writebacks++;
    }
    if (whole_line_write) {
      const uint64_t granted = start + l2_hit_latency;
      if (granted > done) done = granted;
    } else {
      // The line comes from the LLC (or DRAM behind it) one MEMORY_BUS_BYTES beat per cycle.
      const uint64_t first = llc_access((line - 1) * L2_LINE_BYTES, start, false);
      const uint64_t in = outer_read.reserve(first, MEMORY_BUS_LINE_CYCLES) + MEMORY_BUS_LINE_CYCLES;
      if (in > done) done = in;
    }
    tag[victim] = line;
    l2_dirty[set * L2_WAYS + victim] = dirty || whole_line_write;
    l2_mshr[m].book(start, done);
    fill[victim] = done;
    return done;
  }

  // FASED's DDR3 timing model behind the LLC (FireSim FRFCFSModel.scala, DramCommon.scala):
  // 4 ranks of 8 banks, open-page policy, addresses mapped as DramCommon's defaults map them
  // (bank bits from bit 13, so 8 KiB rows; rank bits above them; the row above those). A
  // block's round trip is dram_latency when its bank has no row open; a block in the row the
  // bank holds open skips the activation (tRCD earlier), one in another row first closes it
  // (tRP later, and no earlier than tRAS after that row was opened). A bank takes a column
  // command every tCCD; the data bus carries one block at a time. LLC refills and the LLC's
  // dirty writebacks both go through it, so a stream of writebacks interleaved with reads
  // keeps closing the rows the reads want. FR-FCFS's preference for row hits within its window
  // is not modelled.
  // Requests reach a bank in program order, not time order (see Timeline): a move-out's
  // writebacks may be booked for a time after the move-ins booked next. A bank serves requests
  // in the order they arrive: each keeps its recent accesses ordered by arrival, and a request
  // is served after the last one that arrived before it (that access's row, when the row was
  // opened, its column slot), not after the latest booking, which may have arrived later.
  struct DramAccess { uint64_t arrived = 0, at = 0, row = ~0ull, opened = 0; };
  static constexpr int DRAM_HISTORY = 16;
  struct DramBank { DramAccess recent[DRAM_HISTORY]; uint32_t n = 0; };
  DramBank dram_banks[DRAM_RANKS * DRAM_BANKS];
  Timeline dram_bus;
  uint64_t dram_row_hits = 0, dram_row_opens = 0, dram_row_conflicts = 0;
  // When the data of a block access that reaches the DRAM model at `t` starts on its bus.
  uint64_t dram_access(uint64_t addr, uint64_t t) {
    const uint64_t page = addr >> DRAM_BANK_SHIFT;
    const uint64_t bank = page % DRAM_BANKS, rank = page / DRAM_BANKS % DRAM_RANKS;
    const uint64_t row = page / DRAM_BANKS / DRAM_RANKS;
    DramBank& b = dram_banks[rank * DRAM_BANKS + bank];
    const uint32_t kept = b.n < (uint32_t)DRAM_HISTORY ? b.n : (uint32_t)DRAM_HISTORY;
    uint32_t pos = b.n;  // where this access goes in arrival order
    while (b.n - pos < kept && b.recent[(pos - 1) % DRAM_HISTORY].arrived > t) pos--;
    const DramAccess* before = b.n - pos < kept ? &b.recent[(pos - 1) % DRAM_HISTORY] : nullptr;
    uint64_t data = t + dram_latency - DRAM_T_RCD;  // as if the row were open
    if (before && before->at + DRAM_T_CCD > data) data = before->at + DRAM_T_CCD;
    DramAccess now;
    now.arrived = t;
    if (before && before->row == row) {
      dram_row_hits++;
      now.opened = before->opened;
    } else if (!before || before->row == ~0ull) {
      dram_row_opens++;
      now.opened = data;
      data += DRAM_T_RCD;
    } else {
      dram_row_conflicts++;
      const uint64_t precharge = data > before->opened + DRAM_T_RAS ? data : before->opened + DRAM_T_RAS;
      now.opened = precharge + DRAM_T_RP;
      data = now.opened + DRAM_T_RCD;
    }
    now.at = data;
    now.row = row;
    for (uint32_t k = b.n; k > pos; k--) b.recent[k % DRAM_HISTORY] = b.recent[(k - 1) % DRAM_HISTORY];
    b.recent[pos % DRAM_HISTORY] = now;
    b.n++;
    return dram_bus.reserve(data, DRAM_BLOCK_BUS_CYCLES);
  }

  // FireSim's last-level cache model (FASED LastLevelCache.scala), under the memory bus: a
  // timing-only cache of LLC_SETS x LLC_WAYS blocks of LLC_BLOCK_BYTES, random replacement, one request
  // at a time through its state machine (tag access, then one cycle per data beat; a miss's
  // refill takes it again, for the block's beats, when DRAM answers), at most LLC_MSHRS
  // refills in flight. Requests are taken in order: one to a set with a refill in
  // flight waits for it and holds every request behind it (the read queue's head blocks), and
  // with no free MSHR nothing is taken, hits included. A write of less than a block that
  // misses refills the block from DRAM first (write-triggered refill); a dirty victim is
  // written back to DRAM, holding the state machine for the block's beats.
  // Returns when the first beat of a read's data can leave (a write: when it is acknowledged)
  // for a request that reaches the LLC at `t`.
  std::vector<uint64_t> llc_tag = std::vector<uint64_t>(LLC_SETS * LLC_WAYS, 0);
  std::vector<uint64_t> llc_fill = std::vector<uint64_t>(LLC_SETS * LLC_WAYS, 0);        // refill done
  std::vector<uint64_t> llc_fill_start = std::vector<uint64_t>(LLC_SETS * LLC_WAYS, 0);  // refill taken
  std::vector<uint8_t> llc_dirty = std::vector<uint8_t>(LLC_SETS * LLC_WAYS, 0);
  Timeline llc_mshr[LLC_MSHRS];
  Timeline llc_state;  // the state machine, one request at a time
  // The read queue and the write queue, each in order: when its head was last taken, and the
  // latest time a request reached it. FASED keeps the two apart (a read waiting on its set does
  // not hold writes back, nor the reverse); both go through the one state machine. A request
  // booked after one that reached the queue later was ahead of it, so it does not wait for it.
  uint64_t llc_read_head = 0, llc_write_head = 0, llc_read_latest = 0, llc_write_latest = 0;
  uint64_t llc_rng = 0x2545F4914F6CDD1Dull;  // replacement (FASED: an LFSR)
  uint64_t llc_hits = 0, llc_misses = 0;
  // FireSim's latency-bandwidth pipe (`memory_pipe`; FASED LatencyPipe.scala): every request
  // the L2 sends out is answered `pipe_latency` cycles after the pipe takes it, whatever its
  // address; the pipe holds at most `pipe_reads` reads and `pipe_writes` writes, each until
  // its answer (the data beats themselves are on the memory bus, outer_read / outer_write).
  uint64_t pipe_latency = 0, pipe_reads = 0, pipe_writes = 0;
  Timeline pipe_read_slot[MAX_PIPE_REQUESTS], pipe_write_slot[MAX_PIPE_REQUESTS];
  uint64_t pipe_access(uint64_t t, bool write) {
    Timeline* slots = write ? pipe_write_slot : pipe_read_slot;
    const uint64_t n = write ? pipe_writes : pipe_reads;
    int m = 0;
    uint64_t start = ~0ull;
    for (int i = 0; i < (int)n && start != t; i++) {
      const uint64_t e = slots[i].earliest(t, pipe_latency);
      if (e < start) start = e, m = i;
    }
    slots[m].book(start, start + pipe_latency);
    llc_misses++;  // in `stats`, every request the pipe answers counts as a miss: it reached memory
    return start + pipe_latency;
  }
  uint64_t llc_access(uint64_t addr, uint64_t t, bool write) {
    if (pipe_latency) return pipe_access(t, write);
    const uint64_t block = addr / LLC_BLOCK_BYTES + 1, set = block % LLC_SETS;
    const uint64_t block_addr = (block - 1) * LLC_BLOCK_BYTES;
    uint64_t* tag = &llc_tag[set * LLC_WAYS];
    uint64_t* fill = &llc_fill[set * LLC_WAYS];
    uint64_t* fill_start = &llc_fill_start[set * LLC_WAYS];
    uint64_t& head = write ? llc_write_head : llc_read_head;
    uint64_t& latest = write ? llc_write_latest : llc_read_latest;
    uint64_t d = t;
    if (t >= latest) {
      if (head > d) d = head;
      latest = t;
    }
    for (int w = 0; w < (int)LLC_WAYS; w++)  // a refill in flight to this set: the queue's head waits
      if (fill_start[w] <= d && fill[w] > d) d = fill[w];
    // no MSHR free: nothing is taken (the MSHR free soonest for a refill's round trip)
    int m = 0;
    uint64_t free_at = ~0ull;
    for (int i = 0; i < (int)LLC_MSHRS && free_at != d; i++) {
      const uint64_t e = llc_mshr[i].earliest(d, dram_latency);
      if (e < free_at) free_at = e, m = i;
    }
    d = free_at;
    int way = -1;
    for (int w = 0; w < (int)LLC_WAYS; w++)
      if (tag[w] == block) way = w;
    const bool hit = way >= 0;
    uint64_t victim_block = 0;
    // Now: the metadata access (llc_r_mdaccess / llc_w_mdaccess, one cycle), then a hit's
    // read beats or a write's data beats (llc_r_daccess / llc_w_daccess), and a dirty
    // victim's writeback beats (llc_r_wb / llc_w_wb). A read miss ends its turn after the
    // metadata access: its data comes with the refill.
    uint64_t busy = 1 + ((hit || write) ? LLC_LINE_BEATS : 0);
    if (!hit) {
      for (int w = 0; w < (int)LLC_WAYS && way < 0; w++)
        if (!tag[w]) way = w;
      if (way < 0) {
        way = (int)(next_random(llc_rng) % LLC_WAYS);
        if (llc_dirty[set * LLC_WAYS + way]) {
          busy += LLC_BLOCK_BEATS;
          victim_block = tag[way];
        }
      }
    }
    d = llc_state.reserve(d, busy);
    // The dirty victim's writeback goes to DRAM as the state machine sends its beats: it takes
    // its bank and the data bus, and opens its row there.
    if (victim_block) dram_access((victim_block - 1) * LLC_BLOCK_BYTES, d + 1);
    head = d;
    uint64_t answer = write ? d + busy : d + llc_hit_latency;
    if (hit) {
      llc_hits++;
      if (write) llc_dirty[set * LLC_WAYS + way] = 1;
    } else {
      llc_misses++;
      // Later: DRAM's answer takes the state machine for the block's beats (llc_refill, which
      // has priority over new requests in llc_idle); a read's data leaves with its first beat,
      // and the MSHR is free from then on (refill_start clears acq_in_flight).
      const uint64_t refill = llc_state.reserve(dram_access(block_addr, d), LLC_BLOCK_BEATS);
      llc_mshr[m].book(d, refill);
      tag[way] = block;
      fill_start[way] = d;
      fill[way] = refill;
      llc_dirty[set * LLC_WAYS + way] = write;
      if (!write) answer = refill;
    }
    return answer;
  }
  uint64_t tlb_misses = 0, tlb_filter_misses = 0, dma_read_reqs = 0, dma_write_reqs = 0;
  // FrontendTLB as the harness runs it (bare metal, machine mode): each client (reader,
  // writer) first checks a one-entry register of its last translated page
  // (use_tlb_register_filter); a request to another page is registered and presented to the
  // shared TLB the next cycle while the client sees a miss and retries: TLB_FILTER_MISS_CYCLES.
  // The TLB itself never misses in machine mode (rocket TLB.scala: translation only when the
  // privilege is S or U with satp set), so no page-table walk is charged.
  uint64_t tlb_lookup(DmaEngine& e, uint64_t addr) {
    uint64_t page = (addr >> 12) + 1;
    if (e.tlb_page[0] == page) return 0;
    e.tlb_page[0] = page;
    tlb_filter_misses++;
    return TLB_FILTER_MISS_CYCLES;
  }
  // Issue the requests of one DMA command starting no earlier than `start`. Returns when the
  // engine can take the next command (its last request issued) in `issue_end`, and when the
  // last response is back (the data is in place / the write acknowledged).
  // `row_cycles`: cycles each read row takes to be written locally, when more than its beats
  // (PixelRepeater.scala writes a row pixel_repeats times, and VectorScalarMultiplier.scala a
  // zero-stride move-in's row `repeats` + 1 times, one write per cycle, before taking the next).
  // Beats on the bus for the TileLink request that carries the bytes [a, a + len) of one line.
  // RTL: DMA.scala StreamReaderCore (read_packets) and StreamWriter (write_packets) size each
  // request as the aligned 16-, 32- or 64-byte block holding the next byte that carries the most
  // of the bytes left, the smallest on a tie, and move all of its beats (a Get of 64 bytes
  // returns four even when 48 of them are wanted; a PutPartial sends its masked beats too). So
  // a span fits the smallest aligned block that holds all of it: 48 bytes from offset 16 take
  // a 64-byte request (4 beats), 16 bytes from offset 8 a 32-byte one (2 beats).
  static uint64_t request_beats(uint64_t a, uint64_t len) {
    for (uint64_t size = DMA_BEAT_BYTES; size < DMA_MAX_REQUEST_BYTES; size *= 2)
      if (a % size + len <= size) return size / DMA_BEAT_BYTES;
    return DMA_MAX_REQUEST_BYTES / DMA_BEAT_BYTES;
  }

  // `row_blocks` (writes): the DIM-column blocks the store controller hands the writer for each
  // row, one request per block (StoreController.scala: one dma.req per block, `store_en` on the
  // last). DMA.scala StreamWriter takes a request only while idle (io.req.ready is
  // state === s_idle, or the cycle its last beat leaves), keeps the blocks of a row and starts
  // writing only at the last: a row of n blocks waits n - 1 cycles after the previous row's
  // last beat before its own first beat (a 64-column int8 row: 4 beats every 7 cycles).
  uint64_t dma_transfer(DmaEngine& e, uint64_t start, uint64_t addr, uint64_t stride, uint32_t rows,
                        uint64_t bytes, uint64_t& issue_end, bool write, uint64_t row_cycles = 1,
                        uint64_t row_blocks = 1, uint64_t* row_done = nullptr) {
    uint64_t t = start + DMA_COMMAND_OVERHEAD;
    if (t < e.last_issue + 1) t = e.last_issue + 1;
    // A move-in command waits for a command-tracker entry, held until all its data is back.
    uint64_t& cmd_slot = e.cmd_slot[e.ncmd % dma_commands()];
    if (!write && cmd_slot > t) t = cmd_slot;
    uint64_t done = t;
    for (uint32_t r = 0; r < rows; r++) {
      uint64_t a = addr + r * stride, end = a + bytes, row_beats = 0;
      while (a < end) {
        uint64_t line_end = (a / DMA_MAX_REQUEST_BYTES + 1) * DMA_MAX_REQUEST_BYTES;
        uint64_t len = (end < line_end ? end : line_end) - a;
        const uint64_t beats = request_beats(a, len);
        t += tlb_lookup(e, a);
        uint64_t& slot = e.slot[e.n % dma_inflight];
        if (slot > t) t = slot;
        uint64_t resp;
        const bool whole_line = write && len == L2_LINE_BYTES && a % L2_LINE_BYTES == 0;
        if (write) {  // the request carries its data beats; the ack comes back from the L2
          uint64_t data = t > e.bus_free ? t : e.bus_free;
          if (a == addr + r * stride) data += row_blocks - 1;  // the row's other blocks come first
          e.bus_free = data + beats;
          resp = l2_response(a, e.bus_free, whole_line, true);
          const uint64_t probed = l1_probe(a, t, true);  // the host's copy goes first
          if (probed > t && probed + L2_PROBE_TO_DATA_CYCLES > resp) resp = probed + L2_PROBE_TO_DATA_CYCLES;
          e.last_issue = e.bus_free - 1;
          if (a == addr + r * stride)
            for (uint64_t b = 0; b < row_blocks; b++) e.take(t);
        } else {  // a one-beat request; the data beats come back when the L2 answers
          uint64_t ans = l2_response(a, t);
          const uint64_t probed = l1_probe(a, t, false);  // the L2 answers once the host's L1 has
          if (probed > t && probed + L2_PROBE_TO_DATA_CYCLES > ans) ans = probed + L2_PROBE_TO_DATA_CYCLES;
          row_beats += beats;
          const bool row_end = a + len >= end;  // the row's local writes follow its last beat
          const uint64_t occupy = beats + (row_end && row_cycles > row_beats ? row_cycles - row_beats : 0);
          resp = e.returns.reserve(ans, occupy) + occupy;
          e.last_issue = t;
        }
        slot = resp;
        (write ? wr_bytes : rd_bytes) += len;
        (write ? wr_latency : rd_latency) += resp - t;
        e.n++;
        (write ? dma_write_reqs : dma_read_reqs)++;
        if (resp > done) done = resp;
        if (row_done && resp > row_done[r]) row_done[r] = resp;  // the row's last beat is in
        t = e.last_issue + 1;
        a += len;
      }
    }
    issue_end = t;
    if (!write) { cmd_slot = done; e.ncmd++; }
    return done;
  }

  // When the last of the `k` block-rows just handed to the writer was read out of its SRAM (the
  // cycle after its read fires; `start` if there were none), the reads starting at `start`, one
  // a cycle, each no earlier than the writer took the block-row `depth` before it (the write
  // path between the SRAM and the writer holds `depth`).
  uint64_t moveout_reads_fired(uint64_t start, uint64_t k, uint64_t depth) const {
    const DmaEngine& e = dma_wr;
    const uint64_t first = e.ntaken - k;
    uint64_t fired = start - 1;  // unsigned: the first read goes at start even when start is 0
    for (uint64_t j = 0; j < k; j++) {
      uint64_t f = fired + 1;
      const uint64_t g = first + j;  // its place among all block-rows the writer took
      if (g >= depth && g - depth + DmaEngine::TAKEN >= e.ntaken) {
        const uint64_t w = e.taken[(g - depth) % DmaEngine::TAKEN];
        if (w > f) f = w;
      }
      fired = f;
    }
    return fired + 1;
  }

  // ---- commands ----------------------------------------------------------------------
  void config(uint64_t rs1, uint64_t rs2) {
    uint32_t kind = rs1 & 3;
    if (kind == 0) {
      cur = "config_ex";
      uint32_t a_stride = (rs1 >> 16) & 0xFFFF;
      uint32_t c_stride = (rs2 >> 48) & 0xFFFF;
      if (((rs1 >> 7) & 1) == 0) {
        ex.dataflow = (rs1 >> 2) & 1;
        // ExecuteController.scala: a WS-only build fixes current_dataflow and ignores this bit,
        // so the hardware loops still work; a preload or compute expecting OS is refused.
        lean_os_requested = lean && ex.dataflow != WEIGHT_STATIONARY;
        if (lean) ex.dataflow = WEIGHT_STATIONARY;
        ex.act = (rs1 >> 3) & 7;
        ex.a_transpose = (rs1 >> 8) & 1;
        ex.b_transpose = (rs1 >> 9) & 1;
        ex.shift = (uint32_t)rs2;
        ex.acc_scale = bits_to_float((uint32_t)(rs1 >> 32));
        if (ex.act != ACT_NONE && ex.act != ACT_RELU)
          fail(ACTIVATION_REFUSAL, (unsigned)ex.act);
      }
      ex.a_stride = a_stride;
      ex.c_stride = c_stride;
      // Changing the array's configuration waits for the mesh to drain (results of earlier
      // computes still in flight), so a config_ex inside a compute loop costs a pipeline bubble.
      Queue& q = exq;
      uint64_t t = enter(q);
      if (q.last_done > t) t = q.last_done;
      uint64_t s = start_after(q, t);
      occupy(q, s, CONFIG_CYCLES, s + CONFIG_CYCLES);
    } else if (kind == 1) {
      cur = "config_ld";
      uint32_t id = (rs1 >> 3) & 3;
      if (id > 2) fail("load state id %u out of range (0..2: mvin, mvin2, mvin3)", id);
      LoadConfig& c = ld[id];
      c.shrunk = (rs1 >> 2) & 1;
      c.pixel_repeats = (rs1 >> 8) & 0xFF;
      c.block_stride = (rs1 >> 16) & 0xFFFF;
      c.scale = bits_to_float((uint32_t)(rs1 >> 32));
      c.stride = rs2;
      Queue& q = ldq;
      uint64_t s = start_after(q, enter(q));
      occupy(q, s, CONFIG_CYCLES, s + CONFIG_CYCLES);
    } else if (kind == 2) {
      cur = "config_st";
      st.act = (rs1 >> 2) & 3;
      st.pool_stride = (rs1 >> 4) & 3;
      st.pool_size = (rs1 >> 6) & 3;
      st.upad = (rs1 >> 8) & 3;
      st.lpad = (rs1 >> 10) & 3;
      st.pool_out_dim = (rs1 >> 24) & 0xFF;
      st.porows = (rs1 >> 32) & 0xFF;
      st.pocols = (rs1 >> 40) & 0xFF;
      st.orows = (rs1 >> 48) & 0xFF;
      st.ocols = (rs1 >> 56) & 0xFF;
      st.stride = (uint32_t)rs2;
      st.scale = bits_to_float((uint32_t)(rs2 >> 32));
      if (st.act != ACT_NONE && st.act != ACT_RELU)
        fail(ACTIVATION_REFUSAL, (unsigned)st.act);
      Queue& q = stq;
      uint64_t s = start_after(q, enter(q));
      occupy(q, s, CONFIG_CYCLES, s + CONFIG_CYCLES);
    } else {
      cur = "config_norm";
      // Normalisation statistics only matter for LAYERNORM/SOFTMAX, which are rejected at
      // config_st/config_ex; the command itself is accepted as a no-op.
      Queue& q = exq;
      uint64_t s = start_after(q, enter(q));
      occupy(q, s, CONFIG_CYCLES, s + CONFIG_CYCLES);
    }
  }

  void mvin(int id, uint64_t dram, uint64_t rs2) {
    static const char* names[3] = {"mvin", "mvin2", "mvin3"};
    cur = names[id];
    Operand o = decode_operand(rs2);
    const LoadConfig& c = ld[id];
    if (o.addr.garbage) fail("local address is GARBAGE_ADDR");
    if (o.rows == 0 || o.cols == 0) fail("rows (%u) and cols (%u) must both be at least 1", o.rows, o.cols);
    if (o.rows > DIM) fail("%u rows exceed DIM=%u; use one move-in per DIM rows", o.rows, DIM);
    if (c.pixel_repeats > 1) fail("pixel_repeats=%u is not modelled (use 1)", c.pixel_repeats);
    const bool to_acc = o.addr.acc;
    const uint32_t ebytes = (to_acc && !c.shrunk) ? 4 : 1;
    const uint32_t max_cols = DIM * (to_acc ? (c.shrunk ? MAX_BLOCK_LEN : MAX_BLOCK_LEN_ACC) : MAX_BLOCK_LEN);
    if (o.cols > max_cols)
      fail("%u columns exceed the %u-column limit for a %s move-in (64-byte DMA rows)", o.cols,
           max_cols, to_acc ? (c.shrunk ? "shrunk accumulator" : "accumulator") : "scratchpad");
    if (!to_acc && o.addr.row >= g_sp_rows && (o.addr.accumulate || o.addr.full))
      fail("scratchpad address 0x%x has accumulator-only bits set", o.raw);
    const uint32_t blocks = (o.cols + DIM - 1) / DIM;
    const uint32_t bstride = c.block_stride;
    for (uint32_t b = 0; b < blocks; b++) {
      uint32_t base = o.addr.row + b * bstride;
      if (to_acc) check_acc(base, o.rows, cur); else check_sp(base, o.rows, cur);
    }
    const bool zeros = dram == 0;
    if (!zeros) check_stride(c.stride, o.rows);
    if (!zeros)
      for (uint32_t r = 0; r < o.rows; r++) check_dram(dram + r * c.stride, (uint64_t)o.cols * ebytes);

    // Timing: wait for readers of the destination rows (WAR), then the DMA.
    if (print_timeline) std::snprintf(cmd_detail, sizeof cmd_detail, ":r%u:c%u:a%llx", o.rows, o.cols, (unsigned long long)dram);
    uint64_t done = 0;
    if (g_timed) {
      Queue& q = ldq;
      uint64_t t = enter(q);
      for (uint32_t b = 0; b < blocks; b++)
        for (uint32_t r = 0; r < o.rows; r++) {
          uint32_t row = o.addr.row + b * bstride + r;
          uint64_t busy_until = to_acc ? (acc_r[row] > acc_w[row] ? acc_r[row] : acc_w[row])
                                       : (sp_r[row] > sp_w[row] ? sp_r[row] : sp_w[row]);
          if (busy_until > t) t = busy_until;
        }
      uint64_t s = start_after(q, t);
      uint64_t occ;
      uint64_t row_done[DIM] = {0};
      if (zeros) {  // ZeroWriter: one local row per cycle, no DRAM traffic
        occ = DMA_COMMAND_OVERHEAD + (uint64_t)o.rows * blocks;
        done = s + occ;
      } else {
        uint64_t issue_end;
        // A zero stride reads the row once and writes it to every local row (LoadController.scala:
        // actual_rows_read is 1 and the DMA request carries rows - 1 repeats).
        const uint32_t rows_read = c.stride == 0 ? 1 : o.rows;
        done = dma_transfer(dma_rd, s, dram, c.stride, rows_read, (uint64_t)o.cols * ebytes, issue_end, false,
                            c.stride == 0 ? o.rows : 1, 1, row_done);
        occ = issue_end - s;
      }
      // The local writes: a DRAM row's blocks are written as their beats come in (a block is
      // DIM * ebytes bytes); the ZeroWriter and a repeated row write one local row a cycle up
      // to `done`. The array's writes to the same SRAM go first (book_mvin_writes).
      MvinWrites& m = recent_mvins[recent_mvin_n++ % MVIN_RECORDS];
      m.n = 0;
      m.keys = 0;
      m.acc = to_acc;
      const uint64_t block_beats = (uint64_t)DIM * ebytes / DMA_BEAT_BYTES;
      const bool one_a_cycle = zeros || c.stride == 0;
      const uint32_t writes = o.rows * blocks;
      for (uint32_t r = 0; r < o.rows; r++)
        for (uint32_t b = 0; b < blocks; b++) {
          const uint32_t row = o.addr.row + b * bstride + r, key = write_key(to_acc, row);
          m.key[m.n] = (uint8_t)key;
          m.row[m.n] = row;
          m.keys |= 1u << key;
          m.ready[m.n] = one_a_cycle ? done - (writes - 1 - m.n) : row_done[r] - (blocks - 1 - b) * block_beats;
          m.n++;
        }
      const uint64_t held = book_mvin_writes(m);
      done += held;
      occupy(q, s, occ + held, done);
    }

    // Function.
    for (uint32_t b = 0; b < blocks; b++) {
      uint32_t ncols = o.cols - b * DIM < DIM ? o.cols - b * DIM : DIM;
      for (uint32_t r = 0; r < o.rows; r++) {
        uint32_t row = o.addr.row + b * bstride + r;
        uint64_t src = dram + r * c.stride + (uint64_t)b * DIM * ebytes;
        uint8_t raw[DIM * 4] = {0};
        if (!zeros) ld_bytes(src, raw, (uint64_t)ncols * ebytes);
        if (to_acc) {
          int32_t* dst = &acc[(size_t)row * DIM];
          for (uint32_t k = 0; k < ncols; k++) {
            // int32 data is not scaled (MVIN_SCALE_ACC is the identity); shrunk int8 data
            // goes through the int8 scaling path (scale, round, saturate) before widening.
            int32_t v;
            if (ebytes == 4) std::memcpy(&v, raw + 4 * k, 4);
            else v = c.scale == 1.0f ? (int32_t)(int8_t)raw[k] : (int32_t)scale_to_int8((int8_t)raw[k], c.scale);
            dst[k] = o.addr.accumulate ? (int32_t)((uint32_t)dst[k] + (uint32_t)v) : v;
          }
          acc_w[row] = done;
          acc_touched[row] = 1;
        } else {
          int8_t* dst = &sp[(size_t)row * DIM];
          if (c.scale == 1.0f) std::memcpy(dst, raw, ncols);
          else
            for (uint32_t k = 0; k < ncols; k++) dst[k] = scale_to_int8((int8_t)raw[k], c.scale);
          sp_w[row] = done;
          sp_touched[row] = 1;
        }
      }
    }
    // An accumulating move-in reads each row it adds to through its bank's read port
    // (ACC_BANKS), one row a cycle, the last at `done`.
    if (to_acc && o.addr.accumulate && g_timed) {
      uint32_t per_bank[ACC_BANKS] = {0};
      for (uint32_t b = 0; b < blocks; b++)
        for (uint32_t r = 0; r < o.rows; r++) per_bank[acc_bank_of(o.addr.row + b * bstride + r)]++;
      for (uint32_t k = 0; k < ACC_BANKS; k++)
        if (per_bank[k]) note_acc_rmw(k, done - per_bank[k], done);
    }
    // Scratchpad banks are single ported and a write wins over a read in the same cycle
    // (Scratchpad.scala ScratchpadBank: "the writes take precedence"): remember when each bank
    // is busy taking this move-in's rows (one per cycle, the last at `done`).
    if (!to_acc && g_timed) {
      uint32_t per_bank[BANKS] = {0};
      for (uint32_t b = 0; b < blocks; b++)
        for (uint32_t r = 0; r < o.rows; r++) per_bank[(o.addr.row + b * bstride + r) / g_bank_rows]++;
      for (uint32_t k = 0; k < BANKS; k++)
        if (per_bank[k]) note_bank_write(k, done - per_bank[k], done);
    }
  }

  // Windows in which an SRAM is written (move-ins into a scratchpad bank, the array's result
  // writes, accumulating writes), per bank. Commands are timed in program order, but a queue
  // that lags (the execute queue behind a hardware loop's loaders, which are booked a loop
  // ahead) asks about windows booked long before it: a loop_ws tile streams up to a bank's
  // worth of move-ins (64 of 64 columns into a 4096-row bank) before its steps are timed. So
  // each bank keeps WRITE_WINDOWS of them and a new window replaces the one that ends first,
  // which no later query can meet before any other. 16 windows kept oldest-first forgot live
  // ones (tiled_matmul_ws_perf 128x256x256 read 35,604 cycles where 128 or more give 35,746;
  // test_sim_rtl_timing.py::test_loop_steps_and_moveins_share_a_single_ported_bank).
  static constexpr int WRITE_WINDOWS = 128;
  struct BankWrites {
    uint64_t from[WRITE_WINDOWS] = {0}, to[WRITE_WINDOWS] = {0};
    uint32_t add(uint64_t f, uint64_t t) {  // records [f, t) over the window that ends first; its slot
      uint32_t slot = 0;
      for (uint32_t i = 1; i < (uint32_t)WRITE_WINDOWS; i++)
        if (to[i] < to[slot]) slot = i;
      from[slot] = f;
      to[slot] = t;
      return slot;
    }
    uint64_t overlap(uint64_t s, uint64_t e) const {  // cycles of [s, e) inside the windows
      uint64_t cycles = 0;
      for (int i = 0; i < WRITE_WINDOWS; i++) {
        uint64_t a = from[i] > s ? from[i] : s, b = to[i] < e ? to[i] : e;
        if (b > a) cycles += b - a;
      }
      return cycles;
    }
  };
  BankWrites bank_writes[BANKS];
  uint64_t port_conflict_cycles = 0;
  void note_bank_write(uint32_t bank, uint64_t from, uint64_t to) {
    bank_writes[bank].add(from, to);
    stall_queued_reads(bank, from, to);
  }
  // A scratchpad bank written over [from, to) answers no read then (single ported): steps
  // already queued that read it stall for those cycles, which delays every later step, and
  // move-outs already queued that read it delay the store queue.
  void stall_queued_reads(uint32_t bank, uint64_t from, uint64_t to) {
    delay_moveouts(bank, from, to);
    uint64_t lost = 0;
    for (const StepRec& r : recent_steps) {
      if (r.end <= from || r.start >= to) continue;
      if (r.keys[0] != (int)bank && r.keys[1] != (int)bank && r.keys[2] != (int)bank) continue;
      uint64_t a = r.start > from ? r.start : from, b = r.end < to ? r.end : to;
      lost += b - a;
    }
    if (lost) {
      exq.free_at += lost;
      exq.busy += lost;
      port_conflict_cycles += lost;
    }
  }
  // The last execute steps (start, end, SRAMs read), for move-in writes that land on them.
  struct StepRec { uint64_t start = 0, end = 0; int keys[3] = {-1, -1, -1}; };
  StepRec recent_steps[32];
  uint32_t recent_n = 0;
  void note_step(uint64_t start, uint64_t end, int a, int b, int d) {
    StepRec& r = recent_steps[recent_n++ % 32];
    r.start = start; r.end = end; r.keys[0] = a; r.keys[1] = b; r.keys[2] = d;
  }
  // Cycles of [s, e) in which the SRAM `key` refuses reads: a scratchpad bank (key < BANKS)
  // whenever it is written, by a move-in or by the array (ScratchpadBank, single ported:
  // read.req.ready needs !io.write.fire); an accumulator bank (BANKS + bank) while something
  // accumulates into it (AccumulatorMem, below).
  uint64_t read_blocked(uint32_t key, uint64_t s, uint64_t e) const {
    if (key < BANKS) return bank_writes[key].overlap(s, e) + ex_writes[key].overlap(s, e);
    return acc_rmw[key - BANKS].overlap(s, e);
  }
  // The same for an execute step's operand (bank_key: a scratchpad bank, or none).
  uint64_t write_overlap(int key, uint64_t s, uint64_t e) const {
    if (key < 0 || key >= (int)BANKS) return 0;
    return read_blocked((uint32_t)key, s, e);
  }
  // A step reading the given SRAMs in [s, s + cost) stretches by the cycles their ports are
  // taken by writes (each distinct bank counted once), counted over the stretched window until
  // it meets no further write: one port serves every write and every read of the bank.
  uint64_t port_stall(int a, int b, int d, uint64_t s, uint64_t cost) {
    const int k[3] = {a, b, d};
    const uint64_t extra = stretch_over_blocks(s, cost, [&](uint64_t from, uint64_t to) {
      uint64_t lost = 0;
      for (int i = 0; i < 3; i++) {
        bool seen = false;
        for (int j = 0; j < i; j++) seen |= k[j] == k[i];
        if (!seen) lost += write_overlap(k[i], from, to);
      }
      return lost;
    });
    port_conflict_cycles += extra;
    return extra;
  }
  // How much longer `n` reads from `s`, one a cycle, take when `blocked(from, to)` of the
  // cycles in [from, to) refuse reads: counted over the stretched span again until it meets no
  // further block, since a stretched run can run into writes its first span did not reach.
  template <class Blocked>
  static uint64_t stretch_over_blocks(uint64_t s, uint64_t n, Blocked blocked) {
    uint64_t extra = 0;
    for (int pass = 0; pass < 64; pass++) {
      const uint64_t e = blocked(s, s + n + extra);
      if (e == extra) break;
      extra = e;
    }
    return extra;
  }

  // The accumulator banks' read port (timing_params.h ACC_BANKS): windows in which the array
  // (or an accumulating move-in) accumulates into each bank, and the recent move-out reads of
  // each bank, so that a write booked after a read it lands on (commands are timed in program
  // order) still delays the store queue, as note_bank_write does for the scratchpad.
  static_assert(ACC_BANKS == 2, "the windows below are kept per bank in pairs ({-1, -1})");
  BankWrites acc_rmw[ACC_BANKS];
  struct PortRead { uint64_t start = 0, end = 0; uint32_t key = 0; };  // a move-out's reads
  PortRead recent_moveout_reads[16];
  uint32_t recent_moveout_read_n = 0;
  uint64_t moveout_port_stall_cycles = 0;
  static uint32_t acc_bank_of(uint32_t row) {
    const uint32_t per_bank = g_acc_rows / ACC_BANKS;
    const uint32_t b = per_bank ? row / per_bank : 0;
    return b < ACC_BANKS ? b : ACC_BANKS - 1;
  }
  // Records that `bank` is accumulated into over [from, to); returns the window's slot.
  uint32_t note_acc_rmw(uint32_t bank, uint64_t from, uint64_t to) {
    const uint32_t slot = acc_rmw[bank].add(from, to);
    delay_moveouts(BANKS + bank, from, to);
    return slot;
  }
  // Move-outs already queued whose reads of `key` fall in [from, to), when reads of it are
  // refused, delay the store queue by the overlap.
  void delay_moveouts(uint32_t key, uint64_t from, uint64_t to) {
    uint64_t lost = 0;
    for (const PortRead& r : recent_moveout_reads) {
      if (r.key != key || r.end <= from || r.start >= to) continue;
      lost += (r.end < to ? r.end : to) - (r.start > from ? r.start : from);
    }
    if (lost) {
      stq.free_at += lost;
      stq.busy += lost;
      moveout_port_stall_cycles += lost;
    }
  }
  // A move-out reading `n` rows of SRAM `key` from `s`, one a cycle, waits out the cycles in
  // which the SRAM refuses reads (read_blocked): returns how much later its last read happens.
  uint64_t moveout_read_stall(uint32_t key, uint64_t s, uint64_t n) {
    const uint64_t extra =
        stretch_over_blocks(s, n, [&](uint64_t from, uint64_t to) { return read_blocked(key, from, to); });
    PortRead& r = recent_moveout_reads[recent_moveout_read_n++ % 16];
    r.start = s;
    r.end = s + n + extra;
    r.key = key;
    moveout_port_stall_cycles += extra;
    return extra;
  }
  // The accumulating write windows of a step whose results land in `n` rows from `row` (every
  // `stride`) by `ready`, one row a cycle; slots[] gets each bank's window slot (or -1).
  void note_step_rmw(uint32_t row, uint32_t n, uint32_t stride, uint64_t ready, int slots[ACC_BANKS]) {
    uint32_t per_bank[ACC_BANKS] = {0};
    for (uint32_t r = 0; r < n; r++) per_bank[acc_bank_of(row + r * stride)]++;
    for (uint32_t b = 0; b < ACC_BANKS; b++)
      slots[b] = per_bank[b] ? (int)note_acc_rmw(b, ready - per_bank[b], ready) : -1;
  }

  // The banks' write ports. Scratchpad.scala gives the ExecuteController's write to a bank
  // precedence over a move-in's ("Order of precedence during writes is ExecuteController, and
  // then mvin_scale, and then mvin_scale_acc, and then zero_writer", in the accumulator and, by
  // the same when/elsewhen order, in each scratchpad bank): a move-in row waits out every cycle
  // in which the array writes results into the SRAM it goes to. Write keys: scratchpad bank k
  // is k, accumulator bank k is BANKS + k.
  static constexpr uint32_t WRITE_KEYS = BANKS + ACC_BANKS;
  static_assert(WRITE_KEYS == 6, "MulStep::write_slot is initialised with six -1s");
  BankWrites ex_writes[WRITE_KEYS];  // the array's result-write windows, per key
  uint64_t write_port_stall_cycles = 0;
  static uint32_t write_key(bool acc, uint32_t row) {
    return acc ? BANKS + acc_bank_of(row) : (row / g_bank_rows < BANKS ? row / g_bank_rows : BANKS - 1);
  }
  // A move-in's local row writes in the order the DMA delivers them: the cycle each row's data
  // is ready to be written and the key it goes to. The move-ins' write path (mvin_scale, then
  // the bank) is one in-order stream, so a row held back holds back the rows after it.
  static constexpr uint32_t MVIN_WRITES_MAX = DIM * MAX_BLOCK_LEN;
  struct MvinWrites {
    uint32_t n = 0, keys = 0;  // how many writes; a bit per key written
    bool acc = false;          // into the accumulator (else the scratchpad)
    uint8_t key[MVIN_WRITES_MAX] = {};
    uint32_t row[MVIN_WRITES_MAX] = {};
    uint64_t ready[MVIN_WRITES_MAX] = {};
    uint64_t when[MVIN_WRITES_MAX] = {};  // each write's cycle as booked, array writes included
    uint64_t last() const { return n ? when[n - 1] : 0; }
  };
  static constexpr uint32_t MVIN_RECORDS = 16;
  MvinWrites recent_mvins[MVIN_RECORDS];
  uint32_t recent_mvin_n = 0;
  // The first cycle at or after t outside the array's write windows on `key`.
  uint64_t after_ex_writes(uint32_t key, uint64_t t) const {
    const BankWrites& w = ex_writes[key];
    for (uint32_t pass = 0; pass <= WRITE_WINDOWS; pass++) {
      bool moved = false;
      for (int i = 0; i < WRITE_WINDOWS; i++)
        if (w.from[i] <= t && t < w.to[i]) { t = w.to[i]; moved = true; }
      if (!moved) break;
    }
    return t;
  }
  // The cycle of a move-in's last write, one write a cycle in order, each once its data is
  // ready, and (with_ex) none in a cycle the array writes the same SRAM; `when` gets each.
  uint64_t mvin_last_write(const MvinWrites& m, bool with_ex, uint64_t* when = nullptr) const {
    uint64_t w = 0;
    for (uint32_t i = 0; i < m.n; i++) {
      uint64_t t = m.ready[i];
      if (i && t < w + 1) t = w + 1;
      if (with_ex) t = after_ex_writes(m.key[i], t);
      w = t;
      if (when) when[i] = t;
    }
    return w;
  }
  // Whether any array write window on the move-in's keys ends after its first row is ready.
  bool mvin_meets_ex_writes(const MvinWrites& m) const {
    if (m.n == 0) return false;
    for (uint32_t k = 0; k < WRITE_KEYS; k++) {
      if (!(m.keys >> k & 1)) continue;
      for (int i = 0; i < WRITE_WINDOWS; i++)
        if (ex_writes[k].to[i] > m.ready[0]) return true;
    }
    return false;
  }
  // Books a move-in's writes; returns how many cycles the array's writes hold back its last.
  uint64_t book_mvin_writes(MvinWrites& m) {
    const uint64_t free_run = mvin_last_write(m, false, m.when);
    if (mvin_meets_ex_writes(m)) mvin_last_write(m, true, m.when);
    write_port_stall_cycles += m.last() - free_run;
    return m.last() - free_run;
  }
  // Records that the array writes `key` over [from, to) and returns the window's slot. A move-in
  // booked earlier (program order) whose writes it lands on now finishes later: the load
  // stream behind it waits by as much.
  uint32_t note_ex_write(uint32_t key, uint64_t from, uint64_t to) {
    const uint32_t slot = ex_writes[key].add(from, to);
    recheck_mvins(key, from, to);
    if (key < BANKS) stall_queued_reads(key, from, to);
    return slot;
  }
  // The booked writes of such a move-in that fall in [from, to) on `key` move past it, and the
  // writes after them follow, one a cycle (never earlier than booked).
  void recheck_mvins(uint32_t key, uint64_t from, uint64_t to) {
    for (MvinWrites& m : recent_mvins) {
      if (m.n == 0 || !(m.keys >> key & 1) || m.last() < from || m.ready[0] >= to) continue;
      const uint64_t booked = m.last();
      uint64_t w = 0;
      for (uint32_t i = 0; i < m.n; i++) {
        uint64_t t = m.when[i];
        if (i && t < w + 1) t = w + 1;
        if (m.key[i] == key && from <= t && t < to) t = to;
        if (t != m.when[i]) t = after_ex_writes(m.key[i], t);
        m.when[i] = w = t;
      }
      if (w <= booked) continue;
      const uint64_t lost = w - booked, moved = w;
      ldq.free_at += lost;
      ldq.busy += lost;
      if (moved > ldq.last_done) ldq.last_done = moved;
      for (uint32_t i = 0; i < m.n; i++) {  // its rows are written no earlier than that
        uint64_t& row_ready = m.acc ? acc_w[m.row[i]] : sp_w[m.row[i]];
        if (moved > row_ready) row_ready = moved;
      }
      write_port_stall_cycles += lost;
    }
  }
  // The write windows of a step whose results land in `n` rows from `row` (every `stride`) by
  // `ready`, one row a cycle; slots[] gets each key's window slot (or -1).
  void note_step_writes(bool acc, uint32_t row, uint32_t n, uint32_t stride, uint64_t ready,
                        int slots[WRITE_KEYS]) {
    uint32_t per_key[WRITE_KEYS] = {0};
    for (uint32_t r = 0; r < n; r++) per_key[write_key(acc, row + r * stride)]++;
    for (uint32_t k = 0; k < WRITE_KEYS; k++)
      slots[k] = per_key[k] ? (int)note_ex_write(k, ready - per_key[k], ready) : -1;
  }

  void mvout(uint64_t dram, uint64_t rs2) {
    cur = "mvout";
    Operand o = decode_operand(rs2);
    if (o.addr.garbage) fail("local address is GARBAGE_ADDR");
    if (o.rows == 0 || o.cols == 0) fail("rows (%u) and cols (%u) must both be at least 1", o.rows, o.cols);
    if (lean && o.addr.acc && o.addr.full)
      fail("a full-width (int32) read of the accumulator, which the Lean image does not have (Configs.scala "
           "leanConfig acc_read_full_width=false: Scratchpad.scala moves out int8 only); move out scaled int8 rows");
    if (st.pool_stride != 0) {
      pooled_mvout(dram, o);
      return;
    }
    if (o.rows > DIM) fail("%u rows exceed DIM=%u; use one move-out per DIM rows", o.rows, DIM);
    const bool from_acc = o.addr.acc;
    const bool full = from_acc && o.addr.full;
    if (from_acc && o.addr.norm != 0) fail("normalization commands (address bits 26-28) are not modelled");
    const uint32_t ebytes = full ? 4 : 1;
    const uint32_t max_cols = full ? DIM : DIM * MAX_BLOCK_LEN;
    if (o.cols > max_cols)
      fail("%u columns exceed the %u-column limit for this move-out", o.cols, max_cols);
    const uint32_t blocks = (o.cols + DIM - 1) / DIM;
    for (uint32_t b = 0; b < blocks; b++) {
      if (from_acc) check_acc(o.addr.row + b * DIM, o.rows, cur);
      else check_sp(o.addr.row + b * DIM, o.rows, cur);
    }
    check_stride(st.stride, o.rows);
    for (uint32_t r = 0; r < o.rows; r++) check_dram(dram + r * st.stride, (uint64_t)o.cols * ebytes);

    if (print_timeline) std::snprintf(cmd_detail, sizeof cmd_detail, ":r%u:c%u:a%llx", o.rows, o.cols, (unsigned long long)dram);
    if (g_timed) {
      Queue& q = stq;
      uint64_t t = enter(q);
      // ReservationStation.scala: a store depends on every earlier store until it completes.
      if (q.last_done > t) t = q.last_done;
      for (uint32_t b = 0; b < blocks; b++)
        for (uint32_t r = 0; r < o.rows; r++) {
          uint32_t row = o.addr.row + b * DIM + r;
          uint64_t ready = from_acc ? acc_w[row] : sp_w[row];
          if (ready > t) t = ready;
        }
      uint64_t s = start_after(q, t);
      // A bank that refuses reads (an accumulator bank being accumulated into, ACC_BANKS; a
      // scratchpad bank being written, single ported): the rows' reads start later by the
      // cycles they lose, charged to the bank of the first row (a move-out whose blocks
      // straddle a bank boundary is charged to one bank).
      s += moveout_read_stall(write_key(from_acc, o.addr.row), s, (uint64_t)o.rows * blocks);
      // The local rows are read one per cycle (accumulator reads go through the scale/activation
      // pipeline) and the writer sends them as they come.
      uint64_t issue_end;
      uint64_t wdone = dma_transfer(dma_wr, s + (from_acc ? ACC_READ_LATENCY : SP_READ_LATENCY), dram, st.stride,
                                    o.rows, (uint64_t)o.cols * ebytes, issue_end, true, 1, blocks);
      // Scratchpad.scala reports a move-out done (io.dma.write.resp) as soon as its rows are read
      // out of the local memory, and the queues behind that read let the reads run ahead of the
      // writer by WRITE_PATH_ROWS_ACC / _SP block-rows; the DRAM acknowledgements are waited for
      // only by fence (busy). ReservationStation.scala: a later command overwriting these rows,
      // and (from ext-spad on) the next store, wait for that.
      const uint64_t complete = moveout_reads_fired(s, (uint64_t)o.rows * blocks,
                                                    from_acc ? WRITE_PATH_ROWS_ACC : WRITE_PATH_ROWS_SP);
      for (uint32_t b = 0; b < blocks; b++)
        for (uint32_t r = 0; r < o.rows; r++) {
          uint32_t row = o.addr.row + b * DIM + r;
          uint64_t& rd = from_acc ? acc_r[row] : sp_r[row];
          if (complete > rd) rd = complete;
        }
      occupy(q, s, complete - s, complete);
      if (wdone > writes_acked) writes_acked = wdone;
    }

    for (uint32_t b = 0; b < blocks; b++) {
      uint32_t ncols = o.cols - b * DIM < DIM ? o.cols - b * DIM : DIM;
      for (uint32_t r = 0; r < o.rows; r++) {
        uint32_t row = o.addr.row + b * DIM + r;
        uint64_t dst = dram + r * st.stride + (uint64_t)b * DIM * ebytes;
        for (uint32_t k = 0; k < ncols; k++) {
          if (!from_acc) {
            st8(dst + k, sp[(size_t)row * DIM + k]);
          } else if (full) {
            st32(dst + 4 * k, acc[(size_t)row * DIM + k]);
          } else {
            st8(dst + k, acc_to_elem(acc[(size_t)row * DIM + k], st.act, st.scale));
          }
        }
      }
    }
  }

  // Max-pooling move-out from the accumulator (config_st pool_stride != 0), as used by conv
  // layers with fused pooling: the rows hold an orows x ocols output image (one pixel per row,
  // `cols` channels); each pooled pixel is the max over a pool_size x pool_size window with
  // padding (upad, lpad), written as int8 with scaling and activation.
  void pooled_mvout(uint64_t dram, const Operand& o) {
    if (!o.addr.acc) fail("pooling move-outs must read the accumulator");
    if (o.cols > DIM) fail("pooling move-outs take at most %u columns", DIM);
    const uint32_t ps = st.pool_size, pstride = st.pool_stride;
    const uint32_t orows = st.orows, ocols = st.ocols, porows = st.porows, pocols = st.pocols;
    if (ps == 0 || orows == 0 || ocols == 0 || porows == 0 || pocols == 0)
      fail("pooling configuration needs pool_size, orows, ocols, porows, pocols >= 1");
    check_acc(o.addr.row, orows * ocols, cur);
    const uint64_t out_row_bytes = st.stride;  // bytes between output pixels
    const uint64_t pool_out_dim = st.pool_out_dim;
    for (uint32_t pr = 0; pr < porows; pr++)
      for (uint32_t pc = 0; pc < pocols; pc++)
        check_dram(dram + (pr * pool_out_dim + pc) * out_row_bytes, o.cols);
    Queue& q = stq;
    uint64_t t = enter(q);
    for (uint32_t r = 0; r < orows * ocols; r++)
      if (acc_w[o.addr.row + r] > t) t = acc_w[o.addr.row + r];
    uint64_t s = start_after(q, t);
    s += moveout_read_stall(BANKS + acc_bank_of(o.addr.row), s, (uint64_t)porows * pocols * ps * ps);
    // Each pooled pixel reads pool_size^2 accumulator rows, one per cycle, then is written.
    uint64_t issue_end;
    uint64_t wdone = dma_transfer(dma_wr, s + (uint64_t)ps * ps + ACC_READ_LATENCY, dram, out_row_bytes,
                                  porows * pocols, o.cols, issue_end, true);
    if (wdone > writes_acked) writes_acked = wdone;
    uint64_t reads = s + (uint64_t)porows * pocols * ps * ps + ACC_READ_LATENCY;
    if (issue_end < reads) issue_end = reads;
    uint64_t occ = issue_end - s;
    for (uint32_t r = 0; r < orows * ocols; r++) {
      uint64_t& rd = acc_r[o.addr.row + r];
      if (reads > rd) rd = reads;
    }
    occupy(q, s, occ, issue_end > reads ? issue_end : reads);
    for (uint32_t pr = 0; pr < porows; pr++)
      for (uint32_t pc = 0; pc < pocols; pc++)
        for (uint32_t ch = 0; ch < o.cols; ch++) {
          bool any = false;
          int8_t best = -128;
          for (uint32_t wr = 0; wr < ps; wr++)
            for (uint32_t wc = 0; wc < ps; wc++) {
              int64_t orow = (int64_t)pr * pstride + wr - st.upad;
              int64_t ocol = (int64_t)pc * pstride + wc - st.lpad;
              int8_t v;
              if (orow < 0 || ocol < 0 || orow >= orows || ocol >= ocols) {
                v = 0;  // padding contributes zero
              } else {
                int32_t a = acc[(size_t)(o.addr.row + orow * ocols + ocol) * DIM + ch];
                v = acc_to_elem(a, st.act, st.scale);
              }
              if (!any || v > best) best = v;
              any = true;
            }
          st8(dram + (pr * pool_out_dim + pc) * out_row_bytes + ch, best);
        }
  }

  // Which single-ported SRAM an operand streams from: a scratchpad bank, the accumulator
  // (AccumulatorMem: reads of two operands from it serialise too), or none (GARBAGE_ADDR).
  static int bank_key(const Operand& o) {
    if (o.addr.garbage) return -1;
    if (o.addr.acc) return 100;
    return (int)(o.addr.row / g_bank_rows);
  }
  // How many operands of one step read the same SRAM (1: no conflict).
  static uint64_t bank_conflict(int a, int b, int d) {
    uint64_t worst = 1;
    const int k[3] = {a, b, d};
    for (int i = 0; i < 3; i++) {
      if (k[i] < 0) continue;
      uint64_t n = 0;
      for (int j = 0; j < 3; j++) n += k[j] == k[i];
      if (n > worst) worst = n;
    }
    return worst;
  }
  // The last compute step, while a following preload may still join it.
  struct MulStep {
    bool valid = false;
    uint64_t start = 0, cost = 0, rows = 0;
    int a_key = -1, b_key = -1;
    uint32_t a_row = 0, a_n = 0, a_stride = 1, b_row = 0, b_n = 0;
    uint32_t c_row = 0, c_n = 0, c_stride = 1;
    bool c_acc = false;
    uint64_t drain = 0;
    int rmw_slot[ACC_BANKS] = {-1, -1};  // this step's accumulating-write windows (acc_rmw)
    int write_slot[WRITE_KEYS] = {-1, -1, -1, -1, -1, -1};  // its result-write windows (ex_writes)
    static void move_window(BankWrites& w, int slot, uint64_t ready) {  // the window now ends at ready
      if (ready > w.to[slot]) {
        w.from[slot] += ready - w.to[slot];
        w.to[slot] = ready;
      }
    }
    void finish(gemmini_t& g, uint64_t end) {  // the step now ends at `end`
      uint64_t ready = end + MESH_FILL_LATENCY + drain;
      for (uint32_t b = 0; b < ACC_BANKS; b++)
        if (rmw_slot[b] >= 0) move_window(g.acc_rmw[b], rmw_slot[b], ready);
      for (uint32_t k = 0; k < WRITE_KEYS; k++) {
        if (write_slot[k] < 0) continue;
        BankWrites& w = g.ex_writes[k];
        move_window(w, write_slot[k], ready);
        g.recheck_mvins(k, w.from[write_slot[k]], w.to[write_slot[k]]);
      }
      for (uint32_t r = 0; r < a_n; r++) {
        uint64_t& rd = g.sp_r[a_row + r * a_stride];
        if (ready > rd) rd = ready;
      }
      for (uint32_t r = 0; r < b_n; r++)
        if (ready > g.sp_r[b_row + r]) g.sp_r[b_row + r] = ready;
      for (uint32_t r = 0; r < c_n; r++) {
        uint64_t& w = c_acc ? g.acc_w[c_row + r * c_stride] : g.sp_w[c_row + r * c_stride];
        if (ready > w) w = ready;
      }
    }
  };
  MulStep last_mul;
  uint64_t exq_steps_paired = 0;
  // When each of the last MESH_TAGS_IN_FLIGHT mesh steps frees its tag (MeshWithDelays'
  // tag queue; steps leave the mesh in the order they entered, so a ring is exact). A step's
  // tag is freed when the results of the step MESH_TAG_LAG_* after it leave (timing_params.h),
  // so until that step is booked its slot holds "not yet".
  uint64_t mesh_tag_free[MESH_TAGS_IN_FLIGHT] = {};
  uint64_t mesh_tags_taken = 0, mesh_tag_wait_cycles = 0;
  uint64_t mesh_tag_ready(uint64_t t) {  // earliest start at or after t with a free tag
    const uint64_t f = mesh_tag_free[mesh_tags_taken % MESH_TAGS_IN_FLIGHT];
    if (f > t) { mesh_tag_wait_cycles += f - t; return f; }
    return t;
  }
  // Cycles one weight block of loop_conv takes in steady state: a DIM-row step (the new
  // weights shift in) then n - 1 steps of r rows, each step waiting for its row slot and for
  // the tag of the step six back. Three blocks are run through the ring; the third's length
  // is the answer (the first two settle it). Long blocks are settled by their own length.
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> tagged_blocks;
  uint64_t mesh_tagged_block(uint64_t n, uint64_t r) {
    auto key = std::make_pair(n, r);
    auto hit = tagged_blocks.find(key);
    if (hit != tagged_blocks.end()) return hit->second;
    const uint64_t blocks = n > 4096 ? 1 : 3, F = MESH_FILL_LATENCY + 1;
    uint64_t ring_end[MESH_TAGS_IN_FLIGHT] = {}, t = 0, k = 0, block_start = 0;
    for (uint64_t b = 0; b < blocks; b++) {
      block_start = t;
      for (uint64_t i = 0; i < n; i++, k++) {
        const uint64_t rows = i == 0 ? (uint64_t)DIM : r;
        uint64_t& slot = ring_end[k % MESH_TAGS_IN_FLIGHT];
        if (k >= MESH_TAGS_IN_FLIGHT && slot > t) t = slot;
        slot = ~0ull;
        if (k >= MESH_TAG_LAG_WS) ring_end[(k - MESH_TAG_LAG_WS) % MESH_TAGS_IN_FLIGHT] = t + rows + F;
        t += rows;
      }
    }
    const uint64_t cycles = t - block_start;
    tagged_blocks.emplace(key, cycles);
    return cycles;
  }
  void mesh_tag_release(uint64_t step, uint64_t results_out) {  // step `step`'s results leave then
    const uint64_t lag = ex.dataflow == WEIGHT_STATIONARY ? MESH_TAG_LAG_WS : MESH_TAG_LAG_OS;
    if (step >= lag) mesh_tag_free[(step - lag) % MESH_TAGS_IN_FLIGHT] = results_out + 1;
  }
  void mesh_tag_take(uint64_t results_out) {
    const uint64_t step = mesh_tags_taken++;
    mesh_tag_free[step % MESH_TAGS_IN_FLIGHT] = ~0ull;
    mesh_tag_release(step, results_out);
  }
  void mesh_tag_extend(uint64_t results_out) {  // the last step grew (a preload joined it)
    mesh_tag_release(mesh_tags_taken - 1, results_out);
  }

  void preload(uint64_t rs1, uint64_t rs2) {
    cur = "preload";
    Operand bd = decode_operand(rs1), c = decode_operand(rs2);
    refuse_lean_os();
    if (!bd.addr.garbage) {
      if (bd.addr.acc) refuse_acc_operand("the B/D operand", bd.raw);
      if (bd.rows > DIM || bd.cols > DIM) fail("B/D operand is %ux%u, larger than %ux%u", bd.rows, bd.cols, DIM, DIM);
      uint32_t phys_rows = (ex.dataflow == WEIGHT_STATIONARY && ex.b_transpose) ? bd.cols : bd.rows;
      check_sp(bd.addr.row, phys_rows, cur);
    }
    if (!c.addr.garbage) {
      if (lean && !c.addr.acc)
        fail("results go to scratchpad row 0x%x, but the Lean image cannot write the scratchpad from the array "
             "(Configs.scala leanConfig ex_write_to_spad=false: ExecuteController.scala drops the write); "
             "write them to an accumulator address", c.addr.row);
      if (c.rows > DIM || c.cols > DIM) fail("C operand is %ux%u, larger than %ux%u", c.rows, c.cols, DIM, DIM);
      uint64_t span = c.rows == 0 ? 0 : (uint64_t)(c.rows - 1) * ex.c_stride + 1;
      if (c.addr.acc) check_acc(c.addr.row, span, cur); else check_sp(c.addr.row, span, cur);
    }
    pre_bd = bd;
    pre_c = c;
    have_preload = true;

    // Timing (ExecuteController.scala): a preload joins the compute step just before it in the
    // queue ("perform_mul_pre") when it was already waiting when that step started; otherwise it
    // takes a step of its own. A step streams `total_rows` rows: DIM when weights are shifted in
    // (or in OS), else max(A rows, B rows, WS_MIN_STEP_ROWS); operands read from the same
    // scratchpad bank (or both from the accumulator) take turns, one row each per cycle.
    if (g_timed) {
      Queue& q = exq;
      uint64_t t = enter(q);
      const bool ws = ex.dataflow == WEIGHT_STATIONARY;
      uint32_t phys_rows = 0;
      if (!bd.addr.garbage) {
        phys_rows = (ws && ex.b_transpose) ? bd.cols : bd.rows;
        for (uint32_t r = 0; r < phys_rows; r++)
          if (sp_w[bd.addr.row + r] > t) t = sp_w[bd.addr.row + r];
      }
      const int d_key = bank_key(bd);
      if (last_mul.valid && q.free_at == last_mul.start + last_mul.cost && t <= last_mul.start) {
        uint64_t rows = (!ws || d_key >= 0) ? (uint64_t)DIM : last_mul.rows;
        uint64_t cost = rows * bank_conflict(last_mul.a_key, last_mul.b_key, d_key);
        cost += port_stall(last_mul.a_key, last_mul.b_key, d_key, last_mul.start, cost);
        if (cost < last_mul.cost) cost = last_mul.cost;
        uint64_t end = last_mul.start + cost;
        {
          StepRec& r = recent_steps[(recent_n - 1) % 32];  // the compute step just joined
          r.end = end;
          r.keys[2] = d_key;
        }
        q.busy += cost - last_mul.cost;
        q.free_at = end;
        q.retire(end);
        last_mul.finish(*this, end);
        mesh_tag_extend(end + MESH_FILL_LATENCY + last_mul.drain);
        for (uint32_t r = 0; r < phys_rows; r++)
          if (end > sp_r[bd.addr.row + r]) sp_r[bd.addr.row + r] = end;
        exq_steps_paired++;
      } else {
        uint64_t cost = (!ws || d_key >= 0) ? (uint64_t)DIM : (uint64_t)WS_MIN_STEP_ROWS;
        uint64_t s = mesh_tag_ready(start_after(q, t));
        cost += port_stall(d_key, -1, -1, s, cost);
        mesh_tag_take(s + cost + MESH_FILL_LATENCY);
        note_step(s, s + cost, d_key, -1, -1);
        for (uint32_t r = 0; r < phys_rows; r++)
          if (s + cost > sp_r[bd.addr.row + r]) sp_r[bd.addr.row + r] = s + cost;
        occupy(q, s, cost, s + cost);
      }
    }
    last_mul.valid = false;
    if (ex.dataflow == WEIGHT_STATIONARY) {
      // Weights are latched now; compute_preloaded makes them current.
      std::memset(next_weights, 0, sizeof next_weights);
      if (!bd.addr.garbage)
        for (uint32_t k = 0; k < bd.rows; k++)
          for (uint32_t j = 0; j < bd.cols; j++)
            next_weights[k][j] = ex.b_transpose ? sp[(size_t)(bd.addr.row + j) * DIM + k]
                                                : sp[(size_t)(bd.addr.row + k) * DIM + j];
    } else {
      std::memset(next_os, 0, sizeof next_os);
      if (!bd.addr.garbage)
        for (uint32_t i = 0; i < bd.rows; i++)
          for (uint32_t j = 0; j < bd.cols; j++) next_os[i][j] = sp[(size_t)(bd.addr.row + i) * DIM + j];
    }
  }
  int8_t next_weights[DIM][DIM] = {};
  int32_t next_os[DIM][DIM] = {};

  void compute(uint64_t rs1, uint64_t rs2, bool preloaded) {
    cur = preloaded ? "compute_preloaded" : "compute_accumulated";
    Operand a = decode_operand(rs1), bd = decode_operand(rs2);
    if (!have_preload) fail("no preload before the first compute");
    if (a.rows > DIM || a.cols > DIM) fail("A operand is %ux%u, larger than %ux%u", a.rows, a.cols, DIM, DIM);
    if (bd.rows > DIM || bd.cols > DIM) fail("B/D operand is %ux%u, larger than %ux%u", bd.rows, bd.cols, DIM, DIM);
    refuse_lean_os();
    const bool ws = ex.dataflow == WEIGHT_STATIONARY;
    if (lean && ws && !bd.addr.garbage)
      fail("the D operand is scratchpad row 0x%x, but the Lean image ignores it (Configs.scala leanConfig "
           "hardcode_d_to_garbage_addr: ExecuteController.scala makes it GARBAGE_ADDR); pass GARBAGE_ADDR and "
           "move a bias into the accumulator instead", bd.addr.row);
    uint32_t a_phys = 0;
    if (!a.addr.garbage) {
      if (a.addr.acc) refuse_acc_operand("operand A", a.raw);
      a_phys = ex.a_transpose ? a.cols : a.rows;
      uint64_t span = a_phys == 0 ? 0 : (uint64_t)(a_phys - 1) * ex.a_stride + 1;
      check_sp(a.addr.row, span, cur);
    }
    uint32_t bd_phys = 0;
    if (!bd.addr.garbage) {
      if (bd.addr.acc) refuse_acc_operand("operand B/D", bd.raw);
      bd_phys = (!ws && ex.b_transpose) ? bd.cols : bd.rows;
      check_sp(bd.addr.row, bd_phys, cur);
    }
    const Operand& c = pre_c;

    // Timing.
    if (g_timed) {
      Queue& q = exq;
      uint64_t t = enter(q);
      for (uint32_t r = 0; r < a_phys; r++) {
        uint32_t row = a.addr.row + r * ex.a_stride;
        if (sp_w[row] > t) t = sp_w[row];
      }
      for (uint32_t r = 0; r < bd_phys; r++)
        if (sp_w[bd.addr.row + r] > t) t = sp_w[bd.addr.row + r];
      uint32_t c_rows = c.addr.garbage ? 0 : c.rows;
      for (uint32_t r = 0; r < c_rows; r++) {
        uint32_t row = c.addr.row + r * ex.c_stride;
        uint64_t busy = c.addr.acc ? acc_r[row] : sp_r[row];
        if (busy > t) t = busy;
      }
      uint64_t s = mesh_tag_ready(start_after(q, t));
      // One step of total_rows rows (see preload); the transposer path always streams DIM rows.
      uint64_t rows = DIM;
      if (ws && !ex.a_transpose) {
        uint64_t ra = a.addr.garbage ? 1 : a.rows, rb = bd.addr.garbage ? 1 : bd.rows;
        rows = ra > rb ? ra : rb;
        if (rows < WS_MIN_STEP_ROWS) rows = WS_MIN_STEP_ROWS;
      }
      const int a_key = bank_key(a), b_key = bank_key(bd);
      uint64_t cost = rows * bank_conflict(a_key, b_key, -1);
      cost += port_stall(a_key, b_key, -1, s, cost);
      // Results leave the mesh MESH_FILL_LATENCY after the last row enters (OS: shifted out,
      // one row per cycle, when the next step propagates).
      uint64_t drain = ws ? 0 : (uint64_t)c_rows * OS_DRAIN_CYCLES_PER_ROW;
      uint64_t ready = s + cost + MESH_FILL_LATENCY + drain;
      // ReservationStation.scala: a load overwriting rows a compute reads waits for the compute
      // to complete (its results written), so the read rows stay busy until `ready`.
      for (uint32_t r = 0; r < a_phys; r++) {
        uint32_t row = a.addr.row + r * ex.a_stride;
        if (ready > sp_r[row]) sp_r[row] = ready;
      }
      for (uint32_t r = 0; r < bd_phys; r++)
        if (ready > sp_r[bd.addr.row + r]) sp_r[bd.addr.row + r] = ready;
      for (uint32_t r = 0; r < c_rows; r++) {
        uint32_t row = c.addr.row + r * ex.c_stride;
        if (c.addr.acc) { acc_w[row] = ready; acc_touched[row] = 1; }
        else { sp_w[row] = ready; sp_touched[row] = 1; }
      }
      int rmw_slot[ACC_BANKS] = {-1, -1};
      if (c.addr.acc && c.addr.accumulate) note_step_rmw(c.addr.row, c_rows, ex.c_stride, ready, rmw_slot);
      int write_slot[WRITE_KEYS];
      note_step_writes(c.addr.acc, c.addr.row, c_rows, ex.c_stride, ready, write_slot);
      occupy(q, s, cost, ready);
      mesh_tag_take(ready);
      note_step(s, s + cost, a_key, b_key, -1);
      last_mul = MulStep{true, s, cost, rows, a_key, b_key, a.addr.row, a_phys, ex.a_stride,
                         bd.addr.garbage ? 0u : bd.addr.row, bd_phys,
                         c.addr.row, c_rows, ex.c_stride, c.addr.acc, drain, {rmw_slot[0], rmw_slot[1]}};
      std::memcpy(last_mul.write_slot, write_slot, sizeof write_slot);
    }

    // Function. A is I x K (logical), stored transposed when a_transpose.
    int16_t A[DIM][DIM] = {};
    if (!a.addr.garbage)
      for (uint32_t i = 0; i < a.rows; i++)
        for (uint32_t k = 0; k < a.cols; k++)
          A[i][k] = ex.a_transpose ? sp[(size_t)(a.addr.row + k * ex.a_stride) * DIM + i]
                                   : sp[(size_t)(a.addr.row + i * ex.a_stride) * DIM + k];
    int32_t out[DIM][DIM];
    int16_t BT[DIM][DIM] = {};  // the stationary or streamed B operand, transposed: BT[j][k]
    if (ws) {
      if (preloaded) std::memcpy(weights, next_weights, sizeof weights);
      for (int k = 0; k < DIM; k++)
        for (int j = 0; j < DIM; j++) BT[j][k] = weights[k][j];
      for (int i = 0; i < DIM; i++)
        for (int j = 0; j < DIM; j++) out[i][j] = 0;
      if (!bd.addr.garbage)
        for (uint32_t i = 0; i < bd.rows; i++)
          for (uint32_t j = 0; j < bd.cols; j++) out[i][j] = sp[(size_t)(bd.addr.row + i) * DIM + j];
      mesh_multiply(A, BT, out);
    } else {
      if (preloaded) std::memcpy(os_acc, next_os, sizeof os_acc);
      if (!bd.addr.garbage)
        for (uint32_t k = 0; k < bd.rows; k++)
          for (uint32_t j = 0; j < bd.cols; j++)
            BT[j][k] = ex.b_transpose ? sp[(size_t)(bd.addr.row + j) * DIM + k]
                                      : sp[(size_t)(bd.addr.row + k) * DIM + j];
      mesh_multiply(A, BT, os_acc);
      std::memcpy(out, os_acc, sizeof out);
    }
    if (c.addr.garbage) return;
    for (uint32_t i = 0; i < c.rows; i++) {
      uint32_t row = c.addr.row + i * ex.c_stride;
      for (uint32_t j = 0; j < c.cols; j++) {
        int32_t v = out[i][j];
        if (c.addr.acc) {
          int32_t& d = acc[(size_t)row * DIM + j];
          d = c.addr.accumulate ? (int32_t)((uint32_t)d + (uint32_t)v) : v;
        } else {
          int64_t x = rounding_shift(v, ex.shift);
          if (ex.act == ACT_RELU && x < 0) x = 0;
          sp[(size_t)row * DIM + j] = sat8(x);
        }
      }
    }
  }

  // ---- performance counters (CounterFile.scala; the suite's gemmini_counter.h) ----------
  // rs1: bit 0 resets every counter, bit 1 clears the snapshot, bit 2 takes one, bit 3
  // (with bits 6:4 = counter, 17:12 = event, 31 = external) configures a counter and zeroes
  // it; rd returns counter bits 6:4 (from the snapshot while one is held). Incremental events
  // count modelled cycles or requests since the counter was configured; external events are
  // levels (reservation-station occupancy, DMA bytes and latency).
  struct Counter { uint32_t event = 0; bool external = false; uint64_t base = 0; };
  Counter counters[8];
  uint64_t counter_snap[8] = {0};
  bool counter_snap_on = false;
  uint64_t rd_bytes = 0, wr_bytes = 0, rd_latency = 0, wr_latency = 0, rs_full_cycles = 0, loop_active = 0;
  static uint64_t active(const Queue& q, uint64_t t) {
    uint64_t future = q.free_at > t ? q.free_at - t : 0;
    return q.busy > future ? q.busy - future : 0;
  }
  static uint64_t in_station(const Queue& q, uint64_t t) {
    uint64_t n = 0, k = q.count < (uint64_t)q.depth ? q.count : (uint64_t)q.depth;
    for (uint64_t i = 0; i < k; i++) n += q.ring[(q.count - 1 - i) % q.depth] > t;
    return n;
  }
  uint64_t event_value(uint32_t ev, bool external, uint64_t t) const {
    if (external) {
      switch (ev) {
        case 1: return in_station(ldq, t);
        case 2: return in_station(stq, t);
        case 3: return in_station(exq, t);
        case 4: return rd_bytes;
        case 5: return wr_bytes;
        case 6: return rd_latency;
        case 7: return wr_latency;
        default: return 0;
      }
    }
    const uint64_t ld = active(ldq, t), st = active(stq, t), ex = active(exq, t);
    auto mn = [](uint64_t a, uint64_t b) { return a < b ? a : b; };
    switch (ev) {
      case 1: case 8: case 9: case 18: return ld;
      case 2: case 11: case 12: case 21: return st;
      case 3: case 24: return ex;
      case 4: return mn(ld, st);
      case 5: return mn(ld, ex);
      case 6: return mn(st, ex);
      case 7: return mn(mn(ld, st), ex);
      case 15: return tlb_misses * TLB_MISS_CYCLES;  // no TLB misses in machine mode
      case 16: return tlb_filter_misses;  // requests that reached the shared TLB (all hit)
      case 17: return dma_read_reqs + dma_write_reqs;
      case 41: return rs_full_cycles;
      case 42: return ld > st ? (ld > ex ? ld : ex) : (st > ex ? st : ex);
      case 43: return loop_active;
      default: return 0;  // hazard, wait, garbage, im2col and transposer events: not modelled
    }
  }
  uint64_t counter_read_at(int i, uint64_t t) const {
    const Counter& c = counters[i];
    if (c.event == 0) return 0;
    uint64_t v = event_value(c.event, c.external, t);
    return c.external ? v : (v > c.base ? v - c.base : 0);
  }
  reg_t counter_op(uint64_t rs1) {
    cur = "counter";
    const uint64_t t = now();
    const int idx = (int)((rs1 >> 4) & 7);
    if (rs1 & 1) {
      // The global reset also clears the DMA's own running totals (CounterFile.scala drives
      // external_reset from it; DMA.scala / XactTracker.scala zero total_bytes_read /
      // total_bytes_sent / total_latency on it); occupancy levels are live values.
      rd_bytes = wr_bytes = rd_latency = wr_latency = 0;
      for (auto& c : counters) c.base = c.event ? event_value(c.event, c.external, t) : 0;
      counter_snap_on = false;
    }
    if (rs1 & 8) {
      Counter& c = counters[idx];
      c.event = (uint32_t)((rs1 >> 12) & 0x3f);
      c.external = (rs1 >> 31) & 1;
      c.base = c.event ? event_value(c.event, c.external, t) : 0;
    }
    if (rs1 & 2) counter_snap_on = false;
    uint64_t value = counter_snap_on ? counter_snap[idx] : counter_read_at(idx, t);
    if (rs1 & 4) {
      for (int i = 0; i < 8; i++) counter_snap[i] = counter_read_at(i, t);
      counter_snap_on = true;
    }
    return (reg_t)(uint32_t)value;
  }

  void flush() {
    cur = "flush";
    Queue& q = exq;
    uint64_t s = start_after(q, enter(q));
    occupy(q, s, CONFIG_CYCLES, s + CONFIG_CYCLES);
  }

  // ---- loop_ws: the hardware matmul unroller --------------------------------------------
  // Emits the same mvin/preload/compute/mvout stream as Gemmini's LoopMatmul: A tiles from
  // the start of a scratchpad half, B tiles at the end of it, D/C in one half of the
  // accumulator (halves alternate between loops that write C), execute order k, j, i.
  void loop_ws(uint64_t rs1, uint64_t rs2) {
    cur = "loop_ws";
    const uint32_t I = lw.max_i, J = lw.max_j, K = lw.max_k;
    const bool ex_accumulate = rs1 & 1, full_c = (rs1 >> 1) & 1, low_d = (rs1 >> 2) & 1;
    const uint32_t act = (rs1 >> 8) & 7;
    const uint32_t a_spad_id = (rs1 >> 18) & 3, b_spad_id = (rs1 >> 16) & 3;
    const bool a_t = rs2 & 1, b_t = (rs2 >> 1) & 1, resadd = (rs2 >> 2) & 1;
    if (act != ACT_NONE && act != ACT_RELU) fail(ACTIVATION_REFUSAL, act);
    if (resadd) {
      loop_resadd(I, J);
      return;
    }
    if (I == 0 || J == 0 || K == 0) fail("bounds I=%u J=%u K=%u must be at least 1 (set by loop_ws config bounds)", I, J, K);
    if (lw.pad_i >= DIM || lw.pad_j >= DIM || lw.pad_k >= DIM)
      fail("padding pad_I=%u pad_J=%u pad_K=%u must be below DIM=%u", lw.pad_i, lw.pad_j, lw.pad_k, DIM);
    if (ex.dataflow != WEIGHT_STATIONARY) fail("loop_ws needs the WEIGHT_STATIONARY dataflow (config_ex)");
    const uint32_t half_sp = g_sp_rows / 2, half_acc = g_acc_rows / 2;
    const uint64_t a_rows = (uint64_t)I * K * DIM, b_rows = (uint64_t)K * J * DIM, c_rows = (uint64_t)I * J * DIM;
    if (c_rows > half_acc)
      fail("I*J*DIM = %llu accumulator rows exceed half the accumulator (%u rows)", (unsigned long long)c_rows, half_acc);
    const uint32_t slot = loop_count % 2;
    uint32_t a_start = a_spad_id == 0 ? slot * half_sp : (a_spad_id - 1) * half_sp;
    uint32_t b_end = b_spad_id == 0 ? (slot + 1) * half_sp : b_spad_id * half_sp;
    if (a_rows > half_sp || b_rows > half_sp)
      fail("A (%llu rows) or B (%llu rows) exceeds half the scratchpad (%u rows)",
           (unsigned long long)a_rows, (unsigned long long)b_rows, half_sp);
    if (b_rows > b_end) fail("B tiles (%llu rows) do not fit below scratchpad row %u", (unsigned long long)b_rows, b_end);
    const uint32_t b_start = b_end - (uint32_t)b_rows;
    if (a_spad_id == b_spad_id && a_start + a_rows > b_start)
      fail("A tiles (rows %u..%llu) and B tiles (rows %u..%u) overlap in the scratchpad; use smaller I/J/K",
           a_start, (unsigned long long)(a_start + a_rows - 1), b_start, b_end - 1);
    const uint64_t mem = mem_hi - mem_lo;
    if (lw.a_stride > mem || lw.b_stride > mem || lw.c_stride > mem || lw.d_stride > mem)
      fail("a DRAM stride (A %llu, B %llu, D %llu, C %llu elements) is larger than target memory",
           (unsigned long long)lw.a_stride, (unsigned long long)lw.b_stride,
           (unsigned long long)lw.d_stride, (unsigned long long)lw.c_stride);
    const uint32_t acc_base = loop_acc_base;

    // Host: a third loop waits until the loop two back has been unrolled.
    if (!internal) {
      wait_until(loop_issue_end[slot]);
      stall += ROCC_ISSUE_CYCLES;
    }
    const uint64_t t0 = now();
    internal = true;
    internal_issue = t0;
    loop_issue_cursor = t0;
    const ExecConfig saved_ex = ex;
    ex.a_transpose = a_t;
    ex.b_transpose = b_t;
    ex.a_stride = 1;
    ex.c_stride = 1;

    auto tile_rows = [](uint32_t idx, uint32_t max, uint32_t pad) { return DIM - (idx == max - 1 ? pad : 0); };
    auto acc_addr = [&](uint32_t row, bool accumulate, bool full) {
      return 0x80000000u | (accumulate ? 0x40000000u : 0) | (full ? 0x20000000u : 0) | row;
    };
    auto rs2_of = [](uint32_t addr, uint32_t cols, uint32_t rows) {
      return ((uint64_t)rows << 48) | ((uint64_t)cols << 32) | addr;
    };

    // LoopMatmul.scala runs its loaders (LdA, LdB, LdD), its execute unroller (Ex) and its
    // store unroller (StC) as separate state machines, each on its own loop: a loader takes
    // the next loop as soon as it has issued the last one's move-ins, so the next tile's
    // loads overlap this tile's computes; Ex issues a step once the loads it needs have been
    // issued (ld_ahead: the loaders' k/i/j counters have passed it); StC issues a move-out
    // once Ex has issued that output's last compute (ex_ahead). Each is held back only by its
    // own reservation-station queue (enter()). Modelled as three cursors; the RTL's one
    // command per cycle shared by all of them (the global Arbiter) is not modelled.
    uint64_t ld_c = std::max(t0, lw_ld_free), ex_c = std::max(t0, lw_ex_free), st_c = std::max(t0, lw_st_free);
    auto on = [&](uint64_t& cursor, auto&& issue) {
      internal_issue = cursor;
      issue();
      cursor = internal_issue;
    };
    // D (bias) into the accumulator first: execution waits for all of it (ldd_ahead).
    if (lw.d != 0) {
      const uint32_t dblocks = low_d ? (J < MAX_BLOCK_LEN ? J : MAX_BLOCK_LEN) : MAX_BLOCK_LEN_ACC;
      const uint32_t dbytes = low_d ? 1 : 4;
      for (uint32_t j = 0; j < J; j += dblocks)  // LdD: i innermost, as StC
        for (uint32_t i = 0; i < I; i++) {
          uint32_t blocks = j + dblocks <= J ? dblocks : J - j;
          uint32_t cols = blocks * DIM - (j + blocks >= J ? lw.pad_j : 0);
          uint32_t rows = tile_rows(i, I, lw.pad_i);
          uint64_t dram = lw.d + ((uint64_t)i * lw.d_stride + j) * DIM * dbytes;
          on(ld_c, [&] { mvin(2, dram, rs2_of(acc_addr(acc_base + (i * J + j) * DIM, false, false), cols, rows)); });
        }
      ex_c = std::max(ex_c, ld_c);
    }
    // A and B tiles are loaded just ahead of the execute order (k, then j, then i).
    const uint32_t a_max_r = a_t ? K : I, a_max_c = a_t ? I : K;
    const uint32_t a_pad_r = a_t ? lw.pad_k : lw.pad_i, a_pad_c = a_t ? lw.pad_i : lw.pad_k;
    const uint32_t b_max_r = b_t ? J : K, b_max_c = b_t ? K : J;
    const uint32_t b_pad_r = b_t ? lw.pad_j : lw.pad_k, b_pad_c = b_t ? lw.pad_k : lw.pad_j;
    const uint32_t a_blocks = a_max_c < MAX_BLOCK_LEN ? a_max_c : MAX_BLOCK_LEN;
    const uint32_t b_blocks = b_max_c < MAX_BLOCK_LEN ? b_max_c : MAX_BLOCK_LEN;
    std::vector<uint8_t> a_loaded((size_t)a_max_r * a_max_c, 0), b_loaded((size_t)b_max_r * b_max_c, 0);
    auto load_tile = [&](bool is_a, uint32_t r, uint32_t c) {
      std::vector<uint8_t>& loaded = is_a ? a_loaded : b_loaded;
      const uint32_t max_r = is_a ? a_max_r : b_max_r, max_c = is_a ? a_max_c : b_max_c;
      const uint32_t nb = is_a ? a_blocks : b_blocks;
      if (loaded[(size_t)r * max_c + c]) return;
      uint64_t base = is_a ? lw.a : lw.b;
      if (base == 0) return;  // operand already resident (software reuse)
      uint32_t c0 = (c / nb) * nb;
      uint32_t blocks = c0 + nb <= max_c ? nb : max_c - c0;
      uint32_t cols = blocks * DIM - (c0 + blocks >= max_c ? (is_a ? a_pad_c : b_pad_c) : 0);
      uint32_t rows = DIM - (r == max_r - 1 ? (is_a ? a_pad_r : b_pad_r) : 0);
      uint64_t stride = is_a ? lw.a_stride : lw.b_stride;
      uint64_t dram = base + ((uint64_t)r * stride + c0) * DIM;
      uint32_t sp_addr = (is_a ? a_start : b_start) + (r * max_c + c0) * DIM;
      on(ld_c, [&] { mvin(is_a ? 0 : 1, dram, rs2_of(sp_addr, cols, rows)); });
      for (uint32_t b = 0; b < blocks; b++) loaded[(size_t)r * max_c + c0 + b] = 1;
    };
    // Loaders first (functionally the move-ins only write this loop's rows), recording when
    // the loads each execute step needs have been issued.
    std::vector<uint64_t> ld_gate((size_t)K * J * I);
    for (uint32_t k = 0; k < K; k++)
      for (uint32_t j = 0; j < J; j++)
        for (uint32_t i = 0; i < I; i++) {
          load_tile(true, a_t ? k : i, a_t ? i : k);
          load_tile(false, b_t ? j : k, b_t ? k : j);
          ld_gate[((size_t)k * J + j) * I + i] = ld_c;
        }
    std::vector<uint64_t> ex_last((size_t)I * J, 0);  // issue of each output's last compute
    for (uint32_t k = 0; k < K; k++)
      for (uint32_t j = 0; j < J; j++)
        for (uint32_t i = 0; i < I; i++) {
          uint32_t a_sp = a_start + ((a_t ? k : i) * a_max_c + (a_t ? i : k)) * DIM;
          uint32_t b_sp = b_start + ((b_t ? j : k) * b_max_c + (b_t ? k : j)) * DIM;
          uint32_t c_acc = acc_base + (i * J + j) * DIM;
          uint32_t kr = tile_rows(k, K, lw.pad_k), jc = tile_rows(j, J, lw.pad_j), ir = tile_rows(i, I, lw.pad_i);
          ex_c = std::max(ex_c, ld_gate[((size_t)k * J + j) * I + i]);
          on(ex_c, [&] {
            preload(rs2_of(i == 0 ? b_sp : GARBAGE, jc, kr),
                    rs2_of(acc_addr(c_acc, ex_accumulate || k != 0, false), jc, ir));
            compute(rs2_of(a_sp, kr, ir), rs2_of(GARBAGE, DIM, DIM), i == 0);
          });
          ex_last[(size_t)i * J + j] = ex_c;
        }
    if (lw.c != 0) {
      const uint32_t cblocks = full_c ? 1 : (J < MAX_BLOCK_LEN ? J : MAX_BLOCK_LEN);
      const uint32_t cbytes = full_c ? 4 : 1;
      // StC walks i innermost, then the next block of columns (LoopMatmul.scala LoopMatmulStC:
      // next_i = floorAdd(i, 1, max_i), next_j advances when i wraps), so a 64-column block's
      // move-outs follow the last k pass's j sweep rather than waiting for a whole row.
      for (uint32_t j = 0; j < J; j += cblocks)
        for (uint32_t i = 0; i < I; i++) {
          uint32_t blocks = j + cblocks <= J ? cblocks : J - j;
          uint32_t cols = blocks * DIM - (j + blocks >= J ? lw.pad_j : 0);
          uint32_t rows = tile_rows(i, I, lw.pad_i);
          uint64_t dram = lw.c + ((uint64_t)i * lw.c_stride + j) * DIM * cbytes;
          for (uint32_t b = 0; b < blocks; b++) st_c = std::max(st_c, ex_last[(size_t)i * J + j + b]);
          on(st_c, [&] { mvout(dram, rs2_of(acc_addr(acc_base + (i * J + j) * DIM, false, full_c), cols, rows)); });
        }
      loop_acc_base = (loop_acc_base + half_acc) % g_acc_rows;
    }
    if (timeline_line())
      std::fprintf(stderr, "TRACE loop_ws I %u J %u K %u unrolled %llu loads issued %llu computes issued %llu "
                   "stores issued %llu\n", I, J, K, (unsigned long long)(t0 - m_t0), (unsigned long long)(ld_c - m_t0),
                   (unsigned long long)(ex_c - m_t0), (unsigned long long)(st_c - m_t0));
    lw_ld_free = ld_c;
    lw_ex_free = ex_c;
    lw_st_free = st_c;
    internal_issue = std::max({ld_c, ex_c, st_c});
    ex = saved_ex;
    internal = false;
    loop_issue_end[slot] = internal_issue;
    last_loop_issue_end = internal_issue;
    loop_active += internal_issue - t0;
    loop_count++;
    cur = "loop_ws";
  }

  // Residual-add mode of loop_ws (is_resadd): C = A + B elementwise through the accumulator.
  // A and B (I x J tiles of int8) are moved into the accumulator with mvin / mvin2 (their
  // load configs normally "shrunk" with a scale), B accumulating onto A, and C is moved out
  // through the store path (config_st scale and activation). No computes are issued.
  void loop_resadd(uint32_t I, uint32_t J) {
    cur = "loop_ws";
    if (I == 0 || J == 0) fail("bounds I=%u J=%u must be at least 1 in residual-add mode", I, J);
    if (lw.pad_i >= DIM || lw.pad_j >= DIM) fail("padding pad_I=%u pad_J=%u must be below DIM=%u", lw.pad_i, lw.pad_j, DIM);
    const uint32_t half_acc = g_acc_rows / 2;
    if ((uint64_t)I * J * DIM > half_acc)
      fail("I*J*DIM = %llu accumulator rows exceed half the accumulator (%u rows)", (unsigned long long)I * J * DIM, half_acc);
    if (lw.a == 0 || lw.b == 0) fail("residual add needs both A and B addresses");
    const uint32_t slot = loop_count % 2;
    if (!internal) {
      wait_until(loop_issue_end[slot]);
      stall += ROCC_ISSUE_CYCLES;
    }
    const uint64_t t0 = now();
    internal = true;
    internal_issue = t0;
    loop_issue_cursor = t0;
    const uint32_t base = loop_acc_base;
    const uint32_t blocks_max = J < MAX_BLOCK_LEN ? J : MAX_BLOCK_LEN;
    auto rs2_of = [](uint32_t addr, uint32_t cols, uint32_t rows) {
      return ((uint64_t)rows << 48) | ((uint64_t)cols << 32) | addr;
    };
    for (int pass = 0; pass < 3; pass++)
      for (uint32_t i = 0; i < I; i++)
        for (uint32_t j = 0; j < J; j += blocks_max) {
          const uint32_t blocks = j + blocks_max <= J ? blocks_max : J - j;
          const uint32_t cols = blocks * DIM - (j + blocks >= J ? lw.pad_j : 0);
          const uint32_t rows = DIM - (i == I - 1 ? lw.pad_i : 0);
          const uint32_t row = base + (i * J + j) * DIM;
          if (pass == 0)
            mvin(0, lw.a + ((uint64_t)i * lw.a_stride + j) * DIM, rs2_of(0x80000000u | row, cols, rows));
          else if (pass == 1)
            mvin(1, lw.b + ((uint64_t)i * lw.b_stride + j) * DIM, rs2_of(0xC0000000u | row, cols, rows));
          else if (lw.c != 0)
            mvout(lw.c + ((uint64_t)i * lw.c_stride + j) * DIM, rs2_of(0x80000000u | row, cols, rows));
        }
    if (lw.c != 0) loop_acc_base = (loop_acc_base + half_acc) % g_acc_rows;
    internal = false;
    loop_issue_end[slot] = internal_issue;
    last_loop_issue_end = internal_issue;
    loop_active += internal_issue - t0;
    loop_count++;
    cur = "loop_ws";
  }

  // ---- loop_conv_ws ----------------------------------------------------------------------
  void loop_conv_ws(uint64_t rs1, uint64_t rs2);

  // ---- harness -------------------------------------------------------------------------
  bool in_harness(reg_t pc) const {
    for (auto& r : harness_ranges)
      if (pc >= r.first && pc < r.second) return true;
    return false;
  }

  // The harness code must be, byte for byte, what the host read from the ELF file. Checked at
  // every harness command (the first included) and at exit, so no program code can move a
  // marker by patching harness instructions, even before the first command.
  void verify_harness_code() {
    for (size_t k = 0; k < harness_ranges.size(); k++) {
      uint64_t lo = harness_ranges[k].first;
      const std::vector<uint8_t>& want = harness_bytes[k];
      size_t i = 0;
      for (; i + 8 <= want.size(); i += 8) {
        uint64_t w;
        std::memcpy(&w, want.data() + i, 8);
        if (proc->get_mmu()->load<uint64_t>(lo + i) != w) break;
      }
      for (; i < want.size(); i++)
        if (proc->get_mmu()->load<uint8_t>(lo + i) != want[i])
          fail("the harness code was modified while the program ran (byte at 0x%llx)", (unsigned long long)(lo + i));
    }
  }

  void take_snapshot() {
    if (snapshots >= 256) fail("more than 256 snapshots");
    wait_until(drain_time());
    uint64_t total = 0;
    for (auto& reg : snap_regions) total += reg.len;
    snapshot_bytes += total;
    if (snapshot_bytes > (1ull << 30)) fail("snapshots exceed 1 GiB");
    std::vector<uint8_t> buf(total);
    uint64_t pos = 0;
    for (auto& reg : snap_regions) {
      check_dram(reg.addr, reg.len);
      uint64_t i = 0;
      for (; i < reg.len && ((reg.addr + i) & 7); i++) buf[pos + i] = proc->get_mmu()->load<uint8_t>(reg.addr + i);
      for (; i + 8 <= reg.len; i += 8) {
        uint64_t w = proc->get_mmu()->load<uint64_t>(reg.addr + i);
        std::memcpy(buf.data() + pos + i, &w, 8);
      }
      for (; i < reg.len; i++) buf[pos + i] = proc->get_mmu()->load<uint8_t>(reg.addr + i);
      pos += reg.len;
    }
    send('S', buf.data(), buf.size());
    snapshots++;
  }

  void harness(uint32_t funct, reg_t pc) {
    cur = funct == F_HARNESS_MEASURE_BEGIN ? "measure_begin"
          : funct == F_HARNESS_MEASURE_END ? "measure_end" : "snapshot";
    if (!in_harness(pc))
      fail("harness command at pc 0x%llx outside the harness code; only the generated harness may measure or snapshot",
           (unsigned long long)pc);
    verify_harness_code();
    if (funct == F_HARNESS_MEASURE_BEGIN) {
      if (phase == 1) fail("measure_begin while a measured region is already open");
      if (regions.size() >= measure_limit)
        fail("measure_begin after the measured region ended; a program is measured exactly once");
      phase = 1;
      measuring = true;
      m_t0 = now();
      m_i0 = instret();
      m_ld0 = ldq.busy; m_ex0 = exq.busy; m_st0 = stq.busy;
      print_memory_stats("measure_begin");
      if (print_stats) std::fprintf(stderr, "TRACE measure_begin %llu\n", (unsigned long long)m_t0);
      std::fill(sp_touched.begin(), sp_touched.end(), 0);
      std::fill(acc_touched.begin(), acc_touched.end(), 0);
    } else if (funct == F_HARNESS_MEASURE_END) {
      if (phase == 0) fail("measure_end without measure_begin");
      if (phase == 2 && measure_limit > 1) fail("measure_end without measure_begin");
      if (phase == 2) fail("measure_end twice; a program is measured exactly once");
      wait_until(drain_time());  // all queued Gemmini work belongs to the region
      Region r;
      r.cycles = now() - m_t0;
      if (print_stats) std::fprintf(stderr, "TRACE measure_end %llu instret %llu\n", (unsigned long long)now(), (unsigned long long)(instret() - m_i0));
      r.instret = instret() - m_i0;
      if (region_insn_limit && r.instret > region_insn_limit)
        fail("the measured call retired %llu host instructions, more than its limit of %llu "
             "(raise autocomp.target.gemmini.max_instructions)",
             (unsigned long long)r.instret, (unsigned long long)region_insn_limit);
      r.busy_ld = ldq.busy - m_ld0; r.busy_ex = exq.busy - m_ex0; r.busy_st = stq.busy - m_st0;
      r.sp_rows = 0; r.acc_rows = 0;
      for (auto v : sp_touched) r.sp_rows += v;
      for (auto v : acc_touched) r.acc_rows += v;
      regions.push_back(r);
      measuring = false;
      phase = 2;
      if (regions.size() >= measure_limit) g_timed = false, untimed_stall = stall;
      take_snapshot();  // fused: the outputs are whatever memory holds when the clock stops
      write_report();
    } else {
      if (phase == 1) fail("snapshot inside the measured region; only measure_end may take it");
      take_snapshot();
      write_report();
    }
  }

 public:
  reg_t handle(insn_t insn, reg_t pc) {
    if (!proc) fail("extension used before reset");
    rocc_insn_union_t u;
    u.i = insn;
    state_t* s = proc->get_state();
    reg_t xs1 = u.r.xs1 ? s->XPR[insn.rs1()] : 0;
    reg_t xs2 = u.r.xs2 ? s->XPR[insn.rs2()] : 0;
    reg_t result = 0;
    switch (u.r.funct) {
      case F_CONFIG: config(xs1, xs2); break;
      case F_MVIN: mvin(0, xs1, xs2); break;
      case F_MVIN2: mvin(1, xs1, xs2); break;
      case F_MVIN3: mvin(2, xs1, xs2); break;
      case F_MVOUT: mvout(xs1, xs2); break;
      case F_PRELOAD: preload(xs1, xs2); break;
      case F_COMPUTE_PRELOADED: compute(xs1, xs2, true); break;
      case F_COMPUTE_ACCUMULATED: compute(xs1, xs2, false); break;
      case F_FLUSH: flush(); break;
      case F_LOOP_WS_BOUNDS:
        cur = "loop_ws_config_bounds";
        lw.max_i = xs2 & 0xFFFF; lw.max_j = (xs2 >> 16) & 0xFFFF; lw.max_k = (xs2 >> 32) & 0xFFFF;
        lw.pad_i = xs1 & 0xFFFF; lw.pad_j = (xs1 >> 16) & 0xFFFF; lw.pad_k = (xs1 >> 32) & 0xFFFF;
        // The unroller holds two loops: configuring a new one waits for the loop two back.
        wait_until(loop_issue_end[loop_count % 2]); stall += ROCC_ISSUE_CYCLES;
        break;
      case F_LOOP_WS_ADDRS_AB: lw.a = xs1; lw.b = xs2; stall += ROCC_ISSUE_CYCLES; break;
      case F_LOOP_WS_ADDRS_DC: lw.d = xs1; lw.c = xs2; stall += ROCC_ISSUE_CYCLES; break;
      case F_LOOP_WS_STRIDES_AB: lw.a_stride = xs1; lw.b_stride = xs2; stall += ROCC_ISSUE_CYCLES; break;
      case F_LOOP_WS_STRIDES_DC: lw.d_stride = xs1; lw.c_stride = xs2; stall += ROCC_ISSUE_CYCLES; break;
      case F_LOOP_WS: loop_ws(xs1, xs2); break;
      case F_LOOP_CONV_WS: loop_conv_ws(xs1, xs2); break;
      case F_COUNTER: result = counter_op(xs1); break;
      case F_ABORT:
        cur = "gemmini_abort";
        fail("the program stopped itself with code %lld (see its output)", (long long)(int64_t)xs1);
      case F_HARNESS_MEASURE_BEGIN:
      case F_HARNESS_MEASURE_END:
      case F_HARNESS_SNAPSHOT: harness(u.r.funct, pc); break;
      case F_HARNESS_EXIT:
        // Ignored unless it comes from the runtime's _exit (in the harness section).
        if (in_harness(pc)) {
          cur = "exit";
          verify_harness_code();
          if (phase == 1) fail("the program exited inside the measured region (exit() called from the kernel?)");
          exited = true;
          exit_code = (int64_t)(int32_t)xs1;
          write_report();
        }
        break;
      default:
        if (u.r.funct >= F_LOOP_CONV_WS_CONFIG_1 && u.r.funct <= F_LOOP_CONV_WS_CONFIG_6) {
          cur = "loop_conv_ws_config";
          conv_cfg[u.r.funct - F_LOOP_CONV_WS_CONFIG_1][0] = xs1;
          conv_cfg[u.r.funct - F_LOOP_CONV_WS_CONFIG_1][1] = xs2;
          wait_until(loop_issue_end[loop_count % 2]); stall += ROCC_ISSUE_CYCLES;
          break;
        }
        cur = "gemmini";
        fail("unknown command funct7=%u at pc 0x%llx", (unsigned)u.r.funct, (unsigned long long)pc);
    }
    if (u.r.xd) s->XPR.write(insn.rd(), result);
    return pc + 4;
  }

  void on_fence() {
    wait_until(drain_time());
  }

  // Spike retires instructions in batches and updates minstret only between batches. Like
  // its own counter CSRs, our handlers first ask for serialization (return the magic
  // PC_SERIALIZE_BEFORE = 3: Spike ends the batch, updates minstret, and re-executes the
  // instruction), so instret() is exact when they run.
  static constexpr reg_t PC_SERIALIZE_BEFORE = 3;
  static bool serialize(processor_t* p) {
    state_t* s = p->get_state();
    if (!s->serialized) return false;
    s->serialized = false;
    return true;
  }

  static reg_t custom3(processor_t* p, insn_t insn, reg_t pc) {
    if (!serialize(p)) return PC_SERIALIZE_BEFORE;
    gemmini_t* g = static_cast<gemmini_t*>(p->get_extension("gemmini"));
    if (!g->proc) g->proc = p;
    try {
      return g->handle(insn, pc);
    } catch (const std::exception& e) {  // e.g. std::bad_alloc: report, never crash Spike
      g->fail("internal error: %s", e.what());
    }
  }
  static reg_t rdcycle(processor_t* p, insn_t insn, reg_t pc) {
    if (!serialize(p)) return PC_SERIALIZE_BEFORE;
    gemmini_t* g = static_cast<gemmini_t*>(p->get_extension("gemmini"));
    if (!g->proc) g->proc = p;
    if (insn.rd() != 0) p->get_state()->XPR.write(insn.rd(), g->now());
    return pc + 4;
  }
  static reg_t fence(processor_t* p, insn_t, reg_t pc) {
    if (!serialize(p)) return PC_SERIALIZE_BEFORE;
    gemmini_t* g = static_cast<gemmini_t*>(p->get_extension("gemmini"));
    if (!g->proc) g->proc = p;
    g->on_fence();
    return pc + 4;
  }
};

reg_t cycle_csr_t::read() const noexcept { return model->now(); }
void host_charge(const HostWrap& w, uint64_t addr, reg_t pc, reg_t next, insn_t insn) {
  if (g_model) g_model->host_cost(w, addr, pc, next, insn);
}
bool guard_csr_t::unlogged_write(const reg_t) noexcept { model->counter_written(name); }
bool cycle_csr_t::unlogged_write(const reg_t) noexcept { model->counter_written("mcycle"); }

#include "loop_conv.inc"

}  // namespace

REGISTER_EXTENSION(gemmini, []() { return new gemmini_t(); })
