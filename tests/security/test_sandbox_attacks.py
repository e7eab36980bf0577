"""Attacks on the jail itself (autocomp.sandbox), as any candidate process could make them:
the program here stands for a built candidate, a simulator running one, or an interpreter
child. Each names the defence that beats it."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import sys
import tempfile
import threading
import time

import pytest

from autocomp import sandbox
from autocomp.sandbox import Isolation, SandboxUnavailable, python_view, run_limited


_WORKDIRS: list[str] = []


@pytest.fixture(autouse=True)
def _remove_workdirs():
    """Each attack's scratch folder goes when its test ends, whatever the attack left there."""
    yield
    while _WORKDIRS:
        shutil.rmtree(_WORKDIRS.pop(), ignore_errors=True)


def _workdir(prefix: str) -> str:
    path = tempfile.mkdtemp(prefix=prefix)
    _WORKDIRS.append(path)
    return path


def run(argv, **kw):
    workdir = _workdir("autocomp-attack-")
    return asyncio.run(run_limited(argv, workdir, kw.pop("timeout", 20), **kw)), workdir


def sh(script: str, **kw):
    return run(["/bin/sh", "-c", script], **kw)


def test_sandbox_attack_environment_keys(hostile):
    """Dump the environment: the child starts from an empty one (--clearenv), so keys set on
    the host are not there."""
    result, _ = sh("env; cat /proc/self/environ")
    hostile.check(result.stdout, result.stderr)
    assert "PATH=" in result.stdout


def test_sandbox_attack_caller_passes_a_key(hostile):
    """Even a caller that forwards a secret-named variable cannot hand it to a child."""
    result, _ = sh("env", env={"OPENAI_API_KEY": hostile.keys["OPENAI_API_KEY"], "HARMLESS": "1"})
    hostile.check(result.stdout)
    assert "HARMLESS=1" in result.stdout


def test_sandbox_attack_parent_environ_through_proc(hostile):
    """Read the parent's environment through /proc: no /proc is mounted, and the child has
    its own PID namespace, so the host's processes are not even numbered."""
    result, _ = sh(f"cat /proc/{os.getpid()}/environ; cat /proc/1/environ; ls /proc")
    assert result.returncode != 0
    hostile.check(result.stdout, result.stderr)


def test_sandbox_attack_read_host_file(hostile):
    """Read a host file by absolute path: only /usr, the toolchain's paths and the work
    directory exist inside."""
    result, _ = sh(f"cat {hostile.canary}; ls {hostile.canary.parent}; cat /etc/passwd; ls /tmp /root /home /work")
    assert "No such file" in result.stderr
    hostile.check(result.stdout, result.stderr)


def test_sandbox_attack_write_host_file(hostile):
    """Create or modify host files: /usr is read-only, everything else is absent or a
    private tmpfs that disappears with the child."""
    result, _ = sh(
        f"mkdir -p {hostile.forbidden.parent}; echo x > {hostile.forbidden}; echo x >> {hostile.canary};"
        " echo x > /usr/pwned; touch /tmp/pwned"
    )
    hostile.check(result.stdout, result.stderr)
    assert not os.path.exists("/usr/pwned") and not os.path.exists("/tmp/pwned")


def test_sandbox_attack_network_exfiltration(hostile):
    """Send the keys to a listener on the host's loopback: the child has its own, empty
    network namespace."""
    received: list[bytes] = []
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(5)
    port = server.getsockname()[1]

    def accept() -> None:
        try:
            conn, _ = server.accept()
            received.append(conn.recv(1024))
            conn.close()
        except OSError:
            pass

    listener = threading.Thread(target=accept)
    listener.start()
    code = (
        "import socket,sys\n"
        "s=socket.create_connection(('127.0.0.1',%d),timeout=2)\n"
        "s.sendall(b'stolen')\n" % port
    )
    result, _ = run([sys.executable, "-c", code], isolation=Isolation(readable=python_view()))
    listener.join(6)
    server.close()
    assert result.returncode != 0
    assert received == []
    hostile.check(result.stdout, result.stderr)


def test_sandbox_attack_fork_bomb(hostile):
    """Start hundreds of processes: the pids limit refuses forks past it and the run still
    ends within its time limit."""
    start = time.monotonic()
    result, _ = sh("n=0; for i in $(seq 500); do sleep 30 & n=$((n+1)); done; echo started $n", timeout=10, max_processes=32)
    assert time.monotonic() - start < 15
    assert "started 500" not in result.stdout
    hostile.check(result.stdout, result.stderr)


