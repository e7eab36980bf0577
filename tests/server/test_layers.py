"""The server's layers: features above the jobs layer, no import cycles, one writer of a
job's state, and per-document session state that closing the document drops."""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from lsp_harness import KERNEL, server_settings, start_editor
from lsprotocol import types as lsp

SERVER = Path(__file__).resolve().parents[2] / "server"
PACKAGE = "autocomp.server"


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(SERVER.rglob("*.py")):
        rel = path.relative_to(SERVER).with_suffix("")
        parts = [p for p in rel.parts if p != "__init__"]
        out[".".join([PACKAGE, *parts])] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The server modules ``name`` imports at run time (function-level imports included,
    ``if TYPE_CHECKING:`` blocks not)."""
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    is_package = path.name == "__init__.py"

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in modules else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return {m for m in found if m in modules and m != name}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def test_every_server_module_imports_in_a_fresh_interpreter():
    names = sorted(n for n in _modules() if not n.endswith("__main__"))  # __main__ serves
    code = "import importlib, json, sys\nfor n in json.loads(sys.argv[1]): importlib.import_module(n)\nprint('ok')"
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(names)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]


def test_no_import_cycles_and_jobs_never_import_features():
    graph = _graph()
    assert f"{PACKAGE}.jobs.runner" in graph and f"{PACKAGE}.features.apply" in graph
    # No cycle, lazy imports included.
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    # Layers: only the wiring (app) and the features themselves import a feature.
    features = f"{PACKAGE}.features"
    for name, deps in graph.items():
        if name.startswith(features) or name == f"{PACKAGE}.app":
            continue
        bad = sorted(d for d in deps if d.startswith(features))
        assert not bad, f"{name} imports the feature modules {bad}; only app.py and features may"
    for name, deps in graph.items():
        if name.startswith(f"{PACKAGE}.jobs"):
            assert not any(d.startswith(features) or d == f"{PACKAGE}.app" for d in deps), (name, deps)


def test_one_writer_of_job_state():
    """Only jobs/state.py assigns a Job's fields; everything else calls its methods."""
    from autocomp.server.jobs.state import Job

    fields = {f.name for f in dataclasses.fields(Job)}
    owner = SERVER / "jobs" / "state.py"
    offenders = []
    for name, path in _modules().items():
        if path == owner:
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            targets: list[ast.AST] = []
            if isinstance(node, ast.Assign):
                targets = list(node.targets)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            for target in targets:
                for t in ast.walk(target):
                    if (isinstance(t, ast.Attribute) and t.attr in fields and isinstance(t.ctx, ast.Store)
                            and not (isinstance(t.value, ast.Name) and t.value.id == "self")):
                        offenders.append(f"{path.relative_to(SERVER)}:{t.lineno}: .{t.attr} =")
    assert not offenders, "job state written outside jobs/state.py:\n" + "\n".join(offenders)
    from autocomp.server import render

    for path in _modules().values():
        assert "apply_event(" not in path.read_text(), path
    assert callable(getattr(render, "status_line"))


async def test_sessions_are_dropped_on_close_unit():
    from autocomp.model import Metric
    from autocomp.server.session import Sessions

    sessions = Sessions()
    doc = sessions.open("file:///a.kern", "text")
    fired: list[str] = []
    doc.save_timer = asyncio.get_running_loop().call_later(0.05, fired.append, "save")
    sessions.kernel("file:///a.kern", "scale").measurement = Metric(1.0, "cost units", "x")
    assert sessions.peek("file:///a.kern", "scale").measurement is not None
    sessions.drop("file:///a.kern")
    await asyncio.sleep(0.1)
    assert fired == []  # the pending save was cancelled
    assert sessions.get("file:///a.kern") is None and sessions.peek("file:///a.kern", "scale") is None
    # A task that ends after the close writes into a detached session: nothing comes back.
    sessions.kernel("file:///a.kern", "scale").edit_note = "late"
    assert sessions.documents == {}


def test_features_never_parse_a_whole_file_on_the_event_loop():
    """A backend's make_problem parses the whole file (hundreds of ms at 2 MB): features go
    through ``documents.make_problem`` / ``documents.problem``, which use the detection
    process for big documents, never the backend directly."""
    offenders = []
    for path in sorted((SERVER / "features").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "make_problem"
                    and not (isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "documents")):
                offenders.append(f"features/{path.name}:{node.lineno}")
    assert not offenders, offenders


async def test_closing_a_document_drops_its_kernel_state(tmp_path, fake_llm):
    """A saved edit leaves a measurement and a note on the kernel's lens; after didClose
    and a fresh open of the same text, neither is there."""
    ed = await start_editor("visual-studio-code", str(tmp_path), fake_llm, server_settings(str(tmp_path)))
    try:
        doc = ed.open("k.kern", KERNEL)
        ed.replace(doc, KERNEL.replace("cost = 1000", "cost = 2000"))
        ed.save(doc)
        for _ in range(150):
            titles = [lens.command.title for lens in await ed.lenses(doc)]
            if any(t.startswith("your edit: 0.50x") for t in titles):
                break
            await asyncio.sleep(0.1)
        assert any(t.startswith("your edit: 0.50x") for t in titles), titles
        assert "2,000 cost units (scripted double)" in titles
        ed.client.text_document_did_close(lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(doc.uri)))
        ed.docs.pop(doc.uri)
        again = ed.open("k.kern", doc.text)
        titles = [lens.command.title for lens in await ed.lenses(again)]
        assert "Optimize kernel" in titles, titles
        assert not any(t.startswith("your edit") or "cost units" in t for t in titles), titles
    finally:
        await ed.client.shutdown_session()
        await ed.client.stop()
