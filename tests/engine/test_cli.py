"""The `autocomp` command line on the scripted double: record, replay (labelled as such),
eval JSON contract, --write with the user's-text rules, and clear errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from autocomp.cli.main import main
from autocomp.testing.fake_llm import FakeLLMServer

from .helpers import KERNEL, halving_rules, kern

FLAGS = ["--target", "scripted", "--iterations", "2", "--beam", "2", "--plans", "2", "--implementations", "1"]


def run_cli(args, env=None, cwd=None):
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "autocomp", *args], capture_output=True, text=True, env=full_env, cwd=cwd, timeout=120)


def test_record_then_replay_without_network(tmp_path):
    kernel = tmp_path / "scale.kern"
    kernel.write_text(KERNEL)
    session = tmp_path / "scale.session.jsonl"
    with FakeLLMServer(halving_rules()) as server:
        recorded = run_cli(["optimize", str(kernel), "--llm", "openai:fake", "--record", str(session), *FLAGS], env=server.env())
    assert recorded.returncode == 0, recorded.stderr
    header = json.loads(session.read_text().splitlines()[0])
    assert header["autocomp_session"] == 1
    # No server now: the replay must not touch the network, and must say it is a replay.
    replayed = run_cli(["optimize", str(kernel), "--llm", f"replay:{session}", *FLAGS])
    assert replayed.returncode == 0, replayed.stderr
    assert "REPLAY" in replayed.stderr
    assert recorded.stdout == replayed.stdout  # same diff
    as_json = run_cli(["optimize", str(kernel), "--llm", f"replay:{session}", "--json", *FLAGS])
    events = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert events[0]["replay"] is True and events[-1]["replay"] is True
    # The bundled-session convention: FILE.session.jsonl is used when no --llm is given.
    implicit = run_cli(["optimize", str(kernel), *FLAGS])
    assert implicit.returncode == 0 and "REPLAY" in implicit.stderr


def test_replay_names_the_prompt_it_lacks(tmp_path):
    kernel = tmp_path / "scale.kern"
    kernel.write_text(KERNEL)
    session = tmp_path / "s.jsonl"
    with FakeLLMServer(halving_rules()) as server:
        run_cli(["optimize", str(kernel), "--llm", "openai:fake", "--record", str(session), *FLAGS], env=server.env())
    other_seed = run_cli(["optimize", str(kernel), "--llm", f"replay:{session}", "--seed", "99", "--keep", "0.9", *FLAGS])
    assert "has no reply for this plan prompt" in other_seed.stderr
    assert other_seed.returncode == 0  # the run still ends cleanly with its best so far


def test_eval_json_contract(tmp_path, capsys):
    base = tmp_path / "base.kern"
    base.write_text(KERNEL)
    fast = tmp_path / "fast.kern"
    fast.write_text(kern(250))
    wrong = tmp_path / "wrong.kern"
    wrong.write_text(kern(10, result=7))
    assert main(["eval", str(fast), "--against", str(base), "--target", "scripted", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["verdict"] == "correct" and result["correct"] is True
    assert result["speedup"] == 4.0 and result["primary_metric"] == "cost"
    assert result["metrics"]["cost"] == {"value": 250.0, "unit": "cost units", "source": "scripted double"}
    assert main(["eval", str(wrong), "--against", str(base), "--target", "scripted", "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["verdict"] == "incorrect" and result["correct"] is False and result["speedup"] is None
    assert main(["eval", str(base), "--target", "scripted", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["speedup"] is None


def test_write_rewrites_only_an_unchanged_kernel(tmp_path, monkeypatch):
    kernel = tmp_path / "scale.kern"
    kernel.write_text("# header\n" + KERNEL + "# footer\n")
    with FakeLLMServer(halving_rules()) as server:
        for key, value in server.env().items():
            monkeypatch.setenv(key, value)
        assert main(["optimize", str(kernel), "--llm", "openai:fake", "--write", *FLAGS]) == 0
    assert kernel.read_text() == "# header\n" + kern(250) + "# footer\n"


def test_write_needs_a_confirmed_result(tmp_path, monkeypatch, capsys):
    """An estimate (a tier that cannot confirm) is never written unless the user accepts it."""
    original = "# header\n" + KERNEL + "# footer\n"
    kernel = tmp_path / "scale.kern"
    kernel.write_text(original)
    monkeypatch.setenv("AUTOCOMP_SCRIPTED_CONFIRMS", "0")
    with FakeLLMServer(halving_rules()) as server:
        for key, value in server.env().items():
            monkeypatch.setenv(key, value)
        assert main(["optimize", str(kernel), "--llm", "openai:fake", "--write", *FLAGS]) == 1
        assert kernel.read_text() == original
        assert "--accept-unconfirmed" in capsys.readouterr().err
        assert main(["optimize", str(kernel), "--llm", "openai:fake", "--write", "--accept-unconfirmed", *FLAGS]) == 0
    assert kernel.read_text() == "# header\n" + kern(250) + "# footer\n"


def test_clear_errors(tmp_path, capsys):
    kernel = tmp_path / "scale.kern"
    kernel.write_text(KERNEL)
    assert main(["optimize", str(kernel), "--target", "scripted", "--llm", "openai:gpt-x"]) == 2
    assert "OPENAI_API_KEY" in capsys.readouterr().err
    assert main(["optimize", str(kernel), "--target", "scripted"]) == 2
    assert "no LLM given" in capsys.readouterr().err
    assert main(["optimize", str(tmp_path / "missing.c")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["optimize", str(kernel), "--target", "scripted", "--llm", "replay:x", "--keep", "2"]) == 2
    assert main(["eval", str(kernel), "--target", "nonsense"]) == 2
    assert "unknown target" in capsys.readouterr().err
    assert main(["show", "no-such-run"]) == 2


def test_runs_and_show(tmp_path, capsys, monkeypatch):
    kernel = tmp_path / "scale.kern"
    kernel.write_text(KERNEL)
    with FakeLLMServer(halving_rules()) as server:
        for key, value in server.env().items():
            monkeypatch.setenv(key, value)
        main(["optimize", str(kernel), "--llm", "openai:fake", *FLAGS])
    capsys.readouterr()
    assert main(["runs", "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    assert runs[0]["status"] == "finished"
    assert main(["show", runs[0]["run_id"]]) == 0
    shown = capsys.readouterr().out
    assert "+  cost = 250" in shown and "usage openai:fake" in shown


def test_replay_works_again_with_evaluations_cached(tmp_path):
    """A cached evaluation must render the same prompt as a fresh one (metric order
    included), or a second replay in the same store would miss its recorded replies."""
    from autocomp.store import Store

    store = Store.open(tmp_path / "h")
    ordered = {"verdict": "correct", "metrics": {"zeta": {"value": 1, "unit": "u", "source": "s"}, "alpha": {"value": 2, "unit": "u", "source": "s"}}}
    store.set("k", ordered)
    assert list(store.get("k")["metrics"]) == ["zeta", "alpha"]

    kernel = tmp_path / "scale.kern"
    kernel.write_text(KERNEL)
    session = tmp_path / "s.jsonl"
    with FakeLLMServer(halving_rules()) as server:
        run_cli(["optimize", str(kernel), "--llm", "openai:fake", "--record", str(session), *FLAGS], env=server.env())
    env = {"AUTOCOMP_HOME": str(tmp_path / "shared-home")}
    first = run_cli(["optimize", str(kernel), "--llm", f"replay:{session}", *FLAGS], env=env)
    second = run_cli(["optimize", str(kernel), "--llm", f"replay:{session}", *FLAGS], env=env)
    assert "no reply" not in second.stderr
    assert first.stdout == second.stdout
