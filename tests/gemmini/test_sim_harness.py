"""The toolchain's run() contract: snapshots by ELF symbol, measured regions only from the
harness section, exit codes, instruction and wall limits, output that cannot forge numbers,
the report kept away from the target, and discovery/doctor."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from simkit import SQUARE_GEMM_LIBRARY_AND_CHECK, assert_ok, run_c, toolchain  # noqa: E402

from autocomp.backends.base import BackendError  # noqa: E402
from autocomp.backends.gemmini.toolchain import GemminiToolchain, candidate_may_forge  # noqa: E402


def test_snapshots_copy_regions_after_gemmini_work(tmp_path):
    run = run_c(tmp_path, r"""
elem_t In[DIM][DIM] row_align(1);
elem_t Out[DIM][DIM] row_align(1);
int32_t Counter = 7;
static void kernel(void) {
  gemmini_config_ld(DIM); gemmini_config_st(DIM);
  gemmini_mvin(In, 0); gemmini_mvout(Out, 0);   /* no fence: the snapshot waits for the queues */
}
AUTOCOMP_HARNESS_FN int main(void) {
  for (int i = 0; i < DIM; i++) for (int j = 0; j < DIM; j++) In[i][j] = (elem_t)(i - j);
  AUTOCOMP_SNAPSHOT();
  AUTOCOMP_MEASURE_BEGIN();
  kernel();
  AUTOCOMP_MEASURE_END();
  Counter = -1;
  AUTOCOMP_SNAPSHOT();
  printf("cycles=1 Correct\n");   /* target output decides nothing */
  return 0;
}
""", regions={"in": ("In", 256), "out": ("Out", 256), "counter": ("Counter", 4)})
    assert_ok(run)
    assert len(run.snapshots) == 3  # MEASURE_END takes one too (fused with the clock stop)
    first, at_end, second = run.snapshots
    assert first["out"] == bytes(256)
    assert second["out"] == second["in"] == at_end["out"] == bytes(((i - j) & 0xFF) for i in range(16) for j in range(16))
    assert first["counter"] == at_end["counter"] == (7).to_bytes(4, "little") and second["counter"] == b"\xff" * 4
    assert run.cycles is not None and run.cycles > 1
    assert run.instructions is not None and 0 < run.instructions < run.cycles
    assert "Correct" in run.stdout  # printed, but the numbers come from the report only


def test_candidate_code_cannot_measure_or_snapshot(tmp_path):
    run = run_c(tmp_path, r"""
__attribute__((noinline)) static void candidate(void) { AUTOCOMP_MEASURE_END(); }
AUTOCOMP_HARNESS_FN int main(void) {
  AUTOCOMP_MEASURE_BEGIN();
  candidate();
  AUTOCOMP_MEASURE_END();
  return 0;
}
""")
    assert "measure_end: harness command at pc" in run.error
    assert run.cycles is None


def test_patching_harness_code_is_detected(tmp_path):
    """Target code that rewrites harness instructions (memory is writable) is caught at the
    next harness command."""
    run = run_c(tmp_path, r"""
AUTOCOMP_HARNESS_FN static void victim(void) { printf("victim\n"); }
__attribute__((noinline)) static void patch(void) { volatile uint32_t *p = (volatile uint32_t *)(uintptr_t)&victim; p[0] = p[0]; p[1] ^= 0; p[0] = 0x00000013; }
AUTOCOMP_HARNESS_FN int main(void) {
  AUTOCOMP_MEASURE_BEGIN();
  patch();
  AUTOCOMP_MEASURE_END();
  return 0;
}
""")
    assert "harness code was modified" in run.error, run.error


def test_unbalanced_markers_are_errors(tmp_path):
    run = run_c(tmp_path, r"""
AUTOCOMP_HARNESS_FN int main(void) { AUTOCOMP_MEASURE_END(); return 0; }
""")
    assert "measure_end without measure_begin" in run.error


def test_exit_code_and_no_measurement(tmp_path):
    run = run_c(tmp_path, r"""
int main(void) { printf("bye\n"); return 42; }
""")
    assert run.error == ""
    assert run.exit_code == 42 and not run.timed_out
    assert run.stdout == "bye\n"
    assert run.cycles is None and run.snapshots == []


def test_instruction_limit_is_a_timeout(tmp_path):
    run = run_c(tmp_path, r"""
