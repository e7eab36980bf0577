"""Assemble the two-phase prompts (plan, then implement) and the repair prompt from the
templates in ``prompts/common`` and the target's pieces in ``prompts/<target>``.

The split into a system part (stable per target) and a user part (per request) matters for
provider-side prompt caching; the ``---`` line in a template marks it.

What a plan prompt carries besides the code and its measurements: the worked examples
(in the system part), a headroom line from the backend (how far the measured figure is
from a hardware floor), the plans already tried on the same parent with their outcomes,
and either a menu to pick from or, for a share of prompts (``explore_rate``), an
invitation to propose the model's own optimization with the menu as reference.
"""

from __future__ import annotations

from string import Template
from typing import Sequence

from autocomp.backends import target_title
from autocomp.llm.base import LLMRequest
from autocomp.model import Candidate, Metric, Verdict
from autocomp.prompts import PromptPieces, read_text


# How much evaluator output a prompt quotes: the head (where the first compiler error is)
# and the tail (where the final summary is), with the middle elided.
FEEDBACK_HEAD = 2500
FEEDBACK_TAIL = 1500
PLAN_NOTES_LIMIT = 3000
TRIED_LIMIT = 8

MENU_CHOICE = (
    "Pick ONE optimization from this menu (or a close variant of one) that is most likely to make this $noun "
    "faster given the measurements above:"
)
EXPLORE_CHOICE = (
    "This time, propose an optimization of YOUR OWN: one that is not on the menu below and not among the plans "
    "already tried, chosen from what the measurements and the hardware description tell you (a combination of "
    "ideas counts if it is new). The menu only shows what other plans draw from:"
)


def _split(template_name: str, values: dict[str, str]) -> tuple[str, str]:
    text = Template(read_text(f"common/{template_name}.md")).safe_substitute(values)
    system, sep, user = text.partition("\n---\n")
    if not sep:
        return "", text.strip()
    return system.strip(), user.strip()


def head_and_tail(text: str, head: int = FEEDBACK_HEAD, tail: int = FEEDBACK_TAIL) -> str:
    """``text`` if short, else its first ``head`` and last ``tail`` characters with a note
    of what was left out (the first compiler error is at the head, the summary at the tail)."""
    text = text.strip()
    if len(text) <= head + tail + 80:
        return text
    omitted = len(text) - head - tail
    return f"{text[:head].rstrip()}\n[... {omitted:,} characters omitted ...]\n{text[-tail:].lstrip()}"


def format_metrics(metrics: dict[str, Metric], feedback: str = "", headroom: str = "") -> str:
    lines = [f"- {name}: {m.display()}" for name, m in metrics.items()]
    if headroom.strip():
        lines.append(f"- headroom: {headroom.strip()}")
    if feedback.strip():
        lines.append("Evaluator notes:\n" + head_and_tail(feedback, PLAN_NOTES_LIMIT - 1000, 1000))
    return "\n".join(lines) if lines else "- (no measurements)"


def format_history(path: list[Candidate], primary: str) -> str:
    if len(path) <= 1:
        return "- This is the starting code."
    lines = []
    for step in path:
        metric = step.metrics.get(primary)
        figure = metric.display() if metric else "not measured"
        label = "starting code" if step.parent is None else f"iteration {step.iteration}: {step.plan_summary()}"
        lines.append(f"- {label} → {figure}")
    return "\n".join(lines)


def outcome(child: Candidate, parent: Candidate, primary: str, lower_is_better: bool = True) -> str:
    """A short description of how a child of ``parent`` fared, for the plan prompt."""
    verdict = child.verdict
    if verdict is Verdict.CORRECT:
        c, p = child.metrics.get(primary), parent.metrics.get(primary)
        if c is None or p is None or not c.value or not p.value:
            return "correct, not measured"
        ratio = (p.value / c.value) if lower_is_better else (c.value / p.value)
        word = "faster" if ratio > 1.0 else "no faster"
        return f"correct, {ratio:.2f}x ({word}: {c.display()})"
    first = next((ln.strip() for ln in child.feedback.splitlines() if ln.strip()), "")
    return f"{verdict.value}" + (f": {first[:160]}" if first else "")


