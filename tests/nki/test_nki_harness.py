"""End-to-end evaluation through NkiBackend: children, verdicts decided in the parent,
and kernels that cheat."""

from __future__ import annotations

import asyncio

import pytest

from autocomp.backends import get_backend
from autocomp.backends.base import BackendError
from autocomp.model import Verdict

BASE = '''import numpy as np
import nki
import nki.isa as nisa
import nki.language as nl

CACHE = []


@nki.jit
def scale_add(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // 128):
        x = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        y = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=a[i * 128:(i + 1) * 128, :])
        nisa.dma_copy(dst=y, src=b[i * 128:(i + 1) * 128, :])
        z = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=z, data=x, op0=nl.multiply, operand0=2.0, op1=nl.add, operand1=y)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=z)
    return out


def get_inputs(rng):
    return [rng.standard_normal((256, 128)).astype(np.float32), rng.standard_normal((256, 128)).astype(np.float32)]
'''

BODY_START = BASE.index("@nki.jit")
BODY_END = BASE.index("def get_inputs")
ORIGINAL = BASE[BODY_START:BODY_END].rstrip() + "\n"


def variant(old: str, new: str) -> str:
    assert old in ORIGINAL, old
    return ORIGINAL.replace(old, new)


@pytest.fixture(scope="module")
def backend_problem(tmp_path_factory):
    path = tmp_path_factory.mktemp("k") / "scale_add.py"
    path.write_text(BASE)
    backend = get_backend("nki", {"timeout": 5, "seeds": [0, 1]})
    return backend, backend.make_problem(str(path), BASE)


def evaluate(backend_problem, codes):
    backend, problem = backend_problem
    return asyncio.run(backend.evaluate(problem, codes))


def test_original_is_correct_with_an_estimate_that_is_never_confirmed(backend_problem):
    (ev,) = evaluate(backend_problem, [ORIGINAL])
    assert ev.verdict is Verdict.CORRECT, ev.feedback
    m = ev.metrics["cycles"]
    assert (m.unit, m.source) == ("cycles", "nki estimate") and m.value > 0
    assert ev.confirmed is False and ev.tier == "nki interpreter"
    assert "VectorE" in ev.feedback and "DMA" in ev.feedback and "not a measurement" in ev.feedback


FORWARD = "nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=z)"
CHEATS = {
    # prints the pass line and stores nothing: the output stays poisoned / unwritten
    "prints_pass": (variant(FORWARD, "print('PASS: all outputs match')"), Verdict.RUNTIME_ERROR),
    # returns a constant instead of computing
    "constant": (variant("        nisa.scalar_tensor_tensor(dst=z, data=x, op0=nl.multiply, operand0=2.0, op1=nl.add, operand1=y)",
                         "        nisa.memset(dst=z, value=0.5)"), Verdict.INCORRECT),
    # skips half of the work
    "skips_work": (variant("nl.affine_range(a.shape[0] // 128)", "nl.affine_range(1)"), Verdict.RUNTIME_ERROR),
    # computes on the host with NumPy
    "host_numpy": (variant("    return out", "    out = np.asarray(a) * 2\n    return out"), Verdict.REJECTED),
    # reaches into the interpreter's memory
    "private": (variant("    return out", "    out._data[...] = 0\n    return out"), Verdict.REJECTED),
    # imports something
    "imports": (variant("    return out", "    import os\n    return out"), Verdict.REJECTED),
    # writes to its input
    "modifies_input": (variant(FORWARD, FORWARD + "\n        nisa.dma_copy(dst=a[i * 128:(i + 1) * 128, :], src=z)"),
                       Verdict.INCORRECT),
    # keeps results of an earlier run in module state (stale buffer): not in the NKI subset
    "stale_buffer": (variant("    return out", "    CACHE.append(out)\n    return CACHE[0]"), Verdict.REJECTED),
    # (nl.store under `import nki` is no longer a case here: NKI 2.29 put the functional
    # forms back into nki.language; mixing the two modules is refused in test_nki_constraints)
    "syntax": (variant("    return out", "    return out +"), Verdict.COMPILE_ERROR),
    # `while` is not part of the subset; a loop over an enormous range runs into the time limit
    "while_loop": (variant("    return out", "    while True:\n        pass\n    return out"), Verdict.REJECTED),
    "loops_forever": (variant("    return out", "    for j in nl.sequential_range(10 ** 12):\n        pass\n    return out"),
                      Verdict.TIMEOUT),
}


def test_cheating_and_broken_kernels_are_rejected(backend_problem):
    names = list(CHEATS)
    evs = evaluate(backend_problem, [CHEATS[n][0] for n in names])
    for name, ev in zip(names, evs):
        assert ev.verdict is CHEATS[name][1], f"{name}: {ev.verdict} {ev.feedback}"
        assert not ev.metrics, name
    by_name = dict(zip(names, evs))
    assert "never written" in by_name["prints_pass"].feedback
    assert "modified its input" in by_name["modifies_input"].feedback


