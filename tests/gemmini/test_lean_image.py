"""The Lean image (setting ``autocomp.target.gemmini.image = "lean"``): FireSim's public Gemmini
build, FireSimLeanGemminiRocketConfig.

Gemmini's ``leanConfig`` (Configs.scala) differs from ``defaultConfig`` in ways that change what a
kernel computes, not only how fast: it is weight-stationary only, reads the accumulator only
through its int8 scaling path, cannot write the scratchpad from the array and makes a WS
compute's D operand GARBAGE_ADDR (ExecuteController.scala). The hardware does something else
without a word when a kernel relies on one of these; the model refuses the command and says
why. Each such kernel is run on both builds here: accepted by the default one, refused by the
Lean one. Its timing side (64 requests in flight, FireSim's latency pipe) is checked through the
backend, which is where a user selects it.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from simkit import assert_ok, run_c  # noqa: E402

from autocomp.backends import get_backend  # noqa: E402
from autocomp.backends.base import BackendError  # noqa: E402
from autocomp.backends.gemmini.images import DEFAULT, IMAGES, LEAN, image_named  # noqa: E402
from autocomp.model import Verdict  # noqa: E402
from autocomp.schema import check_target_settings  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

# One 16x16x16 product in the weight-stationary way the Lean build supports (VARIANT 0, checked
# against the CPU), or with one thing the Lean build lacks.
TILE = r"""
static elem_t A[DIM][DIM], B[DIM][DIM], C[DIM][DIM];
static acc_t C32[DIM][DIM];
int main(void) {
  for (int i = 0; i < DIM; i++)
    for (int j = 0; j < DIM; j++) { A[i][j] = (elem_t)(i - j); B[i][j] = (elem_t)((i * j) % 5 - 2); }
  gemmini_flush(0);
  gemmini_config_ld(DIM * sizeof(elem_t));
  gemmini_extended_config_st(DIM * (VARIANT == 4 ? sizeof(acc_t) : sizeof(elem_t)), NO_ACTIVATION, ACC_SCALE_IDENTITY);
  gemmini_config_ex(VARIANT == 1 || VARIANT == 5 ? OUTPUT_STATIONARY : WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  const uint32_t a_sp = 0, b_sp = DIM, d_sp = 2 * DIM, c_sp = 3 * DIM, c_acc = 1u << 31;
  gemmini_mvin(A, a_sp);
  gemmini_mvin(B, b_sp);
  gemmini_mvin(A, d_sp);
  if (VARIANT == 5) {  /* no compute: a move through the scratchpad only */
    gemmini_mvout(C, a_sp);
    gemmini_fence();
    for (int i = 0; i < DIM; i++)
      for (int j = 0; j < DIM; j++) CHECK(C[i][j] == A[i][j], "C[%d][%d] = %d", i, j, C[i][j]);
    return failures != 0;
  }
  gemmini_extended_preload(b_sp, VARIANT == 3 ? c_sp : c_acc, DIM, DIM, DIM, DIM);
  gemmini_extended_compute_preloaded(VARIANT == 6 ? c_acc : a_sp, VARIANT == 2 ? d_sp : GARBAGE_ADDR, DIM, DIM, DIM, DIM);
  if (VARIANT == 4) gemmini_mvout(C32, c_acc | (1u << 29));
  else gemmini_mvout(C, VARIANT == 3 ? c_sp : c_acc);
  gemmini_fence();
  if (VARIANT != 0) return 0;
  for (int i = 0; i < DIM; i++)
    for (int j = 0; j < DIM; j++) {
      int32_t sum = 0;
      for (int k = 0; k < DIM; k++) sum += A[i][k] * B[k][j];
      CHECK(C[i][j] == ref_scale(sum, 1.0f), "C[%d][%d] = %d, expected %d", i, j, C[i][j], ref_scale(sum, 1.0f));
    }
  return failures != 0;
}
"""


def _tile(tmp_path: Path, variant: int, image: str):
    work = tmp_path / f"v{variant}-{image}"
    work.mkdir()
    return run_c(work, f"#define VARIANT {variant}\n" + TILE, image=image)


@pytest.mark.parametrize("variant", [0, 5])
def test_a_weight_stationary_kernel_runs_alike_on_both_builds(tmp_path, variant):
    """Variant 5 selects OUTPUT_STATIONARY but never computes: the Lean build ignores the
    dataflow bit (ExecuteController.scala), so only a preload or compute that expects OS is
    refused, as Berkeley's move-in/move-out tests that configure OS out of habit show."""
    default, lean = _tile(tmp_path, variant, "default"), _tile(tmp_path, variant, "lean")
    assert_ok(default)
    assert_ok(lean)


@pytest.mark.parametrize(
    "variant, reason",
    [
        (1, "weight-stationary only"),  # leanConfig dataflow = WS
        (2, "the Lean image ignores it"),  # hardcode_d_to_garbage_addr
        (3, "cannot write the scratchpad from the array"),  # ex_write_to_spad = false
        (4, "full-width (int32) read of the accumulator"),  # acc_read_full_width = false
    ],
)
def test_what_the_lean_build_lacks_is_refused_with_the_reason(tmp_path, variant, reason):
    assert_ok(_tile(tmp_path, variant, "default"))
    lean = _tile(tmp_path, variant, "lean")
    assert lean.exit_code != 0
    assert reason in lean.error and "leanConfig" in lean.error, lean.error


def test_array_operands_from_the_accumulator_are_refused_on_both_builds_for_different_reasons(tmp_path):
    """leanConfig has no accumulator operands (ex_read_from_acc=false). defaultConfig sends the
    request, but its Scratchpad passes an accumulator read back only alongside a pending
    move-out, so the array would stall or take a move-out's rows: refused too, saying why."""
    default, lean = _tile(tmp_path, 6, "default"), _tile(tmp_path, 6, "lean")
    assert default.exit_code != 0 and "does not work on this build" in default.error, default.error
    assert "only alongside a pending move-out" in default.error, default.error
    assert lean.exit_code != 0 and "leanConfig ex_read_from_acc=false" in lean.error, lean.error


def test_an_unknown_image_line_is_refused(tmp_path):
    run = run_c(tmp_path, "int main(void) { return 0; }\n", image="huge")
    assert run.exit_code != 0
    assert "image huge: expected default or lean" in run.error + run.stderr


def test_images_name_their_builds_and_the_lean_memory():
    assert set(IMAGES) == {"default", "lean"}
    assert DEFAULT.run_options() == {"dma_inflight": 16, "memory_pipe": None, "image": "default"}
    assert LEAN.run_options() == {"dma_inflight": 64, "memory_pipe": (30, 16, 16), "image": "lean"}
    with pytest.raises(ValueError, match="must be one of 'default'.*'lean'"):
        image_named("fast")


def test_settings_refuse_an_unknown_image_before_anything_runs():
    problems = check_target_settings("gemmini", {"image": "fast"})[1]
    assert problems and "autocomp.target.gemmini.image" in problems[0], problems
    assert check_target_settings("gemmini", {"image": "lean"}) == ({"image": "lean"}, [])
    backend = get_backend("gemmini", {"image": 3})
    path = ROOT / "examples" / "gemmini" / "gemm_64.c"
    problem = backend.make_problem(str(path), path.read_text())
    with pytest.raises(BackendError, match="image must be one of"):
        asyncio.run(backend.evaluate(problem, [problem.code]))


def _evaluate(settings: dict, path: Path):
    backend = get_backend("gemmini", {"public_seeds": True, "seeds": [1], **settings})
    problem = backend.make_problem(str(path), path.read_text())
    return asyncio.run(backend.evaluate(problem, [problem.code]))[0]


def test_the_backend_times_a_kernel_on_the_lean_build_and_says_so():
    """The 512^3 example GEMM moves 256 KiB operands in 16-row move-ins: on the Lean build the
    DMA keeps 64 requests in flight (to FireSim's latency pipe) where defaultConfig keeps 16, and
    each figure names the build it stands for."""
    path = ROOT / "examples" / "gemmini" / "gemm_512.c"
    default = _evaluate({}, path)
    lean = _evaluate({"image": "lean"}, path)
    narrow = _evaluate({"image": "lean", "dma_inflight": 16}, path)
    for ev in (default, lean, narrow):
        assert ev.verdict is Verdict.CORRECT, ev.feedback
    assert default.metrics["cycles"].source == "gemmini timing model"
    assert lean.metrics["cycles"].source == "gemmini timing model, lean image"
    assert "(gemmini timing model, lean image)" in lean.feedback
    assert lean.metrics["cycles"].value < 0.9 * default.metrics["cycles"].value
    # An explicit dma_inflight overrides the image's 64.
    assert narrow.metrics["cycles"].value > 1.1 * lean.metrics["cycles"].value


def test_a_kernel_the_lean_build_cannot_run_gets_the_reason(tmp_path):
    """As a candidate: a runtime error naming the reason; as the original: refused up front."""
    path = ROOT / "examples" / "gemmini" / "gemm_64.c"
    source = path.read_text()
    assert "gemmini_config_ex(WEIGHT_STATIONARY" in source
    os_source = source.replace("gemmini_config_ex(WEIGHT_STATIONARY", "gemmini_config_ex(OUTPUT_STATIONARY")
    backend = get_backend("gemmini", {"public_seeds": True, "seeds": [1], "image": "lean"})
    problem = backend.make_problem(str(path), source)
    candidate = problem.span.text_of(os_source)
    assert "OUTPUT_STATIONARY" in candidate
    ev = asyncio.run(backend.evaluate(problem, [candidate]))[0]
    assert ev.verdict is Verdict.RUNTIME_ERROR, (ev.verdict, ev.feedback)
    assert "weight-stationary only" in ev.feedback, ev.feedback
    os_path = tmp_path / "os_gemm.c"
    os_path.write_text(os_source)
    with pytest.raises(BackendError, match="cannot serve as the reference.*weight-stationary only"):
        _evaluate({"image": "lean"}, os_path)


def test_the_benches_time_each_firesim_run_on_the_build_it_ran_on():
    """The F2 runs (lorikjashari/OpenASDx) were on the public Lean image; DOSA's and Autocomp's on
    defaultConfig with the LLC and DDR3. The calibration and fidelity benches take the build
    from images.py, so a change to it reaches every comparison."""
    sys.path.insert(0, str(ROOT / "bench"))
    import gemmini_calibrate as calibrate
    import gemmini_firesim_f2 as f2

    assert f2.LEAN is LEAN
    builds: dict[str, set[str]] = {}
    for _name, _source, _published, image, group, _runs in calibrate.programs():
        builds.setdefault(group, set()).add(image.name)
    assert builds == {"DOSA": {"default"}, "pair": {"default"}, "F2": {"lean"}}, builds


def test_doctor_says_which_build_the_cycles_stand_for():
    checks = {c.name: c for c in get_backend("gemmini", {"image": "lean"}).doctor()}
    assert checks["modelled build"].found and checks["modelled build"].detail.startswith("lean: FireSimLean")
    assert "64 DMA requests" in checks["modelled build"].detail
    bad = {c.name: c for c in get_backend("gemmini", {"image": "huge"}).doctor()}["modelled build"]
    assert not bad.found and "must be one of" in bad.detail


def test_plans_for_the_lean_build_are_told_what_it_lacks():
    """The description gains prompts/gemmini/lean.md only for the Lean build; the default
    build's prompt is unchanged (the recorded example sessions replay it exactly)."""
    from autocomp.prompts import pieces_for_problem

    path = ROOT / "examples" / "gemmini" / "gemm_64.c"
    pieces = {}
    for image in ("default", "lean"):
        backend = get_backend("gemmini", {"image": image})
        problem = backend.make_problem(str(path), path.read_text())
        pieces[image] = pieces_for_problem(backend.prompt_pieces(), problem.path, backend.prompt_context(problem))
    base = get_backend("gemmini").prompt_pieces()
    assert pieces["default"].description == base.description
    assert pieces["lean"].description.startswith(base.description)
    added = pieces["lean"].description[len(base.description):]
    for needed in ("Weight-stationary only", "GARBAGE_ADDR", "accumulator", "full-width", "64 requests in flight"):
        assert needed in added, needed


def test_a_users_requests_in_flight_override_the_builds():
    assert LEAN.run_options(dma_inflight=16) == {"dma_inflight": 16, "memory_pipe": (30, 16, 16), "image": "lean"}
