"""Feature "job queries": the custom requests ``autocomp/jobs``, ``autocomp/run`` and
``autocomp/candidate`` (docs/lsp-extensions.md) that editors and scripts read a job
through."""

from __future__ import annotations

from typing import Any

from pygls.exceptions import JsonRpcInvalidParams

from autocomp.server import params, render
from autocomp.server.features.apply import job_and_candidate
from autocomp.server.server import AutocompServer


def register(server: AutocompServer) -> None:
    @server.feature("autocomp/jobs")
    def jobs(ls: AutocompServer, params_: Any = None) -> dict[str, Any]:
        return {"jobs": [job.status() for job in ls.jobs.jobs.values()]}

    @server.feature("autocomp/run")
    def run(ls: AutocompServer, params_: Any = None) -> dict[str, Any]:
        obj = params.as_plain(params_) if params_ is not None else {}
        if not isinstance(obj, dict):
            raise JsonRpcInvalidParams("autocomp/run takes {jobId}")
        job = ls.jobs.get(str(obj.get("jobId")))
        if job is None:
            raise JsonRpcInvalidParams(f"autocomp/run: no job {obj.get('jobId')!r}")
        return render.run_report(job)

    @server.feature("autocomp/candidate")
    def candidate(ls: AutocompServer, params_: Any = None) -> dict[str, Any]:
        obj = params.as_plain(params_) if params_ is not None else {}
        if not isinstance(obj, dict):
            raise JsonRpcInvalidParams("autocomp/candidate takes {jobId, candidateId}")
        job, info = job_and_candidate(ls, obj, "autocomp/candidate")
        c = info.candidate
        return {
            "code": c.code,
            "original": job.baseline.candidate.code if job.baseline else job.original_code,
            "plan": c.plan,
            "verdict": c.verdict.value,
            "metrics": {k: m.to_json() for k, m in c.metrics.items()},
            "speedup": info.speedup,
        }
