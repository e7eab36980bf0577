"""The reorder proof: a traced run shows the affine_range iterations independent, so the
reversed-loop run can be skipped (backends/nki/reorder_proof.py), and where it cannot show
that, the reversed run still decides.

Each kernel runs in-process with ``prove_reorder=True``; ``reorder_conflict`` is None when
proven. The dependent kernels are also run reversed, to show the proof refuses exactly where
the reversed run would have something to say. The static gate (Python state the older
compiler traces once) is checked on source text; the end-to-end tests go through the
backend and watch what the interpreter child reports.
"""

from __future__ import annotations

import asyncio
import inspect
import textwrap

import numpy as np
import pytest

from nki_testlib import INSTALLED  # noqa: F401 - installs the nki modules
import nki
import nki.isa as nisa
import nki.language as nl

from autocomp.backends import get_backend
from autocomp.backends.nki.interp.install import execute
from autocomp.backends.nki.reorder_proof import proof_may_stand
from autocomp.model import Verdict


def proved(kernel, *arrays) -> str | None:
    fn = getattr(kernel, "func", kernel)
    res = execute(kernel, [np.asarray(a) for a in arrays], kernel_file=inspect.getsourcefile(fn), prove_reorder=True)
    return res.reorder_conflict


def test_tiled_matmul_accumulating_in_psum_is_proven(rng):
    @nki.jit
    def matmul(lhsT, rhs):
        k_dim, m_dim = lhsT.shape
        n_dim = rhs.shape[1]
        out = nl.ndarray((m_dim, n_dim), dtype=nl.float32, buffer=nl.shared_hbm)
        for m in nl.affine_range(m_dim // 128):
            for n in nl.affine_range(n_dim // 512):
                acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
                for k in nl.affine_range(k_dim // 128):
                    a = nl.ndarray((128, 128), dtype=lhsT.dtype, buffer=nl.sbuf)
                    b = nl.ndarray((128, 512), dtype=rhs.dtype, buffer=nl.sbuf)
                    nisa.dma_copy(dst=a, src=lhsT[k * 128:(k + 1) * 128, m * 128:(m + 1) * 128])
                    nisa.dma_copy(dst=b, src=rhs[k * 128:(k + 1) * 128, n * 512:(n + 1) * 512])
                    nisa.nc_matmul(dst=acc, stationary=a, moving=b)
                res = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_copy(dst=res, src=acc)
                # Column tiles of one row block: their flat byte ranges interleave, their
                # boxes do not.
                nisa.dma_copy(dst=out[m * 128:(m + 1) * 128, n * 512:(n + 1) * 512], src=res)
        return out

    lhsT = rng.standard_normal((256, 256)).astype(np.float32)
    rhs = rng.standard_normal((256, 1024)).astype(np.float32)
    assert proved(matmul, lhsT, rhs) is None


def test_psum_accumulation_in_the_older_style_is_proven(tmp_path, rng):
    text = textwrap.dedent('''
        import numpy as np
        import neuronxcc.nki as nki
        import neuronxcc.nki.language as nl

        @nki.jit
        def mm(lhsT, rhs):
            out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
            acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(lhsT.shape[0] // 128):
                a = nl.load(lhsT[k * 128:(k + 1) * 128, :])
                b = nl.load(rhs[k * 128:(k + 1) * 128, :])
                acc += nl.matmul(a, b, transpose_x=True)
            nl.store(out, value=nl.copy(acc))
            return out
        ''')
    path = tmp_path / "mm.py"
    path.write_text(text)
    import importlib.util

    spec = importlib.util.spec_from_file_location("reorder_mm", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    args = [rng.standard_normal((512, 128)).astype(np.float32), rng.standard_normal((512, 512)).astype(np.float32)]
    res = execute(mod.mm, args, kernel_file=str(path), prove_reorder=True)
    assert res.reorder_conflict is None
    assert proof_may_stand(text)


def test_index_array_views_name_their_own_bytes(rng):
    @nki.jit
    def gather(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        buf = nl.ndarray((128, 4, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        ip = nl.arange(128)[:, None]
        jf = nl.arange(a.shape[1])[None, :]
        for i in nl.affine_range(4):
            nisa.dma_copy(dst=buf[ip, i, jf], src=a[i * 128 + ip, jf])
        for i in nl.affine_range(4):
            nisa.dma_copy(dst=out[i * 128 + ip, jf], src=buf[ip, i, jf])
        return out

    assert proved(gather, rng.standard_normal((512, 64)).astype(np.float32)) is None


def test_a_tile_carried_between_iterations_is_a_conflict(rng):
    @nki.jit
    def prefix(a):
        out = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(4):
            nisa.dma_copy(dst=acc[:, i:i + 1], src=a[:, i:i + 1])
            if i > 0:
                nisa.tensor_tensor(dst=acc[:, i:i + 1], data1=acc[:, i:i + 1], data2=acc[:, i - 1:i], op=nl.add)
        nisa.dma_copy(dst=out, src=acc)
        return out

    assert "iterations" in proved(prefix, rng.standard_normal((128, 4)).astype(np.float32))


def test_reading_the_previous_iterations_output_is_a_conflict(rng):
    @nki.jit
    def chain(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(a.shape[0] // 128):
            y = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=y, src=a[i * 128:(i + 1) * 128, :])
            if i > 0:
                nisa.dma_copy(dst=y, src=out[(i - 1) * 128:i * 128, :])
            nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=y)
        return out

    assert proved(chain, rng.standard_normal((512, 64)).astype(np.float32)) is not None


def test_overlapping_hbm_writes_from_different_iterations_are_a_conflict(rng):
    @nki.jit
    def smear(a):
        out = nl.ndarray((128, 640), dtype=a.dtype, buffer=nl.shared_hbm)
        for j in nl.affine_range(2):
            t = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=a[:, j * 128:j * 128 + 512])
            nisa.dma_copy(dst=out[:, j * 128:j * 128 + 512], src=t)  # columns 128..511 twice
        return out

    assert proved(smear, rng.standard_normal((128, 640)).astype(np.float32)) is not None


def test_a_scratch_tile_shared_by_iterations_is_a_conflict(rng):
    """Written then read in every iteration: the reversed run passes it, the compiler may
    interleave iterations over one buffer. The proof does not vouch for it; the reversed
    run still decides (and lets it through, as before)."""
    @nki.jit
    def scratch(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        tmp = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        for i in nl.affine_range(a.shape[0] // 128):
            nisa.dma_copy(dst=tmp, src=a[i * 128:(i + 1) * 128, :])
            nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=tmp)
        return out

    assert proved(scratch, rng.standard_normal((256, 64)).astype(np.float32)) is not None


def test_sequential_range_carries_what_it_likes(rng):
    @nki.jit
    def running(a):
        out = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=acc, src=a)
        for i in nl.sequential_range(1, 4):
            nisa.tensor_tensor(dst=acc[:, i:i + 1], data1=acc[:, i:i + 1], data2=acc[:, i - 1:i], op=nl.add)
        nisa.dma_copy(dst=out, src=acc)
        return out

    assert proved(running, rng.standard_normal((128, 4)).astype(np.float32)) is None


OLD_HEAD = "import neuronxcc.nki as nki\nimport neuronxcc.nki.language as nl\n\n"


@pytest.mark.parametrize("body, stands", [
    # A name bound fresh in every iteration, loop indices reused by later loops: no state.
    ("for i in nl.affine_range(4):\n        off = i * 128\n        t = nl.load(a[off:off + 128, :])\n"
     "        nl.store(out[off:off + 128, :], value=t)\n    for i in nl.affine_range(4):\n        off = i * 128\n", True),
    # A counter carried from one iteration to the next: the older compiler traces it once.
    ("off = 0\n    for i in nl.affine_range(4):\n        t = nl.load(a[off:off + 128, :])\n"
     "        nl.store(out[off:off + 128, :], value=t)\n        off += 128\n", False),
    # An outer list grown in place.
    ("seen = []\n    for i in nl.affine_range(4):\n        seen.append(i)\n", False),
    # A list made inside the iteration is that iteration's own.
    ("for i in nl.affine_range(4):\n        tiles = []\n        tiles.append(nl.load(a[i * 128:(i + 1) * 128, :]))\n"
     "        nl.store(out[i * 128:(i + 1) * 128, :], value=tiles[0])\n", True),
    # A tensor updated in place is an instruction, which the trace shows.
    ("acc = nl.zeros((128, 64), nl.float32, buffer=nl.sbuf)\n    for i in nl.affine_range(4):\n"
     "        acc += nl.load(a[i * 128:(i + 1) * 128, :])\n", True),
    # A helper that changes its argument in place.
    ("box = [0]\n    for i in nl.affine_range(4):\n        bump(box)\n", False),
    ("for i in nl.affine_range(4):\n        global COUNT\n", False),
])
def test_python_state_gate_for_the_older_api(body, stands):
    text = OLD_HEAD + "def bump(b):\n    b.append(1)\n\n\n@nki.jit\ndef k(a, out):\n    " + body
    assert proof_may_stand(text) is stands


def test_the_gate_leaves_nki_0_7_kernels_to_the_trace():
    text = "import nki\nimport nki.language as nl\n\n@nki.jit\ndef k(a):\n    off = 0\n" \
           "    for i in nl.affine_range(4):\n        off += 128\n"
    assert proof_may_stand(text)  # Python loops unroll in order there, as the interpreter runs them
    assert not proof_may_stand("def broken(:\n")


# ---------------------------------------------------------------------------- end to end
BASE = '''import numpy as np
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def copy2(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // 128):
        x = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=a[i * 128:(i + 1) * 128, :])
        y = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y, data=x, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=y)
    return out


def get_inputs(rng):
    return [rng.standard_normal((512, 64)).astype(np.float32)]
'''

OLD_BASE = '''import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def copy2(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // 128):
        x = nl.load(a[i * 128:(i + 1) * 128, :])
        nl.store(out[i * 128:(i + 1) * 128, :], value=nl.multiply(x, 2.0))
    return out


def get_inputs(rng):
    return [rng.standard_normal((512, 64)).astype(np.float32)]
'''


def _watched(tmp_path, text: str):
    """The backend, the problem, and the results of its interpreter children as they come."""
    path = tmp_path / "copy2.py"
    path.write_text(text)
    backend = get_backend("nki", {"timeout": 30, "seeds": [0]})
    problem = backend.make_problem(str(path), text)
    runs = []
    harness = backend.harness
    original = harness._run_child

    async def spy(*args, **kwargs):
        run = await original(*args, **kwargs)
        runs.append((args[2], args[3] if len(args) > 3 else kwargs.get("extra"), run.data))
        return run

    harness._run_child = spy
    return backend, problem, runs


def _kernel(text: str) -> str:
    return text[text.index("@nki.jit"):text.index("def get_inputs")].rstrip() + "\n"


def test_a_proven_candidate_needs_no_reversed_run(tmp_path):
    backend, problem, runs = _watched(tmp_path, BASE)
    asyncio.run(backend.harness.oracle(problem))
    code = _kernel(BASE).replace("operand0=2.0)", "operand0=2.0)  # same kernel, another text")
    (ev,) = asyncio.run(backend.evaluate(problem, [code]))
    assert ev.verdict is Verdict.CORRECT, ev.feedback
    mode, extra, data = runs[-1]
    assert mode == "candidate" and extra["reorder"] and extra["reorder_proof"]
    assert data["reorder_proven"] is True and "rev_count" not in data


def test_the_original_as_its_own_candidate_is_proven_by_the_oracle_run(tmp_path):
    backend, problem, runs = _watched(tmp_path, BASE)
    (ev,) = asyncio.run(backend.evaluate(problem, [problem.code]))
    assert ev.verdict is Verdict.CORRECT, ev.feedback
    oracle = asyncio.run(backend.harness.oracle(problem))
    assert oracle.reorder_proven
    finished = [m for m, _, data in runs if m == "candidate" and data.get("status") == "ok"]
    assert finished == []  # no reversed-loop run finished (an early one, if any, was stopped)


def test_an_unproven_candidate_still_meets_the_reversed_run(tmp_path):
    """The older API with a Python counter carried across iterations: the interpreter's
    forward run is fine, the compiler traces the body once. No proof is offered; the
    reversed run sees the counter take other values and says so."""
    backend, problem, runs = _watched(tmp_path, OLD_BASE)
    code = ("@nki.jit\ndef copy2(a):\n    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)\n"
            "    row = 0\n    for i in nl.affine_range(a.shape[0] // 128):\n"
            "        x = nl.load(a[i * 128:(i + 1) * 128, :])\n"
            "        nl.store(out[row:row + 128, :], value=nl.multiply(x, 2.0))\n"
            "        row += 128\n    return out\n")
    (ev,) = asyncio.run(backend.evaluate(problem, [code]))
    assert ev.verdict is Verdict.RUNTIME_ERROR and "loop-carried dependency" in ev.feedback, ev.feedback
    mode, extra, data = runs[-1]
    assert extra["reorder_proof"] is False and "reorder_proven" not in data


def test_a_real_dependency_is_left_to_the_reversed_run(tmp_path):
    backend, problem, runs = _watched(tmp_path, BASE)
    code = _kernel(BASE).replace(
        "        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=y)\n",
        "        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=y)\n"
        "        if i > 0:\n"
        "            nisa.dma_copy(dst=y, src=out[(i - 1) * 128:i * 128, :])\n"
        "            nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=y)\n")
    (ev,) = asyncio.run(backend.evaluate(problem, [code]))
    # (reversed, iteration 3 reads rows iteration 2 has not written yet)
    assert ev.verdict is Verdict.RUNTIME_ERROR and "reverse order" in ev.feedback, ev.feedback
    _, extra, data = runs[-1]
    assert extra["reorder_proof"]  # offered, found the dependency, and the reversed run spoke
    assert data["error"]["stage"] == "reorder"


def test_the_log_gives_up_past_its_bound(rng, monkeypatch):
    """A trace far longer than any published shape's: the proof stops logging (its memory
    is bounded) and leaves the decision to the reversed run."""
    from autocomp.backends.nki import reorder_proof

    monkeypatch.setattr(reorder_proof, "MAX_ROWS", 10)

    @nki.jit
    def copy(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(a.shape[0] // 128):
            t = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=a[i * 128:(i + 1) * 128, :])
            nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=t)
        return out

    assert "too many accesses" in proved(copy, rng.standard_normal((1024, 8)).astype(np.float32))
