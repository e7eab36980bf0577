"""A model child of the GPU runner: ``python -m autocomp.backends.cuda.gpu_child``.

Started by :mod:`gpu_runner` (the timer) with pipes on standard input/output and nothing
else: no descriptor of the runner's result channel, an empty environment, its own process.
It loads ONE model -- the reference ``Model`` or the candidate ``ModelNew`` -- and answers
requests (see :mod:`gpu_wire`): ``load``, ``weights``, ``run`` (fresh inputs arrive in the
request; outputs go back in the reply), ``ping`` (the same transfers without the model, for
calibration) and ``quit``.

Everything here is as trustworthy as the model it loaded: for the candidate, nothing this
process says is believed by the runner except output bytes, which the runner compares
with the reference child's for the same fresh inputs, and the wall-clock time the runner
measures itself. The kernel list it reports (from the PyTorch profiler) is a consistency
check (did the custom kernel run?), not a proof.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import traceback
from typing import Any

from autocomp.backends.cuda import gpu_wire, runner_main


def _load_module(path: str, name: str) -> Any:
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


class Child:
    def __init__(self, device: str) -> None:
        import torch

        self.torch = torch
        self.device = torch.device(device)
        self.model: Any = None
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("torch.cuda.is_available() is False: no usable NVIDIA GPU for PyTorch in the sandbox")

    def load(self, header: dict[str, Any], payload: list[bytes]) -> dict[str, Any]:
        torch = self.torch
        module = _load_module(header["path"], "autocomp_" + header["role"])
        cls = getattr(module, header["class"], None)
        if cls is None:
            return {"ok": False, "stage": "import", "error": f"the file defines no {header['class']}"}
        init = gpu_wire.rebuild(header["tensors"], payload)
        torch.manual_seed(int(header["init_seed"]))
        model = cls(*init)
        if isinstance(model, torch.nn.Module):
            model = model.to(self.device).eval()
        self.model = model
        name = torch.cuda.get_device_name(0) if self.device.type == "cuda" else "cpu"
        return {"ok": True, "device": name}

    def state(self) -> tuple[dict[str, Any], list[bytes]]:
        sd = self.model.state_dict() if isinstance(self.model, self.torch.nn.Module) else {}
        names = list(sd)
        descs, chunks = gpu_wire.describe([sd[n] for n in names])
        return {"ok": True, "names": names, "tensors": descs}, chunks

    def weights(self, header: dict[str, Any], payload: list[bytes]) -> dict[str, Any]:
        if not isinstance(self.model, self.torch.nn.Module):
            return {"ok": True, "shared": 0}
        tensors = gpu_wire.rebuild(header["tensors"], payload)
        own = self.model.state_dict()
        shared = {n: t for n, t in zip(header["names"], tensors) if n in own and tuple(own[n].shape) == tuple(t.shape)}
        if shared:
            self.model.load_state_dict(shared, strict=False)
        return {"ok": True, "shared": len(shared)}

    def _poison(self, shapes: list[list[int]], dtypes: list[str]) -> None:
        """Fill fresh memory of the expected outputs' sizes with NaN and free it, so an
        output the model never writes does not hold a previous result."""
        torch = self.torch
        fillers = []
        for shape, dtype in zip(shapes, dtypes):
            t = torch.empty(shape, dtype=getattr(torch, dtype), device=self.device)
            t.fill_(float("nan") if t.is_floating_point() else -1)
            fillers.append(t)
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        del fillers

    def run(self, header: dict[str, Any], payload: list[bytes]) -> tuple[dict[str, Any], list[bytes]]:
        torch = self.torch
        inputs = gpu_wire.rebuild(header["tensors"], payload, str(self.device))
        originals = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        self._poison(header.get("poison_shapes", []), header.get("poison_dtypes", []))
        kernels: list[str] = []
        with torch.no_grad():
            if header.get("profile") and self.device.type == "cuda":
                from torch.profiler import ProfilerActivity, profile

                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    out = self.model(*inputs)
                    torch.cuda.synchronize()
                names: set[str] = set()
                for e in prof.events():
                    if str(getattr(e, "device_type", "")).endswith("CUDA"):
                        names.add(e.name)
                    names.update(k.name for k in getattr(e, "kernels", []) or [])
                kernels = sorted(names)
            else:
                out = self.model(*inputs)
                if self.device.type == "cuda":
                    torch.cuda.synchronize()
        outputs = _flatten(out)
        changed = [i for i, (x, o) in enumerate(zip(inputs, originals))
                   if isinstance(x, torch.Tensor) and not torch.equal(x, o)]
        descs, chunks = gpu_wire.describe(outputs)
        return {"ok": True, "tensors": descs, "inputs_changed": changed, "kernels": kernels}, chunks


def main() -> int:
    runner_main.nondumpable()  # neither sibling (reference or candidate) may read the other's memory
    device = sys.argv[1] if len(sys.argv) > 1 else "cuda"
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    # what the model prints must not corrupt the wire: from here on print() goes to stderr
    sys.stdout = sys.stderr
    try:
        child = Child(device)
    except Exception:
        gpu_wire.send(stdout, {"ok": False, "stage": "setup", "error": traceback.format_exc(limit=4)})
        return 1
    while True:
        try:
            header, payload = gpu_wire.receive(stdin)
        except gpu_wire.WireError:
            return 0
        op = header.get("op")
        try:
            if op == "quit":
                return 0
            if op == "load":
                gpu_wire.send(stdout, child.load(header, payload))
            elif op == "state":
                reply, chunks = child.state()
                gpu_wire.send(stdout, reply, chunks)
            elif op == "weights":
                gpu_wire.send(stdout, child.weights(header, payload))
            elif op == "run":
                reply, chunks = child.run(header, payload)
                gpu_wire.send(stdout, reply, chunks)
            elif op == "ping":
                # the transfers of a run without the model: inputs up, outputs of the expected sizes down
                torch = child.torch
                gpu_wire.rebuild(header["tensors"], payload, str(child.device))
                outs = [torch.zeros(shape, dtype=getattr(torch, dtype), device=child.device)
                        for shape, dtype in zip(header.get("poison_shapes", []), header.get("poison_dtypes", []))]
                descs, chunks = gpu_wire.describe(outs)
                gpu_wire.send(stdout, {"ok": True, "tensors": descs}, chunks)
            else:
                gpu_wire.send(stdout, {"ok": False, "stage": "protocol", "error": f"unknown op {op!r}"})
        except Exception:
            text = traceback.format_exc(limit=8)
            stage = "build" if ("Error building extension" in text or "ninja" in text.lower()) else op or "run"
            gpu_wire.send(stdout, {"ok": False, "stage": stage, "error": text})


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    sys.exit(main())
