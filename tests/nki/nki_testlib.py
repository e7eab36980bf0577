"""Helpers for the NKI target tests (a uniquely named module, so it never collides with
other test folders' helpers).

Importing it installs the interpreter's ``nki`` / ``neuronxcc.nki`` modules into this
test process — the way the harness child does — so kernels can be written inline.
"""

from __future__ import annotations

import inspect

import numpy as np

from autocomp.backends.nki.interp import install
from autocomp.backends.nki.interp.install import execute

INSTALLED = install()


def run(kernel, *arrays, reverse: bool = False):
    """Run an inline kernel on host arrays; returns the RunResult."""
    fn = getattr(kernel, "func", kernel)
    return execute(kernel, [np.asarray(a) for a in arrays], kernel_file=inspect.getsourcefile(fn), reverse_affine=reverse)


def load_module(tmp_path, name: str, text: str):
    """Write ``text`` as ``name``.py under ``tmp_path`` and import it: (module, path)."""
    import importlib.util
    import textwrap

    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(text))
    spec = importlib.util.spec_from_file_location(f"nki_testlib_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, str(path)


def run_both_ways(path: str, mod, fn_name: str, args, grid=()):
    """Run ``fn_name`` in this process and through the kernel process (the trust-boundary
    split): it must pass the validator and give the same trace and outputs both ways."""
    from autocomp.backends.nki.remote import KernelProcess
    from autocomp.backends.nki.validate import validate_file

    assert validate_file(open(path).read(), fn_name) == []
    local = execute(getattr(mod, fn_name), args, kernel_file=path, grid=grid)
    proc = KernelProcess(path, fn_name)
    try:
        proc.load()
        remote = execute(proc.kernel, args, kernel_file=path, names=proc.names, grid=grid)
    finally:
        proc.close()
    assert [i.to_list() for i in remote.trace] == [i.to_list() for i in local.trace]
    for a, b in zip(remote.outputs, local.outputs):
        np.testing.assert_array_equal(a, b)
    return local
