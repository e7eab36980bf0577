"""The editor files derived from the target declarations (``backends/<t>/target.py``).

An editor must know which buffers to start the language server for before the server
runs, so each client ships a small generated file listing the languages of the shipped
targets (and VS Code's ``package.json`` carries their activation events and settings):

- ``editors/vscode/package.json``: ``activationEvents`` (``onLanguage:*``),
  ``autocomp.targets`` and one ``autocomp.target.<name>`` object per target;
- ``editors/vscode/src/targets.ts``: the targets and LSP language ids for the client;
- ``editors/nvim/autocomp_targets.lua``: the Neovim filetypes;
- ``editors/emacs/autocomp-targets.el``: the Emacs major modes.

``python -P -m autocomp.backends.editor_files --write`` (in the checkout) regenerates them after a target is
added or changed; ``--check`` (and ``tests/server/test_target_plugins.py``) fails when one
is stale. Targets from plugins are not in these files (they depend on what is installed):
their languages are added in the editor's own settings (see ``docs/targets.md``), and the
server reports every declared target (:func:`autocomp.backends.describe`).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path
from typing import Any

from autocomp.backends import builtin_targets, editor_languages
from autocomp.backends.base import TargetInfo

HEADER = "Generated from the target declarations (backends/<target>/target.py) by\n`python -P -m autocomp.backends.editor_files --write`; a test checks it is current. Do not edit."

PACKAGE_JSON = "editors/vscode/package.json"
TARGETS_TS = "editors/vscode/src/targets.ts"
NVIM_LUA = "editors/nvim/autocomp_targets.lua"
EMACS_EL = "editors/emacs/autocomp-targets.el"
TARGETS_ORDER = 13  # where `autocomp.targets` sits among the settings; each target follows


def _shipped() -> list[TargetInfo]:
    return [t for t in builtin_targets() if t.detect_by_default]


def _comment(prefix: str) -> str:
    return "\n".join(f"{prefix} {line}" for line in HEADER.splitlines())


def targets_ts(infos: list[TargetInfo]) -> str:
    rows = [
        f"  {{ name: {json.dumps(t.name)}, label: {json.dumps(t.label or t.name)}, languages: {json.dumps([lang.lsp for lang in t.languages])} }},"
        for t in infos
    ]
    langs = editor_languages(infos)["lsp"]
    return (
        f"{_comment('//')}\n\n"
        "/** A target shipped with Autocomp: its name, how the UI names its kernels, its LSP language ids. */\n"
        "export interface TargetLanguages {\n  name: string;\n  label: string;\n  languages: string[];\n}\n\n"
        "export const TARGETS: readonly TargetLanguages[] = [\n" + "\n".join(rows) + "\n];\n\n"
        "/** The LSP language ids whose documents may hold a kernel (the client's document selector). */\n"
        f"export const LANGUAGES: readonly string[] = {json.dumps(langs)};\n"
    )


def nvim_lua(infos: list[TargetInfo]) -> str:
    fts = ", ".join(json.dumps(ft) for ft in editor_languages(infos)["nvim"])
    names = ", ".join(json.dumps(t.name) for t in infos)
    return f"{_comment('--')}\n\nreturn {{\n  targets = {{ {names} }},\n  filetypes = {{ {fts} }},\n}}\n"


def emacs_el(infos: list[TargetInfo]) -> str:
    modes = " ".join(editor_languages(infos)["emacs"])
    names = " ".join(json.dumps(t.name) for t in infos)
    return (
        ";;; autocomp-targets.el --- Autocomp's targets and their major modes  -*- lexical-binding: t; -*-\n\n"
        f"{_comment(';;')}\n\n;;; Code:\n\n"
        f"(defconst autocomp-targets '({names})\n  \"The targets shipped with Autocomp.\")\n\n"
        f"(defconst autocomp-target-modes '({modes})\n  \"Major modes whose buffers may hold a kernel of a shipped target.\")\n\n"
        "(provide 'autocomp-targets)\n;;; autocomp-targets.el ends here\n"
    )


def package_json(manifest: dict[str, Any], infos: list[TargetInfo]) -> dict[str, Any]:
    """``manifest`` with the target-derived parts replaced (everything else kept as is)."""
    out = copy.deepcopy(manifest)
    events = [e for e in out.get("activationEvents", []) if not e.startswith("onLanguage:")]
    out["activationEvents"] = [f"onLanguage:{lang}" for lang in editor_languages(infos)["lsp"]] + events
    props = out["contributes"]["configuration"]["properties"]
    listed = ", ".join(f"`{t.name}` ({t.summary or t.label or t.name})" for t in infos)
    fresh: dict[str, Any] = {}
    for key, value in props.items():
        if key.startswith("autocomp.target."):
            continue  # regenerated below, right after autocomp.targets
        fresh[key] = value
        if key == "autocomp.targets":
            fresh[key] = {
                "type": "array",
                "items": {"type": "string"},
                "default": [t.name for t in infos],
                "markdownDescription": f"The targets whose kernels are detected in open files: {listed}. "
                "Installed target plugins add theirs (see `docs/targets.md`).",
                "order": TARGETS_ORDER,
            }
            for i, t in enumerate(infos, start=1):
                fresh[f"autocomp.target.{t.name}"] = {
                    "type": "object",
                    "default": {},
                    "scope": "machine-overridable",
                    "markdownDescription": t.settings_help or f"{t.label or t.name} settings (`autocomp.target.{t.name}.*`).",
                    "properties": copy.deepcopy(t.settings),
                    "order": TARGETS_ORDER + i,
                }
    out["contributes"]["configuration"]["properties"] = fresh
    return out


def expected(root: Path) -> dict[str, str]:
    """Path (relative to ``root``) -> the text it must have."""
    infos = _shipped()
    manifest = json.loads((root / PACKAGE_JSON).read_text(encoding="utf-8"))
    return {
        PACKAGE_JSON: json.dumps(package_json(manifest, infos), indent=2, ensure_ascii=False) + "\n",
        TARGETS_TS: targets_ts(infos),
        NVIM_LUA: nvim_lua(infos),
        EMACS_EL: emacs_el(infos),
    }


def stale(root: Path) -> list[str]:
    """The generated files that differ from what the declarations give."""
    out = []
    for rel, text in expected(root).items():
        path = root / rel
        if rel == PACKAGE_JSON:  # compare parsed: formatting and other keys are not ours
            if json.loads(text) != json.loads(path.read_text(encoding="utf-8")):
                out.append(rel)
        elif not path.is_file() or path.read_text(encoding="utf-8") != text:
            out.append(rel)
    return out


def write(root: Path) -> list[str]:
    changed = stale(root)
    for rel, text in expected(root).items():
        if rel in changed:
            (root / rel).write_text(text, encoding="utf-8")
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autocomp.backends.editor_files", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=".", help="the Autocomp checkout (default: the current folder)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="rewrite the stale files")
    mode.add_argument("--check", action="store_true", help="exit 1 when a file is stale (the default)")
    args = parser.parse_args(argv)
    root = Path(args.root)
    if args.write:
        for rel in write(root):
            print(f"wrote {rel}")
        return 0
    bad = stale(root)
    for rel in bad:
        print(f"{rel} is stale: run python -P -m autocomp.backends.editor_files --write", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
