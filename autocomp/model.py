"""Problems, candidates, metrics and verdicts: the nouns every part of Autocomp shares.

Everything here round-trips through plain JSON (``to_json``/``from_json``) so that the
store, the CLI's ``--json`` output, recorded sessions and the language server all speak
the same shapes, and nothing is ever ``eval``-ed or unpickled.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class Verdict(str, Enum):
    """Outcome of evaluating one piece of code. The string values are a public contract
    (``autocomp eval --json`` prints them)."""

    CORRECT = "correct"
    INCORRECT = "incorrect"
    REJECTED = "rejected"  # refused by static checks before running
    COMPILE_ERROR = "compile-error"
    RUNTIME_ERROR = "runtime-error"
    TIMEOUT = "timeout"
    UNVERIFIED = "unverified"  # built, but no tier here can check correctness
    NO_CODE = "no-code"  # the LLM reply held no usable code
    LLM_ERROR = "llm-error"  # the LLM call itself failed (after retries)
    PENDING = "pending"

    @property
    def correct(self) -> bool | None:
        """True/False when correctness was decided, None when it could not be."""
        if self is Verdict.CORRECT:
            return True
        if self in (Verdict.UNVERIFIED, Verdict.PENDING, Verdict.LLM_ERROR):
            return None
        return False

    @property
    def repairable(self) -> bool:
        """Failures whose evaluator output is worth feeding back for one repair: build and
        run failures, and wrong results (with the mismatch description)."""
        return self in (Verdict.COMPILE_ERROR, Verdict.RUNTIME_ERROR, Verdict.INCORRECT)


@dataclass(frozen=True)
class Metric:
    """One measured or estimated number, always with its unit and where it came from.

    ``source`` names the tier, e.g. ``gemmini timing model``, ``spike``, ``nki estimate``,
    ``cuda events, H100``. ``display`` renders ``412,330 cycles (gemmini timing model)``.
    """

    value: float
    unit: str
    source: str

    def display(self) -> str:
        v = self.value
        text = f"{int(v):,}" if float(v).is_integer() and abs(v) >= 1 else f"{v:.4g}"
        return f"{text} {self.unit} ({self.source})"

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "unit": self.unit, "source": self.source}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Metric":
        return cls(value=float(d["value"]), unit=str(d["unit"]), source=str(d["source"]))


@dataclass
class Evaluation:
    """What a backend says about one piece of code.

    ``confirmed`` is True only when the tier that produced the primary metric is one the
    server may act on (a simulator with a timing model, real hardware); estimates and
    compile-only tiers set it False so nothing is auto-applied on their word.
    """

    verdict: Verdict
    metrics: dict[str, Metric] = field(default_factory=dict)
    feedback: str = ""
    tier: str = ""
    confirmed: bool = False
    seconds: float = 0.0
    # How the candidate was isolated ("bwrap", or "off" when the user opted out); set by
    # the evaluator so every result shows it.
    sandbox: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict.value,
            "metrics": {k: m.to_json() for k, m in self.metrics.items()},
            "feedback": self.feedback,
            "tier": self.tier,
            "confirmed": self.confirmed,
            "seconds": self.seconds,
            "sandbox": self.sandbox,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Evaluation":
        return cls(
            verdict=Verdict(d["verdict"]),
            metrics={k: Metric.from_json(m) for k, m in d.get("metrics", {}).items()},
            feedback=d.get("feedback", ""),
            tier=d.get("tier", ""),
            confirmed=bool(d.get("confirmed", False)),
            seconds=float(d.get("seconds", 0.0)),
            sandbox=str(d.get("sandbox", "")),
        )


@dataclass(frozen=True)
class KernelSpan:
    """Where a kernel sits in a file: 0-based inclusive start line, exclusive end line.

    Lines rather than offsets because editors, diffs and humans all think in lines, and a
    kernel (a function, a class, a whole KernelBench file) always spans whole lines.
    """

    name: str
    target: str
    start_line: int
    end_line: int

    def text_of(self, file_text: str) -> str:
        lines = file_text.splitlines(keepends=True)
        return "".join(lines[self.start_line : self.end_line])

    def replace_in(self, file_text: str, new_kernel: str) -> str:
        lines = file_text.splitlines(keepends=True)
        if new_kernel and not new_kernel.endswith("\n"):
            new_kernel += "\n"
        return "".join(lines[: self.start_line]) + new_kernel + "".join(lines[self.end_line :])

    def contains_line(self, line: int) -> bool:
        return self.start_line <= line < self.end_line

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "KernelSpan":
        return cls(str(d["name"]), str(d["target"]), int(d["start_line"]), int(d["end_line"]))


@dataclass
class Problem:
    """One kernel in one file, ready to optimize.

    ``code`` is the kernel's starting text (the oracle every candidate is compared with);
    ``file_text`` is the whole file at the time the problem was made, so a backend can
    rebuild a candidate file by putting candidate code into ``span``.
    """

    path: str
    span: KernelSpan
    file_text: str
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def target(self) -> str:
        return self.span.target

    @property
    def name(self) -> str:
        return self.span.name

    @property
    def code(self) -> str:
        return self.span.text_of(self.file_text)

    def file_with(self, kernel_code: str) -> str:
        """The whole file with ``kernel_code`` in place of the original kernel."""
        return self.span.replace_in(self.file_text, kernel_code)

    def oracle_key(self) -> str:
        """Identity of the original's run (the reference a backend computes once): problems
        that differ only in how a candidate's file is assembled share it, so `eval FILE
        --against BASE` runs BASE's original once, not once per problem."""
        return self.content_hash()

    def content_hash(self) -> str:
        """Identity for caching: file, span and options (not the path: moving a file
        should not throw away its cache)."""
        payload = json.dumps(
            {"file": self.file_text, "span": self.span.to_json(), "options": self.options},
            sort_keys=True,
        )
        return sha256(payload)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "span": self.span.to_json(),
            "file_text": self.file_text,
            "options": self.options,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Problem":
        base = Problem(
            path=d["path"],
            span=KernelSpan.from_json(d["span"]),
            file_text=d["file_text"],
            options=dict(d.get("options", {})),
        )
        if "candidate_file" not in d:
            return base
        return CandidateFileProblem(
            base.path, base.span, base.file_text, base.options, str(d.get("candidate_code", "")), str(d["candidate_file"])
        )


@dataclass
class CandidateFileProblem(Problem):
    """``problem`` (the baseline's kernel is the oracle) with one whole candidate file, for
    ``autocomp eval FILE --against BASE``: ``file_with(candidate_code)`` is
    ``candidate_file`` itself (its own constants, helpers and imports), not the candidate
    code pasted into the baseline. The candidate's kernel starts on ``span.start_line`` of
    ``candidate_file`` as the baseline's does in ``file_text``."""

    candidate_code: str = ""
    candidate_file: str = ""

    def file_with(self, kernel_code: str) -> str:
        if kernel_code == self.candidate_code:
            return self.candidate_file
        return super().file_with(kernel_code)

    def content_hash(self) -> str:
        return sha256(super().content_hash() + "\0candidate-file\0" + sha256(self.candidate_file))

    def oracle_key(self) -> str:
        return super().content_hash()  # the baseline's original is the oracle, whatever the candidate file

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "candidate_code": self.candidate_code, "candidate_file": self.candidate_file}


@dataclass
class Usage:
    """Token and call accounting for one LLM call or a sum of them."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_calls: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, other: "Usage") -> None:
        self.calls += other.calls
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cached_calls += other.cached_calls

    def to_json(self) -> dict[str, int]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Usage":
        return cls(**{k: int(d.get(k, 0)) for k in ("calls", "input_tokens", "output_tokens", "cached_calls")})


@dataclass
class Candidate:
    """One version of the kernel: the start, or a child proposed by plan + implementation."""

    id: str
    code: str
    plan: str = ""
    parent: str | None = None
    iteration: int = 0
    models: list[str] = field(default_factory=list)
    evaluation: Evaluation = field(default_factory=lambda: Evaluation(Verdict.PENDING))
    repaired_from: str | None = None
    usage: Usage = field(default_factory=Usage)
    llm_seconds: float = 0.0

    @property
    def verdict(self) -> Verdict:
        return self.evaluation.verdict

    @property
    def metrics(self) -> dict[str, Metric]:
        return self.evaluation.metrics

    @property
    def feedback(self) -> str:
        return self.evaluation.feedback

    def plan_summary(self) -> str:
        """First meaningful line of the plan, for lenses, diagnostics and tables."""
        for line in self.plan.splitlines():
            s = line.strip().lstrip("#*-0123456789.) ").strip()
            if s:
                return s[:160]
        return "starting code" if self.parent is None else "(no plan text)"

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "code": self.code,
            "plan": self.plan,
            "parent": self.parent,
            "iteration": self.iteration,
            "models": list(self.models),
            "evaluation": self.evaluation.to_json(),
            "repaired_from": self.repaired_from,
            "usage": self.usage.to_json(),
            "llm_seconds": self.llm_seconds,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Candidate":
        return cls(
            id=d["id"],
            code=d["code"],
            plan=d.get("plan", ""),
            parent=d.get("parent"),
            iteration=int(d.get("iteration", 0)),
            models=list(d.get("models", [])),
            evaluation=Evaluation.from_json(d.get("evaluation", {"verdict": "pending"})),
            repaired_from=d.get("repaired_from"),
            usage=Usage.from_json(d.get("usage", {})),
            llm_seconds=float(d.get("llm_seconds", 0.0)),
        )


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def code_hash(code: str) -> str:
    """Hash used to drop duplicate candidates: whitespace at line ends does not count."""
    normalized = "\n".join(line.rstrip() for line in code.strip().splitlines())
    return sha256(normalized)[:16]


def speedup(baseline: Metric | None, candidate: Metric | None, lower_is_better: bool = True) -> float | None:
    """Baseline ÷ candidate for lower-is-better metrics (the inverse otherwise)."""
    if baseline is None or candidate is None:
        return None
    if baseline.value <= 0 or candidate.value <= 0:
        return None
    return baseline.value / candidate.value if lower_is_better else candidate.value / baseline.value
