"""The server's settings, read from ``initializationOptions`` and ``workspace/configuration``.

Every client sends settings differently (VS Code: nested objects from ``settings.json``;
Neovim and eglot: whatever the user wrote in Lua or Lisp, sometimes with dotted keys), so
this module accepts both nested (``{"autocomp": {"search": {"beam": 4}}}``) and dotted
(``{"autocomp.search.beam": 4}``) forms, and turns bad values into one readable problem
each instead of an exception: a typo in a setting must never take the server down.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

DEFAULT_TARGETS: tuple[str, ...] = ("gemmini", "nki", "cuda")


@dataclass
class SearchSettings:
    """``autocomp.search.*``: the beam search knobs exposed to editor users."""

    iterations: int = 8
    beam: int = 4
    plans: int = 4
    implementations: int = 2
    keep: float = 0.3


@dataclass
class Settings:
    """All ``autocomp.*`` settings with their defaults (documented in the README)."""

    llm: list[str] = field(default_factory=list)
    search: SearchSettings = field(default_factory=SearchSettings)
    auto_apply: bool = True
    # Let auto-apply use a result from a tier that cannot confirm it (estimates).
    accept_unconfirmed: bool = False
    # "auto"/"bwrap" isolate every candidate; "off" opts out (shown in every result).
    sandbox: str = "auto"
    # Where evaluations run: "local", "ray" or "ray://HOST:PORT" (autocomp.executor).
    executor: str = "local"
    min_speedup: float = 1.02
    tune_on_save: bool = True
    targets: list[str] = field(default_factory=lambda: list(DEFAULT_TARGETS))
    target: dict[str, dict[str, Any]] = field(default_factory=dict)
    store: str | None = None
    max_file_bytes: int = 2_000_000

    def search_config(self) -> Any:
        """The engine's ``SearchConfig`` for these settings (imported late so the server
        starts, and answers requests, even while the engine is being imported)."""
        from autocomp.config import SearchConfig

        s = self.search
        return SearchConfig(
            iterations=s.iterations, beam=s.beam, plans=s.plans, implementations=s.implementations, keep=s.keep
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


def _int(value: Any, name: str, low: int, high: int, problems: list[str]) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
        problems.append(f"autocomp.{name} must be a whole number between {low} and {high}, got {value!r}")
        return None
    if not low <= int(value) <= high:
        problems.append(f"autocomp.{name} must be between {low} and {high}, got {value}")
        return None
    return int(value)


def _float(value: Any, name: str, low: float, high: float, problems: list[str]) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        problems.append(f"autocomp.{name} must be a number between {low} and {high}, got {value!r}")
        return None
    if not low <= float(value) <= high:
        problems.append(f"autocomp.{name} must be between {low} and {high}, got {value}")
        return None
    return float(value)


def _bool(value: Any, name: str, problems: list[str]) -> bool | None:
    if isinstance(value, bool):
        return value
    problems.append(f"autocomp.{name} must be true or false, got {value!r}")
    return None


def _str_list(value: Any, name: str, problems: list[str]) -> list[str] | None:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        problems.append(f'autocomp.{name} must be a list of strings such as ["openai:gpt-4o"], got {value!r}')
        return None
    return [v.strip() for v in value]


def parse_settings(raw: Any, base: Settings | None = None) -> tuple[Settings, list[str]]:
    """Settings from a client's object, on top of ``base``; plus one line per bad value.

    Unknown keys are ignored (clients send their own things alongside ours); bad values
    keep the previous value and are reported once.
    """
    cur = base or Settings()
    section = autocomp_section(raw)
    problems: list[str] = []
    out = Settings(
        llm=list(cur.llm),
        search=SearchSettings(**vars(cur.search)),
        auto_apply=cur.auto_apply,
        accept_unconfirmed=cur.accept_unconfirmed,
        sandbox=cur.sandbox,
        executor=cur.executor,
        min_speedup=cur.min_speedup,
        tune_on_save=cur.tune_on_save,
        targets=list(cur.targets),
        target={k: dict(v) for k, v in cur.target.items()},
        store=cur.store,
        max_file_bytes=cur.max_file_bytes,
    )
    if "llm" in section and section["llm"] is not None:
        if (v := _str_list(section["llm"], "llm", problems)) is not None:
            out.llm = v
    search = section.get("search")
    if isinstance(search, dict):
        limits = {"iterations": (1, 1000), "beam": (1, 64), "plans": (1, 64), "implementations": (1, 16)}
        for key, (low, high) in limits.items():
            if key in search and (v := _int(search[key], f"search.{key}", low, high, problems)) is not None:
                setattr(out.search, key, v)
        if "keep" in search and (f := _float(search["keep"], "search.keep", 0.0, 1.0, problems)) is not None:
            out.search.keep = f
    elif search is not None:
        problems.append(f"autocomp.search must be an object, got {search!r}")
    if "autoApply" in section and (b := _bool(section["autoApply"], "autoApply", problems)) is not None:
        out.auto_apply = b
    if "acceptUnconfirmed" in section and (b := _bool(section["acceptUnconfirmed"], "acceptUnconfirmed", problems)) is not None:
        out.accept_unconfirmed = b
    if "sandbox" in section:
        value = section["sandbox"]
        if isinstance(value, str) and value.strip().lower() in ("auto", "bwrap", "off"):
            out.sandbox = value.strip().lower()
        else:
            problems.append(f'autocomp.sandbox must be "auto", "bwrap" or "off", got {value!r}')
    if "executor" in section:
        value = section["executor"]
        from autocomp.executor import ExecutorError, validate_spec

        try:
            out.executor = validate_spec(value if isinstance(value, str) else repr(value))
        except ExecutorError as exc:
            problems.append(f"autocomp.{exc}")
    if "minSpeedup" in section and (f := _float(section["minSpeedup"], "minSpeedup", 1.0, 1e6, problems)) is not None:
        out.min_speedup = f
    if "tuneOnSave" in section and (b := _bool(section["tuneOnSave"], "tuneOnSave", problems)) is not None:
        out.tune_on_save = b
    if "targets" in section and (v := _str_list(section["targets"], "targets", problems)) is not None:
        out.targets = v
    target = section.get("target")
    if isinstance(target, dict):
        for name, values in target.items():
            if isinstance(values, dict):
                out.target[str(name)] = dict(values)
            else:
                problems.append(f"autocomp.target.{name} must be an object of toolchain settings, got {values!r}")
    elif target is not None:
        problems.append(f"autocomp.target must be an object keyed by target name, got {target!r}")
    if "store" in section:
        store = section["store"]
        if store is None or (isinstance(store, str) and store.strip()):
            out.store = store
        else:
            problems.append(f"autocomp.store must be a folder path, got {store!r}")
    if "maxFileBytes" in section:
        if (n := _int(section["maxFileBytes"], "maxFileBytes", 1000, 1 << 30, problems)) is not None:
            out.max_file_bytes = n
    return out, problems
