"""Targets as plugins (issue 13, item 3): a target declares itself in its own package, and
nothing outside ``backends/<t>/`` and ``prompts/<t>/`` names a target.

A fourth target, the TinyTargetDouble (tests/server/tiny_target_double.py, a test double
declared as a plugin would be), registered from the test, flows through detection, the
prompts' title, reply fences, settings, the executor's device, the editors' language lists
and a real server subprocess (through ``AUTOCOMP_PLUGINS``)."""

from __future__ import annotations

import ast
import io
import json
import os
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest
import tiny_target_double
from lsp_harness import start_editor
from tiny_target_double import TARGET, TITLE

from autocomp import backends
from autocomp.backends import editor_files
from autocomp.testing.fake_llm import FakeLLMServer

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
SHIPPED = ("gemmini", "nki", "cuda")

TINY_KERNEL = "// a tiny kernel (test double target)\nkernel scale {\n  result = 42\n  cost = 1000\n}\n"


def tiny(cost: int, tag: str = "tiny") -> str:
    return f"Here it is.\n```{tag}\nkernel scale {{\n  result = 42\n  cost = {cost}\n}}\n```\n"


@pytest.fixture
def tiny_target():
    backends.register(TARGET)
    try:
        yield TARGET
    finally:
        backends.unregister(TARGET.name)


# -- the shipped targets declare themselves ------------------------------------------------
def test_shipped_targets_are_declared_in_their_own_packages():
    names = [t.name for t in backends.builtin_targets()]
    assert names == list(SHIPPED)
    for info in backends.builtin_targets():
        assert type(info).__module__ == "autocomp.backends.base"
        backend = backends.get_backend(info.name)
        assert backend.name == info.name
        assert set(backend.file_suffixes) == set(info.file_suffixes), info.name
        assert info.title and info.languages and info.fences and info.settings_help
    assert backends.plugin_errors() == []


def test_test_doubles_are_not_registered_in_production():
    """Only tests opt in: a plain process (no AUTOCOMP_PLUGINS) knows just the shipped targets."""
    env = {k: v for k, v in os.environ.items() if k != backends.PLUGINS_ENV}
    code = "from autocomp import backends; print(backends.all_target_names())"
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd="/", capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().replace("'", '"')) == list(SHIPPED)
    src = (ROOT / "backends" / "__init__.py").read_text()
    assert "scripted" not in src and "testing" not in src


def _string_literals(path: Path) -> list[tuple[int, str]]:
    """String constants that are not docstrings (behaviour, not prose)."""
    text = path.read_text(encoding="utf-8")
    docstrings = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                docstrings.add(first.lineno)
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.STRING and tok.start[0] not in docstrings:
            try:
                value = ast.literal_eval(tok.string)
            except (ValueError, SyntaxError):
                continue
            if isinstance(value, str):
                out.append((tok.start[0], value))
    return out


def test_no_target_is_named_outside_its_own_package():
    """No code outside backends/<t>/ (and the test doubles' autocomp/testing/) has a target's
    name as a value: behaviour comes from the declarations."""
    names = set(SHIPPED) | {"scripted"}
    offenders = []
    folders = [ROOT / "autocomp", ROOT / "server", ROOT / "backends"]
    for folder in folders:
        for path in folder.rglob("*.py"):
            rel = path.relative_to(ROOT)
            if rel.parts[0] == "backends" and len(rel.parts) > 2:
                continue  # a target's own package
            if rel.parts[:2] == ("autocomp", "testing"):
                continue  # the test doubles themselves
            for line, value in _string_literals(path):
                if value.strip().lower() in names:
                    offenders.append(f"{rel}:{line}: {value!r}")
    assert not offenders, offenders


def test_editor_files_are_generated_from_the_declarations():
    """package.json (activation events, autocomp.targets, autocomp.target.*), the VS Code
    client's targets.ts, Neovim's autocomp_targets.lua and Emacs's autocomp-targets.el."""
    assert editor_files.stale(ROOT) == [], "run: python -P -m autocomp.backends.editor_files --write"
    for rel in ("editors/vscode/src/client.ts", "editors/vscode/src/commands.ts", "editors/nvim/autocomp.lua",
                "editors/nvim/autocomp-0.7.lua", "editors/emacs/autocomp.el"):
        text = (ROOT / rel).read_text()
        for literal in ('"cuda-cpp"', '"python"', "python-mode", '"cuda"'):
            assert literal not in text, f"{rel} lists a target's language ({literal}); it belongs in the generated file"


