"""Helpers for the prompt checks (a uniquely named module so it never collides with other
test folders' helpers): rendering every prompt of every shipped example, and the names an
API text mentions."""

from __future__ import annotations

import glob
import re
from pathlib import Path

from autocomp.backends import get_backend
from autocomp.model import Candidate, Evaluation, Metric, Verdict
from autocomp.prompting import implement_request, plan_request, repair_request
from autocomp.prompts import PromptPieces, pieces_for_problem

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = {
    "gemmini": sorted(glob.glob(str(ROOT / "examples/gemmini/*.c"))),
    "nki": sorted(glob.glob(str(ROOT / "examples/nki/*.py"))),
    "cuda": sorted(glob.glob(str(ROOT / "examples/cuda/*.py")) + glob.glob(str(ROOT / "examples/cuda/*.cu"))),
}
SETTINGS = {"cuda": {"gpu": "off"}}


def problem_pieces(target: str, path: str, settings: dict | None = None):
    backend = get_backend(target, {**SETTINGS.get(target, {}), **(settings or {})})
    text = Path(path).read_text()
    problem = backend.make_problem(path, text)
    return backend, problem, pieces_for_problem(backend.prompt_pieces(), path, backend.prompt_context(problem))


def worst_case_prompts(pieces: PromptPieces, name: str, code: str) -> dict[str, int]:
    """Sizes (system + user characters) of the largest plan, implement and repair prompts
    the engine can render for this code: the whole menu, the longest evaluator notes and
    feedback the templates keep, a full list of tried plans, a long plan."""
    start = Candidate(id="start", code=code, evaluation=Evaluation(
        Verdict.CORRECT, metrics={"cycles": Metric(1e6, "cycles", "model"), "other": Metric(1.0, "x", "model")},
        feedback="n" * 20000))
    tried = [(Candidate(id=f"i1.b0.p{j}.k0", code="", plan="Plan: " + "t" * 300, parent="start", iteration=1),
              "incorrect: " + "o" * 200) for j in range(20)]
    plan = plan_request(pieces, name, start, [start], list(pieces.menu), 2, 8, "cycles", "tier", tried=tried,
                        explore=True, headroom="h" * 400)
    implement = implement_request(pieces, name, start, "Plan: " + "p" * 4000)
    failed = Candidate(id="i1.b0.p0.k0", code=code, plan="Plan: " + "p" * 4000, parent="start", iteration=1,
                       evaluation=Evaluation(Verdict.COMPILE_ERROR, feedback="e" * 50000))
    repair = repair_request(pieces, name, failed, start)
    return {kind: len(r.system) + len(r.user) for kind, r in (("plan", plan), ("implement", implement), ("repair", repair))}


_NAME = re.compile(r"(?<![\w.])(nl|nisa)\.([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?)")


def api_names(text: str) -> set[str]:
    """``nl.x`` / ``nisa.x`` / ``nl.tile_size.pmax`` names an API text mentions."""
    return {f"{m.group(1)}.{m.group(2)}" for m in _NAME.finditer(text)}
