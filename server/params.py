"""Reading command arguments and custom-request parameters.

Each command takes one JSON object (docs/lsp-extensions.md). A malformed call gets an
InvalidParams error that says what the command expects, never a crash and never a pop-up
storm. Shared by the handlers of every feature.
"""

from __future__ import annotations

from typing import Any

from pygls.exceptions import JsonRpcInvalidParams


def as_plain(value: Any) -> Any:
    """JSON-like data from what pygls hands us (namedtuples for custom requests,
    lsprotocol objects, dicts, lists)."""
    if hasattr(value, "_asdict"):
        return {k: as_plain(v) for k, v in value._asdict().items()}
    if isinstance(value, dict):
        return {str(k): as_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_plain(v) for v in value]
    return value


def one_object(name: str, args: tuple[Any, ...], shape: str) -> dict[str, Any]:
    """The single object argument of a command (a bare list of fields is refused)."""
    if len(args) == 1 and isinstance(as_plain(args[0]), dict):
        return as_plain(args[0])
    if not args:
        return {}
    raise JsonRpcInvalidParams(f"{name} takes one object argument {shape}, got {args!r}"[:400])


def string(obj: dict[str, Any], key: str, name: str, required: bool = True) -> str | None:
    value = obj.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise JsonRpcInvalidParams(f"{name}: '{key}' must be a non-empty string, got {value!r}")
    return value


def line(obj: dict[str, Any], name: str) -> int | None:
    value = obj.get("line")
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise JsonRpcInvalidParams(f"{name}: 'line' must be a 0-based line number, got {value!r}")
    return value
