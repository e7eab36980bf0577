"""Optimization-menu dropout (the paper's remedy for LLMs proposing the same few ideas):
each plan prompt sees its own random subset of the target's menu, each option kept with
probability ``keep``. Randomness is derived from (seed, iteration, parent, plan index), so
the subsets do not depend on the order concurrent work finishes in."""

from __future__ import annotations

import hashlib
import random
from typing import Sequence


def rng_for(seed: int, *parts: object) -> random.Random:
    material = "\x1f".join([str(seed), *map(str, parts)]).encode()
    return random.Random(int.from_bytes(hashlib.sha256(material).digest()[:8], "big"))


def sample_menu(options: Sequence[str], keep: float, rng: random.Random) -> list[str]:
    """Each option independently with probability ``keep``, in menu order; never empty
    (an empty menu would leave the model with nothing to choose from, so one option is
    drawn uniformly instead)."""
    if not options:
        return []
    chosen = [option for option in options if rng.random() < keep]
    if not chosen:
        chosen = [options[rng.randrange(len(options))]]
    return chosen
