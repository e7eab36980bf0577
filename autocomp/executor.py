"""Where evaluations run: a local process pool (the default) or a Ray cluster.

The evaluator (:mod:`autocomp.evaluator`) keeps everything that makes a run exact — the
store in front (nothing is evaluated twice), the in-flight de-duplication, the sandbox label
in the cache key, the concurrency bound — and hands each uncached evaluation to an executor:

* :class:`LocalExecutor` awaits the backend on this machine; each candidate builds and runs
  in its own sandboxed child process (``autocomp.sandbox.run_limited``).
* :class:`RayExecutor` submits each evaluation as a Ray task. The task rebuilds the same
  backend class with the same settings on a worker and calls the same ``evaluate``, so the
  candidate still builds and runs in a bubblewrap child of the worker, never in the worker
  process itself. The driver's sandbox mode travels with every task and is imposed on the
  worker (a worker whose environment says ``AUTOCOMP_SANDBOX=off`` still isolates when the
  driver does). A task asks for one CPU plus the device its target's confirming tier needs
  when the cluster has it (each target declares its ``device_resource``, e.g. ``GPU``; see
  :func:`autocomp.backends.device_resource`). Cancelling the awaiting coroutine cancels the task
  with ``force=True``: the worker is killed, and with it (``--die-with-parent``) every
  sandboxed child. A worker that dies for any other reason is retried on another worker
  (``max_retries``), and an evaluation that failed for good is reported, not cached.

``--executor local|ray|ray://HOST:PORT`` and the editor setting ``autocomp.executor``
choose one (:func:`make_executor`). ``ray`` joins the cluster named by ``RAY_ADDRESS`` or a
cluster already running on this machine, else starts a local one; ``ray://HOST:PORT``
connects through Ray Client. ``ray`` is the optional extra ``autocomp[ray]``.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import socket
import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

from autocomp import sandbox
from autocomp.backends.base import Backend, BackendError
from autocomp.model import Evaluation, Problem
from autocomp.sandbox import cpu_slots

# The device each target's confirming tier needs (its declaration's ``device_resource``),
# requested only where the cluster advertises it (otherwise the task runs on a CPU worker
# and the backend reports the tier it could use there). A backend may override this with a
# method ``executor_resources(cluster: dict[str, float]) -> dict[str, float]``.


def __getattr__(name: str) -> Any:
    if name == "DEVICE_RESOURCES":  # target -> resource, from the declarations
        from autocomp.backends import targets

        return {t.name: t.device_resource for t in targets() if t.device_resource}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

EXECUTOR_HELP = "local (a process pool on this machine, the default), ray (join RAY_ADDRESS or a local Ray head, else start one) or ray://HOST:PORT (Ray Client)"


class ExecutorError(BackendError):
    """An executor cannot be used as configured; the message names the fix."""


class Executor(Protocol):
    name: str
    concurrency: int

    async def evaluate(self, backend: Backend, problem: Problem, code: str) -> Evaluation: ...

    def describe(self) -> str: ...


class LocalExecutor:
    """Evaluate on this machine, up to one candidate per core at a time."""

    name = "local"

    def __init__(self, concurrency: int | None = None) -> None:
        self.concurrency = concurrency or cpu_slots()

    async def evaluate(self, backend: Backend, problem: Problem, code: str) -> Evaluation:
        (result,) = await backend.evaluate(problem, [code])
        return result

    def describe(self) -> str:
        return f"local ({self.concurrency} at a time)"


def validate_spec(spec: str | None) -> str:
    """``local``, ``ray`` or ``ray://HOST:PORT``; an :class:`ExecutorError` otherwise."""
    value = (spec or "local").strip()
    if value in ("local", "ray"):
        return value
    if value.startswith("ray://"):
        rest = value[len("ray://") :]
        host, _, port = rest.rpartition(":")
        if host and port.isdigit():
            return value
    raise ExecutorError(f"executor must be {EXECUTOR_HELP}; got {spec!r}")


def make_executor(spec: str | None, concurrency: int | None = None) -> Executor:
    spec = validate_spec(spec)
    if spec == "local":
        return LocalExecutor(concurrency)
    return RayExecutor(None if spec == "ray" else spec, concurrency=concurrency)


def backend_ref(backend: Backend) -> str:
    """``module:Class`` of a backend, so a worker can rebuild it without the registry."""
    cls = type(backend)
    return f"{cls.__module__}:{cls.__qualname__}"


def task_resources(backend: Backend, cluster: dict[str, float]) -> dict[str, Any]:
    """Ray task options for one evaluation of ``backend`` on a cluster with ``cluster``
    resources: one CPU, plus one of the target's device where the cluster has any."""
    hook = getattr(backend, "executor_resources", None)
    wanted: dict[str, float]
    if callable(hook):
        wanted = dict(hook(dict(cluster)))
    else:
        wanted = {"CPU": 1.0}
        from autocomp.backends import device_resource

        device = device_resource(backend.name)
        if device and cluster.get(device, 0.0) >= 1.0:
            wanted[device] = 1.0
    options: dict[str, Any] = {"num_cpus": wanted.pop("CPU", 1.0), "num_gpus": wanted.pop("GPU", 0.0)}
    if wanted:
        options["resources"] = wanted
    return options


