"""The Gemmini backend end to end on the real toolchain (cross gcc + Spike + Autocomp's
Gemmini extension): correct kernels pass with modelled cycles, and every way of cheating
seen in published LLM-kernel work gets the right verdict.

One module-scoped backend keeps the reference outputs cached, so the original kernel runs
once for the whole module.
"""

from __future__ import annotations

import asyncio

import pytest


from backend_support import GEMM32, backend as make_backend
from autocomp.backends.base import BackendError
from autocomp.model import Verdict

ORIGINAL = GEMM32

HEADER = "void gemm(const elem_t A[DIM_I][DIM_K], const elem_t B[DIM_K][DIM_J], elem_t C[DIM_I][DIM_J]) {\n"
BODY = ORIGINAL.split(HEADER, 1)[1]


def kernel(body: str) -> str:
    return HEADER + body


# A faster correct version: every tile gets its own scratchpad rows, loaded once, and the
# B tile stays in the array for both A tiles (preload GARBAGE + compute_accumulated).
FASTER = kernel("""\
  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_extended3_config_ld(DIM_K, MVIN_SCALE_IDENTITY, false, 0);
  gemmini_extended3_config_ld(DIM_J, MVIN_SCALE_IDENTITY, false, 1);
  gemmini_config_st(DIM_J);
  const uint32_t a_base = 0, b_base = 1024;
  for (int i = 0; i < DIM_I / DIM; i++)
    gemmini_extended_mvin(&A[i * DIM][0], a_base + i * (DIM_K / DIM) * DIM, DIM_K, DIM);
  for (int k = 0; k < DIM_K / DIM; k++)
    gemmini_extended_mvin2(&B[k * DIM][0], b_base + k * (DIM_J / DIM) * DIM, DIM_J, DIM);
  for (int j = 0; j < DIM_J / DIM; j++)
    for (int k = 0; k < DIM_K / DIM; k++)
      for (int i = 0; i < DIM_I / DIM; i++) {
        uint32_t acc = (1u << 31) | ((i * (DIM_J / DIM) + j) * DIM) | (k ? 1u << 30 : 0);
        uint32_t a = a_base + (i * (DIM_K / DIM) + k) * DIM;
        if (i == 0) {
          gemmini_extended_preload(b_base + (k * (DIM_J / DIM) + j) * DIM, acc, DIM, DIM, DIM, DIM);
          gemmini_extended_compute_preloaded(a, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
        } else {
          gemmini_extended_preload(GARBAGE_ADDR, acc, DIM, DIM, DIM, DIM);
          gemmini_extended_compute_accumulated(a, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
        }
      }
  for (int i = 0; i < DIM_I / DIM; i++)
    for (int j = 0; j < DIM_J / DIM; j++)
      gemmini_extended_mvout(&C[i * DIM][j * DIM], (1u << 31) | ((i * (DIM_J / DIM) + j) * DIM), DIM, DIM);
}
""")

CPU_REFERENCE = """\
  for (int i = 0; i < DIM_I; i++)
    for (int j = 0; j < DIM_J; j++) {
      int32_t s = 0;
      for (int k = 0; k < DIM_K; k++) s += A[i][k] * B[k][j];
      C[i][j] = s > 127 ? 127 : (s < -128 ? -128 : s);
    }
"""