def format_tried(tried: Sequence[tuple[Candidate, str]]) -> str:
    """``(child, outcome)`` pairs, one line each, the same plan text listed once (with its
    outcomes joined)."""
    if not tried:
        return "- none yet"
    merged: dict[str, list[str]] = {}
    for child, result in tried:
        merged.setdefault(child.plan_summary(), []).append(result)
    lines = [f"- {summary} → {'; '.join(dict.fromkeys(results))}" for summary, results in merged.items()]
    if len(lines) > TRIED_LIMIT:
        lines = lines[-TRIED_LIMIT:]
    return "\n".join(lines)


def _common(pieces: PromptPieces, kernel: str) -> dict[str, str]:
    return {
        "target_title": target_title(pieces.target),  # the target's own declaration
        "description": pieces.description,
        "rules": pieces.rules,
        "examples": pieces.examples or "(none)",
        "language": pieces.language,
        "noun": pieces.noun,
        "kernel": kernel,
    }


def plan_request(
    pieces: PromptPieces,
    kernel: str,
    current: Candidate,
    path: list[Candidate],
    menu: list[str],
    iteration: int,
    iterations: int,
    primary: str,
    tier: str,
    *,
    tried: Sequence[tuple[Candidate, str]] = (),
    explore: bool = False,
    headroom: str = "",
    tuning: str = "",
) -> LLMRequest:
    values = _common(pieces, kernel)
    choice = Template(EXPLORE_CHOICE if explore else MENU_CHOICE).safe_substitute(noun=pieces.noun)
    values.update(
        {
            "code": current.code.rstrip("\n"),
            "metrics": format_metrics(current.metrics, current.feedback, headroom),
            "history": format_history(path, primary),
            "tried": format_tried(tried),
            "choice": choice,
            "menu": "\n".join(f"{i + 1}. {option}" for i, option in enumerate(menu)),
            "iteration": str(iteration),
            "iterations": str(iterations),
            "tier": tier,
            # With in-search tuning on (tune_evals > 0): the target's note that constants are
            # tuned automatically; empty otherwise, leaving the prompt as it was.
            "tuning": f"\n\n{tuning.strip()}" if tuning.strip() else "",
        }
    )
    system, user = _split("plan", values)
    return LLMRequest(system=system, user=user, kind="plan", max_tokens=4096)


def implement_request(pieces: PromptPieces, kernel: str, current: Candidate, plan: str) -> LLMRequest:
    values = _common(pieces, kernel)
    values.update({"code": current.code.rstrip("\n"), "plan": plan.strip()})
    system, user = _split("implement", values)
    return LLMRequest(system=system, user=user, kind="implement", max_tokens=16384)


_FAILURES = {
    Verdict.COMPILE_ERROR: "it failed to build",
    Verdict.RUNTIME_ERROR: "it failed while running",
    Verdict.TIMEOUT: "it ran out of time",
    Verdict.INCORRECT: "it computes wrong results: its outputs differ from what the original computes",
}


def repair_request(pieces: PromptPieces, kernel: str, failed: Candidate, parent: Candidate | None = None) -> LLMRequest:
    """Fix a candidate that failed to build or run, or computed wrong results. The
    evaluator's output is quoted head and tail (the first error is kept); the parent's
    working code is shown so the model can see what the plan changed."""
    values = _common(pieces, kernel)
    incorrect = failed.verdict is Verdict.INCORRECT
    if parent is not None and parent.code.strip():
        parent_text = (
            f"The version the plan started from (correct, and what the new code must still compute):\n\n"
            f"```{pieces.language}\n{parent.code.rstrip()}\n```\n"
        )
    else:
        parent_text = ""
    if incorrect:
        advice = (
            "Find what makes the results differ (indexing, tile bounds and edge tiles, overwrite versus accumulate, "
            "uninitialised or stale buffers, a missed part of the output) by comparing with the version above, and "
            "fix it while keeping the optimization; where part of the plan cannot be made correct, drop that part."
        )
    else:
        advice = "Fix the problem (the first error reported is usually the cause) while keeping the optimization."
    values.update(
        {
            "code": failed.code.rstrip("\n"),
            "plan": failed.plan.strip() or "(none)",
            "verdict": failed.verdict.value,
            "failure": _FAILURES.get(failed.verdict, "it failed"),
            "feedback": head_and_tail(failed.feedback) or "(no output)",
            "parent": parent_text,
            "advice": advice,
        }
    )
    system, user = _split("repair", values)
    return LLMRequest(system=system, user=user, kind="repair", max_tokens=16384)
