"""Pieces every subcommand shares: reading the kernel file, picking the target, turning
known errors into one clear line and an exit status."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from autocomp.backends import Backend, BackendError, get_backend, target_names
from autocomp.run import detect_kernels
from autocomp.run import unified_diff as run_diff
from autocomp.errors import UserError
from autocomp.model import Problem

EXIT_OK = 0
EXIT_FAILED = 1  # the kernel is not correct / the run failed
EXIT_USAGE = 2  # bad input, missing toolchain, no LLM: nothing was evaluated


class CliError(UserError):
    """A message for the user and nothing else (no traceback)."""


def read_source(path: str) -> str:
    p = Path(path)
    if not p.is_file():
        raise CliError(f"{path}: no such file")
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise CliError(f"{path}: not UTF-8 text; Autocomp reads kernel source files") from None


def target_settings(args: Any, target: str) -> dict[str, Any]:
    """``autocomp.target.<target>.*`` for this command: workspace ``autocomp.toml`` under
    ``--set KEY=VALUE`` (see autocomp.schema)."""
    from autocomp.schema import cli_settings

    return dict(cli_settings(args).get("target", {}).get(target, {}))


def resolve_backend(path: str, text: str, target: str, args: Any = None) -> Backend:
    if target != "auto":
        try:
            return get_backend(target, target_settings(args, target) if args is not None else None)
        except BackendError as exc:
            raise CliError(str(exc)) from None
    candidates = []
    for name in target_names():
        try:
            candidates.append((name, get_backend(name, target_settings(args, name) if args is not None else None)))
        except BackendError:
            continue
    found = detect_kernels(path, text, candidates)
    if not found:
        raise CliError(
            f"{path}: no kernel recognised for any target ({', '.join(target_names())}); "
            "pass --target to say which, and see the README for what each target expects"
        )
    claimed = {id(backend) for _span, backend in found}
    return next(backend for _name, backend in candidates if id(backend) in claimed)


def load_problem(path: str, function: str | None, target: str, line: int | None = None, args: Any = None) -> tuple[Problem, Backend]:
    text = read_source(path)
    backend = resolve_backend(path, text, target, args)
    try:
        problem = backend.make_problem(os.path.abspath(path), text, function=function, line=line)
    except BackendError as exc:
        raise CliError(str(exc)) from None
    return problem, backend


def unified_diff(before: str, after: str, name: str) -> str:
    return run_diff(before, after, name)


def err(message: str) -> None:
    print(f"autocomp: {message}", file=sys.stderr)
