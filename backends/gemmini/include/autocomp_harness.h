/* Markers the generated harness uses to talk to Autocomp's Gemmini model.
 *
 * The model honours these only when the instruction's address lies inside the harness code
 * (the "autocomp_harness_text" section, whose range the host reads from the ELF and passes
 * to the model), so candidate code cannot start/stop the clock or take snapshots. Put every
 * function that uses them in that section (AUTOCOMP_HARNESS_FN), keep those functions static
 * in their own translation unit, and reject candidate code that names the section. Call the
 * kernel through a boundary the compiler cannot inline across (a separate translation unit
 * or __attribute__((noinline))): code inlined into a harness function runs at harness PCs.
 *
 * AUTOCOMP_MEASURE_BEGIN()  start a measured region (modelled cycles, instret, queue busy)
 * AUTOCOMP_MEASURE_END()    end it; all queued Gemmini work is counted (implicit fence)
 * AUTOCOMP_SNAPSHOT()       copy every configured memory region to the host
 */
#ifndef AUTOCOMP_HARNESS_H
#define AUTOCOMP_HARNESS_H

#define AUTOCOMP_HARNESS_SECTION "autocomp_harness_text"
#ifndef AUTOCOMP_HARNESS_FN
#define AUTOCOMP_HARNESS_FN __attribute__((section(AUTOCOMP_HARNESS_SECTION), noinline, used))
#endif

#define AUTOCOMP_HARNESS_CMD_(funct) __asm__ volatile(".insn r 0x7b, 3, " #funct ", x0, x0, x0" ::: "memory")
#define AUTOCOMP_MEASURE_BEGIN() AUTOCOMP_HARNESS_CMD_(120)
#define AUTOCOMP_MEASURE_END() AUTOCOMP_HARNESS_CMD_(121)
#define AUTOCOMP_SNAPSHOT() AUTOCOMP_HARNESS_CMD_(122)

#endif
