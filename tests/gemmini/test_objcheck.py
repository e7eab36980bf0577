"""The object checks (backends/gemmini/objcheck.py) on objects the real cross compiler
builds: what an honest kernel uses passes; each way of stepping outside the kernel call is
named by section, instruction or symbol."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from simkit import toolchain  # noqa: E402

from autocomp.backends.gemmini.objcheck import Allowance, check_object  # noqa: E402


def build(tmp_path: Path, source: str) -> str:
    (tmp_path / "k.c").write_text('#include <stdio.h>\n#include <string.h>\n#include <math.h>\n#include "gemmini.h"\n' + source)
    res = asyncio.run(toolchain().compile_object("k.c", "k.o", str(tmp_path)))
    assert res.ok, res.tail()
    return str(tmp_path / "k.o")


def test_an_honest_kernel_passes(tmp_path):
    obj = build(tmp_path, r"""
static elem_t scratch[64];
const float table[4] = {1, 2, 3, 4};
void k(const elem_t A[64], elem_t C[64], float f) {
  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_config_ld(16); gemmini_config_st(16);
  gemmini_mvin(A, 0); gemmini_mvout(C, 0); gemmini_fence();
  memcpy(scratch, A, 64); memset(C + 32, 0, 8);
  C[0] = (elem_t)nearbyintf(f * table[1]) + (elem_t)sqrtf(f);
  printf("%d %llu %llu\n", C[1], (unsigned long long)read_cycles(), (unsigned long long)read_instret());
  uint32_t c = counter_read(0); (void)c;
  __asm__ volatile("frflags t0; fsflags t0; csrr t1, minstret" ::: "t0", "t1");
}
""")
    assert check_object(obj) == []


@pytest.mark.parametrize(
    "source, expected",
    [
        ('void k(void) { __asm__ volatile("csrw minstret, zero"); }', "csrrw minstret"),
        ('void k(void) { __asm__ volatile("csrs mcountinhibit, 1" ::: "memory"); }', "csrrsi mcountinhibit"),
        ('void k(long x) { __asm__ volatile("csrc mstatus, %0" :: "r"(x)); }', "csrrc mstatus"),
        ('void k(void) { __asm__ volatile("csrwi mtvec, 0"); }', "csrrwi mtvec"),
        ('void k(void) { __asm__ volatile("ecall"); }', "ecall"),
        ('void k(void) { __asm__ volatile("ebreak"); }', "ebreak"),
        ('void k(void) { __asm__ volatile("mret"); }', "mret"),
        ('void k(void) { __asm__ volatile("wfi"); }', "wfi"),
        ('void k(void) { __asm__ volatile("fence.i"); }', "fence.i"),
        ('void k(void) { __asm__ volatile(".insn r 0x7b, 3, 122, x0, x0, x0"); }', "funct7 122"),
        ('void k(void) { __asm__ volatile(".insn r 0x0b, 3, 0, x0, x0, x0"); }', "custom opcode"),
        ("static volatile int x;\n__attribute__((constructor)) static void w(void) { x = 1; }\nvoid k(void) {}", "section `.init_array`"),
        ("static volatile int x;\n__attribute__((destructor)) static void w(void) { x = 1; }\nvoid k(void) {}", "section `.fini_array`"),
        ('__attribute__((section(".text.init.enter"))) void k(void) {}', "section `.text.init.enter`"),
        ('__attribute__((section(".preinit_array"))) void (*p)(void) = 0;', "`.preinit_array`"),
        ('__attribute__((section(".ctors"))) void (*p)(void) = 0;', "`.ctors`"),
        ('__attribute__((section("autocomp_harness_text"))) void k(void) {}', "reserved for the harness"),
        ('__attribute__((section(".mystuff"))) int x = 1;', "section `.mystuff` is not allowed"),
        ('__attribute__((section(".data.x,\\"awx\\",@progbits#"))) void k(void) {}', "executable"),
        ("extern volatile unsigned long tohost; void k(void) { tohost = 1; }", "`tohost`"),
        ("#include <stdlib.h>\nvoid k(void) { exit(0); }", "`exit`"),
        ("extern void _exit(int); void k(void) { _exit(0); }", "`_exit`"),
        ("#include <stdlib.h>\nstatic void f(void) {}\nvoid k(void) { atexit(f); }", "`atexit`"),
        ("#include <stdio.h>\nvoid k(void) { fopen(\"/etc/passwd\", \"r\"); }", "`fopen`"),
        ("extern char __start_foo[]; char *k(void) { return __start_foo; }", "`__start_foo`"),
        ("extern void autocomp_measure_end(void); void k(void) { autocomp_measure_end(); }", "reserved"),
        ("static int autocomp_x; int k(void) { return autocomp_x++; }", "reserved"),
        ('__asm__(".text\\n.globl k\\n.type k, @gnu_indirect_function\\nk: ret\\n");', "ifunc"),
    ],
)
def test_rejections_name_the_offence(tmp_path, source, expected):
    problems = check_object(build(tmp_path, source))
    assert any(expected in p for p in problems), problems


def test_substitute_allowance(tmp_path):
    """A `// SUBSTITUTE HERE` program may call exit() and the harness's measure calls, and
    define its renamed main; nothing more."""
    obj = build(tmp_path, r"""
#include <stdlib.h>
extern void autocomp_measure_begin(void);
int autocomp_user_main(void) { autocomp_measure_begin(); if (rand() == 7) exit(1); return 0; }
""")
    assert check_object(obj) != []
    allowance = Allowance(
        undefined=frozenset({"exit", "autocomp_measure_begin"}),
        reserved=frozenset({"autocomp_user_main", "autocomp_measure_begin"}),
    )
    assert check_object(obj, allowance) == []


def test_unreadable_object(tmp_path):
    (tmp_path / "bad.o").write_bytes(b"not an elf")
    assert "cannot read" in check_object(str(tmp_path / "bad.o"))[0]
