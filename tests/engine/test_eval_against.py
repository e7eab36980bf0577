"""`autocomp eval FILE --against BASE` compares whole files: FILE runs as the program it is
(its own module-level constants, macros, helpers and imports), with BASE's kernel as the
oracle, for every target; a KernelBench solution file (only `ModelNew`) is accepted against
a reference file with `Model`/`get_inputs`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from autocomp.cli.evaluate import against_problems
from autocomp.model import CandidateFileProblem, Problem
from autocomp.cli.main import main
from autocomp.model import KernelSpan, Problem

ROOT = Path(__file__).resolve().parents[2]
NKI = (ROOT / "examples" / "nki" / "softmax.py").read_text()
GEMMINI = (ROOT / "examples" / "gemmini" / "gemm_64.c").read_text()
MATMUL = (ROOT / "examples" / "cuda" / "matmul.py").read_text()
MATMUL_STEP2 = (ROOT / "examples" / "cuda" / "improved" / "matmul_step2.py").read_text()

requires_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(),
                                   reason="nvcc (CUDA toolkit) is not installed; .ci/install-cuda.sh says how")


def run_eval(capsys, file: Path, base: Path, *extra: str) -> tuple[int, dict]:
    code = main(["eval", str(file), "--against", str(base), "--json", "--no-cache", *extra])
    return code, json.loads(capsys.readouterr().out)


# -- the mechanism ------------------------------------------------------------------------------
def test_candidate_file_problem_aligns_both_files_and_hands_out_the_whole_file():
    base = "a\nb\nKERNEL\nend\n"
    problem = Problem("base.txt", KernelSpan("k", "t", 2, 3), base)

    class Finder:
        def candidate_span(self, problem, path, text):
            return KernelSpan("k", "t", 4, 6)

    cand = "x\ny\nz\nw\nNEW1\nNEW2\ntail\n"
    baseline, candidate, code = against_problems(problem, Finder(), "file.txt", cand)
    assert code == "NEW1\nNEW2\n"
    # both kernels now start on line 4: BASE got two blank lines on top, FILE none
    assert baseline.span.start_line == candidate.span.start_line == 4
    assert baseline.code == "KERNEL\n" and baseline.file_text == "\n\n" + base
    assert candidate.file_with(code) == cand  # FILE itself, not FILE's kernel pasted into BASE
    assert candidate.file_with("other\n") == baseline.file_with("other\n")
    assert candidate.content_hash() != baseline.content_hash()  # FILE's context is part of the cache key
    again = Problem.from_json(json.loads(json.dumps(candidate.to_json())))
    assert isinstance(again, CandidateFileProblem) and again.file_with(code) == cand


# -- NKI: the candidate's own module constant decides the schedule ------------------------------------
def _nki_with_rows(rows: int) -> str:
    return (NKI.replace("@nki.jit\n", f"ROWS = {rows}\n\n\n@nki.jit\n", 1)
            .replace("r * 128:(r + 1) * 128", "r * ROWS:(r + 1) * ROWS").replace("R // 128", "R // ROWS"))


def test_nki_file_runs_with_its_own_module_constants(tmp_path, capsys):
    base = tmp_path / "base.py"
    base.write_text(NKI)
    same = tmp_path / "rows128.py"
    same.write_text(_nki_with_rows(128))  # the kernel names ROWS, which only FILE defines
    code, result = run_eval(capsys, same, base)
    assert code == 0 and result["verdict"] == "correct", result["feedback"]
    assert result["speedup"] == pytest.approx(1.0)
    base128 = tmp_path / "base128.py"
    base128.write_text(_nki_with_rows(128))
    rows64 = tmp_path / "rows64.py"
    rows64.write_text(_nki_with_rows(64))  # same kernel text as base128, another module constant
    code, result = run_eval(capsys, rows64, base128)
    assert code == 0 and result["verdict"] == "correct"
    # FILE's ROWS = 64 (twice the tiles) was used: the cost differs from BASE's
    assert result["metrics"]["cycles"]["value"] != result["baseline"]["metrics"]["cycles"]["value"]
    assert result["speedup"] != pytest.approx(1.0)


def test_nki_original_runs_once_for_base_and_file(tmp_path, capsys, monkeypatch):
    """BASE's original is the oracle of both evaluations (BASE as its own candidate, FILE
    against it): one run of it, not one per problem (they used to run side by side)."""
    from autocomp.backends.nki import harness

    modes = []
    real = harness.Harness._run_child

    async def counted(self, *a, **k):
        modes.append(a[2])
        return await real(self, *a, **k)

    monkeypatch.setattr(harness.Harness, "_run_child", counted)
    base = tmp_path / "base.py"
    base.write_text(NKI)
    cand = tmp_path / "rows64.py"
    cand.write_text(_nki_with_rows(64))
    code, result = run_eval(capsys, cand, base)
    assert code == 0 and result["verdict"] == "correct" and result["baseline"]["verdict"] == "correct"
    assert modes.count("oracle") == 1, modes
    baseline, candidate, _ = against_problems(Problem(str(base), KernelSpan("k", "nki", 1, 2), NKI),
                                              type("F", (), {"candidate_span": lambda s, p, path, t: p.span})(),
                                              str(cand), cand.read_text())
    assert candidate.oracle_key() == baseline.oracle_key() and candidate.content_hash() != baseline.content_hash()


# -- Gemmini: a macro only the candidate file defines ------------------------------------------------
def test_gemmini_file_runs_with_its_own_macros(tmp_path, capsys, monkeypatch):
    from autocomp.backends import get_backend
    from autocomp.backends.gemmini import GemminiBackend

    references = []
    real = GemminiBackend._reference

    async def counted(self, *a, **k):
        references.append(1)
        return await real(self, *a, **k)

    monkeypatch.setattr(GemminiBackend, "_reference", counted)

    if not all(c.found for c in get_backend("gemmini").doctor() if c.required):
        pytest.skip("the Gemmini toolchain (riscv gcc, spike) is not installed here")
    base = tmp_path / "base.c"
    base.write_text(GEMMINI)
    cand = tmp_path / "cand.c"
    cand.write_text(GEMMINI.replace("#define MAT_DIM_K 64\n", "#define MAT_DIM_K 64\n#define B_SP_ROWS DIM\n")
                    .replace("const uint32_t b_sp = DIM;", "const uint32_t b_sp = B_SP_ROWS;"))
    code, result = run_eval(capsys, cand, base)
    assert code == 0 and result["verdict"] == "correct", result["feedback"]
    assert len(references) == 1  # BASE's original ran once for both evaluations (side by side)


# -- CUDA: KernelBench's layout --------------------------------------------------------------------------
def _split(text: str) -> tuple[str, str]:
    """(reference with Model/get_inputs only, ModelNew-only solution file)."""
    from autocomp.backends.cuda import CudaBackend

    problem = CudaBackend().make_problem("m.py", text)
    reference = problem.span.replace_in(text, "")
    solution = "import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n\n\n" + problem.code
    return reference, solution


@requires_nvcc
def test_kernelbench_modelnew_only_solution_is_accepted(tmp_path, capsys):
    reference, solution = _split(MATMUL_STEP2)
    base = tmp_path / "level1_matmul.py"
    base.write_text(reference)
    cand = tmp_path / "level1_matmul_solution.py"
    cand.write_text(solution)
    assert "class Model(" not in solution and "get_inputs" not in solution
    code, result = run_eval(capsys, cand, base, "--target", "cuda")
    assert result["target"] == "cuda"
    # no GPU here: compiled and checked, honestly unverified
    assert result["verdict"] in ("unverified", "correct"), result["feedback"]
    assert "registers" in result["metrics"] and result["metrics"]["registers"]["source"].startswith("ptxas")
    assert result["baseline"]["verdict"] in ("unverified", "correct")


@requires_nvcc
def test_kernelbench_solution_uses_its_own_module_constants(tmp_path, capsys):
    reference, solution = _split(MATMUL)
    base = tmp_path / "ref.py"
    base.write_text(reference)
    # the source is assembled from a constant only the candidate file defines
    solution = solution.replace('matmul_source = r"""', 'TILE = "#define TILE 16\\n"\nmatmul_source = TILE + r"""')
    solution = solution.replace("float acc = 0.f;", "float acc = 0.f * TILE;")
    cand = tmp_path / "sol.py"
    cand.write_text(solution)
    code, result = run_eval(capsys, cand, base, "--target", "cuda")
    assert result["verdict"] in ("unverified", "correct"), result["feedback"]


@requires_nvcc
def test_candidate_file_is_validated_as_a_whole(tmp_path, capsys):
    reference, solution = _split(MATMUL)
    base = tmp_path / "ref.py"
    base.write_text(reference)
    cand = tmp_path / "sol.py"
    cand.write_text("import os\n" + solution + "\nos.system('touch /tmp/x')\n")
    code, result = run_eval(capsys, cand, base, "--target", "cuda")
    assert code == 1 and result["verdict"] == "rejected"
    assert "imports `os`" in result["feedback"] and "kernel line 1" in result["feedback"]


def test_a_reference_is_not_a_candidate(tmp_path, capsys):
    reference, _ = _split(MATMUL)
    base = tmp_path / "ref.py"
    base.write_text(reference)
    other = tmp_path / "other.py"
    other.write_text(reference)
    code = main(["eval", str(other), "--against", str(base), "--json", "--target", "cuda"])
    assert code == 2
    assert "defines no class ModelNew" in capsys.readouterr().err


@requires_nvcc
def test_user_include_paths_and_cuda_flags_are_honoured(tmp_path, capsys):
    """The compiled tier honours the literal extra_include_paths and extra_cuda_cflags of the
    user's own load_inline call: the header is found (and readable in the sandbox), the -D
    flag is applied."""
    inc = tmp_path / "myinclude"
    inc.mkdir()
    (inc / "tile.h").write_text("#define TILE_FROM_HEADER 16\n")
    text = MATMUL.replace("#include <cuda_runtime.h>\n", '#include <cuda_runtime.h>\n#include "tile.h"\n', 1) \
        .replace("float acc = 0.f;", "float acc = 0.f * (TILE_FROM_HEADER + FLAG_TILE);") \
        .replace("verbose=False)", f"verbose=False, extra_include_paths=[{str(inc)!r}], "
                 "extra_cuda_cflags=['-O3', '-DFLAG_TILE=16'])")
    reference, solution = _split(text)
    reference += f"\n# the user's build options\nUSER_INCLUDES = [{str(inc)!r}]\n"
    reference = reference.replace("USER_INCLUDES = [", "load_options = dict(extra_include_paths=[")
    reference = reference.replace(f"[{str(inc)!r}]\n", f"[{str(inc)!r}])\n")
    base = tmp_path / "ref.py"
    base.write_text(reference)
    cand = tmp_path / "sol.py"
    cand.write_text(solution)
    code, result = run_eval(capsys, cand, base, "--target", "cuda")
    assert result["verdict"] in ("unverified", "correct"), result["feedback"]
    # without the flag the same source does not compile: the flag was really passed
    cand.write_text(solution.replace(", '-DFLAG_TILE=16'", ""))
    code, result = run_eval(capsys, cand, base, "--target", "cuda")
    assert result["verdict"] == "compile-error" and "FLAG_TILE" in result["feedback"]
    # and without the user's include path (the candidate cannot add one) the header is not found
    base.write_text(reference.replace("load_options = dict(extra_include_paths=", "load_options = dict(other="))
    cand.write_text(solution)
    code, result = run_eval(capsys, cand, base, "--target", "cuda")
    assert result["verdict"] == "rejected" and "include-path" in result["feedback"]


@requires_nvcc
def test_hip_source_is_called_not_cuda(tmp_path, capsys):
    reference, solution = _split(MATMUL)
    base = tmp_path / "ref.py"
    base.write_text(reference)
    cand = tmp_path / "hip.py"
    cand.write_text(solution.replace("#include <cuda_runtime.h>", "#include <hip/hip_runtime.h>")
                    .replace("matmul_naive_kernel<<<grid, block>>>(", "hipLaunchKernelGGL(matmul_naive_kernel, grid, block, 0, 0, "))
    code, result = run_eval(capsys, cand, base, "--target", "cuda")
    assert result["verdict"] == "rejected" and "not CUDA" in result["feedback"] and "nvcc" not in result["feedback"].split("not CUDA")[0]


ADD_REFERENCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, a, b):
        return a + b


def get_inputs():
    return [torch.randn(1, 128).cuda(), torch.randn(1, 128).cuda()]


def get_init_inputs():
    return []
'''

# written in the idiom of KernelBench's example solutions: the extension kept on self,
# empty extra_cflags/extra_ldflags entries, the C++ declaration in a parenthesised string
ADD_SOLUTION = '''import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

add_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void vec_add_kernel(const float* a, const float* b, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

torch::Tensor vec_add_cuda(torch::Tensor a, torch::Tensor b) {
    auto n = a.numel();
    auto out = torch::zeros_like(a);
    const int block = 256;
    vec_add_kernel<<<(n + block - 1) / block, block>>>(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""

add_cpp_source = (
    "torch::Tensor vec_add_cuda(torch::Tensor a, torch::Tensor b);"
)

vec_add = load_inline(
    name="vec_add",
    cpp_sources=add_cpp_source,
    cuda_sources=add_source,
    functions=["vec_add_cuda"],
    verbose=True,
    extra_cflags=[""],
    extra_ldflags=[""],
)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.vec_add = vec_add

    def forward(self, a, b):
        return self.vec_add.vec_add_cuda(a, b)
'''


@requires_nvcc
def test_kernelbench_example_solution_idiom_is_accepted(tmp_path, capsys):
    base = tmp_path / "model_ex_add.py"
    base.write_text(ADD_REFERENCE)
    cand = tmp_path / "model_new_ex_add.py"
    cand.write_text(ADD_SOLUTION)
    code, result = run_eval(capsys, cand, base, "--target", "cuda")
    assert result["verdict"] in ("unverified", "correct"), result["feedback"]
    assert "vec_add_kernel" in result["feedback"]
    # but a real link flag is refused
    cand.write_text(ADD_SOLUTION.replace('extra_ldflags=[""]', 'extra_ldflags=["-lcublas"]'))
    code, result = run_eval(capsys, cand, base, "--target", "cuda")
    assert result["verdict"] == "rejected" and "extra_ldflags" in result["feedback"]
