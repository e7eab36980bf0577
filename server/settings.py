"""The server's settings, read from ``initializationOptions`` and ``workspace/configuration``.

Every client sends settings differently (VS Code: nested objects from ``settings.json``;
Neovim and eglot: whatever the user wrote in Lua or Lisp, sometimes with dotted keys), so
this module accepts both nested (``{"autocomp": {"search": {"beam": 4}}}``) and dotted
(``{"autocomp.search.beam": 4}``) forms, and turns bad values into one readable problem
each instead of an exception: a typo in a setting must never take the server down.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping



def default_targets() -> list[str]:
    """The declared targets that look for kernels unless the user says otherwise (every
    target's own declaration says whether it does; see :mod:`autocomp.backends`)."""
    from autocomp.backends import target_names

    return target_names()


@dataclass
class SearchSettings:
    """``autocomp.search.*``: the beam search knobs exposed to editor users."""

    iterations: int = 8
    beam: int = 4
    plans: int = 4
    implementations: int = 2
    keep: float = 0.3
    explore_rate: float = 0.15


@dataclass
class Settings:
    """All ``autocomp.*`` settings with their defaults (documented in the README)."""

    llm: list[str] = field(default_factory=list)
    search: SearchSettings = field(default_factory=SearchSettings)
    # "always" | "preview" | "never" (true/false from older settings mean always/never)
    auto_apply: str = "always"
    # Let auto-apply use a result from a tier that cannot confirm it (estimates).
    accept_unconfirmed: bool = False
    # "auto"/"bwrap" isolate every candidate; "off" opts out (shown in every result).
    sandbox: str = "auto"
    # Where evaluations run: "local", "ray" or "ray://HOST:PORT" (autocomp.executor).
    executor: str = "local"
    min_speedup: float = 1.02
    tune_on_save: bool = True
    targets: list[str] = field(default_factory=default_targets)
    target: dict[str, dict[str, Any]] = field(default_factory=dict)
    store: str | None = None
    max_file_bytes: int = 2_000_000
    # the engine (SearchConfig) fields the user set, by field name; a replayed session's
    # own settings fill the rest
    search_set: set[str] = field(default_factory=set)
    engine: dict[str, Any] = field(default_factory=dict)

    def search_overrides(self) -> dict[str, Any]:
        """The search settings the user set explicitly, as ``SearchConfig`` fields: what
        the engine's front door layers over a replayed session's recorded settings."""
        return {name: self.engine.get(name, getattr(self.search, name, None)) for name in sorted(self.search_set)}

    def search_config(self) -> Any:
        """The engine's ``SearchConfig`` for these settings (imported late so the server
        starts, and answers requests, even while the engine is being imported)."""
        from autocomp.config import SearchConfig

        s = self.search
        return SearchConfig(
            iterations=s.iterations, beam=s.beam, plans=s.plans, implementations=s.implementations, keep=s.keep,
            explore_rate=s.explore_rate,
        )

    def target_settings(self, name: str) -> dict[str, Any]:
        return dict(self.target.get(name, {}))


def _nest(flat: Mapping[str, Any]) -> dict[str, Any]:
    """Expand dotted keys (``"search.beam": 4``) into nested dictionaries."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        if isinstance(value, Mapping):
            value = _nest(value)
        parts = str(key).split(".")
        node = out
        for part in parts[:-1]:
            nxt = node.get(part)
            if not isinstance(nxt, dict):
                nxt = {}
                node[part] = nxt
            node = nxt
        last = parts[-1]
        if isinstance(value, dict) and isinstance(node.get(last), dict):
            node[last].update(value)
        else:
            node[last] = value
    return out


def autocomp_section(raw: Any) -> dict[str, Any]:
    """The ``autocomp`` part of whatever a client sent (the whole object, or already the
    section itself, as ``workspace/configuration`` with ``section="autocomp"`` returns)."""
    if not isinstance(raw, Mapping):
        return {}
    nested = _nest(raw)
    inner = nested.get("autocomp")
    if isinstance(inner, dict):
        return inner
    return nested


def parse_settings(raw: Any, base: Settings | None = None) -> tuple[Settings, list[str]]:
    """Settings from a client's object, on top of ``base``; plus one line per bad value.

    Every key and its type, range and default come from the one schema
    (:mod:`autocomp.schema`). Unknown keys are ignored (clients send their own things
    alongside ours); bad values keep the previous value and are reported once.
    """
    from autocomp.config import SearchConfig
    from autocomp.schema import KNOBS, SettingError, check, check_target_settings

    cur = base or Settings()
    section = autocomp_section(raw)
    problems: list[str] = []
    out = copy.deepcopy(cur)
    engine_fields = {f.name for f in dataclasses.fields(SearchConfig)}
    for knob in KNOBS:
        if not knob.server:
            continue
        found, value = _lookup(section, knob.key)
        if not found:
            continue
        if value is None and knob.type != "string":
            continue  # "unset" in a client's settings keeps the previous value
        try:
            value = check(knob, value)
        except SettingError as exc:
            problems.append(str(exc))
            continue
        if knob.key == "executor":
            from autocomp.executor import ExecutorError, validate_spec

            try:
                value = validate_spec(value)
            except ExecutorError as exc:
                problems.append(f"autocomp.{exc}")
                continue
        if knob.key == "autoApply" and isinstance(value, bool):
            value = "always" if value else "never"
        if knob.key == "target":
            bad = [name for name, values in value.items() if not isinstance(values, Mapping)]
            for name in bad:
                problems.append(f"autocomp.target.{name} must be an object of toolchain settings, got {value[name]!r}")
            value = {str(k): dict(v) for k, v in value.items() if k not in bad}
            for name, values in value.items():
                good, wrong = check_target_settings(name, values)
                problems.extend(wrong)
                out.target.setdefault(name, {}).update(good)
            continue
        field_name = knob.field or knob.key
        if knob.key.startswith("search.") or field_name in engine_fields and knob.cli:
            if hasattr(out.search, field_name):
                setattr(out.search, field_name, value)
            out.engine[field_name] = value
            out.search_set.add(field_name)
            continue
        setattr(out, field_name, value)
    if "search" in section and section["search"] is not None and not isinstance(section["search"], Mapping):
        problems.append(f"autocomp.search must be an object, got {section['search']!r}")
    return out, problems


def _lookup(section: Mapping[str, Any], key: str) -> tuple[bool, Any]:
    node: Any = section
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node
