"""Assemble the two-phase prompts (plan, then implement) and the repair prompt from the
templates in ``prompts/common`` and the target's pieces in ``prompts/<target>``.

The split into a system part (stable per target) and a user part (per request) matters for
provider-side prompt caching; the ``---`` line in a template marks it.
"""

from __future__ import annotations

from string import Template

from autocomp.llm.base import LLMRequest
from autocomp.model import Candidate, Metric
from autocomp.prompts import PromptPieces, read_text

TITLES = {"gemmini": "the Gemmini systolic-array accelerator", "nki": "AWS Trainium (NKI kernels)", "cuda": "NVIDIA GPUs (CUDA)"}


def _split(template_name: str, values: dict[str, str]) -> tuple[str, str]:
    text = Template(read_text(f"common/{template_name}.md")).safe_substitute(values)
    system, sep, user = text.partition("\n---\n")
    if not sep:
        return "", text.strip()
    return system.strip(), user.strip()


def format_metrics(metrics: dict[str, Metric], feedback: str = "") -> str:
    lines = [f"- {name}: {m.display()}" for name, m in metrics.items()]
    if feedback.strip():
        lines.append("Evaluator notes:\n" + feedback.strip()[:3000])
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


def _common(pieces: PromptPieces, kernel: str) -> dict[str, str]:
    return {
        "target_title": TITLES.get(pieces.target, pieces.target),
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
) -> LLMRequest:
    values = _common(pieces, kernel)
    values.update(
        {
            "code": current.code.rstrip("\n"),
            "metrics": format_metrics(current.metrics, current.feedback),
            "history": format_history(path, primary),
            "menu": "\n".join(f"{i + 1}. {option}" for i, option in enumerate(menu)),
            "iteration": str(iteration),
            "iterations": str(iterations),
            "tier": tier,
        }
    )
    system, user = _split("plan", values)
    return LLMRequest(system=system, user=user, kind="plan", max_tokens=4096)


def implement_request(pieces: PromptPieces, kernel: str, current: Candidate, plan: str) -> LLMRequest:
    values = _common(pieces, kernel)
    values.update({"code": current.code.rstrip("\n"), "plan": plan.strip()})
    system, user = _split("implement", values)
    return LLMRequest(system=system, user=user, kind="implement", max_tokens=16384)


def repair_request(pieces: PromptPieces, kernel: str, failed: Candidate) -> LLMRequest:
    values = _common(pieces, kernel)
    values.update(
        {
            "code": failed.code.rstrip("\n"),
            "plan": failed.plan.strip() or "(none)",
            "verdict": failed.verdict.value,
            "feedback": failed.feedback.strip()[-4000:] or "(no output)",
        }
    )
    system, user = _split("repair", values)
    return LLMRequest(system=system, user=user, kind="repair", max_tokens=16384)
