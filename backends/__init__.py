"""Target registry: every target declares itself (:class:`TargetInfo`) in its own package,
and everything else (detection, prompts, reply parsing, the executor, settings, the CLI and
the editors) asks this module. Backends are imported lazily so a missing optional
dependency of one target (numpy for NKI, say) never breaks the others.

Where declarations come from, in this order (a later one with the same name replaces an
earlier one):

1. the targets shipped here: every ``autocomp.backends.<name>.target`` module with a
   ``TARGET``;
2. installed plugins: the ``autocomp.targets`` entry-point group (each entry point names a
   :class:`TargetInfo`, or a module with ``TARGET``/``TARGETS``) -- what a third-party
   target package uses; see ``docs/targets.md``;
3. ``AUTOCOMP_PLUGINS``: a comma-separated list of such modules, an explicit opt-in (tests
   use it to give a server or CLI subprocess their test-double target);
4. :func:`register` calls, in-process.

Adding a target needs only ``backends/<name>/`` (with ``target.py``) and ``prompts/<name>/``.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import pkgutil
import sys
import threading
from typing import Any, Iterable

from autocomp.backends.base import Backend, BackendError, EditorLanguage, TargetInfo, TierInfo, ToolCheck

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "autocomp.targets"
PLUGINS_ENV = "AUTOCOMP_PLUGINS"

_lock = threading.RLock()
_targets: dict[str, TargetInfo] | None = None
_builtin: dict[str, TargetInfo] = {}
_registered: dict[str, TargetInfo] = {}  # by register(), kept across reload()
_errors: list[str] = []


# -- loading declarations -----------------------------------------------------------------
def _declarations(obj: Any, source: str) -> list[TargetInfo]:
    """The TargetInfo(s) an entry point or plugin module stands for."""
    if isinstance(obj, TargetInfo):
        return [obj]
    if callable(obj) and not isinstance(obj, type):
        return _declarations(obj(), source)
    found: list[TargetInfo] = []
    for attr in ("TARGET", "TARGETS"):
        value = getattr(obj, attr, None)
        if isinstance(value, TargetInfo):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found.extend(v for v in value if isinstance(v, TargetInfo))
    if not found and not isinstance(obj, type(os)):
        raise TypeError(f"{source} is not a TargetInfo")
    return found


def _import_declaration(package: str, folder: str | None) -> Any:
    """``autocomp.backends.<package>.target``, without running the target package's
    ``__init__`` (which may import its whole backend) when the file is on disk: reading
    the declarations must stay cheap (the server reads them at start-up)."""
    name = f"{__name__}.{package}.target"
    if name in sys.modules:  # the package imported it already
        return sys.modules[name]
    path = os.path.join(folder, package, "target.py") if folder else ""
    private = f"_autocomp_target_declaration_{package}"  # not the package's own name: its
    # parent package stays unimported (a later `import ...<package>.target` is unaffected)
    if private in sys.modules:
        return sys.modules[private]
    spec = importlib.util.spec_from_file_location(private, path) if path and os.path.isfile(path) else None
    if spec is None or spec.loader is None:
        return importlib.import_module(name)
    module = importlib.util.module_from_spec(spec)
    sys.modules[private] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(private, None)
        raise
    return module


def _scan_builtin() -> dict[str, TargetInfo]:
    found: dict[str, TargetInfo] = {}
    for module in pkgutil.iter_modules(__path__):
        if not module.ispkg:
            continue
        folder = getattr(module.module_finder, "path", None)
        if folder and not os.path.isfile(os.path.join(folder, module.name, "target.py")):
            continue  # a package that is not a target
        if not folder:
            try:
                if importlib.util.find_spec(f"{__name__}.{module.name}.target") is None:
                    continue
            except ImportError:
                continue
        try:
            declared = _import_declaration(module.name, folder)
            for info in _declarations(declared, f"{__name__}.{module.name}.target"):
                found[info.name] = info
        except Exception as exc:  # one broken target must not hide the others
            _errors.append(f"{__name__}.{module.name}.target: {type(exc).__name__}: {exc}")
    return found


def _entry_points() -> Iterable[Any]:
    try:
        from importlib.metadata import entry_points
    except ImportError:  # pragma: no cover
        return []
    try:
        return list(entry_points(group=ENTRY_POINT_GROUP))
    except TypeError:  # pragma: no cover - Python < 3.10 API
        return list(entry_points().get(ENTRY_POINT_GROUP, []))


def _load_plugins() -> dict[str, TargetInfo]:
    found: dict[str, TargetInfo] = {}
    for ep in _entry_points():
        try:
            for info in _declarations(ep.load(), f"entry point {ep.name} = {ep.value}"):
                found[info.name] = info
        except Exception as exc:
            _errors.append(f"entry point {ENTRY_POINT_GROUP}:{ep.name} ({ep.value}): {type(exc).__name__}: {exc}")
    for name in filter(None, (part.strip() for part in os.environ.get(PLUGINS_ENV, "").split(","))):
        try:
            for info in _declarations(importlib.import_module(name), name):
                found[info.name] = info
        except Exception as exc:
            _errors.append(f"{PLUGINS_ENV} module {name}: {type(exc).__name__}: {exc}")
    return found


def _shipped() -> dict[str, TargetInfo]:
    """The shipped declarations only (no plugin is imported: safe while other modules, such
    as the settings schema, are still being imported)."""
    with _lock:
        if not _builtin:
            _builtin.update(_scan_builtin())
        return _builtin


def _all() -> dict[str, TargetInfo]:
    global _targets
    with _lock:
        if _targets is None:
            _errors[:] = [e for e in _errors if e.startswith(f"{__name__}.")]  # keep the shipped ones' errors
            merged = dict(_shipped())
            merged.update(_load_plugins())
            merged.update(_registered)
            _targets = dict(sorted(merged.items(), key=lambda item: (item[1].order, item[0])))
        return _targets


def reload() -> None:
    """Forget what was loaded (plugins and ``AUTOCOMP_PLUGINS`` are read again on next use)."""
    global _targets
    with _lock:
        _targets = None


def register(target: TargetInfo | str, ref: str | None = None) -> TargetInfo:
    """Add (or replace) a target in this process: a :class:`TargetInfo`, or the older
    ``register(name, "module:Class")`` form with a title of just the name."""
    if isinstance(target, str):
        if ref is None:
            raise TypeError("register(name, ref) needs the backend's 'module:Class'")
        target = TargetInfo(name=target, backend=ref, title=target)
    with _lock:
        _registered[target.name] = target
        reload()
    return target


def unregister(name: str) -> None:
    """Remove a target added with :func:`register` (tests clean up with this)."""
    with _lock:
        _registered.pop(name, None)
        reload()


# -- asking about targets ---------------------------------------------------------------
def targets() -> list[TargetInfo]:
    """Every declared target, in detection order."""
    return list(_all().values())


def target_info(name: str) -> TargetInfo | None:
    return _all().get(name)


def target_names() -> list[str]:
    """The targets used when none is named (``--target auto``, the default
    ``autocomp.targets``): every declared target except those that ask to be named."""
    return [t.name for t in _all().values() if t.detect_by_default]


default_target_names = target_names


def all_target_names() -> list[str]:
    """Every declared target, the ones only used when named (test doubles) included."""
    return list(_all())


def builtin_targets() -> list[TargetInfo]:
    """The targets shipped in this package (what the checked-in editor files list)."""
    return sorted(_shipped().values(), key=lambda t: (t.order, t.name))


def plugin_errors() -> list[str]:
    """One line per declaration that failed to load (``autocomp doctor`` shows them)."""
    _all()
    return list(_errors)


def target_title(name: str) -> str:
    """How prompts name the target's hardware."""
    info = target_info(name)
    return info.title if info else name


