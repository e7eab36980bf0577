"""The model's side of the trust boundary, on the real toolchain: the counters behind the
clock are read-only (even for machine code emitted at run time), the harness's bytes are
checked against the ELF file from the first command on (every byte), the measurement
protocol is fixed (BEGIN once, END once and fused with the snapshot), and the target's
HTIF syscalls reach neither the host's files nor the report channel."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from simkit import assert_ok, run_c  # noqa: E402

HTIF = r"""
extern volatile uint64_t tohost, fromhost;
static volatile uint64_t blk[8] __attribute__((aligned(64)));
static long sys6(long n, long a0, long a1, long a2, long a3, long a4) {
  blk[0] = n; blk[1] = a0; blk[2] = a1; blk[3] = a2; blk[4] = a3; blk[5] = a4;
  __sync_synchronize();
  tohost = (uint64_t)(uintptr_t)blk;
  while (fromhost == 0) { }
  fromhost = 0;
  __sync_synchronize();
  return (long)blk[0];
}
static long open_path(const char *p, long flags) { return sys6(56, -100, (long)p, (long)strlen(p) + 1, flags, 0644); }
"""

WORK = r"""
static volatile int sink;
__attribute__((noinline)) static void work(int n) { for (int i = 0; i < n; i++) sink += i; }
"""


def test_writing_minstret_stops_the_run(tmp_path):
    run = run_c(tmp_path, WORK + r"""
AUTOCOMP_HARNESS_FN int main(void) {
  AUTOCOMP_MEASURE_BEGIN(); work(1000); asm volatile("csrw minstret, zero"); AUTOCOMP_MEASURE_END(); return 0;
}
""")
    assert "wrote the minstret CSR" in run.error, run.error
    assert run.cycles is None


def test_writing_mcountinhibit_and_mcycle_stops_the_run(tmp_path):
    for insn, name in (("csrwi mcountinhibit, 5", "mcountinhibit"), ("csrw mcycle, zero", "mcycle")):
        run = run_c(tmp_path, WORK + r"""
AUTOCOMP_HARNESS_FN int main(void) {
  AUTOCOMP_MEASURE_BEGIN(); asm volatile("INSN"); work(1000); AUTOCOMP_MEASURE_END(); return 0;
}
""".replace("INSN", insn))
        assert f"wrote the {name} CSR" in run.error, run.error


def test_clock_cannot_be_written_by_code_emitted_at_run_time(tmp_path):
    """Machine code written into a data buffer and jumped to (what no object check sees):
    the guard is on the CSR itself, so the write still stops the run. And reading the
    counters still works: Spike keeps counting through its own objects."""
    program = WORK + r"""
static uint32_t code[4] __attribute__((aligned(16)));
AUTOCOMP_HARNESS_FN int main(void) {
  code[0] = WORD;        /* the clock write */
  code[1] = 0x00008067u; /* ret */
  AUTOCOMP_MEASURE_BEGIN();
  work(2000);
  if (DO_IT) ((void (*)(void))(uintptr_t)code)();
  AUTOCOMP_MEASURE_END();
  return 0;
}
"""
    honest = run_c(tmp_path, program.replace("WORD", "0x00000013u").replace("DO_IT", "1"))
    assert_ok(honest)
    assert honest.cycles is not None and honest.instructions > 2000 * 3
    for word, name in (("0xB0201073u", "minstret"), ("0x3202D073u", "mcountinhibit"), ("0xB0001073u", "mcycle")):
        run = run_c(tmp_path, program.replace("WORD", word).replace("DO_IT", "1"))
        assert f"wrote the {name} CSR" in run.error, (name, run.error)
        assert run.cycles is None


def test_counters_keep_counting(tmp_path):
    """minstret/mcycle reads go to Spike's live counters through the read-only views."""
    run = run_c(tmp_path, WORK + r"""
int main(void) {
  uint64_t i0, i1;
  asm volatile("csrr %0, minstret" : "=r"(i0));
  work(1000);
  asm volatile("csrr %0, minstret" : "=r"(i1));
  return (i1 - i0 > 3000 && i1 - i0 < 20000) ? 0 : 9;
}
""")
    assert_ok(run)


def test_harness_patched_before_the_first_command_is_caught(tmp_path):
    """Code that runs before any harness command (here main itself, standing for a
    constructor) rewrites a harness byte: the model compares with the ELF file's bytes, so
    the very first command already sees it."""
    run = run_c(tmp_path, r"""
AUTOCOMP_HARNESS_FN static void victim(void) { AUTOCOMP_MEASURE_BEGIN(); AUTOCOMP_MEASURE_END(); }
int main(void) {
  volatile uint8_t *p = (volatile uint8_t *)(uintptr_t)&victim;
  p[2] ^= 0;  /* same value: not a modification */
  victim();
  return 0;
}
""")
    assert_ok(run)
    run = run_c(tmp_path, r"""
AUTOCOMP_HARNESS_FN static void victim(void) { AUTOCOMP_MEASURE_BEGIN(); AUTOCOMP_MEASURE_END(); }
int main(void) {
  volatile uint32_t *p = (volatile uint32_t *)(uintptr_t)&victim;
  p[0] = 0x00000013u;  /* nop over the first instruction */
  victim();
  return 0;
}
""")
    assert "harness code was modified" in run.error, run.error


