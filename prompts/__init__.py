"""Prompt text as data. Each target has a folder here:

- ``description.md`` — the ISA / API / architecture the LLM must know
- ``menu.toml``      — ``options = ["...", ...]``: the optimization menu (dropout samples it)
- ``rules.md``       — what keeps code correct on this target
- ``examples.md``    — worked before/after examples for the implementation prompt
- ``target.toml``    — ``language = "c"`` (the code-fence tag replies must use), ``noun``,
  optionally ``[languages]`` mapping a file suffix to another fence tag (CUDA's
  KernelBench files are Python), ``[budget]`` (the most characters each rendered prompt
  may have: ``plan``, ``implement``, ``repair``; checked by ``tests/prompts``) and
  ``[[sections]]``: extra description text chosen per problem (see below)

Per-problem selection (:func:`pieces_for_problem`) keeps prompts within their budget:
a ``[[sections]]`` entry ``{file = "api/x.md", when = {file = "REGEX", arch = "REGEX"}}``
is appended to the description when every regex of ``when`` matches (``re.search``,
multi-line) the named value of the problem's context: ``file`` is the kernel file's text,
other keys come from the backend's :meth:`~autocomp.backends.base.Backend.prompt_context`
(e.g. CUDA's ``arch``). ``unless`` works the same way and excludes. Menu entries may be
tables too: ``[[conditional]]`` ``{option = "...", when = {...}}`` in ``menu.toml`` joins
the menu only when its conditions hold. ``$name`` in the description is replaced by the
context value ``name`` (only for names the context has).

``common/plan.md`` and ``common/implement.md`` are the two prompt templates
(``string.Template`` ``$names`` so C braces need no escaping). Users can point
``AUTOCOMP_PROMPTS`` at a folder of the same shape to override any file.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from string import Template
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
    conditional = menu_data.get("conditional") or []
    if not isinstance(conditional, list) or not all(isinstance(c, dict) and isinstance(c.get("option"), str) for c in conditional):
        raise PromptError(f"{target}/menu.toml: `[[conditional]]` entries need `option = \"...\"` and an optional `when` table")
    meta = _read_toml(f"{target}/target.toml")
    sections = meta.get("sections") or []
    if not isinstance(sections, list) or not all(isinstance(x, dict) and isinstance(x.get("file"), str) for x in sections):
        raise PromptError(f"{target}/target.toml: `[[sections]]` entries need `file = \"...\"` and an optional `when` table")
    for entry in [*conditional, *sections]:
        for key in ("when", "unless"):
            cond = entry.get(key, {})
            if not isinstance(cond, dict) or not all(isinstance(v, str) for v in cond.values()):
                raise PromptError(f"{target}: `{key}` must be a table of regular expressions, got {cond!r}")
            for v in cond.values():
                try:
                    re.compile(v)
                except re.error as exc:
                    raise PromptError(f"{target}: bad regular expression {v!r} in `{key}`: {exc}") from exc
    return PromptPieces(
        target=target,
        description=read_text(f"{target}/description.md").strip(),
        menu=tuple(o.strip() for o in options),
        rules=read_text(f"{target}/rules.md").strip(),
        examples=read_text(f"{target}/examples.md", required=False).strip(),
        language=str(meta.get("language", "")),
        noun=str(meta.get("noun", "kernel")),
        extra={
            **{k: v for k, v in meta.items() if k not in ("language", "noun", "sections")},
            "sections": [dict(x, text=read_text(f"{target}/{x['file']}").strip()) for x in sections],
            "conditional_menu": [dict(c, option=c["option"].strip()) for c in conditional],
        },
    )


def _holds(entry: dict, context: dict[str, str]) -> bool:
    def matches(key: str, pattern: str) -> bool:
        return re.search(pattern, str(context.get(key, "")), re.M) is not None

    when = entry.get("when") or {}
    unless = entry.get("unless") or {}
    return all(matches(k, v) for k, v in when.items()) and not (unless and all(matches(k, v) for k, v in unless.items()))


def pieces_for_problem(pieces: PromptPieces, path: str, context: dict[str, str] | None = None) -> PromptPieces:
    """The pieces for one problem: the fence language of its file (:func:`pieces_for_file`),
    the ``[[sections]]`` whose conditions hold appended to the description, the
    ``[[conditional]]`` menu entries whose conditions hold added to the menu, and ``$name``
    placeholders of the description filled from ``context`` (``file`` = the kernel file's
    text, plus what the backend's ``prompt_context`` gives)."""
    pieces = pieces_for_file(pieces, path)
    context = {k: str(v) for k, v in (context or {}).items()}
    chosen = [s["text"] for s in pieces.extra.get("sections", []) if _holds(s, context)]
    extra_menu = [c["option"] for c in pieces.extra.get("conditional_menu", []) if _holds(c, context)]
    description = "\n\n".join([pieces.description, *chosen])
    names = {k: v for k, v in context.items() if k != "file"}
    if names:
        description = Template(description).safe_substitute(names)
    if description == pieces.description and not extra_menu:
        return pieces
    return dataclasses.replace(pieces, description=description, menu=pieces.menu + tuple(extra_menu))


def budget(pieces: PromptPieces, kind: str) -> int | None:
    """The most characters a rendered ``kind`` prompt (system + user) may have, from
    ``target.toml``'s ``[budget]``; None when the target sets none."""
    value = (pieces.extra.get("budget") or {}).get(kind)
    return int(value) if value else None


def pieces_for_file(pieces: PromptPieces, path: str) -> PromptPieces:
    """The pieces with the fence language of this kernel file (``[languages]`` table)."""
    languages = pieces.extra.get("languages") or {}
    suffix = os.path.splitext(path)[1].lower()
    language = languages.get(suffix)
    if not language or language == pieces.language:
        return pieces
    return dataclasses.replace(pieces, language=str(language))