def device_resource(name: str) -> str | None:
    """The Ray resource one evaluation of this target needs where a cluster has it."""
    info = target_info(name)
    return info.device_resource if info else None


def device_resources() -> set[str]:
    return {t.device_resource for t in _all().values() if t.device_resource}


def fence_aliases(language: str) -> set[str]:
    """The code-fence tags accepted for ``language`` in replies (every target that declares
    that fence contributes its aliases); just the tag itself when no target declares it."""
    found: set[str] = set()
    for t in _all().values():
        found.update(t.fences.get(language, ()))
    return found or {language}


def language_ids(names: Iterable[str] | None = None) -> list[str]:
    """LSP language ids whose documents may hold a kernel of ``names`` (default: all
    declared targets), in declaration order, without repeats."""
    wanted = set(_all() if names is None else names)
    out: list[str] = []
    for t in _all().values():
        if t.name in wanted:
            out.extend(lang.lsp for lang in t.languages if lang.lsp not in out)
    return out


def editor_languages(infos: Iterable[TargetInfo] | None = None) -> dict[str, list[str]]:
    """What each editor starts the server for: ``{"lsp": [...], "nvim": [...], "emacs": [...]}``."""
    out: dict[str, list[str]] = {"lsp": [], "nvim": [], "emacs": []}
    for t in _all().values() if infos is None else infos:
        for lang in t.languages:
            for kind, values in (("lsp", (lang.lsp,)), ("nvim", lang.nvim), ("emacs", lang.emacs)):
                out[kind].extend(v for v in values if v not in out[kind])
    return out


