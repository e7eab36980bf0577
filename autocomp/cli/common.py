"""Pieces every subcommand shares: reading the kernel file, picking the target, turning
known errors into one clear line and an exit status."""

from __future__ import annotations

import difflib
import os
import sys
from pathlib import Path

from autocomp.backends import Backend, BackendError, detect_target, get_backend, target_names
from autocomp.model import Problem

EXIT_OK = 0
EXIT_FAILED = 1  # the kernel is not correct / the run failed
EXIT_USAGE = 2  # bad input, missing toolchain, no LLM: nothing was evaluated


class CliError(Exception):
    """A message for the user and nothing else (no traceback)."""


def read_source(path: str) -> str:
    p = Path(path)
    if not p.is_file():
        raise CliError(f"{path}: no such file")
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise CliError(f"{path}: not UTF-8 text; Autocomp reads kernel source files") from None


def resolve_backend(path: str, text: str, target: str, settings: dict | None = None) -> Backend:
    if target != "auto":
        try:
            return get_backend(target, settings)
        except BackendError as exc:
            raise CliError(str(exc)) from None
    found = detect_target(path, text)
    if not found:
        raise CliError(
            f"{path}: no kernel recognised for any target ({', '.join(target_names())}); "
            "pass --target to say which, and see the README for what each target expects"
        )
    return found[0]


def load_problem(path: str, function: str | None, target: str, line: int | None = None) -> tuple[Problem, Backend]:
    text = read_source(path)
    backend = resolve_backend(path, text, target)
    try:
        problem = backend.make_problem(os.path.abspath(path), text, function=function, line=line)
    except BackendError as exc:
        raise CliError(str(exc)) from None
    return problem, backend


def unified_diff(before: str, after: str, name: str) -> str:
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=f"a/{name}",
            tofile=f"b/{name}",
        )
    )


def err(message: str) -> None:
    print(f"autocomp: {message}", file=sys.stderr)