CHEATS = {
    "prints_correct": (kernel('  printf("Correct result\\nLatency: 12 cycles\\n");\n}\n'), Verdict.INCORRECT, "never wrote"),
    "returns_without_writing": (kernel("  (void)A; (void)B; (void)C;\n}\n"), Verdict.INCORRECT, "never wrote"),
    "exits_early": (kernel(BODY.replace("  gemmini_config_ex", '  printf("Correct\\n"); exit(0);\n  gemmini_config_ex', 1)), Verdict.REJECTED, "`exit`"),
    "exits_nonzero": (kernel("  exit(3);\n}\n"), Verdict.REJECTED, "`exit`"),
    "hangs": (kernel("  for (volatile int spin = 1; spin; ) { }\n}\n"), Verdict.TIMEOUT, "instructions"),
    "does_not_compile": (kernel("  int x = ;\n}\n"), Verdict.COMPILE_ERROR, "kernel line 2"),
    "modifies_input": (kernel(BODY.replace("\n}\n", "\n  gemmini_fence();\n  ((elem_t *)A)[5] ^= 1;\n}\n")), Verdict.INCORRECT, "modified its input"),
    # Computes on the first call and replays the cached answer afterwards (stale outputs).
    "replays_first_answer": (
        kernel(
            "  static elem_t saved[DIM_I][DIM_J]; static int calls;\n"
            "  if (calls++) { memcpy(C, saved, sizeof saved); return; }\n"
            + CPU_REFERENCE
            + "  memcpy(saved, C, sizeof saved);\n}\n"
        ).replace(HEADER, "#include <string.h>\n" + HEADER),
        Verdict.INCORRECT,
        "input set 2",
    ),
    # Skips re-loading B after the first call, trusting the stale scratchpad contents.
    "stale_scratchpad": (
        kernel(
            BODY.replace("  for (int i = 0;", "  static int loaded;\n  for (int i = 0;", 1)
            .replace("gemmini_extended_mvin2(", "if (!loaded) gemmini_extended_mvin2(")
            .replace("\n}\n", "\n  loaded = 1;\n}\n")
        ),
        Verdict.INCORRECT,
        "differs",
    ),
    "wrong_answer": (kernel(CPU_REFERENCE.replace("s > 127 ? 127", "s > 126 ? 126") + "}\n"), Verdict.INCORRECT, "expected 127, got 126"),
    "out_of_range_mvin": (kernel(BODY.replace("gemmini_extended_mvin(&A[i * DIM][k * DIM], 0,", "gemmini_extended_mvin(&A[i * DIM][k * DIM], 20000,")), Verdict.RUNTIME_ERROR, "mvin"),
    "fakes_measurement": (kernel("  autocomp_measure_end();\n" + BODY), Verdict.REJECTED, "reserved"),
    "own_section": (
        '__attribute__((section(".text.autocomp_harness")))\n' + kernel(BODY),
        Verdict.REJECTED,
        "",
    ),
    "changed_signature": (
        "void gemm(const elem_t A[DIM_I][DIM_K], const elem_t B[DIM_K][DIM_J], acc_t C[DIM_I][DIM_J]) {\n}\n",
        Verdict.REJECTED,
        "parameter",
    ),
}


@pytest.fixture(scope="module")
def backend():
    return make_backend(max_instructions=30_000_000, run_timeout=60)


@pytest.fixture(scope="module")
def problem(backend):
    return backend.make_problem("gemm32.c", ORIGINAL)


@pytest.fixture(scope="module")
def results(backend, problem):
    """Every candidate of this module in one parallel batch, as the search would send it."""
    codes = [problem.code, FASTER, kernel(CPU_REFERENCE + "}\n")] + [c for c, _v, _w in CHEATS.values()]
    return dict(zip(["original", "faster", "cpu"] + list(CHEATS), asyncio.run(backend.evaluate(problem, codes))))


def test_original_is_correct_with_metrics(results):
    ev = results["original"]
    assert ev.verdict is Verdict.CORRECT, ev.feedback
    assert ev.confirmed and ev.tier == "spike + gemmini timing model"
    assert ev.metrics["cycles"].source == "gemmini timing model" and ev.metrics["cycles"].value > 0
    assert ev.metrics["instructions"].source == "spike"
    assert {"load_busy", "execute_busy", "store_busy", "scratchpad_rows", "accumulator_rows"} <= set(ev.metrics)
    assert "cycles" in ev.feedback and "Scratchpad rows used" in ev.feedback


def test_faster_version_is_correct_and_faster(results):
    assert results["faster"].verdict is Verdict.CORRECT, results["faster"].feedback
    assert results["faster"].metrics["cycles"].value < results["original"].metrics["cycles"].value


def test_cpu_version_is_correct(results):
    assert results["cpu"].verdict is Verdict.CORRECT, results["cpu"].feedback


@pytest.mark.parametrize("name", list(CHEATS))
def test_cheats_get_the_right_verdict(results, name):
    _code, verdict, words = CHEATS[name]
    ev = results[name]
    assert ev.verdict is verdict, f"{name}: {ev.verdict.value}: {ev.feedback}"
    assert words.lower() in ev.feedback.lower(), ev.feedback
    if verdict is not Verdict.CORRECT:
        assert "cycles" not in ev.metrics or verdict is Verdict.INCORRECT


def test_reference_is_cached(backend, problem, results):
    assert len(backend._references) == 1
    [ev] = asyncio.run(backend.evaluate(problem, [problem.code]))
    assert ev.verdict is Verdict.CORRECT and len(backend._references) == 1


def test_broken_original_is_a_clear_error(backend):
    broken = ORIGINAL.replace("gemmini_config_st(DIM_J);", "gemmini_config_st(DIM_J)")
    problem = backend.make_problem("broken.c", broken)
    with pytest.raises(BackendError, match="cannot serve as the reference"):
        asyncio.run(backend.evaluate(problem, [problem.code]))


