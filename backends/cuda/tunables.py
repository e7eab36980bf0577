"""Tunable constants of a CUDA kernel (``autocomp tune``; see :mod:`autocomp.tuning`).

Tunables: ``#define``s and ``const``/``constexpr`` integers the kernel uses (not part of the
problem: not in the entry's signature, not used outside the kernel), and in a ``.cu`` entry
the block size of a ``<<<grid, block>>>`` launch held in an ``int`` variable
(``int threads = 128;``). Proposed values: a block size is a multiple of 32 up to 1024 (the
powers of two 32…1024); other constants powers of two from an eighth to eight times their
value. Rules: threads per block at most 1024 and a multiple of 32, divisibility of loop
bounds and of ``X / T`` by the constants.
"""

from __future__ import annotations

import re
from typing import Any

from autocomp.backends.ctunables import (
    define_env, divisibility_rules, find_constants, kernel_signature, to_tunable, usage,
)
from autocomp.model import Problem
from autocomp.tuning.space import (
    Constraint, Space, apply_user_ranges, c_eval, parse_directives, powers_of_two_around, require_constraints,
)

MAX_THREADS = 1024
WARP = 32
SIZES = {"float": 4, "double": 8, "int": 4, "half": 2, "__half": 2, "__nv_bfloat16": 2, "char": 1}


def find_space(problem: Problem, backend: Any = None) -> Space:
    text = problem.file_text
    s, e = problem.span.start_line, problem.span.end_line
    if not problem.path.endswith((".cu", ".cuh")) and "<<<" not in text and "#define" not in text and "const" not in text:
        return Space([], [], text, s, e, "c")
    directives = parse_directives(text)
    env = define_env([text])
    signature = kernel_signature(text, s, e, problem.name)
    tunables = []
    block_names: set[str] = set()
    for f in find_constants(text, s, e, launch=True):
        inside, outside, in_sig = usage(text, s, e, f, signature)
        named = f.name in directives.ranges
        if directives.ranges and not named:
            continue
        if not named and (not inside or outside or in_sig):
            continue
        if f.kind == "launch" or _is_block_size(text, f.name):
            block_names.add(f.name)
            values = [v for v in (32, 64, 128, 256, 512, 1024)]
            note = "threads per block: multiples of 32 up to 1024"
        else:
            values = powers_of_two_around(f.value, 1, 1 << 15)
            note = "powers of two around the current value"
        tunables.append(to_tunable(f, values, note))
    apply_user_ranges(tunables, directives)
    names = {t.name for t in tunables}
    for n in names:
        env.pop(n, None)
    constraints = [
        Constraint(f"{n}: threads per block at most {MAX_THREADS} and a multiple of {WARP}",
                   lambda en, n=n: 0 < en[n] <= MAX_THREADS and en[n] % WARP == 0)
        for n in sorted(block_names & names)
    ]
    constraints += divisibility_rules(text, s, e, names, env, SIZES)
    constraints += require_constraints(directives, lambda expr, en: c_eval(expr, en, SIZES))
    return Space(tunables, constraints, text, s, e, "c", env=env, notes=list(directives.errors),
                 directive_lines=directives.lines)


def _is_block_size(text: str, name: str) -> bool:
    """``NAME`` is the block argument of a launch or ``__launch_bounds__``."""
    for m in re.finditer(r"<<<([^,>]+),([^,>]+)", text):
        if re.search(rf"\b{re.escape(name)}\b", m.group(2)):
            return True
    return bool(re.search(rf"__launch_bounds__\s*\(\s*{re.escape(name)}\b", text))
