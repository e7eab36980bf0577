"""Beam selection, kept pure so its rules can be property-tested.

A child survives only if it is correct and strictly better than its parent on the primary
metric (by at least ``min_improvement``, a fraction). The next beam is the best ``width``
of the old beam plus the surviving children, with duplicate code dropped (the best-ranked copy stays).
"""

from __future__ import annotations

from typing import Iterable

from autocomp.model import Candidate, Verdict, code_hash


def primary_value(candidate: Candidate, metric: str) -> float | None:
    m = candidate.metrics.get(metric)
    return None if m is None else m.value


def improves(child: Candidate, parent: Candidate, metric: str, lower_is_better: bool = True, min_improvement: float = 0.0) -> bool:
    if child.verdict is not Verdict.CORRECT:
        return False
    c, p = primary_value(child, metric), primary_value(parent, metric)
    if c is None or p is None:
        return False
    if lower_is_better:
        return c < p * (1.0 - min_improvement)
    return c > p * (1.0 + min_improvement)


def rank_key(candidate: Candidate, metric: str, lower_is_better: bool) -> tuple[float, str]:
    value = primary_value(candidate, metric)
    assert value is not None
    return (value if lower_is_better else -value, candidate.id)


def select_beam(
    old_beam: Iterable[Candidate],
    children: Iterable[Candidate],
    parents: dict[str, Candidate],
    width: int,
    metric: str,
    lower_is_better: bool = True,
    min_improvement: float = 0.0,
) -> list[Candidate]:
    pool: list[Candidate] = list(old_beam)
    for child in children:
        parent = parents.get(child.parent or "")
        if parent is not None and improves(child, parent, metric, lower_is_better, min_improvement):
            pool.append(child)
    pool.sort(key=lambda c: rank_key(c, metric, lower_is_better))
    seen: set[str] = set()
    unique: list[Candidate] = []
    for candidate in pool:  # best first, so of duplicate codes the best-measured one stays
        h = code_hash(candidate.code)
        if h in seen:
            continue
        seen.add(h)
        unique.append(candidate)
    return unique[:width]