def test_constraint_violation_feedback_names_line_and_limit(backend_problem):
    _, problem = backend_problem
    code = variant("nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)\n        y",
                   "nl.ndarray((256, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)\n        y")
    (ev,) = evaluate(backend_problem, [code])
    assert ev.verdict is Verdict.RUNTIME_ERROR
    assert f"{problem.path}:13: in nl.ndarray:" in ev.feedback and "[limit: partition dimension (axis 0) <= 128]" in ev.feedback


def test_loop_carried_dependency_in_affine_range_is_caught(backend_problem):
    code = variant("nl.affine_range(a.shape[0] // 128)", "nl.affine_range(a.shape[0] // 128)")
    code = code.replace("        nisa.dma_copy(dst=y, src=b[i * 128:(i + 1) * 128, :])",
                        "        nisa.dma_copy(dst=y, src=b[i * 128:(i + 1) * 128, :])\n"
                        "        if i > 0:\n"
                        "            nisa.dma_copy(dst=y, src=out[(i - 1) * 128:i * 128, :])")
    (ev,) = evaluate(backend_problem, [code])
    assert ev.verdict in (Verdict.RUNTIME_ERROR,), ev.feedback
    assert "affine_range" in ev.feedback


def test_original_that_fails_is_a_backend_error(tmp_path):
    text = BASE.replace("operand0=2.0", "operand0=a")
    path = tmp_path / "bad.py"
    path.write_text(text)
    backend = get_backend("nki", {"timeout": 20, "seeds": [0]})
    problem = backend.make_problem(str(path), text)
    with pytest.raises(BackendError, match="fails in the NKI interpreter"):
        asyncio.run(backend.evaluate(problem, [problem.code]))


def test_inputs_from_annotations(tmp_path):
    text = BASE.replace("def get_inputs(rng):", "def unused(rng):") + '\nINPUT_SPECS = {"a": ("float32", (128, 64)), "b": ("float32", (128, 64))}\n'
    path = tmp_path / "annotated.py"
    path.write_text(text)
    backend = get_backend("nki", {"timeout": 20, "seeds": [0]})
    problem = backend.make_problem(str(path), text)
    (ev,) = asyncio.run(backend.evaluate(problem, [problem.code]))
    assert ev.verdict is Verdict.CORRECT, ev.feedback


def test_detection_and_tier():
    backend = get_backend("nki")
    assert backend.name == "nki" and backend.file_suffixes == (".py",) and backend.primary_metric == "cycles"
    spans = backend.detect("x.py", BASE)
    assert [s.name for s in spans] == ["scale_add"]
    assert backend.detect("x.py", "def f(:\n") == []
    assert backend.tier().confirms is False
    names = {c.name: c for c in backend.doctor()}
    assert names["numpy"].found and names["ml_dtypes"].found and "nki interpreter" in names["active tier"].detail


OUT_ARG = '''import numpy as np
import neuronxcc.nki.language as nl
from torch_neuronx import nki_jit


@nki_jit
def double_into(a, out):
    for i in nl.affine_range(a.shape[0] // 128):
        t = nl.load(a[i * 128:(i + 1) * 128, :])
        nl.store(out[i * 128:(i + 1) * 128, :], value=t * 2.0)


def get_inputs(rng):
    return [rng.standard_normal((256, 64)).astype(np.float32), np.zeros((256, 64), np.float32)]
'''


def test_kernels_that_write_an_output_argument(tmp_path):
    """Older baremetal style: the output is an argument; it is poisoned for candidates."""
    path = tmp_path / "out_arg.py"
    path.write_text(OUT_ARG)
    backend = get_backend("nki", {"timeout": 20, "seeds": [0, 1]})
    problem = backend.make_problem(str(path), OUT_ARG)
    good = problem.code
    half = good.replace("a.shape[0] // 128", "1")  # leaves poisoned rows behind
    wrong = good.replace("t * 2.0", "t * 3.0")
    evs = asyncio.run(backend.evaluate(problem, [good, half, wrong]))
    assert [e.verdict for e in evs] == [Verdict.CORRECT, Verdict.INCORRECT, Verdict.INCORRECT], [e.feedback for e in evs]
    assert "output argument 1" in evs[1].feedback


SPMD = '''import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

GRID = (2,)


@nki.jit
def scaled(a, factor):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    p = nl.program_id(0)
    t = nl.load(a[p * 128:(p + 1) * 128, :])
    nl.store(out[p * 128:(p + 1) * 128, :], value=t * factor)
    return out


def get_inputs(rng):
    return [rng.standard_normal((256, 32)).astype(np.float32), 1.5]
'''


