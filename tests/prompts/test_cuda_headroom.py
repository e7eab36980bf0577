"""The CUDA headroom line (backends/cuda/headroom.py): a roofline floor from the problem's
bytes and FLOPs and the datasheet peaks of the GPU that timed it, labelled as a model; no
line without a known GPU. No GPU is needed: the device name is passed explicitly or comes
from the metric source a timed run writes."""

from __future__ import annotations

import pytest

from autocomp.backends import get_backend
from autocomp.backends.cuda.headroom import Work, headroom, headroom_line, peaks_for, problem_work
from autocomp.model import Evaluation, Metric, Verdict
from promptkit import ROOT

EX = ROOT / "examples" / "cuda"


def _problem(name: str):
    backend = get_backend("cuda", {"gpu": "off"})
    path = str(EX / name)
    return backend, backend.make_problem(path, (EX / name).read_text())


def _timed(ms: float, device: str = "H200") -> Evaluation:
    return Evaluation(Verdict.CORRECT, metrics={"ms": Metric(ms, "ms", f"runner clock, {device}, transfers subtracted")})


def test_matmul_floor_is_compute_bound_with_the_datasheet_figures():
    _, problem = _problem("matmul.py")
    work = problem_work(problem)
    n = 1024
    assert work == Work(3 * n * n * 4, 2 * n**3, False, True)
    line = headroom(problem, _timed(0.5), device="NVIDIA H200")
    floor_ms = 2 * n**3 / 67e12 * 1e3
    assert "H200" in line and "model" in line and "67 TFLOP/s FP32" in line and "4.8 TB/s" in line
    assert "compute-bound" in line and f"{0.5 / floor_ms:.1f}x" in line


def test_memory_bound_problems_count_their_bytes():
    _, problem = _problem("row_softmax.cu")  # annotated: x and y, 4096 x 1024 floats each
    work = problem_work(problem)
    assert work is not None and work.bytes == 2 * 4096 * 1024 * 4 and work.flops is None and work.outputs_counted
    line = headroom_line(work, 1.0, "NVIDIA H100 80GB HBM3")
    floor_ms = work.bytes / 3.35e12 * 1e3
    assert "H100 SXM" in line and "memory-bound" in line and f"{1.0 / floor_ms:.1f}x" in line
    _, softmax = _problem("softmax.py")  # Python: the input from get_inputs(); output unknown
    w = problem_work(softmax)
    assert w is not None and w.bytes == 4096 * 1024 * 4 and not w.outputs_counted
    assert "outputs not counted" in headroom_line(w, 1.0, "H200")


@pytest.mark.parametrize("name", ["matmul.py", "softmax.py", "layernorm.py", "bias_gelu.py", "row_mean.py", "row_softmax.cu"])
def test_every_example_gets_a_line_on_a_known_gpu(name):
    backend, problem = _problem(name)
    assert backend.headroom(problem, _timed(1.0)).startswith("roofline floor on H200")


def test_no_line_without_a_known_gpu():
    backend, problem = _problem("matmul.py")
    untimed = Evaluation(Verdict.UNVERIFIED, metrics={"registers": Metric(32.0, "registers/thread", "nvcc")})
    assert backend.headroom(problem, untimed) == ""
    assert headroom(problem, _timed(1.0), device="") == ""
    assert headroom(problem, _timed(1.0, "Some Future GPU")) == ""
    assert peaks_for("NVIDIA H100 PCIe").name == "H100 PCIe" and peaks_for("NVIDIA H200 NVL").name == "H200 NVL"
    assert peaks_for("NVIDIA A100-SXM4-80GB").name == "A100 80GB SXM" and peaks_for("NVIDIA L4").name == "L4"


def test_half_precision_uses_the_tensor_core_figure():
    line = headroom_line(Work(3 * 4096 * 4096 * 2, 2 * 4096**3, True, True), 1.0, "H200")
    assert "989 TFLOP/s FP16/BF16 tensor-core, dense" in line
