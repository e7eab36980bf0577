"""Prompt text as data. Each target has a folder here:

- ``description.md`` — the ISA / API / architecture the LLM must know
- ``menu.toml``      — ``options = ["...", ...]``: the optimization menu (dropout samples it)
- ``rules.md``       — what keeps code correct on this target
- ``examples.md``    — worked before/after examples for the implementation prompt
- ``target.toml``    — ``language = "c"`` (the code-fence tag replies must use), ``noun``,
  and optionally ``[languages]`` mapping a file suffix to another fence tag (CUDA's
  KernelBench files are Python)

``common/plan.md`` and ``common/implement.md`` are the two prompt templates
(``string.Template`` ``$names`` so C braces need no escaping). Users can point
``AUTOCOMP_PROMPTS`` at a folder of the same shape to override any file.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PACKAGE_DIR = Path(__file__).resolve().parent


class PromptError(Exception):
    """A prompt folder is missing or malformed; the message names the file."""


@dataclass(frozen=True)
class PromptPieces:
    target: str
    description: str
    menu: tuple[str, ...]
    rules: str
    examples: str
    language: str
    noun: str = "kernel"
    extra: dict = field(default_factory=dict)


def _search_dirs() -> list[Path]:
    dirs = []
    override = os.environ.get("AUTOCOMP_PROMPTS")
    if override:
        dirs.append(Path(override))
    dirs.append(PACKAGE_DIR)
    return dirs


def read_text(relative: str, required: bool = True) -> str:
    """A prompt file by relative path, user override first."""
    for base in _search_dirs():
        path = base / relative
        if path.is_file():
            return path.read_text(encoding="utf-8")
    if required:
        raise PromptError(f"prompt file {relative} not found in {', '.join(map(str, _search_dirs()))}")
    return ""


def _read_toml(relative: str) -> dict:
    text = read_text(relative)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PromptError(f"{relative}: invalid TOML: {exc}") from exc


def load_pieces(target: str) -> PromptPieces:
    """Everything the plan and implementation prompts need for ``target``."""
    menu_data = _read_toml(f"{target}/menu.toml")
    options = menu_data.get("options")
    if not isinstance(options, list) or not all(isinstance(o, str) for o in options) or not options:
        raise PromptError(f"{target}/menu.toml: expected `options = [\"...\", ...]` with at least one option")
    meta = _read_toml(f"{target}/target.toml")
    return PromptPieces(
        target=target,
        description=read_text(f"{target}/description.md").strip(),
        menu=tuple(o.strip() for o in options),
        rules=read_text(f"{target}/rules.md").strip(),
        examples=read_text(f"{target}/examples.md", required=False).strip(),
        language=str(meta.get("language", "")),
        noun=str(meta.get("noun", "kernel")),
        extra={k: v for k, v in meta.items() if k not in ("language", "noun")},
    )


def pieces_for_file(pieces: PromptPieces, path: str) -> PromptPieces:
    """The pieces with the fence language of this kernel file (``[languages]`` table)."""
    languages = pieces.extra.get("languages") or {}
    suffix = os.path.splitext(path)[1].lower()
    language = languages.get(suffix)
    if not language or language == pieces.language:
        return pieces
    return dataclasses.replace(pieces, language=str(language))
