/* Markers the generated harness uses to talk to Autocomp's Gemmini model.
 *
 * The model honours these only when the instruction's address lies inside the harness code
 * (the "autocomp_harness_text" section, whose range and bytes the host reads from the ELF and
 * passes to the model; the model checks those bytes at every marker), so candidate code
 * cannot start/stop the clock or take snapshots. Put every function that uses them in that
 * section (AUTOCOMP_HARNESS_FN), in a translation unit of their own: the backend compiles the
 * kernel alone into kernel.o, checks that object, and calls it through a renamed symbol.
 *
 * AUTOCOMP_MEASURE_BEGIN()  start the measured region (modelled cycles, instret, queue busy);
 *                           once per program
 * AUTOCOMP_MEASURE_END()    end it; all queued Gemmini work is counted (implicit fence), and
 *                           the configured memory regions are snapshotted in the same command
 * AUTOCOMP_SNAPSHOT()       copy every configured memory region to the host (not allowed
 *                           inside the measured region)
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
