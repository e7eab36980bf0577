"""What an LLM call is, independent of provider: a request (system + user text, with a
stable hash), a reply (text + usage), and the errors the pool knows how to handle."""

from __future__ import annotations

import abc
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import ModuleType
from typing import Iterator

from autocomp.errors import UserError
from autocomp.model import Usage, sha256


class LLMConfigError(UserError):
    """The LLM setup cannot work (unknown provider, missing key, unreadable replay file).
    The message says how to fix it."""


class LLMCallError(Exception):
    """One call failed. ``retryable`` errors (429, 408, 409, 5xx, connection problems,
    timeouts) are retried with backoff by the pool; others fail the call at once."""

    def __init__(self, message: str, retryable: bool = False, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after  # seconds the server asked us to wait (Retry-After)


class BudgetExhausted(Exception):
    """A budget cap (calls, tokens, wall time) was reached; the run ends cleanly."""

    def __init__(self, which: str) -> None:
        super().__init__(f"budget reached: {which}")
        self.which = which


@dataclass(frozen=True)
class LLMRequest:
    system: str
    user: str
    kind: str  # "plan" | "implement" | "repair"
    max_tokens: int = 8192

    @property
    def prompt_hash(self) -> str:
        return sha256(self.system + "\x00" + self.user)


@dataclass
class LLMReply:
    text: str
    model: str
    usage: Usage = field(default_factory=Usage)
    cached: bool = False
    replay: bool = False
    seconds: float = 0.0
    truncated: bool = False

    def to_json(self) -> dict:
        return {"text": self.text, "model": self.model, "usage": self.usage.to_json(), "truncated": self.truncated}


class LLMClient(abc.ABC):
    """One model behind one provider. ``spec`` is what the user wrote (``openai:gpt-4o``)."""

    spec: str
    is_replay: bool = False

    @abc.abstractmethod
    async def complete(self, request: LLMRequest, sample: int) -> LLMReply:
        """One attempt; raises LLMCallError. Retries and timeouts belong to the pool."""

    async def close(self) -> None:
        return None


RETRYABLE_STATUS = {408, 409, 429}


def is_retryable_status(status: int | None) -> bool:
    return status is not None and (status in RETRYABLE_STATUS or status >= 500)


def short(exc: BaseException) -> str:
    text = str(exc)
    return text if len(text) < 300 else text[:300] + "…"


def retry_after_seconds(headers: object) -> float | None:
    """``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date) from a response."""
    get = getattr(headers, "get", None)
    if get is None:
        return None
    try:
        ms = get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000.0)
        value = get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            import email.utils
            import time

            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError, OverflowError):
        return None


def malformed(spec: str, exc: BaseException) -> "LLMCallError":
    """A reply that cannot be decoded (invalid UTF-8, not JSON, wrong shape): one failed
    call, not retried (the same request would get the same answer), never a failed run."""
    return LLMCallError(f"{spec}: malformed reply ({type(exc).__name__}: {short(exc)})".replace("\n", " "), False)


@contextmanager
def sdk_errors(sdk: ModuleType, base_error: type[Exception], spec: str) -> Iterator[None]:
    """Map an official SDK's exceptions (openai and anthropic share the names) to
    LLMCallError, marking which ones are worth a retry."""
    try:
        yield
    except sdk.APIStatusError as exc:
        raise LLMCallError(
            f"{spec}: HTTP {exc.status_code}: {short(exc)}", is_retryable_status(exc.status_code), exc.status_code,
            retry_after_seconds(getattr(getattr(exc, "response", None), "headers", None)),
        ) from exc
    except sdk.APITimeoutError as exc:
        raise LLMCallError(f"{spec}: request timed out", True) from exc
    except sdk.APIConnectionError as exc:
        raise LLMCallError(f"{spec}: connection failed: {short(exc)}", True) from exc
    except sdk.APIResponseValidationError as exc:
        raise malformed(spec, exc) from exc
    except base_error as exc:
        raise LLMCallError(f"{spec}: {short(exc)}", False) from exc
    except (ValueError, TypeError, KeyError, AttributeError, IndexError) as exc:  # undecodable body
        raise malformed(spec, exc) from exc
