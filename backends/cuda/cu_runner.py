"""The timer for annotated ``.cu`` kernels, run by the host as
``python -m autocomp.backends.cuda.cu_runner spec.json`` inside the sandbox
(:func:`autocomp.sandbox.run_limited` with the GPU device nodes bound in and a result
channel on descriptor 3).

The same design as :mod:`gpu_runner` (KernelBench problems), for C++ libraries:

* The candidate never runs in this process, which holds no CUDA context at all. Two model
  children (the generated program of :mod:`harness_cu`) each load one library: the
  original kernel and the candidate. They get pipes only (``close_fds``: the result
  channel stays here), and this process is non-dumpable.
* The clock is this process's (``time.perf_counter_ns``): a trial is the round trip
  "send fresh inputs -> receive the outputs". The original kernel's child, trusted code,
  calibrates the transfers with ``PING`` requests of the same sizes (upload, poison,
  download, no kernel), which is subtracted from both.
* Fresh inputs for every check and every trial, from seeds drawn from ``secrets`` here;
  every timed trial of the candidate is compared with the original kernel's outputs for
  the same inputs.
* The original kernel is timed before the candidate's process exists.
* The first check lists the kernels launched during the call; at least one must be a
  ``__global__`` function of the candidate's own file.

The verdict (JSON) is written to descriptor 3 only. Tested without a GPU through a child
double (tests/cuda/test_cuda_cu_runner.py); on a GPU by tests/cuda/test_cuda_gpu.py.
"""

from __future__ import annotations

import json
import os
import secrets
import struct
import subprocess
import sys
import time
from typing import Any

from autocomp.backends.cuda import runner_main
from autocomp.backends.cuda.harness_cu import (MAGIC, OP_CHECK, OP_PING, OP_PROFILE, OP_QUIT, OP_RUN, STATUS_OK,
                                               compare_buffers)

HEADER = struct.Struct("<IIQ")
UNCOUNTED = "\x01uncounted"


class ChildError(Exception):
    """A child stopped answering or broke the protocol."""


