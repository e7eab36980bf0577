"""The GPU runner for KernelBench-style problems -- the timer -- run by the host as
``python -m autocomp.backends.cuda.gpu_runner spec.json`` inside the sandbox
(:func:`autocomp.sandbox.run_limited` with the GPU device nodes bound in and a result
channel on descriptor 3).

Design (docs/cuda.md, "GPU tier by construction"):

* The candidate never runs in this process. Two children (:mod:`gpu_child`) each load one
  model: the reference ``Model`` and the candidate ``ModelNew``. They are started with
  pipes only (``close_fds``: the result channel stays here), and this process makes itself
  non-dumpable, so a child can neither read its memory nor write its verdict.
* The timer is this process's own clock (``time.perf_counter_ns``): a trial is the round trip
  "send fresh inputs -> receive the outputs", measured here; the reference child (trusted
  code) calibrates the transfer overhead with ``ping`` requests of the same sizes, which is
  subtracted from both. The candidate cannot stop this clock early: the clock stops when
  the outputs are here, and they are checked.
* Fresh inputs for every trial and every check, from seeds drawn here from
  ``secrets`` after the candidate is loaded (nothing to precompute or memoise), and EVERY
  timed trial is verified against the reference child's outputs for the same inputs.
* The reference is timed before the candidate's process exists, so a candidate cannot slow
  the reference down with background GPU work.
* The launched CUDA kernels are listed by the PyTorch profiler during the first check; at
  least one must be a ``__global__`` function of the candidate's own sources.

The verdict (JSON) is written to descriptor 3 only.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from typing import Any

from autocomp.backends.cuda import gpu_wire, runner_main


def _tolerance(dtype: str) -> float:
    return 1e-2 if dtype in ("float16", "bfloat16") else 1e-4



class ChildProcess:
    def __init__(self, role: str, device: str, log_path: str) -> None:
        self.role = role
        self.log = open(log_path, "wb")
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "TMPDIR", "LANG", "TORCH_EXTENSIONS_DIR",
                                                            "CUDA_HOME", "MAX_JOBS", "PYTHONDONTWRITEBYTECODE",
                                                            "PYTHONPATH", "LD_LIBRARY_PATH")}
        self.proc = subprocess.Popen([sys.executable, "-m", "autocomp.backends.cuda.gpu_child", device],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, close_fds=True,
                                     env=env, start_new_session=True)

    def ask(self, header: dict[str, Any], payload: list[bytes] | None = None) -> tuple[dict[str, Any], list[bytes]]:
        gpu_wire.send(self.proc.stdin, header, payload)
        return gpu_wire.receive(self.proc.stdout)

    def timed(self, header: dict[str, Any], payload: list[bytes]) -> tuple[float, dict[str, Any], list[bytes]]:
        start = time.perf_counter_ns()
        reply, chunks = self.ask(header, payload)
        return (time.perf_counter_ns() - start) / 1e6, reply, chunks

    def close(self) -> None:
        try:
            gpu_wire.send(self.proc.stdin, {"op": "quit"})
        except (OSError, ValueError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()

    def log_tail(self, path: str, limit: int = 3000) -> str:
        try:
            with open(path, "rb") as fh:
                return fh.read()[-limit:].decode("utf-8", "replace")
        except OSError:
            return ""


def compare(expected: list[Any], got: list[Any], torch: Any) -> tuple[bool, float, str]:
    if len(got) != len(expected):
        return False, 0.0, f"{len(got)} outputs, expected {len(expected)}"
    worst = 0.0
    for i, (g, e) in enumerate(zip(got, expected)):
        if not isinstance(e, torch.Tensor):
            if g != e:
                return False, worst, f"output {i} is {g!r}, expected {e!r}"
            continue
        if not isinstance(g, torch.Tensor):
            return False, worst, f"output {i} is not a tensor"
        if tuple(g.shape) != tuple(e.shape):
            return False, worst, f"output {i} has shape {tuple(g.shape)}, expected {tuple(e.shape)}"
        if g.dtype != e.dtype:
            return False, worst, f"output {i} has dtype {g.dtype}, expected {e.dtype}"
        tol = _tolerance(str(e.dtype).replace("torch.", ""))
        gc, ec = g.double(), e.double()
        diff = (gc - ec).abs()
        finite = ~torch.isnan(diff)
        max_diff = float(diff[finite].max()) if diff.numel() and bool(finite.any()) else 0.0
        worst = max(worst, max_diff)
        bad_nan = bool((torch.isnan(gc) & ~torch.isnan(ec)).any())
        if bad_nan or not torch.allclose(gc, ec, atol=tol, rtol=tol, equal_nan=True):
            extra = ", NaN where the reference has none (an output never written?)" if bad_nan else ""
            return False, max_diff, f"output {i} differs from the reference (max abs diff {max_diff:.3g}, tolerance {tol:g}{extra})"
    return True, worst, ""


class Runner:
    def __init__(self, spec: dict[str, Any]) -> None:
        import torch

        self.torch = torch
        self.spec = spec
        self.device = spec.get("device", "cuda")
        self.ref_mod = self._reference(spec["reference"])

    def _reference(self, path: str) -> Any:
        import importlib.util

        s = importlib.util.spec_from_file_location("autocomp_reference_inputs", path)
        module = importlib.util.module_from_spec(s)
        s.loader.exec_module(module)
        return module

    def inputs(self, seed: int) -> tuple[list[dict[str, Any]], list[bytes]]:
        self.torch.manual_seed(seed)
        return gpu_wire.describe(list(self.ref_mod.get_inputs()))

    def init_inputs(self) -> tuple[list[dict[str, Any]], list[bytes]]:
        self.torch.manual_seed(int(self.spec.get("init_seed", 42)))
        items = list(self.ref_mod.get_init_inputs()) if hasattr(self.ref_mod, "get_init_inputs") else []
        return gpu_wire.describe(items)

    def run(self) -> dict[str, Any]:
        spec, torch = self.spec, self.torch
        work = os.getcwd()
        ref = ChildProcess("reference", self.device, os.path.join(work, "reference.log"))
        cand: ChildProcess | None = None
        try:
            init_descs, init_chunks = self.init_inputs()
            reply, _ = ref.ask({"op": "load", "path": spec["reference"], "class": "Model", "role": "reference",
                                "init_seed": spec.get("init_seed", 42), "tensors": init_descs}, init_chunks)
            if not reply.get("ok"):
                return {"stage": "reference" if reply.get("stage") != "setup" else "setup",
                        "error": reply.get("error", "") + ref.log_tail(os.path.join(work, "reference.log"))}
            result: dict[str, Any] = {"device": reply.get("device", "")}
            state, state_chunks = ref.ask({"op": "state"})
            # 1. the reference alone: expected outputs for the checks, its timing, the overhead
            check_seeds = [secrets.randbits(31) for _ in range(int(spec.get("checks", 3)))]
            expected = {}
            for seed in check_seeds:
                d, c = self.inputs(seed)
                r, chunks = ref.ask({"op": "run", "tensors": d}, c)
                if not r.get("ok"):
                    return {**result, "stage": "reference", "error": r.get("error", "")}
                expected[seed] = (r["tensors"], chunks)
            out_descs = expected[check_seeds[0]][0]
            poison = {"poison_shapes": [t["shape"] for t in out_descs if "shape" in t],
                      "poison_dtypes": [t["dtype"] for t in out_descs if "dtype" in t]}
            trials, warmup = int(spec.get("trials", 100)), int(spec.get("warmup", 3))
            ref_ms, overhead_ms = [], []
            for i in range(warmup + trials):
                d, c = self.inputs(secrets.randbits(31))
                ms, r, _ = ref.timed({"op": "run", "tensors": d}, c)
                pms, _, _ = ref.timed({"op": "ping", "tensors": d, **poison}, c)
                if i >= warmup:
                    ref_ms.append(ms)
                    overhead_ms.append(pms)
            # 2. the candidate, in its own process, started only now
            cand = ChildProcess("candidate", self.device, os.path.join(work, "candidate.log"))
            reply, _ = cand.ask({"op": "load", "path": spec["candidate"], "class": "ModelNew", "role": "candidate",
                                 "init_seed": spec.get("init_seed", 42), "tensors": init_descs}, init_chunks)
            if not reply.get("ok"):
                stage = reply.get("stage", "import")
                return {**result, "stage": "build" if stage == "build" else "import" if stage in ("load", "import") else stage,
                        "error": reply.get("error", "") + cand.log_tail(os.path.join(work, "candidate.log"))}
            reply, _ = cand.ask({"op": "weights", **state}, state_chunks)
            if not reply.get("ok"):
                return {**result, "stage": "construct", "error": reply.get("error", "")}
            worst = 0.0
            kernels: list[str] = []
            for k, seed in enumerate(check_seeds):
                d, c = self.inputs(seed)
                r, chunks = cand.ask({"op": "run", "tensors": d, "profile": k == 0, **poison}, c)
                if not r.get("ok"):
                    return {**result, "stage": "run", "error": r.get("error", "")}
                if k == 0:
                    kernels = [str(x) for x in r.get("kernels", [])][:200]
                if r.get("inputs_changed"):
                    return {**result, "stage": "done", "correct": False,
                            "reason": f"check {k + 1}: the candidate modified input {r['inputs_changed'][0]}"}
                ok, diff, why = compare(gpu_wire.rebuild(*expected[seed]), gpu_wire.rebuild(r["tensors"], chunks), torch)
                worst = max(worst, diff)
                if not ok:
                    return {**result, "stage": "done", "correct": False, "reason": f"check {k + 1} (fresh inputs): {why}",
                            "max_abs_diff": diff}
            result["kernels"] = kernels
            names = [n for n in spec.get("kernel_names", []) if n]
            if names and self.device == "cuda" and not any(n in k for k in kernels for n in names):
                return {**result, "stage": "done", "correct": False,
                        "reason": "none of the candidate's own kernels (" + ", ".join(names[:8]) + ") ran on the GPU; "
                        "launched: " + (", ".join(kernels[:8]) or "no kernels")}
            result.update({"correct": True, "max_abs_diff": worst, "checks": len(check_seeds)})
            if trials <= 0:
                return {**result, "stage": "done"}
            cand_ms = []
            for i in range(warmup + trials):
                d, c = self.inputs(secrets.randbits(31))
                ms, r, chunks = cand.timed({"op": "run", "tensors": d}, c)
                if not r.get("ok"):
                    return {**result, "stage": "run", "error": r.get("error", "")}
                want, want_chunks = ref.ask({"op": "run", "tensors": d}, c)  # untimed: the truth for these inputs
                ok, diff, why = compare(gpu_wire.rebuild(want["tensors"], want_chunks),
                                        gpu_wire.rebuild(r["tensors"], chunks), torch)
                if not ok:
                    return {**result, "stage": "done", "correct": False,
                            "reason": f"timed trial {i + 1} (fresh inputs): {why}"}
                if i >= warmup:
                    cand_ms.append(ms)
            return {**result, **runner_main.timings(ref_ms, cand_ms, overhead_ms), "stage": "done"}
        except (gpu_wire.WireError, OSError) as exc:
            who = "candidate" if cand is not None else "reference"
            log = (cand or ref).log_tail(os.path.join(work, f"{who}.log"))
            return {"stage": "run" if cand is not None else "reference",
                    "error": f"the {who} process stopped answering ({exc}):\n{log}"}
        finally:
            for child in (cand, ref):
                if child is not None:
                    child.close()


def main(argv: list[str] | None = None) -> int:
    return runner_main.main(__doc__.splitlines()[0], lambda spec: Runner(spec).run(), "torch",
                            "PyTorch is not installed where the GPU runner runs; install torch with CUDA", argv)


if __name__ == "__main__":
    sys.exit(main())
