"""One schema for every user-facing setting: type, range, default, CLI flag, LSP key, help.

Derived from it:

- the ``autocomp optimize`` flags (:func:`add_cli_flags`, :func:`cli_overrides`);
- the language server's settings parsing (``autocomp.server.settings`` validates every value
  with :func:`check`);
- the settings table in the README (:func:`markdown_table`, checked by a test);
- a test checks ``editors/vscode/package.json`` against it (:func:`vscode_property`).

Settings also come from a workspace ``autocomp.toml`` (the nearest one in the kernel's
folder or above; for the server, in each workspace folder) and from ``--set KEY=VALUE`` on
the command line. Both take the LSP keys with or without the ``autocomp.`` prefix, so
``--set target.gemmini.run_timeout=120`` and ``[target.gemmini] run_timeout = 120`` reach
the same target setting the editor's ``autocomp.target.gemmini.run_timeout`` does.
Precedence: defaults < ``autocomp.toml`` < editor settings / CLI flags < ``--set``.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from autocomp.errors import UserError

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - 3.10
    import tomli as tomllib  # type: ignore[no-redef]

CONFIG_FILE = "autocomp.toml"


class SettingError(UserError):
    """A setting has a bad key or value; the message names it and what is allowed."""


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


@dataclass(frozen=True)
class Knob:
    key: str  # the LSP key below ``autocomp.``, e.g. "search.beam"
    type: str  # "integer" | "number" | "boolean" | "string" | "array" | "object"
    default: Any
    help: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[Any, ...] | None = None
    cli: str | None = None  # the `autocomp optimize` flag, e.g. "--beam"
    field: str | None = None  # the SearchConfig field (engine knobs) or Settings attribute
    nullable: bool = False
    server: bool = True  # read by the language server (an editor setting)
    also: tuple[Any, ...] = ()  # accepted legacy values (autoApply true/false)

    @property
    def lsp(self) -> str:
        return f"autocomp.{self.key}"

    def allowed(self) -> str:
        if self.choices:
            return " or ".join(repr(c) if isinstance(c, str) else str(c).lower() for c in self.choices + self.also)
        if self.type in ("integer", "number"):
            lo = "" if self.minimum is None else _num(self.minimum)
            hi = "" if self.maximum is None else _num(self.maximum)
            kind = "a whole number" if self.type == "integer" else "a number"
            if lo and hi:
                return f"{kind} between {lo} and {hi}"
            if lo:
                return f"{kind} of at least {lo}"
            return kind
        if self.type == "boolean":
            return "true or false"
        if self.type == "array":
            return 'a list of strings such as ["openai:gpt-4o"]'
        if self.type == "object":
            return "an object"
        return "a string" + (" or null" if self.nullable else "")


def _shipped_targets() -> list[str]:
    """The targets shipped with Autocomp, from their own declarations (``backends/<t>/target.py``)."""
    from autocomp.backends import builtin_targets

    return [t.name for t in builtin_targets() if t.detect_by_default]


KNOBS: tuple[Knob, ...] = (
    Knob("llm", "array", [], "Models: `openai:MODEL`, `anthropic:MODEL`, `replay:FILE`. Several form an ensemble. Empty: `AUTOCOMP_LLM`, else the recorded `FILE.session.jsonl` next to the kernel (replayed, and labelled so).", cli="--llm", field="llm"),
    Knob("search.iterations", "integer", 8, "Beam-search iterations.", 1, 1000, cli="--iterations", field="iterations"),
    Knob("search.beam", "integer", 4, "Candidates kept per iteration.", 1, 64, cli="--beam", field="beam"),
    Knob("search.plans", "integer", 4, "Plans asked per beam entry.", 1, 64, cli="--plans", field="plans"),
    Knob("search.implementations", "integer", 2, "Implementations per plan.", 1, 16, cli="--implementations", field="implementations"),
    Knob("search.keep", "number", 0.3, "Probability each optimization-menu option is shown in a plan prompt.", 0, 1, cli="--keep", field="keep"),
    Knob("search.exploreRate", "number", 0.15, "Share of plan prompts that ask the model for an optimization of its own rather than a menu pick.", 0, 1, cli="--explore-rate", field="explore_rate"),
    Knob("search.seed", "integer", 0, "Seed of menu dropout and sampling: the same seed and replies give the same run.", 0, 2**31 - 1, cli="--seed", field="seed"),
    Knob("search.minImprovement", "number", 0.0, "A child must beat its parent by this fraction (0.05 = 5%).", 0, 0.99, cli="--min-improvement", field="min_improvement"),
    Knob("search.earlyStop", "integer", 3, "Stop after this many iterations without a new best (0 = never).", 0, 1000, cli="--early-stop", field="early_stop"),
    Knob("search.repair", "boolean", True, "One repair attempt for build/run failures and wrong results (CLI: `--no-repair` turns it off).", cli="--no-repair", field="repair"),
    Knob("search.tuneEvals", "integer", 0, "When a candidate becomes the new best, tune its integer constants (tile sizes, unroll factors) with this many evaluations, no LLM; the tuned variant enters the beam as its own candidate (0 = off; see `docs/tuning.md`).", 0, 1000, cli="--tune-evals", field="tune_evals"),
    Knob("budget.calls", "integer", None, "Stop after this many paid LLM calls (cache hits are free).", 1, None, cli="--budget-calls", field="budget_calls", nullable=True),
    Knob("budget.tokens", "integer", None, "Stop after this many LLM tokens (prompt and reply, all models together).", 1, None, cli="--budget-tokens", field="budget_tokens", nullable=True),
    Knob("budget.seconds", "number", None, "Stop after this many seconds of wall time.", 0.001, None, cli="--budget-seconds", field="budget_seconds", nullable=True),
    Knob("llmTimeout", "number", 300.0, "Seconds allowed for one LLM call, its retries included.", 0.001, None, cli="--llm-timeout", field="llm_timeout"),
    Knob("autoApply", "string", "always", "`always`: a confirmed faster kernel is applied as one undoable edit; `preview` / `never`: nothing changes until you apply a candidate (code action `Apply this candidate`). `true`/`false` mean always/never.", choices=("always", "preview", "never"), field="auto_apply", also=(True, False)),
    Knob("acceptUnconfirmed", "boolean", False, "Let auto-apply (CLI: `--write`) use a result from a tier that cannot confirm it (the NKI estimate, CUDA compile checks).", cli="--accept-unconfirmed", field="accept_unconfirmed"),
    Knob("sandbox", "string", "auto", "`auto`/`bwrap`: isolate every candidate with bubblewrap (see `docs/security.md`); `off` (or `AUTOCOMP_SANDBOX=off`): no isolation, shown in every result.", choices=("auto", "bwrap", "off"), field="sandbox"),
    Knob("executor", "string", "local", "Where evaluations run: `local`, `ray` (`RAY_ADDRESS` or a local head) or `ray://HOST:PORT`; see `docs/scale.md`.", cli="--executor", field="executor"),
    Knob("minSpeedup", "number", 1.02, "Smallest speedup applied automatically.", 1, 1e6, field="min_speedup"),
    Knob("tuneOnSave", "boolean", True, "On save, measure an edited kernel against the version before it (saves that leave the kernel unchanged are ignored).", field="tune_on_save"),
    Knob("targets", "array", _shipped_targets(), "Targets that look for kernels (default: every declared target; installed target plugins join it, see `docs/targets.md`).", field="targets"),
    Knob("target", "object", {}, "`autocomp.target.<name>.*`: passed to that target's backend (see each target's section; CLI: `--set target.<name>.KEY=VALUE`).", field="target"),
    Knob("store", "string", None, "Folder for the cache and runs (default `$AUTOCOMP_HOME` or the user cache dir).", field="store", nullable=True),
    Knob("maxFileBytes", "integer", 2_000_000, "Larger files are not scanned for kernels.", 1000, 1 << 30, field="max_file_bytes"),
)

BY_KEY: dict[str, Knob] = {k.key: k for k in KNOBS}


def knob(key: str) -> Knob:
    return BY_KEY[key.removeprefix("autocomp.")]


def check(k: Knob, value: Any) -> Any:
    """The value, normalised, or SettingError naming the setting and what is allowed."""
    bad = SettingError(f"{k.lsp} must be {k.allowed()}, got {value!r}")
    if value is None:
        if k.nullable:
            return None
        raise bad
    if k.also and value in k.also and isinstance(value, bool):
        return value
    if k.choices:
        if isinstance(value, str) and value.strip().lower() in k.choices:
            return value.strip().lower()
        raise bad
    if k.type == "boolean":
        if isinstance(value, bool):
            return value
        raise bad
    if k.type in ("integer", "number"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad
        if k.type == "integer" and int(value) != value:
            raise bad
        if (k.minimum is not None and value < k.minimum) or (k.maximum is not None and value > k.maximum):
            raise bad
        return int(value) if k.type == "integer" else float(value)
    if k.type == "array":
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            raise bad
        return [v.strip() for v in value]
    if k.type == "object":
        if not isinstance(value, Mapping):
            raise bad
        return dict(value)
    if not isinstance(value, str) or not value.strip():
        raise bad
    return value.strip()


# -- the command line ---------------------------------------------------------------------
def add_cli_flags(parser: argparse.ArgumentParser) -> None:
    """The flags of every knob that has one (dest: the knob's field), plus ``--set``."""
    for k in KNOBS:
        if not k.cli:
            continue
        help_text = (k.help + (f" Default {k.default!r}." if k.default not in (None, [], {}) else "")).replace("%", "%%")
        if k.type == "boolean" and k.cli.startswith("--no-"):
            parser.add_argument(k.cli, dest=k.field, action="store_false", default=None, help=help_text)
        elif k.type == "boolean":
            parser.add_argument(k.cli, dest=k.field, action="store_true", default=None, help=help_text)
        elif k.type == "array":
            parser.add_argument(k.cli, dest=k.field, action="append", default=[], metavar="SPEC", help=help_text)
        else:
            kind = {"integer": int, "number": float}.get(k.type, str)
            parser.add_argument(k.cli, dest=k.field, type=kind, default=None, metavar=k.cli.lstrip("-").upper().replace("-", "_"), help=help_text)
    add_set_flag(parser)


def add_set_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--set",
        dest="settings",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any setting by its key (as in autocomp.toml / the editor, e.g. target.gemmini.run_timeout=120); repeatable",
    )


