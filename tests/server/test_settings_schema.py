"""One config schema (issue 13, item 4): the CLI flags, the server's settings parsing, the
README table and the VS Code manifest all agree with autocomp/schema.py; `--set` and a
workspace `autocomp.toml` reach target settings from the CLI and the server alike."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from lsp_harness import KERNEL, server_settings, start_editor

from autocomp.cli.main import build_parser
from autocomp.errors import UserError
from autocomp.schema import KNOBS, SettingError, markdown_table, parse_set, vscode_property
from autocomp.server.settings import parse_settings
from autocomp.testing.fake_llm import FakeLLMServer

ROOT = Path(__file__).resolve().parents[2]


def test_vscode_manifest_matches_the_schema():
    props = json.loads((ROOT / "editors/vscode/package.json").read_text())["contributes"]["configuration"]["properties"]
    for knob in KNOBS:
        if not knob.server or knob.key == "target":
            continue
        assert knob.lsp in props, f"package.json lacks {knob.lsp}"
        declared = props[knob.lsp]
        for key, value in vscode_property(knob).items():
            assert declared.get(key) == value, f"{knob.lsp}.{key}: package.json {declared.get(key)!r} != schema {value!r}"
    ours = {k.lsp for k in KNOBS}
    for name in props:
        if name.startswith(("autocomp.server.", "autocomp.trace.", "autocomp.target.")):
            continue
        assert name in ours, f"package.json declares {name}, which the schema does not know"


def test_readme_table_is_derived_from_the_schema():
    assert markdown_table() in (ROOT / "README.md").read_text()


def test_cli_flags_are_derived_from_the_schema():
    optimize = build_parser()._subparsers._group_actions[0].choices["optimize"]
    flags = {opt for action in optimize._actions for opt in action.option_strings}
    for knob in KNOBS:
        if knob.cli:
            assert knob.cli in flags
    assert "--set" in flags


def test_server_parses_every_knob_with_the_schemas_ranges():
    for knob in KNOBS:
        if knob.type in ("integer", "number") and knob.maximum is not None:
            nested: dict = {}
            node = nested
            parts = knob.key.split(".")
            for part in parts[:-1]:
                node = node.setdefault(part, {})
            node[parts[-1]] = knob.maximum * 2 + 1
            _, problems = parse_settings({"autocomp": nested})
            assert problems and knob.lsp in problems[0], knob.key
    s, problems = parse_settings({"autocomp": {"autoApply": "preview", "budget": {"calls": 5}, "search": {"seed": 7}}})
    assert problems == [] and s.auto_apply == "preview"
    assert s.search_overrides() == {"budget_calls": 5, "seed": 7}
    assert parse_settings({"autocomp": {"autoApply": True}})[0].auto_apply == "always"
    assert parse_settings({"autocomp": {"autoApply": "sometimes"}})[1]


def test_set_parsing_and_errors_share_one_root():
    assert parse_set(["target.gemmini.run_timeout=120", "autocomp.search.beam=2", "target.cuda.arch=sm_80"]) == {
        "target": {"gemmini": {"run_timeout": 120}, "cuda": {"arch": "sm_80"}},
        "search": {"beam": 2},
    }
    with pytest.raises(SettingError, match="search.beam must be"):
        parse_set(["search.beam=0"])
    with pytest.raises(SettingError, match="unknown setting"):
        parse_set(["serch.beam=2"])
    assert issubclass(SettingError, UserError)


def _eval(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, AUTOCOMP_HOME=str(tmp_path / "home"))
    env.pop("AUTOCOMP_SCRIPTED_CONFIRMS", None)
    return subprocess.run(
        [sys.executable, "-m", "autocomp", "eval", str(tmp_path / "k.kern"), "--target", "scripted", "--json", "--no-cache", *extra],
        env=env, capture_output=True, text=True, timeout=60,
    )


def test_cli_reaches_target_settings_through_set_and_autocomp_toml(tmp_path):
    (tmp_path / "k.kern").write_text(KERNEL)
    assert json.loads(_eval(tmp_path).stdout)["confirmed"] is True
    assert json.loads(_eval(tmp_path, "--set", "target.scripted.confirms=false").stdout)["confirmed"] is False
    (tmp_path / "autocomp.toml").write_text("[target.scripted]\nconfirms = false\n")
    assert json.loads(_eval(tmp_path).stdout)["confirmed"] is False
    assert json.loads(_eval(tmp_path, "--set", "target.scripted.confirms=true").stdout)["confirmed"] is True  # --set wins
    (tmp_path / "autocomp.toml").write_text("[search]\nbeam = -1\n")
    bad = _eval(tmp_path)
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0 and "autocomp.search.beam must be" in bad.stderr


async def test_server_reads_workspace_autocomp_toml(tmp_path):
    (tmp_path / "autocomp.toml").write_text("[target.scripted]\nconfirms = false\n")
    with FakeLLMServer(__import__("lsp_harness").default_rules()) as fake:
        ed = await start_editor("neovim", str(tmp_path), fake, server_settings(str(tmp_path)))
        try:
            doc = ed.open("k.kern", KERNEL)
            job = (await ed.command("autocomp.optimize", {"uri": doc.uri, "line": 2}))["jobId"]
            final = await ed.wait_state(job, timeout=60)
            assert final["confirmed"] is False  # the target setting from autocomp.toml reached the backend
            assert not ed.applied_edits  # an unconfirmed result is not applied automatically
        finally:
            await ed.client.shutdown_session()
            await ed.client.stop()


def test_doctor_takes_set_and_checks_targets_with_those_settings(tmp_path):
    """``autocomp doctor --set KEY=VALUE`` reaches each target's settings (issue 13, item 4)."""
    import json as _json
    import os as _os
    import subprocess as _sp
    import sys as _sys

    env = dict(_os.environ, AUTOCOMP_HOME=str(tmp_path / "home"))
    run = lambda *a: _sp.run([_sys.executable, "-m", "autocomp", "doctor", "--json", *a], cwd=tmp_path, env=env,  # noqa: E731
                             capture_output=True, text=True, timeout=120)
    plain = _json.loads(run().stdout)["targets"]["nki"]
    forced = _json.loads(run("--set", "target.nki.tier=neuron").stdout)["targets"]["nki"]
    assert plain["tier"] == "nki interpreter"
    assert forced["tier"] != plain["tier"]  # the Neuron tier asked for; this machine has no Neuron SDK


