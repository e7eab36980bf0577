"""The cache state a FireSim bare-metal run of Gemmini's tests starts from, for our programs
that mirror one (gemmini_dosa_layers.py, gemmini_firesim_f2.py).

FireSim loads a program straight into DRAM: its TSI/DTM host drivers use the LoadMem widget
whenever the target has one (firesim_dtm_t: "always use loadmem if the target supports it";
testchip_tsi_t::write_chunk goes to load_mem_write while loading), and fesvr's ELF loader
writes the zeros of .bss through that same path. gemmini-rocc-tests' bare-metal startup
(riscv-tests' benchmarks/common crt.S and test.ld) never writes .bss. So a buffer a test does
not write before its timed call is in DRAM only, in no cache. Ours is not: picolibc's crt0
zeroes .bss through the caches, which leaves its last 4 MiB dirty in the L2 and the LLC (and
the last 16 KiB in the core's L1). A program that mirrors such a test therefore calls
start_cold() first: it reads a sweep buffer six times the LLC's size, one load per line, and
with random replacement about e^-6 of the lines the zeroing left behind survive (the L1's go
on the first pass).
"""

COLD_START = r"""
static volatile elem_t sweep[24 << 20] __attribute__((aligned(64)));
static void start_cold(void) {
  for (unsigned long i = 0; i < sizeof sweep; i += 64) (void)sweep[i];
}
"""
