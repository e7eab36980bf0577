"""How much of Autocomp's own Trainium benchmark suite runs correctly on our NKI interpreter.

ucb-bar/autocomp keeps, per Trainium benchmark, a harness (``harnesses/trn-*/N_name*.py``:
a reference kernel ``ref``, a correctness check ``test_nki(ref, solution)`` with its own
inputs and tolerances, and a ``# SUBSTITUTE HERE`` line) and a starting solution
(``sols/trn-*/N_name*.py``, a kernel named ``solution``). It cannot be committed here; point
this script at a checkout::

    python bench/nki_autocomp_suite.py --autocomp /path/to/autocomp [--only NAME] [--timeout S]

Each benchmark runs in its own process: the solution is put in place of ``# SUBSTITUTE
HERE`` (what Autocomp's own evaluator does), the text is imported with our interpreter as
``nki`` / ``neuronxcc.nki``, and the harness's ``test_nki(ref, solution)`` decides, on the
harness's inputs and tolerances; both kernels run on the interpreter. The solution's NKI
kernels first pass the static check every candidate passes (``backends/nki/validate.py``,
the harness's own top-level code trusted as the user's). Harnesses written
for a Neuron device get a CPU stand-in for ``torch_xla`` (they only ask it for a device);
kernels called with torch tensors answer with torch tensors, as under torch_xla. PyTorch
itself must be importable for those (``pip install torch``); without it they are reported
as skipped and not counted. Harnesses that only time a PyTorch model (``trn-e2e`` without
``_nki``) have no NKI kernel and are not listed.

Prints one line per benchmark (``pass``, ``FAIL`` with the harness's verdict or the first
error, ``skip`` with why) and the pass rate.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from autocomp.backends.nki.interp.errors import NkiError

SUITES = ("trn-tutorial-nki1", "trn-tutorial-nki2", "trn-advanced-nki1", "trn-advanced-nki2", "trn-internal",
          "trn-e2e")
MARK = "# SUBSTITUTE HERE"


def benchmarks(root: Path) -> list[tuple[str, Path, Path]]:
    """(name, harness, solution) for every harness with an NKI solution beside it."""
    found = []
    for suite in SUITES:
        for harness in sorted((root / "harnesses" / suite).glob("*.py")):
            if MARK not in harness.read_text(errors="replace"):
                continue
            stem = re.sub(r"_test$", "", harness.stem)
            sols = [root / "sols" / suite / f"{stem}_ref.py", root / "sols" / suite / f"{stem}.py"]
            sol = next((s for s in sols if s.exists()), None)
            if sol is None or "nki" not in sol.read_text(errors="replace"):
                continue
            found.append((f"{suite}/{stem}", harness, sol))
    return found


# ---------------------------------------------------------------------------- one benchmark (child)
def _torch_xla_stand_in() -> None:
    """``from torch_xla.core import xla_model as xm``; ``xm.xla_device()`` is the CPU."""
    import types

    import torch

    xm = types.ModuleType("torch_xla.core.xla_model")
    xm.xla_device = lambda *a, **k: torch.device("cpu")
    xm.mark_step = lambda *a, **k: None
    core = types.ModuleType("torch_xla.core")
    core.xla_model = xm
    root = types.ModuleType("torch_xla")
    root.core = core
    root.sync = lambda *a, **k: None
    sys.modules.update({"torch_xla": root, "torch_xla.core": core, "torch_xla.core.xla_model": xm})


class HarnessError(Exception):
    """The harness cannot run as written, before any kernel ran (not the interpreter's doing)."""


def _check(module, text: str) -> bool:
    """What the harness's ``__main__`` decides: ``test_nki(REF, SOLUTION)`` with the two
    functions it names, or ``run_compare()`` (False, or a printed ``FAIL``, is a failure)."""
    main = text[text.find("__main__"):] if "__main__" in text else ""
    m = re.search(r"test_nki\(\s*([A-Za-z_]\w*)\s*,\s*([A-Za-z_]\w*)\s*\)", main)
    if m:
        missing = [n for n in m.groups() if not hasattr(module, n)]
        if missing:
            raise HarnessError(f"its __main__ checks {', '.join(missing)}, which neither it nor the solution defines")
        return module.test_nki(getattr(module, m.group(1)), getattr(module, m.group(2)))
    if "run_compare(" in main:
        import contextlib
        import io

        said = io.StringIO()
        with contextlib.redirect_stdout(said):
            ok = module.run_compare()
        print(said.getvalue(), end="")
        return ok is not False and not re.search(r"^FAIL", said.getvalue(), re.M)
    raise HarnessError("its __main__ neither calls test_nki(ref, solution) nor run_compare()")


def _validator_issues(text: str, harness_text: str, solution_text: str) -> str:
    """What our static check (the one every candidate passes before it runs) says of the
    solution's NKI kernels, with the harness's own top-level code trusted as the user's."""
    import ast

    from autocomp.backends.nki.validate import validate_file

    try:
        kernels = [f.name for f in ast.parse(solution_text).body if isinstance(f, ast.FunctionDef)
                   and any("jit" in ast.unparse(d) for d in f.decorator_list)]
    except SyntaxError as exc:
        return f"the solution does not parse: {exc}"
    for name in kernels:
        issues = validate_file(text, name, original_text=harness_text)
        if issues:
            return f"line {issues[0].line}: {issues[0].message}"
    return ""


RUNS = [0]  # kernel runs started in this process (run_one)
TRACE: list = []  # the solution's first run's instructions (run_one)


def _print_estimate() -> None:
    """``estimate: {...}``: the cost model's figure for the solution's first run."""
    import json

    from autocomp.backends.nki.cost import estimate

    if TRACE:
        est = estimate(TRACE)
        print("estimate: " + json.dumps({"cycles": est.cycles, "us": est.microseconds, "instructions": len(TRACE)}))


def run_one(harness: Path, solution: Path) -> int:
    """Child: 0 pass, 1 the harness said no, 2 an error (printed), 3 skipped (printed)."""
    interp = importlib.import_module("autocomp.backends.nki.interp.install")

    interp.install()
    execute = interp.execute

    def counted(*args, **kwargs):
        RUNS[0] += 1
        res = execute(*args, **kwargs)
        fn = getattr(args[0], "func", args[0])
        if getattr(fn, "__name__", "") == "solution" and not TRACE:
            TRACE.extend(res.trace)  # the solution's first run, on the harness's own inputs
        return res

    interp.execute = counted
    # (harnesses that time the kernel after checking it: the check only)
    harness_text = re.sub(r"^(\s*)perf_iters = \d+", r"\1perf_iters = 0", harness.read_text(), flags=re.M)
    text = harness_text.replace(MARK, solution.read_text(), 1)
    uses_torch = re.search(r"^\s*(import torch|from torch)", text, re.M) is not None
    if uses_torch:
        try:
            import torch  # noqa: F401
        except ImportError:
            print("skip: needs PyTorch (pip install torch)")
            return 3
        _torch_xla_stand_in()
    refused = _validator_issues(text, harness_text, solution.read_text())
    if refused:
        print(f"error: refused by Autocomp's NKI validator: {refused}")
        return 2
    work = Path(tempfile.mkdtemp(prefix="nki-suite-"))
    path = work / harness.name
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("bench_" + harness.stem, path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        ok = _check(module, text)
    except HarnessError as exc:
        print(f"skip: the harness is broken as published: {exc}")
        return 3
    except BaseException as exc:  # noqa: BLE001 - report whatever the run raised
        if isinstance(exc, KeyboardInterrupt):
            raise
        lines = traceback.format_exception(exc)
        ours = isinstance(exc, NkiError) or "nki" in str(exc) or any("/backends/nki/" in ln for ln in lines)
        if RUNS[0] == 0 and not ours:
            # (harness glue that cannot run here, e.g. torch refusing a bfloat16 NumPy array:
            # not counted, and said; anything raised by or about the interpreter counts)
            print(f"skip: the harness failed before any kernel ran: {type(exc).__name__}: {exc}"[:400])
            return 3
        here = [ln for ln in lines if str(path) in ln]
        print(f"error: {type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"[:400])
        if here:
            print("  at " + here[-1].strip().splitlines()[0][:300])
        return 2
    if ok is False:
        print("the harness's check failed (test_nki returned False)")
        return 1
    _print_estimate()
    return 0


# ---------------------------------------------------------------------------- driver
def estimate_of(said: str) -> dict | None:
    """The child's ``estimate:`` line, if it printed one."""
    import json

    for line in reversed(said.splitlines()):
        if line.startswith("estimate: "):
            return json.loads(line[len("estimate: "):])
    return None


def check(harness: Path, solution: Path, timeout: float) -> tuple[int, str, float]:
    """One benchmark in a child process: (exit code as run_one's, what it printed, seconds)."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS=os.environ.get("OPENBLAS_NUM_THREADS", "1"))
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH", "")])
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--one", str(harness), str(solution)],
                              capture_output=True, text=True, timeout=timeout, env=env)
        code, said = proc.returncode, (proc.stdout + proc.stderr).strip()
    except subprocess.TimeoutExpired:
        code, said = 2, f"error: no answer within {timeout:.0f} s (--timeout to wait longer)"
    return code, said, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--autocomp", help="a ucb-bar/autocomp checkout")
    ap.add_argument("--only", nargs="*", default=[], help="run benchmarks whose name contains one of these")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per benchmark")
    ap.add_argument("--one", nargs=2, metavar=("HARNESS", "SOLUTION"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        return run_one(Path(args.one[0]), Path(args.one[1]))
    if not args.autocomp:
        ap.error("--autocomp is required")
    found = [b for b in benchmarks(Path(args.autocomp)) if not args.only or any(o in b[0] for o in args.only)]
    if not found:
        print("no benchmarks found: is --autocomp a ucb-bar/autocomp checkout (harnesses/, sols/)?")
        return 2
    passed = counted = 0
    for name, harness, sol in found:
        code, said, seconds = check(harness, sol, args.timeout)
        verdict = {0: "pass", 1: "FAIL", 3: "skip"}.get(code, "FAIL")
        if code != 3:
            counted += 1
            passed += code == 0
        detail = "" if code == 0 else "  " + said.splitlines()[-1][:300] if said else ""
        if code not in (0, 3) and said:
            detail = "  " + " | ".join(said.splitlines()[-2:])[:400]
        est = estimate_of(said) if code == 0 else None
        if est:
            detail = f"  estimate {est['us'] / 1000:.3f} ms ({est['instructions']} instructions; cycles (nki estimate))"
        print(f"{verdict:5} {name:42} {seconds:6.1f} s{detail}", flush=True)
    print(f"\n{passed} of {counted} benchmarks pass on the interpreter"
          + (f" ({len(found) - counted} skipped)" if counted < len(found) else ""))
    return 0 if passed == counted else 1


if __name__ == "__main__":
    sys.exit(main())
