"""ProbeBackend — a backend TEST DOUBLE for the executor tests (``autocomp.executor``).

It judges ``.kern`` kernels exactly like :class:`ScriptedBackend` and adds what a test of a
distributed executor needs to observe from outside the worker:

* ``pid_dir``: each evaluation writes ``<pid>`` there while it runs (removed when it ends),
  so a test can see which processes were evaluating and check they are gone after a cancel;
* ``die_once``: a folder; the first evaluation of each code in a process other than
  ``driver_pid`` kills its own process (``os._exit``), as a lost worker would, and leaves a
  marker so the retry succeeds;
* ``unavailable``: evaluation raises ``SandboxUnavailable``, as on a machine without
  bubblewrap;
* ``report_sandbox``: the feedback of every evaluation names the sandbox mode the evaluating
  process used, so a test can prove the driver's mode reached the worker.

Registered nowhere: the executor rebuilds backends by ``module:Class``.
"""

from __future__ import annotations

import os

from autocomp import sandbox
from autocomp.model import Evaluation, Problem, sha256
from autocomp.testing.scripted_backend import ScriptedBackend


class ProbeBackend(ScriptedBackend):
    evaluator_version = "probe-1"

    async def _one(self, problem: Problem, code: str) -> Evaluation:
        pid_dir = self.settings.get("pid_dir")
        mark = os.path.join(pid_dir, str(os.getpid())) if pid_dir else None
        if mark:
            with open(mark, "w", encoding="utf-8") as handle:
                handle.write(sha256(code)[:16])
        try:
            if self.settings.get("unavailable"):
                raise sandbox.SandboxUnavailable("cannot isolate candidate code: bubblewrap (bwrap) is not installed (probe double)")
            die_once = self.settings.get("die_once")
            if die_once and os.getpid() != int(self.settings.get("driver_pid", -1)):
                marker = os.path.join(die_once, sha256(code)[:16])
                if not os.path.exists(marker):
                    open(marker, "w").close()
                    os._exit(17)  # a lost worker: no reply, no cleanup
            result = await super()._one(problem, code)
            if self.settings.get("report_sandbox"):
                result.feedback = (result.feedback + f"\nsandbox seen by the evaluating process: {sandbox.mode()}").strip()
            return result
        finally:
            if mark and os.path.exists(mark):
                os.remove(mark)