def test_every_byte_of_the_harness_section_counts(tmp_path):
    """The section's very last byte (which an 8-byte-stride hash skipped) is checked too:
    the runtime's _exit is linked last into the harness section and ends in its `j .`."""
    program = r"""
AUTOCOMP_HARNESS_FN static void victim(void) { AUTOCOMP_MEASURE_BEGIN(); AUTOCOMP_MEASURE_END(); }
extern void _exit(int);
int main(void) {
  volatile uint8_t *p = (volatile uint8_t *)(uintptr_t)&_exit;
  int n = 0;
  while (n < 512 && !(p[n] == 0x01 && p[n + 1] == 0xa0)) n += 2;  /* c.j . */
  if (n >= 512) return 7;
  victim();
  if (PATCH) p[n + 1] ^= 0x40;
  return 0;
}
"""
    assert_ok(run_c(tmp_path, program.replace("PATCH", "0")))
    from autocomp.backends.gemmini.toolchain import HARNESS_SECTION, section_bytes

    _addr, content = section_bytes(str(tmp_path / "prog.elf"), HARNESS_SECTION)
    assert content.endswith(b"\x01\xa0")  # the patched byte is the section's last one
    run = run_c(tmp_path, program.replace("PATCH", "1"))
    assert "harness code was modified" in run.error, run.error


def test_protocol_begin_once_end_once(tmp_path):
    cases = {
        "AUTOCOMP_MEASURE_BEGIN(); AUTOCOMP_MEASURE_BEGIN();": "already open",
        "AUTOCOMP_MEASURE_BEGIN(); AUTOCOMP_MEASURE_END(); AUTOCOMP_MEASURE_BEGIN();": "measured exactly once",
        "AUTOCOMP_MEASURE_BEGIN(); AUTOCOMP_MEASURE_END(); AUTOCOMP_MEASURE_END();": "measure_end twice",
        "AUTOCOMP_MEASURE_END();": "without measure_begin",
        "AUTOCOMP_MEASURE_BEGIN(); AUTOCOMP_SNAPSHOT();": "snapshot inside the measured region",
        "AUTOCOMP_MEASURE_BEGIN(); exit(0);": "exited inside the measured region",
    }
    for body, message in cases.items():
        run = run_c(tmp_path, "AUTOCOMP_HARNESS_FN int main(void) { " + body + " return 0; }\n")
        assert message in run.error, (body, run.error)


def test_measure_end_takes_the_snapshot(tmp_path):
    """END snapshots the regions in the same command: what memory holds when the clock
    stops is what is compared, so stopping the clock early snapshots unfinished work."""
    run = run_c(tmp_path, r"""
int32_t Out[4];
AUTOCOMP_HARNESS_FN int main(void) {
  AUTOCOMP_MEASURE_BEGIN();
  Out[0] = 1;
  AUTOCOMP_MEASURE_END();
  Out[1] = 2;  /* after the clock stopped: not in the snapshot */
  return 0;
}
""", regions={"out": ("Out", 16)})
    assert_ok(run)
    assert len(run.snapshots) == 1
    assert run.snapshots[0]["out"] == (1).to_bytes(4, "little") + bytes(12)


def test_target_syscalls_reach_no_host_file_and_not_the_channel(tmp_path, monkeypatch):
    """The target's HTIF syscalls go through fesvr inside the sandbox: a host file outside
    the work directory does not exist there, /proc is not mounted, and descriptor 3 (the
    channel) is not in fesvr's table, so forged report frames never reach the host."""
    monkeypatch.delenv("AUTOCOMP_SANDBOX", raising=False)  # this test is about the jail
    secret = tmp_path.parent / f"{tmp_path.name}-host-secret.txt"
    secret.write_text("TOP SECRET\n")
    forbidden = tmp_path.parent / f"{tmp_path.name}-created"
    run = run_c(tmp_path, HTIF + r"""
int main(void) {
  char buf[64] = {0};
  static const char fake[] = "R\x20\0\0\0\0\0\0\0{\"error\": \"\", \"exited\": true}    ";
  long w3 = sys6(64, 3, (long)fake, sizeof fake - 1, 0, 0);  /* before any open: fd 3 is nothing */
  long fd = open_path("SECRET", 0);
  long n = fd >= 0 ? sys6(63, fd, (long)buf, 60, 0, 0) : -1;
  long created = open_path("FORBIDDEN", 0101);
  long env = open_path("/proc/self/environ", 0);
  long penv = open_path("/proc/1/environ", 0);
  printf("fd=%ld n=%ld created=%ld env=%ld penv=%ld w3=%ld buf=%s\n", fd, n, created, env, penv, w3, buf);
  return 0;
}
""".replace("SECRET", str(secret)).replace("FORBIDDEN", str(forbidden)))
    assert_ok(run)
    # The sandbox's /tmp is a private tmpfs (the work directory's parents exist there, empty):
    # a file "created" there vanishes with the run.
    assert "fd=-2 " in run.stdout and "created=" in run.stdout, run.stdout
    assert "env=-2 " in run.stdout and "penv=-2 " in run.stdout, run.stdout
    assert "w3=-9 " in run.stdout, run.stdout  # EBADF
    assert "TOP SECRET" not in run.stdout
    assert not forbidden.exists()
    assert run.error == "" and run.exit_code == 0 and run.snapshots == []


def test_target_files_stay_in_the_work_directory(tmp_path, monkeypatch):
    """What the target may touch is its own work directory (bound read-write), which the
    host deletes and never reads back."""
    monkeypatch.delenv("AUTOCOMP_SANDBOX", raising=False)
    run = run_c(tmp_path, HTIF + r"""
int main(void) {
  long fd = open_path("scratch.txt", 0101);
  return fd >= 0 ? 0 : 1;
}
""")
    assert_ok(run)
    assert (tmp_path / "scratch.txt").exists()