# -- the worker side --------------------------------------------------------------------
# A Ray worker process runs one task at a time; it keeps one event loop and one backend
# instance per (class, settings), so per-problem state a backend caches (the original
# kernel's reference run) is paid once per worker, not once per candidate.
_worker_loop: asyncio.AbstractEventLoop | None = None
_worker_backends: dict[tuple[str, str], Backend] = {}


def _worker_backend(ref: str, settings: dict[str, Any]) -> Backend:
    key = (ref, repr(sorted(settings.items())))
    backend = _worker_backends.get(key)
    if backend is None:
        module_name, class_name = ref.split(":")
        cls = getattr(importlib.import_module(module_name), class_name)
        backend = _worker_backends[key] = cls(settings)
    return backend


def evaluate_in_worker(ref: str, settings: dict[str, Any], problem: dict[str, Any], code: str, sandbox_mode: str) -> dict[str, Any]:
    """The body of one Ray task. Candidate code never runs here: the backend builds and
    runs it in a sandboxed child, exactly as on the driver's machine."""
    global _worker_loop
    # The driver's isolation decides, whatever this worker's environment says.
    os.environ[sandbox.ENV_VAR] = sandbox_mode
    sandbox.configure(sandbox_mode)
    where: dict[str, Any] = {"host": socket.gethostname(), "pid": os.getpid()}
    try:  # what Ray gave this task (CPU, GPU ids, custom resources), for reports and tests
        import ray

        where["assigned"] = {k: float(sum(v for _i, v in ids)) if isinstance(ids, list) else float(ids) for k, ids in ray.get_runtime_context().get_assigned_resources().items()}
    except Exception:
        pass
    try:
        backend = _worker_backend(ref, settings)
        if _worker_loop is None or _worker_loop.is_closed():
            _worker_loop = asyncio.new_event_loop()
        (result,) = _worker_loop.run_until_complete(backend.evaluate(Problem.from_json(problem), [code]))
        result.sandbox = sandbox.label()
        return {"evaluation": result.to_json(), **where}
    except sandbox.SandboxUnavailable as exc:
        return {"sandbox_unavailable": str(exc), **where}
    except Exception as exc:  # reported as a failed evaluation on the driver, never cached
        return {"error": f"{type(exc).__name__}: {exc}", **where}


# -- the driver side --------------------------------------------------------------------
_ray_lock = threading.Lock()


@dataclass
class RayStats:
    submitted: int = 0
    finished: int = 0
    cancelled: int = 0
    where: dict[str, int] = field(default_factory=dict)  # "host:pid" -> evaluations
    assigned: list[dict[str, float]] = field(default_factory=list)  # resources Ray gave each task


class RayExecutor:
    """Evaluate each candidate as a Ray task (see the module docstring)."""

    name = "ray"

    def __init__(self, address: str | None = None, concurrency: int | None = None, max_retries: int = 3) -> None:
        try:
            import ray
        except ImportError:
            raise ExecutorError(
                "the Ray executor needs the optional extra: pip install 'autocomp[ray]' (or run .ci/install-ray.sh)"
            ) from None
        self._ray = ray
        self.address = address
        self.max_retries = max_retries
        self._connect()
        self.cluster = {k: float(v) for k, v in ray.cluster_resources().items()}
        self.concurrency = concurrency or max(1, int(self.cluster.get("CPU", 1)))
        self._remote = ray.remote(evaluate_in_worker)
        self.stats = RayStats()

    def _connect(self) -> None:
        ray = self._ray
        with _ray_lock:
            if ray.is_initialized():
                return
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
            try:
                if self.address is None:
                    ray.init(**kwargs)  # RAY_ADDRESS, a head already running here, else a new local one
                else:
                    ray.init(address=self.address, log_to_driver=False)
            except Exception as exc:
                where = self.address or os.environ.get("RAY_ADDRESS") or "a local Ray instance"
                raise ExecutorError(f"cannot connect to {where}: {type(exc).__name__}: {exc}") from exc

    def describe(self) -> str:
        from autocomp.backends import device_resources

        known = device_resources()
        devices = ", ".join(f"{k} {v:g}" for k, v in sorted(self.cluster.items()) if k in ("CPU", "GPU") or k in known)
        return f"ray ({self.address or 'local/RAY_ADDRESS'}; {devices})"

    async def evaluate(self, backend: Backend, problem: Problem, code: str) -> Evaluation:
        options = task_resources(backend, self.cluster)
        ref = self._remote.options(max_retries=self.max_retries, retry_exceptions=False, **options).remote(
            backend_ref(backend), dict(backend.settings), problem.to_json(), code, sandbox.mode()
        )
        self.stats.submitted += 1
        try:
            reply = await asyncio.wrap_future(ref.future())
        except asyncio.CancelledError:
            self.stats.cancelled += 1
            try:
                # force: the worker is killed, and its sandboxed children die with it.
                self._ray.cancel(ref, force=True)
            except Exception:
                pass
            raise
        self.stats.finished += 1
        place = f"{reply.get('host')}:{reply.get('pid')}"
        self.stats.where[place] = self.stats.where.get(place, 0) + 1
        self.stats.assigned.append(dict(reply.get("assigned") or {}))
        if "sandbox_unavailable" in reply:
            raise sandbox.SandboxUnavailable(f"on Ray worker {place}: {reply['sandbox_unavailable']}")
        if "error" in reply:
            raise RuntimeError(f"on Ray worker {place}: {reply['error']}")
        return Evaluation.from_json(reply["evaluation"])
