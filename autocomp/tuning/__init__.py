"""LLM-free autotuning of a kernel's integer constants: the space (:mod:`.space`) each
target's ``tunables`` module finds, and the Optuna-driven search over it (:mod:`.engine`)."""

from autocomp.tuning.space import Constraint, Directives, Space, Tunable, parse_directives

__all__ = ["Constraint", "Directives", "Space", "Tunable", "parse_directives"]