def test_spmd_grid_and_scalar_arguments(tmp_path):
    path = tmp_path / "spmd.py"
    path.write_text(SPMD)
    backend = get_backend("nki", {"timeout": 20, "seeds": [0]})
    problem = backend.make_problem(str(path), SPMD)
    good, wrong = problem.code, problem.code.replace("t * factor", "t * 2.0")
    evs = asyncio.run(backend.evaluate(problem, [good, wrong]))
    assert [e.verdict for e in evs] == [Verdict.CORRECT, Verdict.INCORRECT], [e.feedback for e in evs]


def test_inputs_come_from_secret_seeds_unless_public_seeds(tmp_path):
    """A kernel that regenerates the inputs from the file's get_inputs and a guessed seed
    gets other numbers: the RNG seeds behind the labels are drawn secretly per harness."""
    import numpy as np

    path = tmp_path / "scale_add.py"
    path.write_text(BASE)

    def first_input(settings):
        backend = get_backend("nki", {"seeds": [0, 1], **settings})
        oracle = asyncio.run(backend.harness.oracle(backend.make_problem(str(path), BASE)))
        return oracle.inputs[0][0]

    guessed = np.random.default_rng(0).standard_normal((256, 128)).astype(np.float32)
    a, b = first_input({}), first_input({})
    assert not np.array_equal(a, guessed) and not np.array_equal(a, b)
    np.testing.assert_array_equal(first_input({"public_seeds": True}), guessed)


def test_limits_scale_with_the_problem_and_name_the_setting():
    from types import SimpleNamespace

    from autocomp.backends.nki.harness import MEMORY_BASE, MEMORY_PER_DATA_BYTE, TIME_FACTOR, Harness

    h = Harness(seeds=(0, 1, 2), timeout=60.0, memory_bytes=3 << 30)
    try:
        assert h.limits() == (180.0, 3 << 30)  # the original: the setting per input set
        small = SimpleNamespace(seconds=1.0, data_bytes=1 << 20)
        big = SimpleNamespace(seconds=100.0, data_bytes=1 << 30)
        assert h.limits(small) == (60.0, 3 << 30)
        assert h.limits(big) == (TIME_FACTOR * 100.0, MEMORY_BASE + MEMORY_PER_DATA_BYTE * (1 << 30))
        assert "autocomp.target.nki.timeout" in h._limit_note(400.0)
    finally:
        h.close()


def test_seed_budget_checks_a_large_problem_on_fewer_input_sets(tmp_path):
    """Input sets beyond the first run only within seed_budget: a zero-second budget leaves
    one set (plus the reversed run), a wrong kernel is still caught, and the feedback says so."""
    path = tmp_path / "scale_add.py"
    path.write_text(BASE)
    backend = get_backend("nki", {"timeout": 5, "seeds": [0, 1, 2], "seed_budget": 1e-9})
    problem = backend.make_problem(str(path), BASE)
    good, bad = asyncio.run(backend.evaluate(problem, [ORIGINAL, variant("operand0=2.0", "operand0=3.0")]))
    assert backend.harness._oracles[problem.content_hash()].seeds == (0,)
    assert good.verdict == Verdict.CORRECT and "Checked on 1 of 3 random input sets" in good.feedback
    assert bad.verdict == Verdict.INCORRECT


CONFIGURED = '''import numpy as np
from dataclasses import dataclass
import nki
import nki.isa as nisa
import nki.language as nl


@dataclass(frozen=True)
class Tiling:
    tile_size: int


TILING = Tiling(128)


@nki.jit
def scaled(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // TILING.tile_size):
        x = nl.ndarray((TILING.tile_size, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=a[i * TILING.tile_size:(i + 1) * TILING.tile_size, :])
        y = nl.ndarray((TILING.tile_size, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y, data=x, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=out[i * TILING.tile_size:(i + 1) * TILING.tile_size, :], src=y)
    return out


def get_inputs(rng):
    return [rng.standard_normal((256, 64)).astype(np.float32)]
'''


def test_the_original_file_is_the_users_code_and_skips_the_allowlist(tmp_path):
    """``autocomp eval FILE`` on a kernel written the way AWS's reference kernels are (a
    configuration dataclass read inside the kernel, which the allowlist refuses in an LLM's
    rewrite): the original's own text is the user's code, run trusted by the oracle, so it is
    rated; the same kernel as any other text is a candidate and is checked."""
    path = tmp_path / "configured.py"
    path.write_text(CONFIGURED)
    backend = get_backend("nki", {"timeout": 20, "seeds": [0]})
    problem = backend.make_problem(str(path), CONFIGURED)
    (ev,) = asyncio.run(backend.evaluate(problem, [problem.code]))
    assert ev.verdict is Verdict.CORRECT, ev.feedback
    (copy,) = asyncio.run(backend.evaluate(problem, [problem.code.replace("return out", "return out  # copy")]))
    assert copy.verdict is Verdict.REJECTED and ".tile_size" in copy.feedback, copy.feedback