class Child:
    """One model child: ``argv`` started with pipes only and an empty environment."""

    def __init__(self, argv: list[str], log_path: str, in_bytes: int, out_bytes: int, nbuf: int) -> None:
        self.log_path = log_path
        self.in_bytes, self.out_bytes, self.nbuf = in_bytes, out_bytes, nbuf
        self.log = open(log_path, "wb")
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "TMPDIR", "LANG", "LD_LIBRARY_PATH")}
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     close_fds=True, env=env, start_new_session=True)
        self.ready = self._read_reply()

    def _read_exact(self, n: int) -> bytes:
        parts, left = [], n
        while left > 0:
            chunk = self.proc.stdout.read(left)
            if not chunk:
                raise ChildError("the child closed its pipe")
            parts.append(chunk)
            left -= len(chunk)
        return b"".join(parts)

    def _read_reply(self) -> tuple[int, bytes]:
        magic, status, size = HEADER.unpack(self._read_exact(HEADER.size))
        if magic != MAGIC:
            raise ChildError("the child broke the protocol (bad magic)")
        if size > self.out_bytes + self.nbuf + 65536 and status == STATUS_OK or size > (8 << 30):
            raise ChildError(f"the child sent a reply of {size} bytes")
        return status, self._read_exact(size)

    def ask(self, op: int, inputs: bytes) -> tuple[int, bytes]:
        self.proc.stdin.write(HEADER.pack(MAGIC, op, len(inputs)))
        self.proc.stdin.write(inputs)
        self.proc.stdin.flush()
        return self._read_reply()

    def timed(self, op: int, inputs: bytes) -> tuple[float, int, bytes]:
        start = time.perf_counter_ns()
        status, payload = self.ask(op, inputs)
        return (time.perf_counter_ns() - start) / 1e6, status, payload

    def log_tail(self, limit: int = 3000) -> str:
        try:
            self.log.flush()
            with open(self.log_path, "rb") as fh:
                return fh.read()[-limit:].decode("utf-8", "replace")
        except OSError:
            return ""

    def close(self) -> None:
        try:
            self.proc.stdin.write(HEADER.pack(MAGIC, OP_QUIT, 0))
            self.proc.stdin.flush()
        except (OSError, ValueError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def make_inputs(buffers: list[dict[str, Any]], seed: int) -> bytes:
    """Input and inout buffers for ``seed``, concatenated in annotation order."""
    import numpy as np

    rng = np.random.default_rng(seed)
    parts = []
    for b in buffers:
        if b["role"] == 1:
            continue
        n, dtype, lo, hi = int(b["count"]), b["dtype"], float(b["low"]), float(b["high"])
        if dtype in ("int", "int32", "int64", "uint8"):
            npt = {"int": np.int32, "int32": np.int32, "int64": np.int64, "uint8": np.uint8}[dtype]
            values = rng.integers(int(lo), max(int(hi), int(lo) + 1), size=n).astype(npt)
        else:
            values = rng.uniform(lo, hi, size=n)
            if dtype == "bfloat16":
                values = (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
            else:
                values = values.astype({"float": np.float32, "double": np.float64, "half": np.float16}[dtype])
        parts.append(values.tobytes())
    return b"".join(parts)


def split_outputs(buffers: list[dict[str, Any]], payload: bytes) -> tuple[dict[str, bytes], list[str], list[str]]:
    """A reply's payload -> (outputs by name, names of changed inputs, launched kernels)."""
    outputs, off = {}, 0
    for b in buffers:
        if b["role"] != 0:
            size = int(b["count"]) * int(b["elem"])
            outputs[b["name"]] = payload[off:off + size]
            off += size
    flags = payload[off:off + len(buffers)]
    changed = [b["name"] for b, f in zip(buffers, flags) if b["role"] == 0 and f]
    names = payload[off + len(buffers):].decode("utf-8", "replace").splitlines()
    return outputs, changed, [n for n in names if n][:200]


class Runner:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.buffers = spec["buffers"]
        self.in_bytes = sum(int(b["count"]) * int(b["elem"]) for b in self.buffers if b["role"] != 1)
        self.out_bytes = sum(int(b["count"]) * int(b["elem"]) for b in self.buffers if b["role"] != 0)

    def child(self, library: str, role: str) -> Child:
        return Child([self.spec["child"], library], os.path.join(os.getcwd(), f"{role}.log"), self.in_bytes,
                     self.out_bytes, len(self.buffers))

    def compare(self, expected: dict[str, bytes], got: dict[str, bytes]) -> tuple[bool, float, str]:
        worst = 0.0
        for b in self.buffers:
            if b["role"] == 0:
                continue
            ok, diff, why = compare_buffers(expected[b["name"]], got.get(b["name"], b""), b["dtype"], float(b["tolerance"]))
            if diff == diff:
                worst = max(worst, diff)
            if not ok:
                return False, worst, f"output `{b['name']}`: {why}"
        return True, worst, ""

    def run(self) -> dict[str, Any]:
        spec = self.spec
        ref = self.child(spec["reference"], "reference")
        cand: Child | None = None
        try:
            status, payload = ref.ready
            if status != STATUS_OK:
                return {"stage": "reference", "error": payload.decode("utf-8", "replace") + ref.log_tail()}
            result: dict[str, Any] = {"device": payload.decode("utf-8", "replace")[:200]}
            checks = [secrets.randbits(63) for _ in range(int(spec.get("checks", 3)))]
            expected: dict[int, dict[str, bytes]] = {}
            for seed in checks:
                status, payload = ref.ask(OP_RUN, make_inputs(self.buffers, seed))
                if status != STATUS_OK:
                    return {**result, "stage": "reference", "error": payload.decode("utf-8", "replace")}
                expected[seed] = split_outputs(self.buffers, payload)[0]
            trials, warmup = int(spec.get("trials", 100)), int(spec.get("warmup", 3))
            ref_ms, overhead_ms = [], []
            for i in range(warmup + trials):
                inputs = make_inputs(self.buffers, secrets.randbits(63))
                ms, status, payload = ref.timed(OP_RUN, inputs)
                if status != STATUS_OK:
                    return {**result, "stage": "reference", "error": payload.decode("utf-8", "replace")}
                pms, _, _ = ref.timed(OP_PING, inputs)
                if i >= warmup:
                    ref_ms.append(ms)
                    overhead_ms.append(pms)
            # the candidate, in its own process, started only now
            cand = self.child(spec["candidate"], "candidate")
            status, payload = cand.ready
            if status != STATUS_OK:
                return {**result, "stage": "load", "error": payload.decode("utf-8", "replace")[:4000] + cand.log_tail()}
            worst, kernels = 0.0, []
            for k, seed in enumerate(checks):
                status, payload = cand.ask(OP_PROFILE if k == 0 else OP_CHECK, make_inputs(self.buffers, seed))
                if status != STATUS_OK:
                    return {**result, "stage": "run", "error": payload.decode("utf-8", "replace")[:4000] + cand.log_tail()}
                outputs, changed, names = split_outputs(self.buffers, payload)
                if k == 0:
                    kernels = names
                if changed:
                    return {**result, "stage": "done", "correct": False,
                            "reason": f"check {k + 1}: the candidate modified its inputs ({', '.join(changed)})"}
                ok, diff, why = self.compare(expected[seed], outputs)
                worst = max(worst, diff)
                if not ok:
                    return {**result, "stage": "done", "correct": False, "reason": f"check {k + 1} (fresh inputs): {why}",
                            "max_abs_diff": diff}
            counted = UNCOUNTED not in kernels
            result["kernels_counted"] = counted
            result["kernels"] = [k for k in kernels if k != UNCOUNTED]
            wanted = [n for n in spec.get("kernel_names", []) if n]
            if counted and wanted and not any(n in k for k in result["kernels"] for n in wanted):
                return {**result, "stage": "done", "correct": False,
                        "reason": "none of the candidate's own kernels (" + ", ".join(wanted[:8]) + ") ran on the GPU; "
                        "launched: " + (", ".join(result["kernels"][:8]) or "no kernels")}
            result.update({"correct": True, "max_abs_diff": worst, "checks": len(checks)})
            if trials <= 0:
                return {**result, "stage": "done"}
            cand_ms = []
            for i in range(warmup + trials):
                inputs = make_inputs(self.buffers, secrets.randbits(63))
                ms, status, payload = cand.timed(OP_RUN, inputs)
                if status != STATUS_OK:
                    return {**result, "stage": "run", "error": payload.decode("utf-8", "replace")[:4000]}
                want_status, want = ref.ask(OP_RUN, inputs)  # untimed: the truth for these inputs
                if want_status != STATUS_OK:
                    return {**result, "stage": "reference", "error": want.decode("utf-8", "replace")}
                ok, _, why = self.compare(split_outputs(self.buffers, want)[0], split_outputs(self.buffers, payload)[0])
                if not ok:
                    return {**result, "stage": "done", "correct": False, "reason": f"timed trial {i + 1} (fresh inputs): {why}"}
                if i >= warmup:
                    cand_ms.append(ms)
            return {**result, **runner_main.timings(ref_ms, cand_ms, overhead_ms), "stage": "done"}
        except (ChildError, OSError, struct.error) as exc:
            who = "candidate" if cand is not None else "original kernel"
            return {"stage": "run" if cand is not None else "reference",
                    "error": f"the {who} process stopped answering ({exc}):\n{(cand or ref).log_tail()}"}
        finally:
            for child in (cand, ref):
                if child is not None:
                    child.close()


def main(argv: list[str] | None = None) -> int:
    return runner_main.main(__doc__.splitlines()[0], lambda spec: Runner(spec).run(), "numpy",
                            "NumPy is not installed where the .cu runner runs; pip install numpy", argv)


if __name__ == "__main__":
    sys.exit(main())