def describe(names: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """The declarations as JSON (for a client that asks the server which targets exist)."""
    wanted = None if names is None else set(names)
    return [t.to_json() for t in _all().values() if wanted is None or t.name in wanted]


def target_help() -> str:
    """The ``--target`` flag's help: ``auto`` or a declared target."""
    return f"auto|{'|'.join(all_target_names())} (default: detect among {', '.join(target_names())})"


# -- backends ---------------------------------------------------------------------------
def get_backend(name: str, settings: dict[str, Any] | None = None) -> Backend:
    """Instantiate the backend for ``name``; a clear error if it is unknown or broken."""
    info = target_info(name)
    if info is None:
        raise BackendError(f"unknown target {name!r}; choose one of {', '.join(all_target_names())}") from None
    module_name, _, class_name = info.backend.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise BackendError(f"target {name!r} cannot load: {exc}. Run `autocomp doctor`.") from exc
    cls = getattr(module, class_name)
    return cls(settings)


def detect_target(path: str, text: str, settings: dict[str, dict[str, Any]] | None = None) -> list[Backend]:
    """Backends that find at least one kernel in this file, most specific first."""
    found: list[Backend] = []
    suffix = os.path.splitext(path)[1].lower()
    for info in targets():
        if not info.detect_by_default:
            continue
        if info.file_suffixes and suffix not in info.file_suffixes:
            continue
        try:
            backend = get_backend(info.name, (settings or {}).get(info.name))
        except BackendError:
            continue
        if backend.file_suffixes and suffix not in backend.file_suffixes:
            continue
        try:
            if backend.detect(path, text):
                found.append(backend)
        except Exception:  # detection must never take the caller down
            continue
    return found


__all__ = [
    "Backend",
    "BackendError",
    "EditorLanguage",
    "TargetInfo",
    "TierInfo",
    "ToolCheck",
    "all_target_names",
    "builtin_targets",
    "default_target_names",
    "describe",
    "detect_target",
    "device_resource",
    "device_resources",
    "editor_languages",
    "fence_aliases",
    "get_backend",
    "language_ids",
    "plugin_errors",
    "register",
    "reload",
    "target_info",
    "target_names",
    "target_help",
    "target_title",
    "targets",
    "unregister",
]