# -- a fourth target needs only its own package --------------------------------------------
def test_a_fourth_target_flows_through_everything(tiny_target, tmp_path):
    from autocomp.cli.common import resolve_backend
    from autocomp.executor import task_resources
    from autocomp.extract import extract_code
    from autocomp.model import Candidate
    from autocomp.prompting import plan_request
    from autocomp.server.settings import Settings, parse_settings

    # registry, detection (the library's and the CLI's --target auto)
    assert "tiny" in backends.target_names() and backends.target_info("tiny") is TARGET
    found = backends.detect_target("k.tiny", TINY_KERNEL)
    assert [b.name for b in found] == ["tiny"]
    assert backends.detect_target("k.c", TINY_KERNEL) == []  # its suffixes only
    assert resolve_backend(str(tmp_path / "k.tiny"), TINY_KERNEL, "auto").name == "tiny"
    assert "tiny" in backends.target_help()

    # the prompts name its hardware by its declared title
    backend = found[0]
    problem = backend.make_problem("k.tiny", TINY_KERNEL)
    start = Candidate(id="c0", code=problem.code, plan="the starting kernel")
    request = plan_request(backend.prompt_pieces(), problem.name, start, [start], ["a"], 1, 2, "cost", "tiny double")
    assert TITLE in request.system + request.user

    # replies: its declared fence aliases are preferred over other blocks
    reply = "```python\nprint('no')\n```\n" + tiny(500, tag="tny")
    assert "cost = 500" in (extract_code(reply, "tiny", "scale").code or "")

    # settings: on by default (a plugin is detected unless the user says otherwise), and
    # autocomp.target.tiny.* reaches its backend
    assert "tiny" in Settings().targets
    parsed, problems = parse_settings({"autocomp": {"target": {"tiny": {"speed": 2}}}})
    assert problems == [] and parsed.target_settings("tiny") == {"speed": 2}

    # the executor asks a cluster for its declared device
    assert task_resources(backend, {"CPU": 4, "tiny_device": 1}).get("resources") == {"tiny_device": 1.0}

    # the editors' language lists and the server's description of the targets
    assert "tiny-lang" in backends.language_ids()
    langs = backends.editor_languages()
    assert "tiny" in langs["nvim"] and "tiny-mode" in langs["emacs"]
    assert any(t["name"] == "tiny" and t["languages"][0]["lsp"] == "tiny-lang" for t in backends.describe())
    manifest = json.loads((ROOT / editor_files.PACKAGE_JSON).read_text())
    generated = editor_files.package_json(manifest, [*backends.builtin_targets(), TARGET])
    assert "onLanguage:tiny-lang" in generated["activationEvents"]
    props = generated["contributes"]["configuration"]["properties"]
    assert props["autocomp.target.tiny"]["properties"] == TARGET.settings
    assert "tiny" in props["autocomp.targets"]["default"]
    assert "tiny-lang" in editor_files.targets_ts([TARGET]) and '"tiny"' in editor_files.nvim_lua([TARGET])


def test_unregistering_removes_the_target(tiny_target):
    backends.unregister("tiny")
    assert backends.target_info("tiny") is None
    with pytest.raises(backends.BackendError, match="unknown target 'tiny'"):
        backends.get_backend("tiny")
    backends.register(TARGET)  # the fixture unregisters again


def test_a_broken_plugin_is_reported_not_fatal(monkeypatch):
    monkeypatch.setenv(backends.PLUGINS_ENV, os.environ.get(backends.PLUGINS_ENV, "") + ",no_such_plugin_module_double")
    backends.reload()
    try:
        assert list(SHIPPED) == [n for n in backends.target_names() if n in SHIPPED]
        assert any("no_such_plugin_module_double" in e for e in backends.plugin_errors())
    finally:
        monkeypatch.undo()
        backends.reload()


async def test_a_plugin_target_in_a_server_subprocess(tmp_path):
    """The server learns the plugin from AUTOCOMP_PLUGINS (as a CLI would): it detects the
    .tiny kernel, offers the lens, prompts with the declared title, reads the declared
    fences in replies, and finishes a search."""
    rules = [
        {"role": "plan", "replies": ["Lower the cost.", "Lower it more."]},
        {"role": "implement", "replies": [tiny(c) for c in (600, 400, 300, 200)]},
        {"role": "repair", "reply": tiny(900)},
    ]
    env = {
        backends.PLUGINS_ENV: "tiny_target_double",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH", "")])),
    }
    settings = {"autocomp": {"llm": ["openai:fake"], "search": {"iterations": 1, "beam": 1, "plans": 1, "implementations": 1},
                             "store": str(tmp_path / "store")}}
    with FakeLLMServer(rules) as fake:
        editor = await start_editor("visual-studio-code", str(tmp_path), fake, settings, env=env)
        try:
            doc = editor.open("k.tiny", TINY_KERNEL)
            lenses = await editor.lenses(doc)
            assert [lens.command.title for lens in lenses] == ["Optimize kernel"]
            result = await editor.command("autocomp.optimize", {"uri": doc.uri, "line": 2})
            final = await editor.wait_state(result["jobId"])
            assert final["state"] == "finished", final
            assert final["bestSpeedup"] > 1.0
            assert any(TITLE in p for p in fake.prompts)
        finally:
            await editor.client.shutdown_session()
            await editor.client.stop()
    assert tiny_target_double.TARGET.name == "tiny"
