"""Every prompt of every shipped example renders within its target's size budget, and the
plan / repair prompts carry what the engine promises: worked examples in the plan phase,
the headroom line, plans already tried with their outcome, the exploration variant, the
head and tail of long evaluator output, wrong results as repairable, the parent's code."""

from __future__ import annotations

import pytest

from autocomp.model import Candidate, Evaluation, Metric, Verdict
from autocomp.prompting import head_and_tail, outcome, plan_request, repair_request
from autocomp.prompts import budget, load_pieces

from promptkit import EXAMPLES, problem_pieces, worst_case_prompts

CASES = [(t, p) for t, paths in EXAMPLES.items() for p in paths]


@pytest.mark.parametrize("target,path", CASES, ids=[p.rsplit("/", 1)[-1] for _, p in CASES])
def test_every_prompt_renders_within_its_budget(target, path):
    _, problem, pieces = problem_pieces(target, path)
    sizes = worst_case_prompts(pieces, problem.name, problem.code)
    for kind, size in sizes.items():
        limit = budget(pieces, kind)
        assert limit, f"prompts/{target}/target.toml has no [budget] {kind}"
        assert size <= limit, f"{path}: {kind} prompt is {size:,} characters, budget {limit:,}"


@pytest.mark.parametrize("path", EXAMPLES["gemmini"], ids=[p.rsplit("/", 1)[-1] for p in EXAMPLES["gemmini"]])
def test_lean_gemmini_prompts_render_within_the_budget(path):
    """The Lean build's section (prompts/gemmini/lean.md) fits in the same budget."""
    _, problem, pieces = problem_pieces("gemmini", path, {"image": "lean"})
    assert "FireSimLeanGemminiRocketConfig" in pieces.description
    for kind, size in worst_case_prompts(pieces, problem.name, problem.code).items():
        assert size <= budget(pieces, kind), f"{path}: lean {kind} prompt is {size:,} characters"


def _start(code="int k(void) { return 0; }", feedback="ok"):
    return Candidate(id="start", code=code, evaluation=Evaluation(
        Verdict.CORRECT, metrics={"cycles": Metric(1000.0, "cycles", "model")}, feedback=feedback))


def test_plan_prompt_has_examples_headroom_tried_plans_and_menu():
    pieces = load_pieces("gemmini")
    start = _start()
    faster = Candidate(id="i1.b0.p0.k0", code="x", plan="Plan: tile the loops\nmore", parent="start", iteration=1,
                       evaluation=Evaluation(Verdict.CORRECT, metrics={"cycles": Metric(500.0, "cycles", "model")}))
    broken = Candidate(id="i1.b0.p1.k0", code="x", plan="Plan: use loop_ws", parent="start", iteration=1,
                       evaluation=Evaluation(Verdict.COMPILE_ERROR, feedback="kernel.c:3: error: bad\nmore"))
    tried = [(c, outcome(c, start, "cycles")) for c in (faster, broken)]
    r = plan_request(pieces, "k", start, [start], ["option A"], 2, 8, "cycles", "tier", tried=tried, headroom="floor 10 cycles")
    assert "# Worked examples" in r.system and pieces.examples[:200] in r.system
    assert "- headroom: floor 10 cycles" in r.user
    assert "Plan: tile the loops → correct, 2.00x (faster" in r.user
    assert "Plan: use loop_ws → compile-error: kernel.c:3: error: bad" in r.user
    assert "Pick ONE optimization from this menu" in r.user and "1. option A" in r.user
    explore = plan_request(pieces, "k", start, [start], ["option A"], 2, 8, "cycles", "tier", explore=True)
    assert "of YOUR OWN" in explore.user and "Pick ONE" not in explore.user and "- none yet" in explore.user


def test_long_feedback_keeps_its_head_and_tail():
    text = "error: the first one\n" + "noise\n" * 5000 + "summary at the end"
    kept = head_and_tail(text)
    assert kept.startswith("error: the first one") and kept.endswith("summary at the end")
    assert "characters omitted" in kept and len(kept) < 4200


@pytest.mark.parametrize("verdict", [Verdict.COMPILE_ERROR, Verdict.RUNTIME_ERROR, Verdict.INCORRECT])
def test_repair_prompt_shows_the_first_error_and_the_parents_code(verdict):
    assert verdict.repairable
    pieces = load_pieces("gemmini")
    parent = _start(code="void k(void) { /* the working parent */ }")
    failed = Candidate(id="i1.b0.p0.k0", code="void k(void) { broken }", plan="Plan: x", parent="start", iteration=1,
                       evaluation=Evaluation(verdict, feedback="FIRST PROBLEM\n" + "x" * 10000 + "\nLAST LINE"))
    r = repair_request(pieces, "k", failed, parent)
    assert "FIRST PROBLEM" in r.user and "LAST LINE" in r.user
    assert "the working parent" in r.user and "REPAIR REQUEST" in r.user
    assert ("computes wrong results" in r.user) == (verdict is Verdict.INCORRECT)


def test_gemmini_prompts_state_the_dataflow_roles_and_do_not_offer_the_library():
    pieces = load_pieces("gemmini")
    for option in pieces.menu:
        if "tiled_conv_auto" in option or "tiled_matmul_auto" in option:
            assert "baseline" in option, option
        assert "preload D" not in option, option
    assert "weight (B) tile" in pieces.description and "Output-stationary" in pieces.description
    assert "dataflow argument of `config_ex` may change" in pieces.rules
    assert "When a tile or block grows" in pieces.rules


def test_gemmini_headroom_uses_the_configured_array():
    from autocomp.backends.gemmini.headroom import model_constants

    backend, problem, _ = problem_pieces("gemmini", [p for p in EXAMPLES["gemmini"] if p.endswith("gemm_512.c")][0])
    line = backend.headroom(problem, Evaluation(Verdict.CORRECT, metrics={"cycles": Metric(1_048_576.0, "cycles", "m")}))
    dim = model_constants()["DIM"]
    assert f"{512 ** 3 // (dim * dim):,} cycles" in line and f"{dim}x{dim} PEs" in line and "2.0x" in line


def test_nki_headroom_names_the_busiest_engine():
    backend, problem, _ = problem_pieces("nki", EXAMPLES["nki"][0])
    feedback = ("Estimated 10,000 cycles (nki estimate).\n1 instructions. Per engine:\n"
                "  TensorE       16 instr         4,000 busy   40.0%\n  DMA           16 instr         8,000 busy   80.0%\n")
    line = backend.headroom(problem, Evaluation(Verdict.CORRECT, metrics={"cycles": Metric(10_000.0, "cycles", "e")},
                                                feedback=feedback))
    assert "8,000 cycles (DMA" in line and "1.25x" in line


@pytest.mark.parametrize("target", ["gemmini", "nki"])
def test_authored_session_rules_do_not_match_the_static_prompt_text(target):
    """Plan rules of the authored sessions match a line of the parent's code; if the same
    line were in the description, API text or worked examples (now in every plan prompt),
    every prompt would match the rule and the recorded sessions would go wrong."""
    import glob
    import json

    from autocomp.prompts import load_pieces
    from promptkit import ROOT

    pieces = load_pieces(target)
    static = "\n".join([pieces.description, pieces.rules, pieces.examples, *pieces.menu,
                        *(s["text"] for s in pieces.extra.get("sections", []))])
    for script in glob.glob(str(ROOT / "examples" / target / "**" / "*.script.json"), recursive=True):
        for rule in json.load(open(script))["rules"]:
            for m in rule.get("match", []):
                assert m.endswith("REQUEST") or m not in static, f"{script}: {m!r} occurs in the {target} prompt text"