AUTOCOMP_HARNESS_FN int main(void) { AUTOCOMP_MEASURE_BEGIN(); for (volatile int i = 0; ; i++) { } return 0; }
""", max_instructions=2_000_000)
    assert run.timed_out
    assert run.exit_code is None and run.cycles is None


def test_wall_limit_is_a_timeout(tmp_path):
    run = run_c(tmp_path, r"""
int main(void) { for (volatile int i = 0; ; i++) { } return 0; }
""", max_instructions=10**12, timeout=1.5)
    assert run.timed_out and run.exit_code is None


def test_exit_from_candidate_code_without_runtime_is_not_an_exit(tmp_path):
    """A program that writes tohost itself (skipping the runtime's _exit) ends the simulation,
    but the model never saw an exit from the harness section: no exit code is trusted."""
    run = run_c(tmp_path, r"""
extern volatile uint64_t tohost;
int main(void) { tohost = 1; for (;;) { } }
""")
    assert run.exit_code is None


def test_report_stays_out_of_the_working_directory(tmp_path):
    run = run_c(tmp_path, "int main(void) { return 0; }\n")
    assert_ok(run)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prog.c", "prog.elf"]


def test_missing_symbol_for_a_region_is_a_clear_error(tmp_path):
    import asyncio

    src = tmp_path / "p.c"
    src.write_text('#include "gemmini.h"\nint main(void) { return 0; }\n')
    tc = toolchain()

    async def go():
        res = await tc.compile([str(src)], str(tmp_path / "p.elf"), str(tmp_path))
        assert res.ok, res.tail()
        return await tc.run(str(tmp_path / "p.elf"), str(tmp_path), {"x": ("no_such_symbol", 4)})

    with pytest.raises(BackendError, match="no_such_symbol"):
        asyncio.run(go())


def test_compile_errors_are_reported(tmp_path):
    import asyncio

    src = tmp_path / "bad.c"
    src.write_text('#include "gemmini.h"\nint main(void) { return nope; }\n')
    res = asyncio.run(toolchain().compile([str(src)], str(tmp_path / "bad.elf"), str(tmp_path)))
    assert not res.ok and "nope" in res.stderr


def test_short_names_and_include_forms_compile(tmp_path):
    run = run_c(tmp_path, r"""
#include "include/gemmini.h"
static elem_t A[DIM][DIM] row_align(1), B[DIM][DIM] row_align(1), C[DIM][DIM] row_align(1);
int main(void) {
  for (int i = 0; i < DIM; i++) for (int j = 0; j < DIM; j++) { A[i][j] = (elem_t)(i + j); B[i][j] = i == j; }
  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, false, false);
  config_ld(DIM, 1.0, DIM, 0);
  config_ld(DIM, 1.0, DIM, 1);
  config_st(DIM, 1.0);
  mvin(A, 0, DIM, DIM);
  mvin2(B, DIM, DIM, DIM);
  mvin3(NULL, 2 * DIM, DIM, DIM);
  preload(DIM, 1u << 31, DIM, DIM, DIM, DIM);
  compute_preloaded(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
  preload(GARBAGE_ADDR, (1u << 31) | (1u << 30), DIM, DIM, DIM, DIM);
  compute_accumulated(2 * DIM, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
  mvout(C, 1u << 31, DIM, DIM);
  fence();
  for (int i = 0; i < DIM; i++) for (int j = 0; j < DIM; j++) CHECK(C[i][j] == A[i][j], "%d,%d", i, j);
  return failures ? 1 : 0;
}
""")
    assert_ok(run)


def test_discover_doctor_and_bad_settings(tmp_path):
    checks = GemminiToolchain.doctor({})
    names = {c.name: c for c in checks}
    assert {"riscv64-unknown-elf-gcc", "picolibc (riscv64)", "dtc", "spike", "gemmini extension"} <= set(names)
    assert all(c.found for c in checks), [c.to_json() for c in checks]
    tc = toolchain()
    assert Path(tc.include_dir, "gemmini.h").exists() and Path(tc.include_dir, "include", "gemmini.h").exists()
    with pytest.raises(BackendError, match="does not exist"):
        GemminiToolchain.discover({"extension": str(tmp_path / "missing.so")})
    with pytest.raises(BackendError, match="riscv64-unknown-elf-gcc"):
        GemminiToolchain.discover({"cc": str(tmp_path / "no-gcc")})


def test_candidate_forgery_check():
    assert candidate_may_forge("void k(void) { mvin(a, 0, 16, 16); }") is None
    assert candidate_may_forge('__attribute__((section("autocomp_harness_text"))) void f(void) {}')
    assert candidate_may_forge('asm(".pushsection .foo");')


def test_extension_build_is_cached_by_source_hash(tmp_path, monkeypatch):
    """First use builds the extension with the host g++ into the build cache; the next
    discovery finds the cached library without rebuilding it."""
    monkeypatch.setenv("AUTOCOMP_BUILD_CACHE", str(tmp_path))
    first = GemminiToolchain.discover({})
    built = Path(first.extension).stat().st_mtime_ns
    second = GemminiToolchain.discover({})
    assert first.extension == second.extension
    assert Path(first.extension).is_relative_to(tmp_path / "gemmini-ext")
    assert Path(second.extension).stat().st_mtime_ns == built


_AFTER_REGION_PROGRAM = r"""
#define N 64
static elem_t A[N][N] row_align(1), B[N][N] row_align(1), C[N][N] row_align(1);
static void fill(int salt) {
  for (int i = 0; i < N; i++) for (int j = 0; j < N; j++) {
    A[i][j] = (elem_t)((i * 7 + j + salt) % 11 - 5); B[i][j] = (elem_t)((i + j * 3 + salt) % 13 - 6);
  }
  memset(C, 0, sizeof C);
}
""" + SQUARE_GEMM_LIBRARY_AND_CHECK + r"""
AUTOCOMP_HARNESS_FN int main(void) {
  fill(0); AUTOCOMP_MEASURE_BEGIN(); library(); gemmini_fence(); AUTOCOMP_MEASURE_END();
  if (check()) return 2;
  for (int salt = 1; salt <= 2; salt++) {   /* the harness's checking calls: results only */
    fill(salt);
    uint64_t c0 = read_cycles(), i0, i1;
    asm volatile("rdinstret %0" : "=r"(i0));
    library();
    gemmini_fence();
    asm volatile("rdinstret %0" : "=r"(i1));
    uint64_t c1 = read_cycles();
    if (check()) return 3;
    printf("after: %llu cycles, %llu instructions\n", (unsigned long long)(c1 - c0), (unsigned long long)(i1 - i0));
  }
  return 0;
}
"""


def test_work_after_the_measured_region_is_exact_and_untimed(tmp_path):
    """Once the last measured region has closed, nothing can change a reported figure, so the
    model runs the rest (the harness's checking calls) for results only: Gemmini commands
    still compute exactly, and the host is no longer charged stalls (a cycle per instruction),
    which is what keeps an evaluation's three input sets near the cost of one."""
    run = run_c(tmp_path, _AFTER_REGION_PROGRAM)
    assert_ok(run)
    assert run.cycles is not None and run.instructions is not None
    assert run.cycles > 4 * run.instructions  # the measured call itself is timed: DMA and mesh
    lines = [ln.split() for ln in run.stdout.splitlines() if ln.startswith("after:")]
    assert len(lines) == 2  # both later calls computed the right product (else exit 3)
    for words in lines:
        cycles, instructions = int(words[1]), int(words[3])
        assert 0 < instructions <= cycles <= instructions + 4  # rdcycle and rdinstret themselves


def test_ram_and_code_pages_use_different_spike_tlb_entries():
    """Spike's data TLB is direct-mapped (page number modulo 256): RAM placed a multiple of
    1 MiB from the code and constants page made every load alternating between the two take
    Spike's slow path (a third of an evaluation's time). The linker flags keep them apart."""
    from autocomp.backends.gemmini.toolchain import LDFLAGS, MEM_BASE

    ram = next(int(f.split("=")[-1], 16) for f in LDFLAGS if "__ram=" in f)
    for code_page in range(MEM_BASE >> 12, (MEM_BASE >> 12) + 2):
        assert (ram >> 12) % 256 != code_page % 256
    assert ram % 4096 == 0
