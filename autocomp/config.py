"""Search settings: one dataclass shared by the CLI flags, the editor settings and the store
(a resumed run reads its settings back from here, so they must round-trip through JSON)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from autocomp.errors import UserError


class ConfigError(UserError, ValueError):
    """A setting out of range; the message names the setting and the allowed values."""


@dataclass
class SearchConfig:
    iterations: int = 8
    beam: int = 4
    plans: int = 4
    implementations: int = 2
    keep: float = 0.3  # probability that each menu option appears in one plan prompt
    explore_rate: float = 0.15  # share of plan prompts that invite the model's own optimization
    seed: int = 0
    min_improvement: float = 0.0  # a child must beat its parent by this fraction (0.05 = 5 %)
    repair: bool = True  # one repair attempt for compile/runtime failures, with the output fed back
    early_stop: int = 3  # stop after this many iterations without a new best (0 = never)
    tune_evals: int = 0  # evaluations to tune a new best's constants with (autocomp.tuning; 0 = off)
    budget_calls: int | None = None
    budget_tokens: int | None = None
    budget_seconds: float | None = None
    llm_timeout: float = 300.0  # overall seconds per LLM call, retries included
    llm_concurrency: int = 8
    llm_retries: int = 3

    def validate(self) -> "SearchConfig":
        checks = [
            ("iterations", self.iterations >= 1, "at least 1"),
            ("beam", self.beam >= 1, "at least 1"),
            ("plans", self.plans >= 1, "at least 1"),
            ("implementations", self.implementations >= 1, "at least 1"),
            ("keep", 0.0 <= self.keep <= 1.0, "between 0 and 1"),
            ("explore_rate", 0.0 <= self.explore_rate <= 1.0, "between 0 and 1"),
            ("min_improvement", 0.0 <= self.min_improvement < 1.0, "in [0, 1)"),
            ("early_stop", self.early_stop >= 0, "0 (never) or more"),
            ("tune_evals", self.tune_evals >= 0, "0 (off) or more"),
            ("llm_timeout", self.llm_timeout > 0, "positive"),
            ("llm_concurrency", self.llm_concurrency >= 1, "at least 1"),
            ("llm_retries", self.llm_retries >= 0, "0 or more"),
        ]
        for name, ok, allowed in checks:
            if not ok:
                raise ConfigError(f"{name} = {getattr(self, name)!r} is invalid: must be {allowed}")
        for name in ("budget_calls", "budget_tokens", "budget_seconds"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ConfigError(f"{name} = {value!r} is invalid: must be positive (or unset)")
        return self

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "SearchConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known}).validate()

    def with_overrides(self, **overrides: Any) -> "SearchConfig":
        """A copy with the non-None overrides applied (CLI flags left unset keep defaults)."""
        values = self.to_json()
        values.update({k: v for k, v in overrides.items() if v is not None})
        return SearchConfig.from_json(values)