def test_sandbox_attack_outlive_the_evaluation(hostile):
    """Leave a detached process behind that acts later: the PID namespace dies with the
    child's first process, so nothing survives the evaluation."""
    result, workdir = sh("(setsid sh -c 'sleep 2; echo late > late.txt' &) ; echo left", timeout=10)
    assert "left" in result.stdout
    time.sleep(3)
    assert not os.path.exists(os.path.join(workdir, "late.txt"))
    hostile.check(result.stdout, result.stderr)


def test_sandbox_attack_output_flood(hostile):
    """Print gigabytes to drown the host: output is read through bounded buffers."""
    result, _ = sh("yes flood | head -c 200000000", timeout=30, output_limit=4096)
    assert len(result.stdout) <= 4096 and result.truncated
    hostile.check(result.stdout)


def test_sandbox_attack_memory_hog(hostile):
    """Allocate without bound: the address-space limit stops it."""
    code = "x = []\nwhile True:\n    x.append(bytearray(1 << 26))\n"
    result, _ = run([sys.executable, "-c", code], isolation=Isolation(readable=python_view()),
                    memory_bytes=512 << 20, timeout=30)
    assert result.returncode != 0
    hostile.check(result.stdout, result.stderr)


def test_sandbox_attack_reopen_the_result_channel(hostile):
    """Reopen the trusted result channel by path (/proc/self/fd/3, /dev/fd/3) from a
    program that could not otherwise name it (a simulated target reaches host files only by
    path): without /proc neither path exists."""
    result, _ = sh("echo forged > /proc/self/fd/3; echo forged > /dev/fd/3; echo done", channel=True)
    # The shell itself holds fd 3 (it is the trusted program here), so the only way the
    # channel gets 'forged' is through reopening by path, which must fail.
    assert result.channel == b""
    hostile.check(result.stdout, result.stderr)


def test_sandbox_attack_file_size_bomb(hostile):
    """Fill the disk from the work directory: the file-size limit stops a single file."""
    result, workdir = sh("head -c 3000000000 /dev/zero > big; echo rc=$?", timeout=60)
    size = os.path.getsize(os.path.join(workdir, "big")) if os.path.exists(os.path.join(workdir, "big")) else 0
    assert size <= sandbox.DEFAULT_FILE_BYTES
    hostile.check(result.stdout)


def test_sandbox_refuses_without_bubblewrap(monkeypatch):
    """No bwrap and no opt-out: evaluation refuses with one message naming the fix."""
    monkeypatch.setattr(sandbox, "_probe", sandbox.Probe(False, "bubblewrap (bwrap) is not installed"))
    monkeypatch.delenv("AUTOCOMP_SANDBOX", raising=False)
    with pytest.raises(SandboxUnavailable) as info:
        sh("true")
    assert "apt-get install bubblewrap" in str(info.value) and "AUTOCOMP_SANDBOX=off" in str(info.value)


def test_sandbox_off_still_clears_the_environment(hostile, monkeypatch):
    """Opting out removes the namespaces, never the empty environment, and says so."""
    monkeypatch.setenv("AUTOCOMP_SANDBOX", "off")
    result, _ = sh("env")
    assert result.isolation == "off"
    hostile.check(result.stdout)


def test_sandbox_setting_and_invalid_values(monkeypatch):
    monkeypatch.delenv("AUTOCOMP_SANDBOX", raising=False)
    sandbox.configure("off")
    try:
        assert sandbox.mode() == "off"
    finally:
        sandbox.configure(None)
    assert sandbox.mode() == "bwrap"
    with pytest.raises(Exception):
        sandbox.configure("maybe")


def test_doctor_reports_isolation(monkeypatch, capsys):
    from autocomp.cli.main import main

    monkeypatch.delenv("AUTOCOMP_SANDBOX", raising=False)
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "isolation: bwrap" in out and "no network" in out
    monkeypatch.setenv("AUTOCOMP_SANDBOX", "off")
    assert main(["doctor", "--json"]) == 0
    import json

    assert json.loads(capsys.readouterr().out)["isolation"]["active"] == "off"


def test_sandbox_attack_keys_through_a_remote_transport(hostile):
    """A remote worker command (ssh/srun) runs outside the jail because it needs the network,
    but candidate code only travels through it as data: it gets none of the user's
    variables besides what a transport needs, so no key reaches the GPU host."""
    workdir = _workdir("autocomp-transport-")
    result = asyncio.run(sandbox.run_transport(["/usr/bin/env"], workdir, 20))
    assert result.isolation == "transport" and "PATH=" in result.stdout
    hostile.check(result.stdout, result.stderr)