def _parse_value(text: str) -> Any:
    """A TOML value (number, boolean, string, list, inline table), else the bare text."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def parse_set(items: Iterable[str]) -> dict[str, Any]:
    """``["target.gemmini.run_timeout=120", ...]`` as a nested settings section."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip().removeprefix("autocomp.")
        if not sep or not key:
            raise SettingError(f"--set {item!r}: expected KEY=VALUE, e.g. --set target.gemmini.run_timeout=120")
        _put(out, key.split("."), _parse_value(value.strip()))
    validate_section(out, source="--set")
    return out


def _put(node: dict[str, Any], parts: list[str], value: Any) -> None:
    for part in parts[:-1]:
        nxt = node.get(part)
        if not isinstance(nxt, dict):
            nxt = node[part] = {}
        node = nxt
    node[parts[-1]] = value


def merge(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def _flatten(section: Mapping[str, Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    for key, value in section.items():
        full = f"{prefix}{key}"
        if full in BY_KEY or full.startswith("target."):
            yield full, value
        elif isinstance(value, Mapping):
            yield from _flatten(value, full + ".")
        else:
            yield full, value


def _json_type_ok(spec: Mapping[str, Any], value: Any) -> bool:
    kind = spec.get("type")
    if kind == "boolean":
        return isinstance(value, bool)
    if kind in ("integer", "number"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if kind == "integer" and int(value) != value:
            return False
        low, high = spec.get("minimum"), spec.get("maximum")
        return (low is None or value >= low) and (high is None or value <= high)
    if kind == "string":
        return isinstance(value, str) and ("enum" not in spec or value in spec["enum"])
    if kind == "array":
        items = spec.get("items")
        return isinstance(value, list) and (items is None or all(_json_type_ok(items, v) for v in value))
    if kind == "object":
        return isinstance(value, Mapping)
    return True  # a plugin's own schema keyword we do not know: the backend checks it


def _allowed(spec: Mapping[str, Any]) -> str:
    kind = spec.get("type", "any value")
    if "enum" in spec:
        return "one of " + ", ".join(repr(v) for v in spec["enum"])
    if kind == "array" and isinstance(spec.get("items"), Mapping):
        return f"a list of {spec['items'].get('type', 'values')}s"
    bounds = [f">= {spec['minimum']}" if "minimum" in spec else "", f"<= {spec['maximum']}" if "maximum" in spec else ""]
    return " ".join([f"a{'n' if str(kind)[0] in 'aeiou' else ''} {kind}", *[b for b in bounds if b]])


def check_target_settings(name: str, values: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``autocomp.target.<name>``'s keys and values against the target's own declaration
    (``TargetInfo.settings``): the keys that pass, and one problem per key that does not.
    A misspelt key would otherwise be ignored without a word."""
    from autocomp.backends import all_target_names, target_info

    info = target_info(name)
    if info is None:
        return {}, [f"autocomp.target.{name}: no target named {name!r} is installed; known: {', '.join(all_target_names())}"]
    declared = info.settings
    good: dict[str, Any] = {}
    problems: list[str] = []
    for key, value in values.items():
        spec = declared.get(key)
        if spec is None:
            problems.append(f"autocomp.target.{name}.{key} is not a setting of {name}; known: {', '.join(sorted(declared)) or 'none'}")
        elif not _json_type_ok(spec, value):
            problems.append(f"autocomp.target.{name}.{key} must be {_allowed(spec)}, got {value!r}")
        else:
            good[key] = value
    return good, problems


def validate_section(section: Mapping[str, Any], source: str) -> None:
    """Every key known and every value allowed, target settings against their target's
    declaration."""
    targets = section.get("target")
    if isinstance(targets, Mapping):
        for name, values in targets.items():
            if not isinstance(values, Mapping):
                raise SettingError(f"{source}: autocomp.target.{name} must be a table of settings, got {values!r}")
            problems = check_target_settings(str(name), values)[1]
            if problems:
                raise SettingError(f"{source}: {problems[0]}")
    for key, value in _flatten(section):
        if key.startswith("target."):
            continue
        k = BY_KEY.get(key)
        if k is None:
            raise SettingError(f"{source}: unknown setting {key!r}; known: {', '.join(sorted(BY_KEY))}")
        try:
            check(k, value)
        except SettingError as exc:
            raise SettingError(f"{source}: {exc}") from None


def find_config_file(start: str | os.PathLike[str]) -> Path | None:
    """The nearest ``autocomp.toml`` in ``start`` (a folder or a file's folder) or above."""
    here = Path(start).resolve()
    if not here.is_dir():
        here = here.parent
    for folder in (here, *here.parents):
        candidate = folder / CONFIG_FILE
        if candidate.is_file():
            return candidate
    return None


def read_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The settings in an ``autocomp.toml`` (an optional top-level ``[autocomp]`` table)."""
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise SettingError(f"{path}: cannot read settings ({exc})") from None
    section = data.get("autocomp", data) if isinstance(data.get("autocomp"), dict) else data
    validate_section(section, source=str(path))
    return section


def cli_settings(args: Any) -> dict[str, Any]:
    """The settings section of one command: the workspace ``autocomp.toml`` (nearest the
    kernel file, else the current folder) under ``--set``. Cached on ``args``."""
    cached = getattr(args, "_settings_section", None)
    if cached is not None:
        return cached
    section: dict[str, Any] = {}
    where = getattr(args, "file", None) or os.getcwd()
    found = find_config_file(where) if os.path.exists(where) else find_config_file(os.getcwd())
    if found is not None:
        section = read_config_file(found)
    section = merge(section, parse_set(getattr(args, "settings", None) or []))
    try:
        args._settings_section = section
    except AttributeError:
        pass
    return section


def cli_overrides(args: Any) -> dict[str, Any]:
    """SearchConfig overrides for one command: ``autocomp.toml`` < flags < ``--set``."""
    section = cli_settings(args)
    toml_part: dict[str, Any] = {}
    set_part: dict[str, Any] = {}
    set_keys = set(_flatten(parse_set(getattr(args, "settings", None) or [])))
    set_keys = {key for key, _ in set_keys}
    for key, value in _flatten(section):
        k = BY_KEY.get(key)
        if k is None or k.field is None or not k.cli or k.type == "array":
            continue
        (set_part if key in set_keys else toml_part)[k.field] = check(k, value)
    out = dict(toml_part)
    for k in KNOBS:
        if k.cli and k.field and k.type != "array" and k.field not in ("executor", "accept_unconfirmed"):
            value = getattr(args, k.field, None)
            if value is not None:
                out[k.field] = value
    out.update(set_part)
    return out


# -- docs and editors -----------------------------------------------------------------------
def _fmt_default(k: Knob) -> str:
    if k.default is None:
        return "unset"
    if isinstance(k.default, bool):
        return f"`{str(k.default).lower()}`"
    if isinstance(k.default, str):
        return f'`"{k.default}"`'
    if isinstance(k.default, (list, dict)):
        import json

        return f"`{json.dumps(k.default, separators=(',', ':'))}`"
    return f"{k.default:g}" if isinstance(k.default, float) else str(k.default)


def markdown_table() -> str:
    """The README's settings table, derived from the schema."""
    rows = ["| setting | default | CLI | meaning |", "|---|---|---|---|"]
    for k in KNOBS:
        allowed = ""
        if k.type in ("integer", "number") and (k.minimum is not None or k.maximum is not None):
            allowed = f" ({k.allowed()})"
        cli = f"`{k.cli}`" if k.cli else f"`--set {k.key}=…`"
        rows.append(f"| `{k.lsp}` | {_fmt_default(k)} | {cli} | {k.help}{allowed} |")
    return "\n".join(rows) + "\n"


def vscode_property(k: Knob) -> dict[str, Any]:
    """What ``editors/vscode/package.json`` must declare for a knob."""
    prop: dict[str, Any] = {"type": k.type if not k.nullable or k.type != "string" else ["string", "null"], "default": k.default}
    if k.nullable and k.type in ("integer", "number"):
        prop["type"] = [k.type, "null"]
    if k.minimum is not None:
        prop["minimum"] = k.minimum
    if k.maximum is not None:
        prop["maximum"] = k.maximum
    if k.choices:
        prop["enum"] = list(k.choices)
    return prop


if __name__ == "__main__":  # python -m autocomp.schema: print the README table
    print(markdown_table(), end="")
