"""Tunable constants of a Gemmini kernel (``autocomp tune``; see :mod:`autocomp.tuning`).

Tunables: ``#define``s and ``const`` integers with a decimal value that the kernel uses and
that are not part of the problem (not in the signature, not used outside the kernel).
Proposed values: powers of two from an eighth to eight times the current value. Rules:
divisibility of the loops' bounds and of ``X / T`` by the tile constants, and for each
``gemmini_loop_ws(I, J, K, …)`` the limits the hardware loop has (Gemmini RTL LoopMatmul, as
our model enforces them): ``I*J*DIM`` at most half the accumulator, the A block
(``I*K*DIM`` rows) and the B block (``K*J*DIM`` rows) each at most half the scratchpad, both
together when they share a half, bounds below 2^16.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any

from autocomp.backends.cscan import mask, split_top_level
from autocomp.backends.ctunables import (
    define_env, divisibility_rules, find_constants, kernel_signature, span_offsets, to_tunable, usage,
)
from autocomp.model import Problem
from autocomp.tuning.space import (
    Constraint, NotConstant, Space, apply_user_ranges, c_eval, names_in, parse_directives, powers_of_two_around,
    require_constraints,
)

SIZES = {"elem_t": 1, "acc_t": 4, "int8_t": 1, "int32_t": 4, "uint32_t": 4, "int": 4}


@lru_cache(maxsize=1)
def hardware_env() -> dict[str, int]:
    """DIM, BANK_NUM, BANK_ROWS, ACC_ROWS, … from our gemmini.h."""
    path = os.path.join(os.path.dirname(__file__), "include", "gemmini.h")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        text = ""
    env = define_env([text])
    env.setdefault("DIM", 16)
    env.setdefault("BANK_NUM", 4)
    env.setdefault("BANK_ROWS", 4096)
    env.setdefault("ACC_ROWS", 1024)
    env["SP_ROWS"] = env["BANK_NUM"] * env["BANK_ROWS"]
    return env


def find_space(problem: Problem, backend: Any = None) -> Space:
    text = problem.file_text
    s, e = problem.span.start_line, problem.span.end_line
    directives = parse_directives(text)
    hw = hardware_env()
    env = {**hw, **define_env([text])}
    signature = kernel_signature(text, s, e, problem.name)
    tunables = []
    for f in find_constants(text, s, e):
        inside, outside, in_sig = usage(text, s, e, f, signature)
        named = f.name in directives.ranges
        if directives.ranges and not named:
            continue
        if not named and (not inside or outside or in_sig or f.name in hw):
            continue
        values = powers_of_two_around(f.value, 1, 1 << 15)
        tunables.append(to_tunable(f, values, "powers of two around the current value, pruned by the scratchpad, "
                                              "accumulator and the problem's shapes"))
    apply_user_ranges(tunables, directives)
    names = {t.name for t in tunables}
    for n in names:
        env.pop(n, None)
    constraints = divisibility_rules(text, s, e, names, env, SIZES) + loop_ws_rules(text, s, e, names)
    constraints += require_constraints(directives, lambda expr, en: c_eval(expr, en, SIZES))
    notes = list(directives.errors)
    return Space(tunables, constraints, text, s, e, "c", env=env, notes=notes, directive_lines=directives.lines)


def loop_ws_rules(text: str, start_line: int, end_line: int, names: set[str]) -> list[Constraint]:
    s0, s1 = span_offsets(text, start_line, end_line)
    clean = mask(text)
    rules: list[Constraint] = []
    import re

    for m in re.finditer(r"\bgemmini_loop_ws\s*\(", clean[s0:s1]):
        from autocomp.backends.cscan import match_bracket

        open_at = s0 + m.end() - 1
        close = match_bracket(clean, open_at)
        if close <= 0:
            continue
        args = split_top_level(clean[open_at + 1 : close])
        if len(args) < 22 or not (names_in(" ".join(args[:3])) & names):
            continue
        i, j, k, a_id, b_id = args[0], args[1], args[2], args[20], args[21]

        def val(expr: str, env: dict[str, int]) -> int:
            return c_eval(expr, env, SIZES)

        def acc(env: dict[str, int], i: str = i, j: str = j) -> bool:
            return val(i, env) * val(j, env) * env["DIM"] <= env["ACC_ROWS"] // 2

        def spad(env: dict[str, int], i: str = i, j: str = j, k: str = k, a_id: str = a_id, b_id: str = b_id) -> bool:
            half = env["SP_ROWS"] // 2
            a_rows = val(i, env) * val(k, env) * env["DIM"]
            b_rows = val(k, env) * val(j, env) * env["DIM"]
            if a_rows > half or b_rows > half:
                return False
            try:
                same = val(a_id, env) == val(b_id, env)
            except NotConstant:
                same = False
            return not same or a_rows + b_rows <= half

        def bounds(env: dict[str, int], i: str = i, j: str = j, k: str = k) -> bool:
            return all(0 < val(x, env) < 1 << 16 for x in (i, j, k))

        rules.append(Constraint(f"gemmini_loop_ws: I*J*DIM = ({i})*({j})*DIM within half the accumulator", acc))
        rules.append(Constraint(f"gemmini_loop_ws: A ({i})*({k})*DIM and B ({k})*({j})*DIM rows within half the scratchpad", spad))
        rules.append(Constraint("gemmini_loop_ws: bounds between 1 and 65535", bounds))
    return rules
