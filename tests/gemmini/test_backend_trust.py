"""The backend's construction on the real toolchain: the kernel is its own object file
(static kernels too), the whole test program is checked in `// SUBSTITUTE HERE` mode and its
END marker takes the snapshot, and inputs come from secret seeds shared by a reference and
the candidates judged against it."""

from __future__ import annotations

import asyncio

import pytest

from backend_support import backend as make_backend
from test_backend_verdicts import ORIGINAL, SUBSTITUTE_PROGRAM

from autocomp.backends.base import BackendError
from autocomp.backends.gemmini import backend as gemmini_backend
from autocomp.model import Verdict


def test_static_kernel_and_same_named_globals_link_apart():
    """A static kernel is compiled into kernel.o all the same (made global and renamed), and
    a global of the candidate's file may share a name with the original's copy in the
    harness's translation unit: only the renamed kernel stays global."""
    text = ORIGINAL.replace("void gemm(", "int scratch_counter = 3;\nstatic void gemm(")
    backend = make_backend()
    problem = backend.make_problem("static_gemm.c", text, function="gemm")
    candidate = problem.code.replace("gemmini_config_st(DIM_J);", "gemmini_config_st(DIM_J);\n  scratch_counter++;")
    evs = asyncio.run(backend.evaluate(problem, [problem.code, candidate]))
    assert [e.verdict for e in evs] == [Verdict.CORRECT, Verdict.CORRECT], [e.feedback for e in evs]


def test_secret_seeds_are_drawn_per_reference_and_shared(monkeypatch):
    backend = make_backend()
    problem = backend.make_problem("gemm32.c", ORIGINAL)
    seen: list[tuple[int, ...]] = []
    real = gemmini_backend.generate_function_harness

    def spy(sig, seeds, *a, **k):
        seen.append(tuple(seeds))
        return real(sig, seeds, *a, **k)

    monkeypatch.setattr(gemmini_backend, "generate_function_harness", spy)
    [ev] = asyncio.run(backend.evaluate(problem, [problem.code]))
    assert ev.verdict is Verdict.CORRECT
    assert len(set(seen)) == 1  # reference and candidate: the same inputs
    seeds = seen[0]
    assert len(seeds) == 3 and not set(seeds) & {1, 2, 3}
    seen.clear()
    asyncio.run(backend.evaluate(problem, [problem.code.replace("DIM_J);\n  for", "DIM_J);\n\n  for")]))
    assert set(seen) == {seeds}  # the cached reference keeps its seeds
    other = make_backend()
    seen.clear()
    asyncio.run(other.evaluate(problem, [problem.code]))
    assert seen and seen[0] != seeds  # a new reference computation draws new ones
    public = make_backend(public_seeds=True)
    seen.clear()
    asyncio.run(public.evaluate(problem, [problem.code]))
    assert set(seen) == {(1, 2, 3)}


def test_substitute_program_is_checked_as_a_whole():
    """The user's own code outside the kernel region must pass the object checks too; the
    message says so."""
    backend = make_backend()
    text = SUBSTITUTE_PROGRAM.replace("  gemmini_fence();\n  printf", '  __asm__ volatile("csrw mcycle, zero");\n  gemmini_fence();\n  printf')
    problem = backend.make_problem("test_program.c", text)
    with pytest.raises(BackendError, match="whole program is the candidate(.|\n)*mcycle"):
        asyncio.run(backend.evaluate(problem, [problem.code + "\n"]))


def test_substitute_early_end_snapshots_unfinished_globals(monkeypatch):
    """A region that calls the harness's measure_end itself before doing the work (the text
    check switched off): END takes the snapshot, so the globals are compared unfinished, and
    the marker's own END is a second one."""
    monkeypatch.setattr(gemmini_backend, "reject_reason", lambda *a, **k: None)
    backend = make_backend()
    problem = backend.make_problem("test_program.c", SUBSTITUTE_PROGRAM)
    early = "  { extern void autocomp_measure_end(void); autocomp_measure_end(); }\n" + problem.code
    honest, ev = asyncio.run(backend.evaluate(problem, [problem.code, early]))
    assert honest.verdict is Verdict.CORRECT, honest.feedback
    assert ev.verdict is not Verdict.CORRECT
    assert "measure_end twice" in ev.feedback or "differs" in ev.feedback, ev.feedback


TILED = """\
void gemm(const elem_t A[DIM_I][DIM_K], const elem_t B[DIM_K][DIM_J], elem_t C[DIM_I][DIM_J]) {
  tiled_matmul_auto(DIM_I, DIM_J, DIM_K, (elem_t *)A, (elem_t *)B, NULL, (elem_t *)C, DIM_K, DIM_J, DIM_J, DIM_J,
                    MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY, ACT, ACC_SCALE_IDENTITY, 0, false,
                    false, false, false, false, 0, WS);
}
"""


def test_library_kernels_pass_the_object_checks_and_library_errors_stop_the_run():
    """The library's error paths used to call exit(), which a kernel may not reference; they
    now stop the run through the model (gemmini_abort), with the library's message."""
    backend = make_backend()
    problem = backend.make_problem("gemm32.c", ORIGINAL)
    good, bad = asyncio.run(backend.evaluate(problem, [TILED.replace("ACT", "NO_ACTIVATION"), TILED.replace("ACT", "3")]))
    assert good.verdict is Verdict.CORRECT, good.feedback
    assert bad.verdict is Verdict.RUNTIME_ERROR
    assert "activation 3 is not supported" in bad.feedback and "stopped itself with code 2" in bad.feedback
