"""``workspace/executeCommand`` commands and the custom ``autocomp/*`` requests.

Each command takes one JSON object (docs/lsp-extensions.md). Arguments are validated here:
a malformed call gets an InvalidParams error that says what the command expects, never a
crash and never a pop-up storm.
"""

from __future__ import annotations

import logging
import os
import tempfile
from typing import Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams

from autocomp.run import unified_diff
from autocomp.server import render
from autocomp.server.features import apply, optimize_action
from autocomp.server.jobs import CandidateInfo, Job
from autocomp.server.server import AutocompServer

log = logging.getLogger(__name__)


def as_plain(value: Any) -> Any:
    """JSON-like data from what pygls hands us (namedtuples for custom requests,
    lsprotocol objects, dicts, lists)."""
    if hasattr(value, "_asdict"):
        return {k: as_plain(v) for k, v in value._asdict().items()}
    if isinstance(value, dict):
        return {str(k): as_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_plain(v) for v in value]
    return value


def one_object(name: str, args: tuple[Any, ...], shape: str) -> dict[str, Any]:
    """The single object argument of a command (a bare list of fields is refused)."""
    if len(args) == 1 and isinstance(as_plain(args[0]), dict):
        return as_plain(args[0])
    if not args:
        return {}
    raise JsonRpcInvalidParams(f"{name} takes one object argument {shape}, got {args!r}"[:400])


def _str(obj: dict[str, Any], key: str, name: str, required: bool = True) -> str | None:
    value = obj.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise JsonRpcInvalidParams(f"{name}: '{key}' must be a non-empty string, got {value!r}")
    return value


def _job_and_candidate(ls: AutocompServer, obj: dict[str, Any], name: str) -> tuple[Job, CandidateInfo]:
    job_id = _str(obj, "jobId", name)
    cand_id = _str(obj, "candidateId", name)
    job = ls.jobs.get(job_id or "")
    if job is None:
        raise JsonRpcInvalidParams(f"{name}: no job {job_id!r} (see autocomp/jobs for the known ones)")
    info = job.candidate(cand_id or "")
    if info is None:
        raise JsonRpcInvalidParams(f"{name}: job {job_id} has no candidate {cand_id!r}")
    return job, info


def _diff(job: Job, info: CandidateInfo) -> dict[str, Any]:
    original = job.baseline.candidate.code if job.baseline else job.original_code
    candidate = info.candidate.code
    title = f"{job.kernel}: {info.candidate.plan_summary()[:60]} ({render.fmt_speedup(info.speedup)})"
    unified = unified_diff(original, candidate, f"{job.kernel} (original)", f"{job.kernel} ({info.candidate.id})")
    return {"title": title, "original": original, "candidate": candidate, "unifiedDiff": unified}


async def _show_diff_in_editor(ls: AutocompServer, result: dict[str, Any], job: Job, info: CandidateInfo) -> None:
    """For clients without a diff view: open the unified diff as a document where the
    client can show documents, else put it in a message. VS Code renders the returned
    texts in its own diff view, so it gets neither."""
    if "visual studio code" in ls.client_name.lower() or "code-server" in ls.client_name.lower():
        return
    text = f"# {result['title']}\n" + (result["unifiedDiff"] or "(no difference)\n")
    if ls.supports_show_document:
        folder = os.path.join(tempfile.gettempdir(), f"autocomp-diffs-{os.getuid()}")
        os.makedirs(folder, mode=0o700, exist_ok=True)
        path = os.path.join(folder, f"{job.id}-{info.candidate.id}.diff")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        uri = "file://" + path
        try:
            shown = await ls.window_show_document_async(lsp.ShowDocumentParams(uri=uri, take_focus=True))
            if shown is not None and shown.success:
                return
        except Exception as exc:
            log.info("showDocument failed: %s", exc)
    ls.show(text)


