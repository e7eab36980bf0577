"""The thin adapter to the real Neuron tools, exercised against a TEST DOUBLE of the SDK
(a tiny fake `neuronxcc.nki` package written to a temp dir). The real SDK cannot be
installed here (FACTS.md); the double only mimics the public entry points the adapter
calls: simulate_kernel and benchmark(...).benchmark_result.nc_latency."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap

import pytest

from autocomp.backends.nki.neuron import TRAINIUM_SOURCE, NeuronTools
from autocomp.model import Problem, KernelSpan, Verdict

DOUBLE_INIT = '''"""TEST DOUBLE of the Neuron SDK's neuronxcc.nki (not the real SDK)."""
__version__ = "0.0-test-double"
from . import language


def jit(fn=None, **kw):
    return fn if fn is not None else (lambda f: f)


def simulate_kernel(fn, *args):
    return fn(*args)


class _Latency:
    def get_latency_percentile(self, p):
        return {50: 120.0, 99: 150.0}[p]  # microseconds, as the SDK reports


class _Bench:
    def __init__(self, fn):
        self.fn = fn
        self.benchmark_result = type("R", (), {"nc_latency": _Latency()})()

    def __call__(self, *args):
        return self.fn(*args)


def benchmark(warmup=1, iters=1, **kw):
    return lambda fn: _Bench(fn)
'''
DOUBLE_LANG = '''"""TEST DOUBLE: NumPy stand-ins for two neuronxcc.nki.language functions."""
import numpy as np
add = np.add
subtract = np.subtract
'''

KERNEL = '''import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def k(a, b):
    return nl.add(a, b)


def get_inputs(rng):
    return [rng.standard_normal((4, 8)).astype(np.float32), rng.standard_normal((4, 8)).astype(np.float32)]
'''


@pytest.fixture
def sdk_double(tmp_path):
    pkg = tmp_path / "neuronxcc" / "nki"
    pkg.mkdir(parents=True)
    (tmp_path / "neuronxcc" / "__init__.py").write_text('"""TEST DOUBLE package."""\n__version__ = "0.0-test-double"\n')
    (pkg / "__init__.py").write_text(DOUBLE_INIT)
    (pkg / "language.py").write_text(DOUBLE_LANG)
    return str(tmp_path)


def _problem(tmp_path) -> Problem:
    path = tmp_path / "k.py"
    path.write_text(KERNEL)
    start = KERNEL.splitlines().index("@nki.jit")
    return Problem(str(path), KernelSpan("k", "nki", start, start + 3), KERNEL)


def test_trainium_tier_reports_confirmed_milliseconds(sdk_double, tmp_path):
    tools = NeuronTools(extra_path=[sdk_double], device=True)
    problem = _problem(tmp_path)
    good, bad = problem.code, problem.code.replace("nl.add", "nl.subtract")
    status = asyncio.run(tools.status())
    assert status.old_api == "0.0-test-double" and status.new_api is None
    ev = asyncio.run(tools.evaluate(problem, good))
    assert ev.verdict is Verdict.CORRECT and ev.confirmed is True, ev.feedback
    assert ev.metrics["ms"].value == pytest.approx(0.12) and ev.metrics["ms"].source == TRAINIUM_SOURCE
    assert ev.metrics["ms_p99"].value == pytest.approx(0.15)
    wrong = asyncio.run(tools.evaluate(problem, bad))
    assert wrong.verdict is Verdict.INCORRECT and "nki.simulate" in wrong.feedback
    tools.close()


def test_simulate_only_tier_without_a_device(sdk_double, tmp_path):
    tools = NeuronTools(extra_path=[sdk_double], device=False)
    ev = asyncio.run(tools.evaluate(_problem(tmp_path), _problem(tmp_path).code))
    assert ev.verdict is Verdict.CORRECT and ev.confirmed is False and not ev.metrics
    assert "no Trainium device" in ev.feedback
    tools.close()


def test_install_never_shadows_a_working_sdk(sdk_double):
    code = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {sdk_double!r})
        from autocomp.backends.nki.interp import install
        result = install()
        import neuronxcc.nki.language as nl
        print(json.dumps({{"result": result, "double": nl.__doc__.startswith("TEST DOUBLE")}}))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    data = json.loads(out.strip().splitlines()[-1])
    assert data["result"] == {"new": "interpreter", "old": "real 0.0-test-double"} and data["double"] is True
