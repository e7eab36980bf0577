"""The GPU runner for KernelBench-style problems: run as its own process
(``python -m autocomp.backends.cuda.gpu_runner REF.py CAND.py ...``) on a machine with
an NVIDIA GPU and PyTorch.

It imports the reference (``Model``) and the candidate (``ModelNew``, which builds its
inline CUDA through ``load_inline``), gives both the same weights, checks the candidate
against the reference on several seeds (outputs poisoned by refilling freed memory with
NaN before the candidate runs, inputs compared after it), then times both the same way in
this one process: CUDA events after a full synchronisation, warm-up, an L2 flush before
each trial, trials interleaved. A speedup above ``--reverify-above`` is checked again on
fresh seeds.

The verdict is printed as one line ``AUTOCOMP-RESULT <nonce> <json>``; the nonce comes on
standard input, read before any candidate code is imported, so a candidate printing its
own result line cannot forge one the host accepts.
"""

from __future__ import annotations

import argparse
import fcntl
import importlib.util
import json
import os
import statistics
import sys
import traceback
from contextlib import contextmanager
from typing import Any


def _tolerance(dtype: Any, torch: Any) -> float:
    return 1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-4


def _load(path: str, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _flatten(out: Any) -> list[Any]:
    if isinstance(out, (list, tuple)):
        items: list[Any] = []
        for o in out:
            items.extend(_flatten(o))
        return items
    return [out]


@contextmanager
def _gpu_lock(path: str | None):
    """One timing at a time per GPU host, across processes (compiles run in parallel)."""
    if not path:
        yield
        return
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


class Runner:
    def __init__(self, args: argparse.Namespace) -> None:
        import torch

        self.torch = torch
        self.args = args
        self.device = torch.device("cuda")

    def inputs(self, module: Any, seed: int) -> list[Any]:
        torch = self.torch
        torch.manual_seed(seed)
        items = module.get_inputs()
        return [x.to(self.device) if isinstance(x, torch.Tensor) else x for x in items]

    def build(self, cls: Any, init_inputs: list[Any], seed: int, like: Any = None) -> Any:
        torch = self.torch
        torch.manual_seed(seed)
        model = cls(*init_inputs)
        if isinstance(model, torch.nn.Module):
            model = model.to(self.device).eval()
            if like is not None:
                # same weights as the reference wherever names and shapes agree
                ref_state = like.state_dict()
                own = model.state_dict()
                shared = {k: v for k, v in ref_state.items() if k in own and own[k].shape == v.shape}
                if shared:
                    model.load_state_dict(shared, strict=False)
        return model

    def poison(self, outputs: list[Any]) -> None:
        """Refill the memory the reference's outputs occupied (and more) with NaN, so a
        candidate that returns an unwritten buffer cannot see the right values."""
        torch = self.torch
        shapes = [(o.shape, o.dtype) for o in outputs if isinstance(o, torch.Tensor)]
        del outputs[:]
        fillers = []
        for shape, dtype in shapes:
            t = torch.empty(shape, dtype=dtype, device=self.device)
            t.fill_(float("nan") if t.is_floating_point() else -1)
            fillers.append(t)
        torch.cuda.synchronize()
        del fillers

    def check(self, ref_model: Any, cand_model: Any, ref_mod: Any, seeds: list[int]) -> dict[str, Any]:
        torch = self.torch
        worst = 0.0
        for seed in seeds:
            inputs = self.inputs(ref_mod, seed)
            originals = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
            with torch.no_grad():
                ref_out = _flatten(ref_model(*inputs))
            torch.cuda.synchronize()
            expected = [o.detach().cpu() if isinstance(o, torch.Tensor) else o for o in ref_out]
            self.poison(ref_out)
            with torch.no_grad():
                got = _flatten(cand_model(*inputs))
            torch.cuda.synchronize()
            for i, (x, orig) in enumerate(zip(inputs, originals)):
                if isinstance(x, torch.Tensor) and not torch.equal(x, orig):
                    return {"correct": False, "reason": f"seed {seed}: the candidate modified input {i}"}
            if len(got) != len(expected):
                return {"correct": False, "reason": f"seed {seed}: {len(got)} outputs, expected {len(expected)}"}
            for i, (g, e) in enumerate(zip(got, expected)):
                if not isinstance(e, torch.Tensor):
                    if g != e:
                        return {"correct": False, "reason": f"seed {seed}: output {i} is {g!r}, expected {e!r}"}
                    continue
                if not isinstance(g, torch.Tensor):
                    return {"correct": False, "reason": f"seed {seed}: output {i} is not a tensor"}
                if tuple(g.shape) != tuple(e.shape):
                    return {"correct": False, "reason": f"seed {seed}: output {i} has shape {tuple(g.shape)}, expected {tuple(e.shape)}"}
                if g.dtype != e.dtype:
                    return {"correct": False, "reason": f"seed {seed}: output {i} has dtype {g.dtype}, expected {e.dtype}"}
                tol = _tolerance(e.dtype, torch)
                gc, ec = g.detach().cpu().double(), e.double()
                diff = (gc - ec).abs()
                bad_nan = torch.isnan(gc) & ~torch.isnan(ec)
                max_diff = float(diff[~torch.isnan(diff)].max()) if diff.numel() and (~torch.isnan(diff)).any() else 0.0
                worst = max(worst, max_diff)
                if bool(bad_nan.any()) or not torch.allclose(gc, ec, atol=tol, rtol=tol, equal_nan=True):
                    return {"correct": False, "reason": f"seed {seed}: output {i} differs from the reference "
                            f"(max abs diff {max_diff:.3g}, tolerance {tol:g}{', NaN where the reference has none' if bool(bad_nan.any()) else ''})",
                            "max_abs_diff": max_diff}
        return {"correct": True, "max_abs_diff": worst}

    def time_both(self, ref_model: Any, cand_model: Any, inputs: list[Any]) -> tuple[list[float], list[float]]:
        torch = self.torch
        props = torch.cuda.get_device_properties(0)
        l2 = int(getattr(props, "L2_cache_size", 0) or 64 * 1024 * 1024)
        flush = torch.empty(2 * l2, dtype=torch.uint8, device=self.device)
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        times: dict[str, list[float]] = {"ref": [], "cand": []}
        models = (("ref", ref_model), ("cand", cand_model))
        with torch.no_grad():
            for _ in range(self.args.warmup):
                for _, model in models:
                    model(*inputs)
            torch.cuda.synchronize()
            for trial in range(self.args.trials):
                for name, model in models:
                    flush.fill_(trial & 0xFF)
                    torch.cuda.synchronize()
                    start.record()
                    model(*inputs)
                    stop.record()
                    torch.cuda.synchronize()
                    times[name].append(start.elapsed_time(stop))
        return times["ref"], times["cand"]


def run(args: argparse.Namespace) -> dict[str, Any]:
    try:
        import torch
    except ImportError:
        return {"stage": "setup", "error": "PyTorch is not installed on this GPU host; install torch with CUDA"}
    if not torch.cuda.is_available():
        return {"stage": "setup", "error": "torch.cuda.is_available() is False: no usable NVIDIA GPU for PyTorch"}
    runner = Runner(args)
    result: dict[str, Any] = {"device": torch.cuda.get_device_name(0)}
    try:
        ref_mod = _load(args.reference, "autocomp_reference")
        torch.manual_seed(args.init_seed)
        init_inputs = list(ref_mod.get_init_inputs()) if hasattr(ref_mod, "get_init_inputs") else []
        ref_model = runner.build(ref_mod.Model, init_inputs, args.init_seed)
    except Exception:
        return {**result, "stage": "reference", "error": traceback.format_exc(limit=6)}
    if args.candidate == args.reference and args.reference_only:
        cand_model = ref_model
    else:
        try:
            cand_mod = _load(args.candidate, "autocomp_candidate")
        except Exception:
            text = traceback.format_exc(limit=8)
            stage = "build" if "Error building extension" in text or "ninja" in text.lower() else "import"
            return {**result, "stage": stage, "error": text}
        cls = getattr(cand_mod, "ModelNew", None)
        if cls is None:
            return {**result, "stage": "import", "error": "the candidate defines no ModelNew"}
        try:
            cand_model = runner.build(cls, init_inputs, args.init_seed, like=ref_model)
        except Exception:
            return {**result, "stage": "construct", "error": traceback.format_exc(limit=6)}
    with _gpu_lock(args.lock):
        try:
            verdict = runner.check(ref_model, cand_model, ref_mod, args.seeds)
        except Exception:
            return {**result, "stage": "run", "error": traceback.format_exc(limit=6)}
        result.update(verdict)
        result["seeds"] = list(args.seeds)
        if not verdict["correct"] or args.trials <= 0:
            return {**result, "stage": "done"}
        try:
            ref_ms, cand_ms = runner.time_both(ref_model, cand_model, runner.inputs(ref_mod, args.seeds[0]))
        except Exception:
            return {**result, "stage": "run", "error": traceback.format_exc(limit=6)}
        result["ref_ms"], result["cand_ms"] = ref_ms, cand_ms
        speedup = statistics.median(ref_ms) / max(statistics.median(cand_ms), 1e-9)
        if speedup > args.reverify_above:
            fresh = [s + 7919 for s in args.seeds] + [max(args.seeds) + 104729]
            again = runner.check(ref_model, cand_model, ref_mod, fresh)
            result["reverified"] = {"seeds": fresh, **again}
            if not again["correct"]:
                result["correct"] = False
                result["reason"] = f"speedup {speedup:.1f}x did not hold up on fresh seeds: {again.get('reason')}"
    return {**result, "stage": "done"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reference")
    parser.add_argument("candidate")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--init-seed", type=int, default=42)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--reverify-above", type=float, default=10.0)
    parser.add_argument("--lock", default=None)
    parser.add_argument("--reference-only", action="store_true", help="time the reference against itself")
    args = parser.parse_args(argv)
    nonce = sys.stdin.readline().strip()  # before any candidate code runs
    if not nonce:
        print("gpu_runner: expected a nonce on standard input", file=sys.stderr)
        return 2
    result = run(args)
    sys.stdout.flush()
    print(f"AUTOCOMP-RESULT {nonce} {json.dumps(result)}", flush=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    sys.exit(main())
