"""The store under faults (issue 13, item 5): concurrent processes, damaged or foreign store
files, failed resumes, requests in flight at a kill."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from autocomp.store import Store, StoreError
from autocomp.testing.fake_llm import FakeLLMServer

from .helpers import KERNEL, halving_rules
from .test_resume import FLAGS, cli_env

ROOT = Path(__file__).resolve().parents[2]


def test_concurrent_processes_get_distinct_run_ids_and_keep_every_index_entry(tmp_path):
    home = tmp_path / "home"
    Store.open(home).close()
    script = textwrap.dedent(
        f"""
        import sys
        from autocomp.store import Store
        store = Store.open({str(home)!r})
        ids = []
        for i in range(25):
            run_id = store.new_run_id("same-kernel")
            store.save_run_meta(run_id, {{"status": "running", "by": sys.argv[1]}})
            ids.append(run_id)
        print("\\n".join(ids))
        """
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, str(n)], stdout=subprocess.PIPE, text=True) for n in range(4)]
    ids = []
    for proc in procs:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
        ids += out.split()
    assert len(ids) == 100 and len(set(ids)) == 100, "two processes got the same run id"
    store = Store.open(home)
    try:
        assert sorted(store.run_ids()) == sorted(ids), "an index entry was lost"
    finally:
        store.close()


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, AUTOCOMP_HOME=str(home))
    return subprocess.run([sys.executable, "-m", "autocomp", *args], env=env, capture_output=True, text=True, timeout=60)


def _damage(kind: str, home: Path) -> None:
    folder = home / "store"
    if kind == "store-is-a-file":
        home.mkdir(parents=True)
        folder.write_text("not a folder")
        return
    folder.mkdir(parents=True)
    db = folder / "cache.db"
    if kind == "zero-byte":
        db.write_bytes(b"")
    elif kind == "foreign-file":
        db.write_text("these are my notes, not a database\n" * 50)
    elif kind == "foreign-sqlite":
        conn = sqlite3.connect(db)
        conn.execute("CREATE TABLE songs (title TEXT)")
        conn.commit()
        conn.close()
    elif kind == "damaged-sqlite":
        db.write_bytes(b"SQLite format 3\x00" + os.urandom(4096))


@pytest.mark.parametrize(
    "kind,words",
    [
        ("zero-byte", "empty (zero bytes)"),
        ("foreign-file", "not an Autocomp store"),
        ("foreign-sqlite", "SQLite database of something else"),
        ("damaged-sqlite", "damaged"),
        ("store-is-a-file", "is a file"),
    ],
)
def test_bad_store_is_one_clear_line_and_exit_2(tmp_path, kind, words):
    home = tmp_path / "home"
    _damage(kind, home)
    result = _cli(home, "runs")
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("autocomp: "), result.stderr
    assert words in lines[0] and "Traceback" not in result.stderr
    assert "start a new store" in lines[0] or "writable" in lines[0]
    if kind == "zero-byte":
        assert (home / "store" / "cache.db").stat().st_size == 0  # reported, not silently re-created
    with pytest.raises(StoreError):
        Store.open(home)


def test_store_failure_mid_run_is_one_line_and_exit_2(tmp_path):
    """A store that stops accepting writes during a run (here: its database made read-only
    under it) ends the CLI with one line and exit 2, not a traceback."""
    kernel = tmp_path / "scale.kern"
    kernel.write_text(KERNEL)
    home = tmp_path / "home"
    script = textwrap.dedent(
        f"""
        import sqlite3, sys
        from autocomp import store as store_module
        real_set = store_module.Store.set
        calls = {{"n": 0}}
        def failing_set(self, key, value):
            calls["n"] += 1
            if calls["n"] > 6:
                raise sqlite3.OperationalError("attempt to write a readonly database")
            return real_set(self, key, value)
        store_module.Store.set = lambda self, k, v: _wrap(self, k, v)
        def _wrap(self, k, v):
            try:
                return failing_set(self, k, v)
            except sqlite3.Error as exc:
                raise store_module._fail(f"the store at {{self.home}} cannot be written; check that it is writable and the disk has room", exc) from None
        from autocomp.cli.main import main
        sys.exit(main(sys.argv[1:]))
        """
    )
    with FakeLLMServer(halving_rules()) as server:
        env = cli_env(server, home, tmp_path / "eval.log")
        result = subprocess.run(
            [sys.executable, "-c", script, "optimize", str(kernel), "--llm", "openai:fake", *FLAGS],
            env=env, capture_output=True, text=True, timeout=120,
        )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("autocomp: ")]
    assert errors and "cannot be written" in errors[-1] and "readonly" in errors[-1]


def _store_record(home: Path, run_id: str) -> tuple[dict, list]:
    store = Store.open(home)
    try:
        return store.run_meta(run_id), list(store.events(run_id))
    finally:
        store.close()


def test_failed_resume_never_touches_a_finished_runs_log(tmp_path):
    kernel = tmp_path / "scale.kern"
    kernel.write_text(KERNEL)
    home, log = tmp_path / "home", tmp_path / "eval.log"
    flags = [f for f in FLAGS]
    flags[flags.index("--iterations") + 1] = "1"
    with FakeLLMServer(halving_rules()) as server:
        done = subprocess.run(
            [sys.executable, "-m", "autocomp", "optimize", str(kernel), "--llm", "openai:fake", *flags],
            env=cli_env(server, home, log), capture_output=True, text=True, timeout=120,
        )
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout.splitlines()[0])["run_id"]
    meta_before, events_before = _store_record(home, run_id)
    assert meta_before["status"] == "finished" and events_before[-1]["type"] == "run_finished"

    # Resume it for more iterations; the new LLM requests hang and the resume is killed.
    with FakeLLMServer(halving_rules(), hang_after=0, hang_seconds=60) as server:
        proc = subprocess.Popen(
            [sys.executable, "-m", "autocomp", "optimize", "--resume", run_id, "--iterations", "3", "--json"],
            env=cli_env(server, home, log), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        deadline = time.time() + 60
        while server.requests < 1 and time.time() < deadline:
            time.sleep(0.05)
        assert server.requests >= 1
        time.sleep(0.5)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    assert _store_record(home, run_id) == (meta_before, events_before)

    # A resume that fails at once (its replay file is gone) changes nothing either.
    failed = _cli_env_run(home, log, ["optimize", "--resume", run_id, "--llm", "replay:/nonexistent.jsonl"])
    assert failed.returncode == 2 and "no such file" in failed.stderr
    assert _store_record(home, run_id) == (meta_before, events_before)

    # A resume that succeeds replaces the record with its own (now 3 iterations).
    with FakeLLMServer(halving_rules()) as server:
        ok = subprocess.run(
            [sys.executable, "-m", "autocomp", "optimize", "--resume", run_id, "--iterations", "3", "--json"],
            env=cli_env(server, home, log), capture_output=True, text=True, timeout=120,
        )
    assert ok.returncode == 0, ok.stderr
    meta_after, events_after = _store_record(home, run_id)
    assert meta_after["status"] == "finished" and meta_after["config"]["iterations"] == 3
    assert events_after[-1]["type"] == "run_finished" and events_after != events_before


def _cli_env_run(home: Path, log: Path, args: list[str]) -> subprocess.CompletedProcess:
    env = dict(os.environ, AUTOCOMP_HOME=str(home), AUTOCOMP_SCRIPTED_LOG=str(log))
    return subprocess.run([sys.executable, "-m", "autocomp", *args], env=env, capture_output=True, text=True, timeout=60)


def test_resume_reports_requests_in_flight_it_sent_again(tmp_path):
    kernel = tmp_path / "scale.kern"
    kernel.write_text(KERNEL)
    home, log = tmp_path / "home", tmp_path / "eval.log"
    # (the hanging replies outlast the kill, a few seconds in; the server waits them out on exit)
    cmd = [sys.executable, "-m", "autocomp", "optimize", str(kernel), "--llm", "openai:fake", *FLAGS]
    with FakeLLMServer(halving_rules(), hang_after=3, hang_seconds=20) as server:
        proc = subprocess.Popen(cmd, env=cli_env(server, home, log), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 60
        while server.requests < 5 and time.time() < deadline:
            time.sleep(0.05)
        # The engine logs a request before it reaches the server: compare once every request
        # it sent has arrived (no new one for 2 s; on a loaded CI machine 1 s was not enough).
        seen, since = server.requests, time.time()
        while time.time() - since < 2.0 and time.time() < deadline:
            time.sleep(0.05)
            if server.requests != seen:
                seen, since = server.requests, time.time()
        hanging = server.requests - server.answered
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate(timeout=30)
    assert hanging >= 1
    run_id = json.loads(out.splitlines()[0])["run_id"]
    with FakeLLMServer(halving_rules()) as server:
        resumed = subprocess.run(
            [sys.executable, "-m", "autocomp", "optimize", "--resume", run_id, "--json"],
            env=cli_env(server, home, log), capture_output=True, text=True, timeout=120,
        )
    assert resumed.returncode == 0, resumed.stderr
    notices = [e["message"] for e in map(json.loads, resumed.stdout.splitlines()) if e.get("type") == "notice"]
    start = next(n for n in notices if n.startswith("resuming:"))
    in_flight = int(start.split()[1])
    assert in_flight == hanging, (start, hanging)
    assert f"resume: re-sent {in_flight} LLM request(s)" in " ".join(notices)