# -- target settings: declared by the target, checked everywhere -------------------------

_READS = (
    r"(?:\bsettings|\bs)\.get\(\s*[\"'](\w+)",  # settings.get("key", default)
    r"_setting\(\s*[\"'](\w+)",  # Gemmini's settings-with-defaults helper
    r"settings\[[\"'](\w+)",
)


@pytest.mark.parametrize("name", ["gemmini", "nki", "cuda"])
def test_every_setting_a_backend_reads_is_declared_and_every_declared_one_is_read(name):
    """A key the backend reads but does not declare cannot be set from the editor or
    checked; a declared key nobody reads (the old ``neuronSdk``) silently does nothing."""
    import re

    from autocomp.backends import target_info

    source = "\n".join(p.read_text() for p in (ROOT / "backends" / name).glob("*.py"))
    read = {m for pattern in _READS for m in re.findall(pattern, source)}
    declared = set(target_info(name).settings)
    assert read - declared == set(), f"{name} reads undeclared settings"
    assert declared - read == set(), f"{name} declares settings it never reads"
    readme = (ROOT / "README.md").read_text()
    assert [k for k in declared if f"`{k}`" not in readme] == [], f"README's {name} section misses settings"


def test_misspelt_or_wrong_target_settings_are_named_on_the_cli_and_in_the_server(tmp_path):
    (tmp_path / "k.kern").write_text(KERNEL)
    bad = _eval(tmp_path, "--set", "target.scripted.confirm=false")
    assert bad.returncode == 2 and "autocomp.target.scripted.confirm is not a setting of scripted" in bad.stderr
    assert "known: " in bad.stderr and "confirms" in bad.stderr
    with pytest.raises(SettingError, match=r"autocomp.target.nki.seed_budget must be a number >= 0, got 'soon'"):
        parse_set(["target.nki.seed_budget=soon"])
    with pytest.raises(SettingError, match=r"autocomp.target.nki.tier must be one of 'auto', 'interpreter', 'neuron'"):
        parse_set(["target.nki.tier=gpu"])
    with pytest.raises(SettingError, match="no target named 'gemini'"):
        parse_set(["target.gemini.run_timeout=5"])
    (tmp_path / "autocomp.toml").write_text("[target.gemmini]\nrun_timout = 120\n")
    toml = _eval(tmp_path)
    assert toml.returncode == 2 and "run_timout is not a setting of gemmini" in toml.stderr
    # The server keeps the good keys, drops the bad ones and says which.
    parsed, problems = parse_settings({"autocomp": {"target": {"nki": {"seed_budget": 5, "seed_budgt": 5, "tier": 3}}}})
    assert parsed.target_settings("nki") == {"seed_budget": 5}
    assert any("seed_budgt is not a setting of nki" in p for p in problems)
    assert any("nki.tier must be one of" in p for p in problems)
