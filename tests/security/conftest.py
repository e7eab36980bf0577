"""The attacker's test bench: dummy API keys in the environment, a canary file on the host,
a path that must never come to exist, and a real store the verdict flows into.

Every attack in this folder evaluates a hostile candidate through the real
:class:`autocomp.evaluator.Evaluator` and asserts, besides "it did not win", that nothing
left the jail: the canary is unchanged, the forbidden path does not exist, and no key value
appears in any output, feedback or store entry.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import pytest

from autocomp.evaluator import Evaluator
from autocomp.model import Evaluation, Problem
from autocomp.store import Store

KEY_NAMES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AWS_SECRET_ACCESS_KEY", "HF_TOKEN", "GITHUB_TOKEN")


@dataclass
class Hostile:
    keys: dict[str, str]
    canary: Path
    forbidden: Path
    store_dir: Path
    _canary_digest: str = ""
    _canary_mtime: float = 0.0
    outputs: list[str] = field(default_factory=list)

    async def evaluate(self, backend, problem: Problem, code: str) -> Evaluation:
        """Evaluate ``code`` through the real evaluator with a real store (so anything a
        candidate smuggles into its result would land in the store)."""
        store = Store.open(self.store_dir)
        try:
            evaluation = (await Evaluator(backend, store).evaluate(problem, [code]))[0]
        finally:
            store.close()
        self.outputs.append(repr(evaluation.to_json()))
        return evaluation

    def check(self, *texts: str) -> None:
        """Nothing escaped: canary intact, forbidden path absent, no key anywhere."""
        assert self.canary.exists(), "the canary file was removed"
        assert hashlib.sha256(self.canary.read_bytes()).hexdigest() == self._canary_digest, "the canary was modified"
        assert self.canary.stat().st_mtime == self._canary_mtime, "the canary was touched"
        assert not self.forbidden.exists(), f"{self.forbidden} was created from inside the sandbox"
        haystacks: list[tuple[str, bytes]] = [(f"text #{i}", t.encode("utf-8", "replace")) for i, t in enumerate(texts)]
        haystacks += [(f"evaluation #{i}", t.encode()) for i, t in enumerate(self.outputs)]
        if self.store_dir.exists():
            for path in self.store_dir.rglob("*"):
                if path.is_file():
                    haystacks.append((str(path), path.read_bytes()))
        canary_text = self.canary.read_bytes().strip()
        for where, data in haystacks:
            for name, value in self.keys.items():
                assert value.encode() not in data, f"{name} leaked into {where}"
            assert canary_text not in data, f"the canary's contents leaked into {where}"


@pytest.fixture
def hostile(tmp_path_factory, monkeypatch) -> Hostile:
    keys = {name: f"canary-{name.lower()}-{secrets.token_hex(12)}" for name in KEY_NAMES}
    for name, value in keys.items():
        monkeypatch.setenv(name, value)
    host = tmp_path_factory.mktemp("host-secrets")
    canary = host / "canary.txt"
    canary.write_text(f"CANARY-{secrets.token_hex(16)}\n")
    forbidden = host / "pwned"
    store_dir = tmp_path_factory.mktemp("attack-store") / "home"
    h = Hostile(keys, canary, forbidden, store_dir)
    h._canary_digest = hashlib.sha256(canary.read_bytes()).hexdigest()
    h._canary_mtime = canary.stat().st_mtime
    return h


def not_better(attack: Evaluation, honest: Evaluation, metric: str) -> bool:
    """True when the attack did not win: not correct, or not faster than the honest kernel."""
    if attack.verdict.value != "correct":
        return True
    a, h = attack.metrics.get(metric), honest.metrics.get(metric)
    return a is not None and h is not None and a.value >= h.value


def substitute(template: str, hostile: Hostile, **extra: str) -> str:
    """Fill a hostile candidate's placeholders (CANARY, FORBIDDEN, ...)."""
    values = {"CANARY": str(hostile.canary), "FORBIDDEN": str(hostile.forbidden), **extra}
    for key, value in values.items():
        template = template.replace("{{" + key + "}}", value)
    return template


__all__: Sequence[str] = ("Hostile", "hostile", "not_better", "substitute")