def register(server: AutocompServer) -> None:
    @server.command("autocomp.optimize")
    def optimize(ls: AutocompServer, *args: Any) -> dict[str, Any]:
        obj = one_object("autocomp.optimize", args, "{uri, line?, kernel?, restart?}")
        uri = _str(obj, "uri", "autocomp.optimize")
        line = obj.get("line")
        if line is not None and (isinstance(line, bool) or not isinstance(line, int) or line < 0):
            raise JsonRpcInvalidParams(f"autocomp.optimize: 'line' must be a 0-based line number, got {line!r}")
        kernel = _str(obj, "kernel", "autocomp.optimize", required=False)
        return optimize_action.optimize(ls, uri or "", line, kernel, bool(obj.get("restart", False)))

    @server.command("autocomp.cancel")
    def cancel(ls: AutocompServer, *args: Any) -> dict[str, Any]:
        obj = one_object("autocomp.cancel", args, "{jobId?} or {uri, kernel?}")
        if obj.get("jobId") is not None:
            job = ls.jobs.get(str(obj["jobId"]))
            jobs = [job] if job is not None else []
        elif obj.get("uri") is not None:
            jobs = ls.jobs.running(str(obj["uri"]), obj.get("kernel"))
        else:
            jobs = ls.jobs.running()
        cancelled = False
        for job in jobs:
            cancelled = ls.jobs.stop(job) or cancelled
            if cancelled:
                ls.notify_status(job.status())
        ls.refresh_lenses()
        return {"cancelled": cancelled}

    @server.command("autocomp.applyCandidate")
    async def apply_candidate(ls: AutocompServer, *args: Any) -> dict[str, Any]:
        obj = one_object("autocomp.applyCandidate", args, "{jobId, candidateId}")
        job, info = _job_and_candidate(ls, obj, "autocomp.applyCandidate")
        return await apply.apply_command(ls, job, info)

    @server.command("autocomp.revert")
    async def revert(ls: AutocompServer, *args: Any) -> dict[str, Any]:
        obj = one_object("autocomp.revert", args, "{jobId}")
        job_id = _str(obj, "jobId", "autocomp.revert")
        job = ls.jobs.get(job_id or "")
        if job is None:
            raise JsonRpcInvalidParams(f"autocomp.revert: no job {job_id!r} (see autocomp/jobs for the known ones)")
        return await apply.revert(ls, job)

    @server.command("autocomp.showDiff")
    async def show_diff(ls: AutocompServer, *args: Any) -> dict[str, Any]:
        obj = one_object("autocomp.showDiff", args, "{jobId, candidateId}")
        job, info = _job_and_candidate(ls, obj, "autocomp.showDiff")
        result = _diff(job, info)
        ls.jobs.spawn(_show_diff_in_editor(ls, result, job, info), "show diff")
        return result

    @server.feature("autocomp/jobs")
    def jobs(ls: AutocompServer, params: Any = None) -> dict[str, Any]:
        return {"jobs": [job.status() for job in ls.jobs.jobs.values()]}

    @server.feature("autocomp/run")
    def run(ls: AutocompServer, params: Any = None) -> dict[str, Any]:
        obj = as_plain(params) if params is not None else {}
        if not isinstance(obj, dict):
            raise JsonRpcInvalidParams("autocomp/run takes {jobId}")
        job = ls.jobs.get(str(obj.get("jobId")))
        if job is None:
            raise JsonRpcInvalidParams(f"autocomp/run: no job {obj.get('jobId')!r}")
        return render.run_report(job)

    @server.feature("autocomp/candidate")
    def candidate(ls: AutocompServer, params: Any = None) -> dict[str, Any]:
        obj = as_plain(params) if params is not None else {}
        if not isinstance(obj, dict):
            raise JsonRpcInvalidParams("autocomp/candidate takes {jobId, candidateId}")
        job, info = _job_and_candidate(ls, obj, "autocomp/candidate")
        c = info.candidate
        return {
            "code": c.code,
            "original": job.baseline.candidate.code if job.baseline else job.original_code,
            "plan": c.plan,
            "verdict": c.verdict.value,
            "metrics": {k: m.to_json() for k, m in c.metrics.items()},
            "speedup": info.speedup,
        }
