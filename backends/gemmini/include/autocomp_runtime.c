/* Bare-metal runtime for programs run on Spike: HTIF-backed stdout and exit.
 *
 * Linked into every Gemmini program Autocomp builds (picolibc, --crt0=hosted). Spike's HTIF
 * watches `tohost`: a pointer to a syscall block makes the host perform the syscall, an odd
 * value ends the simulation with exit code (value >> 1).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

volatile uint64_t tohost __attribute__((aligned(64))) = 0;
volatile uint64_t fromhost __attribute__((aligned(64))) = 0;

static volatile uint64_t htif_block[8] __attribute__((aligned(64)));

static void htif_syscall(uint64_t n, uint64_t a0, uint64_t a1, uint64_t a2) {
  htif_block[0] = n;
  htif_block[1] = a0;
  htif_block[2] = a1;
  htif_block[3] = a2;
  __asm__ volatile("" ::: "memory");
  tohost = (uint64_t)(uintptr_t)htif_block;
  while (fromhost == 0) {
  }
  fromhost = 0;
  __asm__ volatile("" ::: "memory");
}

static char out_buf[256];
static size_t out_len;

static void out_flush(void) {
  if (out_len) {
    htif_syscall(64 /* write */, 1, (uint64_t)(uintptr_t)out_buf, out_len);
    out_len = 0;
  }
}

static int out_put(char c, FILE *f) {
  (void)f;
  out_buf[out_len++] = c;
  if (c == '\n' || out_len == sizeof out_buf) out_flush();
  return (unsigned char)c;
}

static int out_flush_file(FILE *f) {
  (void)f;
  out_flush();
  return 0;
}

static FILE autocomp_stdio = FDEV_SETUP_STREAM(out_put, NULL, out_flush_file, _FDEV_SETUP_WRITE);
FILE *const stdin = &autocomp_stdio;
FILE *const stdout = &autocomp_stdio;
FILE *const stderr = &autocomp_stdio;

/* In the harness section so that the model may trust its exit marker (funct7 123): the host
 * then knows the program really exited, rather than being stopped by the instruction limit. */
__attribute__((section("autocomp_harness_text"), noinline, used)) void _exit(int code) {
  out_flush();
  uint64_t c = (uint64_t)(uint32_t)code;
  __asm__ volatile(".insn r 0x7b, 3, 123, x0, %0, x0" : : "r"(c) : "memory");
  tohost = ((uint64_t)(uint32_t)code << 1) | 1;
  for (;;) {
  }
}