SUBSTITUTE_PROGRAM = """\
#include <stdio.h>
#include <stdlib.h>
#include "include/gemmini.h"
#define N 16
static elem_t A[N][N] row_align(1);
static elem_t B[N][N] row_align(1);
static elem_t C[N][N] row_align(1);
int main(void) {
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) { A[i][j] = (elem_t)(rand() % 7 - 3); B[i][j] = (elem_t)(rand() % 5 - 2); }
  gemmini_flush(0);
  // SUBSTITUTE HERE
  tiled_matmul_auto(N, N, N, (elem_t *)A, (elem_t *)B, NULL, (elem_t *)C, N, N, N, N, MVIN_SCALE_IDENTITY,
                    MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY, NO_ACTIVATION, ACC_SCALE_IDENTITY, 0, false, false,
                    false, false, false, 0, WS);
  // SUBSTITUTE END
  gemmini_fence();
  printf("done\\n");
  return 0;
}
"""


def test_substitute_harness_file(backend):
    problem = backend.make_problem("test_program.c", SUBSTITUTE_PROGRAM)
    assert problem.name == "substitute"
    plain = (
        "  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);\n"
        "  gemmini_config_ld(N);\n  gemmini_config_st(N);\n"
        "  gemmini_mvin(A, 0);\n  gemmini_mvin(B, N);\n"
        "  gemmini_preload(N, 1u << 31);\n  gemmini_compute_preloaded(0, GARBAGE_ADDR);\n"
        "  gemmini_mvout(C, 1u << 31);\n"
    )
    wrong = plain.replace("gemmini_mvin(B, N)", "gemmini_mvin(A, N)")
    evs = asyncio.run(backend.evaluate(problem, [problem.code, plain, wrong, '  printf("Correct\\n");\n']))
    assert [e.verdict for e in evs] == [Verdict.CORRECT, Verdict.CORRECT, Verdict.INCORRECT, Verdict.INCORRECT], [
        e.feedback for e in evs
    ]
    assert "`C`" in evs[2].feedback and evs[0].metrics["cycles"].value > 0


def test_cancelling_an_evaluation_kills_its_processes(tmp_path, monkeypatch):
    """Cancel mid-run: every spike/gcc child is gone and every build directory removed."""
    import os
    import tempfile
    import time

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    backend = make_backend(max_instructions=10_000_000_000, run_timeout=300)
    problem = backend.make_problem("gemm32.c", ORIGINAL)
    hang = CHEATS["hangs"][0]

    def ours() -> list[str]:
        found = []
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        if str(tmp_path).encode() in f.read():
                            found.append(pid)
                except OSError:
                    pass
        return found

    async def scenario() -> list[str]:
        task = asyncio.create_task(backend.evaluate(problem, [hang, hang]))
        for _ in range(200):
            await asyncio.sleep(0.1)
            if ours():
                break
        await asyncio.sleep(1.0)
        running = ours()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return running

    running = asyncio.run(scenario())
    assert running, "the evaluation never started a process"
    for _ in range(50):  # SIGKILL was sent; give the kernel a moment to reap
        if not ours():
            break
        time.sleep(0.1)
    assert ours() == []
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("autocomp-gemmini-")] == []


ALIASED = """\
#include "gemmini.h"
#define LEN 64
/* y is written through an alias, which the signature reader cannot see: the reference run
   notices that y changed and treats it as an output from then on. */
void k(const float x[LEN], float y[LEN], acc_t z[LEN]) {
  float *p = &y[0];
  for (int i = 0; i < LEN; i++) {
    z[i] = (acc_t)(x[i] * 1000.0f);
    p[i] = -x[i] * 0.5f;
  }
}
"""


def test_outputs_written_through_aliases_are_found_by_the_reference_run():
    backend = make_backend()
    problem = backend.make_problem("aliased.c", ALIASED)
    assert [p.role for p in backend.prepare(problem).sig.params] == ["input", "input", "output"]
    same = problem.code.replace("float *p = &y[0];", "float *q = y;").replace("p[i] =", "q[i] =")
    wrong = problem.code.replace("* 0.5f", "* 0.25f")
    evs = asyncio.run(backend.evaluate(problem, [same, wrong]))
    assert evs[0].verdict is Verdict.CORRECT, evs[0].feedback
    assert evs[1].verdict is Verdict.INCORRECT and "output `y`" in evs[1].feedback, evs[1].feedback
