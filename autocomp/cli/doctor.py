"""``autocomp doctor``: every target's toolchain (found, or how to get it), the LLM keys
that are set (never their values) and where the store lives."""

from __future__ import annotations

import argparse
import json
import os

from autocomp import sandbox
from autocomp.backends import BackendError, all_target_names, get_backend, plugin_errors, target_info
from autocomp.backends.base import ToolCheck
from autocomp.cli.common import EXIT_OK
from autocomp.store import default_home


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="check each target's toolchain and the LLM setup")
    p.add_argument("--json", action="store_true")
    from autocomp.schema import add_set_flag

    add_set_flag(p)  # --set target.gemmini.spike=/opt/spike/bin/spike: check the toolchain a run would use
    p.set_defaults(handler=run)


def isolation_report() -> dict:
    """Which isolation candidate code gets here, and how to fix it when there is none."""
    try:
        mode = sandbox.mode()
    except sandbox.SandboxUnavailable as exc:
        return {"active": "invalid", "ok": False, "detail": str(exc)}
    if mode == "off":
        return {
            "active": "off",
            "ok": False,
            "detail": "isolation turned off (AUTOCOMP_SANDBOX=off or autocomp.sandbox = \"off\"): candidates run "
            "with your files and network; only the environment is still cleared",
        }
    probe = sandbox.probe()
    if not probe.works:
        return {"active": "none", "ok": False, "detail": f"{probe.detail}; evaluations will refuse to run. {sandbox.INSTALL_HINT}"}
    return {
        "active": "bwrap",
        "ok": True,
        "detail": f"{probe.detail}: no network, empty environment, read-only toolchain view, own PID namespace, "
        f"no /proc; process limit by {probe.pids}",
    }


def collect(args: argparse.Namespace | None = None) -> dict:
    """The report; ``args`` brings ``--set`` (and the workspace ``autocomp.toml``), so each
    target is checked with the settings a run would use."""
    from autocomp.cli.common import target_settings

    report: dict = {"isolation": isolation_report(), "targets": {}, "llm": {}, "store": str(default_home())}
    # every declared target (shipped, installed plugins, AUTOCOMP_PLUGINS), from its declaration
    for name in all_target_names():
        info = target_info(name)
        try:
            backend = get_backend(name, target_settings(args, name) if args is not None else None)
            checks = backend.doctor()
            tier = backend.tier()
            report["targets"][name] = {
                "label": info.label or name if info else name,
                "tier": tier.name,
                "confirms": tier.confirms,
                "note": tier.note,
                "checks": [c.to_json() for c in checks],
            }
        except BackendError as exc:
            report["targets"][name] = {"tier": "unavailable", "confirms": False, "note": str(exc), "checks": []}
        except Exception as exc:  # a broken backend must not hide the others
            report["targets"][name] = {"tier": "unavailable", "confirms": False, "note": f"{type(exc).__name__}: {exc}", "checks": []}
    errors = plugin_errors()
    if errors:
        report["plugin_errors"] = errors
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        report["llm"][var] = "set" if os.environ.get(var) else "not set"
    for var in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "AUTOCOMP_LLM"):
        if os.environ.get(var):
            report["llm"][var] = os.environ[var]
    return report


def run(args: argparse.Namespace) -> int:
    report = collect(args)
    if args.json:
        print(json.dumps(report, indent=2))
        return EXIT_OK
    iso = report["isolation"]
    print(f"isolation: {iso['active']}")
    print(f"  {'ok ' if iso['ok'] else '!! '}{iso['detail']}")
    for name, info in report["targets"].items():
        print(f"{name}: tier {info['tier']}{'' if info['confirms'] else ' (cannot confirm speedups)'}")
        if info.get("note"):
            print(f"  {info['note']}")
        for c in info["checks"]:
            check = ToolCheck(**c)
            mark = "ok " if check.found else ("-- " if not check.required else "!! ")
            print(f"  {mark}{check.name}: {check.detail}")
    for line in report.get("plugin_errors", []):
        print(f"!! target declaration failed to load: {line}")
    print("llm:")
    for var, state in report["llm"].items():
        print(f"  {var}: {state}")
    print(f"store: {report['store']}")
    return EXIT_OK
