"""The engine's front door (autocomp.run) and the one re-anchoring rule (autocomp.anchor):
the CLI, the server and tune-on-save reach the search, the pool, the diff, detection and
re-anchoring only through them (issue 13, item 1)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from autocomp.anchor import Conflict, apply_placement, merge3, place
from autocomp.config import SearchConfig
from autocomp.run import RunSetupError, RunSpec, resolve_config, resolve_llms, session_settings, unified_diff

ROOT = Path(__file__).resolve().parents[2]
ORIGINAL = "kernel a {\n  x = 1\n  y = 2\n  z = 3\n}\n"
CANDIDATE = "kernel a {\n  x = 1\n  y = 20\n  z = 3\n}\n"


def test_in_place_moved_and_nearest():
    text = "top\n" + ORIGINAL + "tail\n"
    p = place(text, ORIGINAL, 1, CANDIDATE)
    assert (p.start, p.end, p.merged) == (1, 6, False)
    assert apply_placement(text, p) == "top\n" + CANDIDATE + "tail\n"
    moved = "new\nlines\n" + text
    assert place(moved, ORIGINAL, 1, CANDIDATE).start == 3
    twice = ORIGINAL + "mid\n" * 10 + ORIGINAL
    assert place(twice, ORIGINAL, 14, CANDIDATE).start == 15  # the occurrence nearest its old place
    assert place(twice, ORIGINAL, 2, CANDIDATE).start == 0


def test_edit_inside_the_kernel_is_merged_when_lines_differ():
    mine = ORIGINAL.replace("  z = 3\n", "  z = 3  // my note\n")
    text = "top\n" + mine
    p = place(text, ORIGINAL, 1, CANDIDATE, current=(1, 6))
    assert p.merged
    assert apply_placement(text, p) == "top\n" + CANDIDATE.replace("  z = 3\n", "  z = 3  // my note\n")


def test_conflicting_edit_says_which_lines():
    mine = ORIGINAL.replace("  y = 2\n", "  y = 7\n")
    with pytest.raises(Conflict) as info:
        place(mine, ORIGINAL, 0, CANDIDATE, current=(0, 5))
    assert "kernel line 3" in str(info.value) and "touch the same lines" in str(info.value)
    with pytest.raises(Conflict, match="no longer in the file"):
        place("nothing here\n", ORIGINAL, 0, CANDIDATE, current=None)


def test_merge3_insertions_and_identical_changes():
    base = "a\nb\nc\n"
    assert merge3(base, "a\nb\nc\nd\n", "A\nb\nc\n") == "A\nb\nc\nd\n"
    assert merge3(base, "a\nB\nc\n", "a\nB\nc\n") == "a\nB\nc\n"  # the same change on both sides


def test_cli_rewrite_uses_the_rule(tmp_path):
    from autocomp.cli.rewrite import StaleKernel, rewrite_kernel
    from autocomp.testing.scripted_backend import ScriptedBackend

    backend = ScriptedBackend({})
    text = "// notes\nkernel scale {\n  result = 42\n  cost = 1000\n}\n"
    problem = backend.make_problem(str(tmp_path / "k.kern"), text)
    new = "kernel scale {\n  result = 42\n  cost = 10\n}\n"
    edited_elsewhere = "// more notes\n" + text
    assert rewrite_kernel(edited_elsewhere, problem, new, backend) == "// more notes\n// notes\n" + new
    edited_inside = text.replace("  result = 42\n", "  result = 42\n  // keep\n")
    merged = rewrite_kernel(edited_inside, problem, new, backend)
    assert "// keep" in merged and "cost = 10" in merged
    clash = text.replace("cost = 1000", "cost = 999")
    with pytest.raises(StaleKernel, match="touch the same lines"):
        rewrite_kernel(clash, problem, new, backend)


def test_one_diff():
    assert unified_diff("a\n", "b\n", "k.c").startswith("--- a/k.c\n+++ b/k.c\n")
    assert unified_diff("a\n", "b\n", "x (original)", "x (c1)").startswith("--- x (original)\n+++ x (c1)\n")


def test_llms_resolved_the_same_everywhere(tmp_path, monkeypatch):
    monkeypatch.delenv("AUTOCOMP_LLM", raising=False)
    kernel = tmp_path / "k.kern"
    kernel.write_text("x")
    assert resolve_llms(["openai:m"], str(kernel)) == ["openai:m"]
    with pytest.raises(RunSetupError, match="no LLM given"):
        resolve_llms([], str(kernel))
    session = tmp_path / "k.session.jsonl"
    session.write_text(json.dumps({"autocomp_session": 1, "search": {"iterations": 2, "beam": 1, "llm_timeout": 9}}) + "\n")
    assert resolve_llms([], str(kernel)) == [f"replay:{session}"]
    monkeypatch.setenv("AUTOCOMP_LLM", "anthropic:a, openai:b")
    assert resolve_llms([], str(kernel)) == ["anthropic:a", "openai:b"]


def test_replay_uses_the_sessions_settings_under_explicit_ones(tmp_path):
    session = tmp_path / "k.session.jsonl"
    session.write_text(json.dumps({"autocomp_session": 1, "search": {"iterations": 2, "beam": 1, "llm_timeout": 9}}) + "\n")
    specs = [f"replay:{session}"]
    assert session_settings(specs) == {"iterations": 2, "beam": 1}  # only what decides the prompts
    config = resolve_config(RunSpec(overrides={"beam": 3}), specs)
    assert (config.iterations, config.beam, config.plans) == (2, 3, SearchConfig().plans)
    assert session_settings(["openai:x"] + specs) == {}  # live models: the defaults
    old = tmp_path / "old.session.jsonl"
    old.write_text(json.dumps({"autocomp_session": 1, "note": "before sessions carried settings"}) + "\n")
    assert resolve_config(RunSpec(), [f"replay:{old}"]) == SearchConfig()  # old sessions stay readable


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.update(f"{node.module}.{a.name}" for a in node.names)
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def test_cli_and_server_reach_the_engine_only_through_the_front_door():
    fronts = list((ROOT / "autocomp" / "cli").glob("*.py")) + list((ROOT / "server").rglob("*.py"))
    forbidden = {"autocomp.search", "autocomp.search.BeamSearch", "autocomp.llm.build_pool", "difflib"}
    for path in fronts:
        bad = _imports(path) & forbidden
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}: go through autocomp.run"
    # one detection loop: only autocomp.run calls backend.detect across targets
    for path in fronts:
        text = path.read_text()
        assert "for name in REAL_TARGETS" not in text and "detect_target(" not in text, path
