"""Attacks on the NKI target, each a whole hostile candidate kernel as an LLM would write it.

Two defences stand in the way, and the tests show each on its own:

* the allowlist of the NKI language subset (``autocomp.backends.nki.validate``) refuses the
  candidate with the line before anything runs (``test_nki_attack_*``);
* the OS sandbox the interpreter child runs in (no network, an empty environment, no
  ``/proc``, no host files beyond a read-only view of Python, its own PID namespace), the
  trace streamed to the parent as it is recorded and the cost computed there, and the
  reorder check in a fresh process. The ``test_nki_bypass_*`` tests run hostile code with
  the allowlist switched off (the harness's test-only ``validate=False``) and show the host
  stays untouched, no key leaks, rewriting the trace in the child changes nothing, and
  state kept between calls cannot fool the reorder check.

Every test asserts the attack does not win and ``hostile.check`` (canary intact, forbidden
path absent, no key in the evaluation, its feedback or the store).
"""

from __future__ import annotations

import asyncio
import json

import pytest

from autocomp.backends import get_backend
from autocomp.backends.nki.backend import NkiBackend
from autocomp.model import Evaluation, Verdict

BASE = '''import numpy as np
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def scale_add(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // 128):
        x = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        y = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=a[i * 128:(i + 1) * 128, :])
        nisa.dma_copy(dst=y, src=b[i * 128:(i + 1) * 128, :])
        z = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=z, data=x, op0=nl.multiply, operand0=2.0, op1=nl.add, operand1=y)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=z)
    return out


def get_inputs(rng):
    return [rng.standard_normal((256, 128)).astype(np.float32), rng.standard_normal((256, 128)).astype(np.float32)]
'''
ORIGINAL = BASE[BASE.index("@nki.jit"):BASE.index("def get_inputs")].rstrip() + "\n"
HEAD = "@nki.jit\ndef scale_add(a, b):\n"
# The honest body (without its return), to wrap hostile code around a kernel that works.
HONEST = ORIGINAL[len(HEAD):ORIGINAL.index("    return out")]


def kernel(before: str = "", after: str = "", ret: str = "    return out\n", prelude: str = "") -> str:
    """A full candidate: module-level ``prelude``, then the kernel with hostile code around the honest body."""
    return prelude + HEAD + before + HONEST + after + ret


def fill(code: str, hostile) -> str:
    return code.replace("{{CANARY}}", str(hostile.canary)).replace("{{FORBIDDEN}}", str(hostile.forbidden))


class UnvalidatedNki(NkiBackend):
    """The real NKI backend with the allowlist switched off (tests only): what is left is
    the sandbox and the parent-side checks."""

    async def evaluate(self, problem, codes):
        await self.harness.oracle(problem)
        return [await self.harness.evaluate(problem, c, validate=False) for c in codes]

    def cache_identity(self) -> str:
        return super().cache_identity() + ":unvalidated"


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    path = tmp_path_factory.mktemp("nki-attack") / "scale_add.py"
    path.write_text(BASE)
    settings = {"timeout": 20, "seeds": [0, 1]}
    backend = get_backend("nki", settings)
    problem = backend.make_problem(str(path), BASE)
    unvalidated = UnvalidatedNki(settings)
    return backend, unvalidated, problem


@pytest.fixture(scope="module")
def honest(target) -> Evaluation:
    backend, _, problem = target
    (ev,) = asyncio.run(backend.evaluate(problem, [ORIGINAL]))
    assert ev.verdict is Verdict.CORRECT, ev.feedback
    return ev


def did_not_win(attack: Evaluation, honest: Evaluation) -> bool:
    if attack.verdict is not Verdict.CORRECT:
        return True
    return attack.metrics["cycles"].value >= honest.metrics["cycles"].value


async def attack(hostile, target, honest, code: str, *, bypass: bool = False) -> Evaluation:
    backend, unvalidated, problem = target
    ev = await hostile.evaluate(unvalidated if bypass else backend, problem, fill(code, hostile))
    assert did_not_win(ev, honest), f"the attack won: {ev.verdict} {ev.metrics} {ev.feedback}"
    hostile.check(json.dumps(ev.to_json()), ev.feedback)
    return ev


def rejected(ev: Evaluation, *words: str) -> None:
    assert ev.verdict is Verdict.REJECTED, f"{ev.verdict}: {ev.feedback}"
    assert ":" in ev.feedback and "scale_add.py:" in ev.feedback, ev.feedback  # names the line
    for w in words:
        assert w in ev.feedback, (w, ev.feedback)


# ---------------------------------------------------------------------------- hostile code
HOST_COMPUTE = HEAD + '''    host = np
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    out._data[...] = host.add(host.multiply(a._data, 2.0), b._data)
    out._written[...] = True
    return out
'''
NUMPY_CTYPES = kernel(before='''    libc = np.ctypeslib.ctypes.CDLL(None)
    libc.system(b"touch {{FORBIDDEN}}")
''')
MRO_SUBCLASSES = kernel(before='''    for cls in ().__class__.__mro__[1].__subclasses__():
        if cls.__name__ == "_wrap_close":
            cls.__init__.__globals__["system"]("touch {{FORBIDDEN}}")
''')
BUILTINS_VIA_GLOBALS = kernel(before='''    bi = nisa.dma_copy.__wrapped__.__globals__["__builtins__"]
    opener = bi["open"] if isinstance(bi, dict) else bi.open
    raise ValueError(opener("{{CANARY}}").read())
''')
REWRITE_TRACE = kernel(before='''    isa_globals = nisa.dma_copy.__wrapped__.__globals__
    isa_globals["record"] = lambda *args, **kwargs: 0
''', after='''    nl.affine_range.__globals__["STATE"].trace.clear()
''')
OS_SYSTEM = kernel(before='''    import os
    os.system("touch {{FORBIDDEN}}")
''')
MODULE_SUBPROCESS = kernel(prelude='''import subprocess

subprocess.run(["touch", "{{FORBIDDEN}}"])


''')
PARENT_ENVIRON = kernel(before='''    import os
    raise ValueError(open("/proc/%d/environ" % os.getppid()).read())
''')
SELF_ENVIRON = kernel(before='''    import os
    raise ValueError(open("/proc/self/environ").read() + repr(dict(os.environ)))
''')
CANARY = kernel(before='''    with open("{{CANARY}}", "a") as fh:
        fh.write("pwned")
    raise ValueError(open("{{CANARY}}").read())
''')
# A loop-carried dependency (y is prefetched by the previous iteration of an affine_range):
# right when the iterations run forward, wrong in reverse. Kept state hides it: when the
# kernel sees its iterations come in reverse, it returns the output of an earlier call.
REORDER_BODY = '''    n = a.shape[0] // 128
    f = a.shape[1]
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    y_next = nl.ndarray((128, f), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=y_next, src=b[0:128, :])
    count = 0
    for i in nl.affine_range(n):
        if count == 0 and i != 0:
            old = _memo(None, True)
            if old is not None:
                return old
        count += 1
        x = nl.ndarray((128, f), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=a[i * 128:(i + 1) * 128, :])
        y = nl.ndarray((128, f), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=y, src=y_next)
        if i + 1 < n:
            nisa.dma_copy(dst=y_next, src=b[(i + 1) * 128:(i + 2) * 128, :])
        z = nl.ndarray((128, f), dtype=a.dtype, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=z, data=x, op0=nl.multiply, operand0=2.0, op1=nl.add, operand1=y)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=z)
    return _memo(out, False)
'''
DEFAULT_ARG_STATE = '''def _memo(out, recall, store=[]):
    if recall:
        return store[0] if store else None
    store.append(out)
    return out


''' + HEAD + REORDER_BODY
MODULE_GLOBAL_MEMO = '''STORE = []


def _memo(out, recall):
    if recall:
        return STORE[0] if STORE else None
    STORE.append(out)
    return out


''' + HEAD + REORDER_BODY
# The prefetch of REORDER_BODY (iteration i loads b's rows for iteration i + 1) hidden from
# the reorder proof, which skips the reversed-loop run when no two iterations touch the same
# bytes (backends/nki/reorder_proof.py). Each is right when run forward, wrong reversed.
PREFETCH_HIDDEN = {
    # through views made with a permuted index array: no slice names those bytes
    "permuted index view": ("    jr = f - 1 - nl.arange(f)[None, :]\n    ip = nl.arange(128)[:, None]\n",
                            "nisa.dma_copy(dst=y_next[ip, jr], src=b[{rows} + ip, jr])"),
    # through two writes by strided index arrays (even columns, then odd ones)
    "strided index views": ("    ip = nl.arange(128)[:, None]\n    je = nl.arange(f // 2)[None, :] * 2\n",
                            "nisa.dma_copy(dst=y_next[ip, je], src=b[{rows} + ip, je])\n{pad}"
                            "nisa.dma_copy(dst=y_next[ip, je + 1], src=b[{rows} + ip, je + 1])"),
    # through the accumulation exemption: a zeroed tile plus a DMA that adds into it
    "read-modify-write DMA": ("",
                              "nisa.memset(dst=y_next, value=0.0)\n{pad}nisa.dma_copy(dst=y_next, "
                              "src=b[{rows}:{rows} + 128, :], dst_rmw_op=nl.add)"),
}


def prefetch_kernel(setup: str, load: str) -> str:
    first = load.format(rows="0", pad="    ")
    later = load.format(rows="(i + 1) * 128", pad="            ")
    return HEAD + f'''    n = a.shape[0] // 128
    f = a.shape[1]
{setup}    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    y_next = nl.ndarray((128, f), dtype=a.dtype, buffer=nl.sbuf)
    {first}
    for i in nl.affine_range(n):
        x = nl.ndarray((128, f), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=a[i * 128:(i + 1) * 128, :])
        y = nl.ndarray((128, f), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=y, src=y_next)
        if i + 1 < n:
            {later}
        z = nl.ndarray((128, f), dtype=a.dtype, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=z, data=x, op0=nl.multiply, operand0=2.0, op1=nl.add, operand1=y)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=z)
    return out
'''


LOOP_REPORT_CLEARED = kernel(before='''    from autocomp.backends.nki import tracer
    tracer.CONN.loops.clear()
''')


CONSTANT = HEAD + '''    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // 128):
        z = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.memset(dst=z, value=0.25)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=z)
    return out
'''
PRECOMPUTED = HEAD + '''    pa, pb = get_inputs(np.random.default_rng(0))
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    out._data[...] = 2.0 * pa + pb
    return out
'''
MODIFY_INPUTS = kernel(after='''    for j in nl.affine_range(a.shape[0] // 128):
        t = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.memset(dst=t, value=0.0)
        nisa.dma_copy(dst=a[j * 128:(j + 1) * 128, :], src=t)
''')
GETATTR_STRING = HEAD + '''    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    getattr(out, "_da" + "ta")[...] = 2.0 * getattr(a, "_da" + "ta") + getattr(b, "_da" + "ta")
    getattr(out, "_writ" + "ten")[...] = True
    return out
'''
EXEC_EVAL = kernel(before='''    eval("__imp" + "ort__('os').system('touch {{FORBIDDEN}}')")
    exec("import subprocess; subprocess.run(['touch', '{{FORBIDDEN}}'])")
''')
IMPORTLIB = kernel(prelude='''import importlib


''', before='''    importlib.import_module("o" + "s").system("touch {{FORBIDDEN}}")
''')
SYS_MODULES = kernel(prelude='''import sys


''', before='''    sys.modules["os"].system("touch {{FORBIDDEN}}")
''')
TRY_SWALLOW = kernel(before='''    try:
        big = nl.ndarray((256, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    except Exception:
        big = None
''')
FORMAT_STRING = kernel(before='''    leak = "{0.__class__.__init__.__globals__}".format(out)
''')
FUNCTION_ATTRIBUTE = kernel(after='''    scale_add.last = out
''')
DECORATOR = '''def _hook(fn):
    import os
    os.system("touch {{FORBIDDEN}}")
    return fn


@_hook
''' + ORIGINAL


# ---------------------------------------------------------------------------- allowlist
async def test_nki_attack_numpy_alias_host_compute(hostile, target, honest):
    """Compute the result on the host with NumPy through a module alias and write the tile's
    memory directly (no instructions, so no cost). Beaten by the allowlist: a module used as
    a value, NumPy calls and private attributes are refused."""
    ev = await attack(hostile, target, honest, HOST_COMPUTE)
    rejected(ev, "`np` is a module", "private attribute `._data`")


async def test_nki_attack_numpy_ctypes_shell(hostile, target, honest):
    """Reach ctypes through numpy (np.ctypeslib.ctypes) and call libc's system(). Beaten by
    the allowlist (np offers dtypes and ops only) and, behind it, the sandbox (see bypass)."""
    rejected(await attack(hostile, target, honest, NUMPY_CTYPES), "np.ctypeslib")


async def test_nki_attack_mro_subclasses_escape(hostile, target, honest):
    """The classic ().__class__.__mro__[1].__subclasses__() walk to os.system. Beaten by the
    allowlist: dunder attributes are refused."""
    rejected(await attack(hostile, target, honest, MRO_SUBCLASSES), "dunder attribute")


async def test_nki_attack_builtins_via_function_globals(hostile, target, honest):
    """Get the real builtins from an API function's __globals__ and open the canary. Beaten by
    the allowlist (dunders, isinstance and dict are not in the subset)."""
    rejected(await attack(hostile, target, honest, BUILTINS_VIA_GLOBALS), "dunder attribute")


async def test_nki_attack_rewrite_trace_recorder(hostile, target, honest):
    """Replace the interpreter's instruction recorder and clear the trace so the cost drops
    to nothing. Beaten by the allowlist (dunders, attribute calls on non-API objects; a
    lambda is checked like any kernel code, so reaching `__globals__` through one is refused
    as anywhere); with it bypassed, the streamed trace and parent-side cost (bypass test)."""
    rejected(await attack(hostile, target, honest, REWRITE_TRACE), "`.__globals__` is not allowed")


async def test_nki_attack_os_system_in_kernel(hostile, target, honest):
    """`import os; os.system(...)` inside the kernel. Beaten by the allowlist (no imports in a
    kernel) and by the sandbox (read-only host view)."""
    rejected(await attack(hostile, target, honest, OS_SYSTEM), "imports inside the kernel")


async def test_nki_attack_module_level_subprocess(hostile, target, honest):
    """Module-level code in the candidate, run when the file is loaded. Beaten by the
    allowlist: a candidate's module-level statements may import only NKI/NumPy/math and hold
    constants."""
    rejected(await attack(hostile, target, honest, MODULE_SUBPROCESS), "`import subprocess` is not allowed")


async def test_nki_attack_parent_environ(hostile, target, honest):
    """Read the parent's /proc/<ppid>/environ (API keys) and raise it into the feedback.
    Beaten by the allowlist (`open`, imports, `os`), and by the sandbox: no /proc, own PID
    namespace, empty environment."""
    rejected(await attack(hostile, target, honest, PARENT_ENVIRON), "imports inside the kernel")


async def test_nki_attack_self_environ(hostile, target, honest):
    """Dump /proc/self/environ and os.environ into the feedback. Beaten by the allowlist and by
    the empty environment of the sandboxed child."""
    rejected(await attack(hostile, target, honest, SELF_ENVIRON), "imports inside the kernel")


async def test_nki_attack_canary_read_and_modify(hostile, target, honest):
    """Append to a host file and read it back into the feedback. Beaten by the allowlist (`with`,
    `open`) and by the sandbox (host files are not in the child's view)."""
    rejected(await attack(hostile, target, honest, CANARY), "`with`")


async def test_nki_attack_default_argument_state_defeats_reorder(hostile, target, honest):
    """Keep earlier outputs in a mutable default argument and return them when the
    affine_range iterations come in reverse, to hide a loop-carried dependency. Beaten by the
    allowlist (non-constant defaults); with it bypassed, by the fresh reorder process."""
    rejected(await attack(hostile, target, honest, DEFAULT_ARG_STATE), "default argument")


@pytest.mark.parametrize("how", sorted(PREFETCH_HIDDEN))
async def test_nki_attack_hides_a_loop_carried_dependency_from_the_reorder_proof(hostile, target, honest, how):
    """A loop-carried dependency (the next iteration's rows prefetched) written so that the
    reorder proof might miss it and skip the reversed-loop run. Beaten by the proof's
    construction: a view made with index arrays counts as the box of their values (a
    permutation or a stride covers the whole row), an accumulation commutes only with other
    accumulations (not with the read of the next iteration), and every value the
    interpreter reads joins the instruction that reads it. The proof finds the overlap, the
    reversed run goes ahead and the dependency shows."""
    ev = await attack(hostile, target, honest, prefetch_kernel(*PREFETCH_HIDDEN[how]))
    assert ev.verdict is Verdict.RUNTIME_ERROR and "revers" in ev.feedback, ev.feedback


async def test_nki_attack_clears_its_loop_report(hostile, target, honest):
    """Empty the kernel process's loop stack so that no instruction names an affine_range
    iteration, and the reorder proof sees nothing to reorder. Beaten by the allowlist
    (imports inside the kernel; the interpreter's modules are not the kernel's to reach)."""
    rejected(await attack(hostile, target, honest, LOOP_REPORT_CLEARED), "imports inside the kernel")


async def test_nki_attack_module_global_memo(hostile, target, honest):
    """The same memo in a module-level list. Beaten by the allowlist (module-level names read
    by a kernel must be constants; `.append` is not a tile attribute)."""
    rejected(await attack(hostile, target, honest, MODULE_GLOBAL_MEMO), "not a constant")


async def test_nki_attack_returns_constant(hostile, target, honest):
    """Skip the work and fill the output with a constant. Beaten by the comparison with the
    oracle in the parent."""
    ev = await attack(hostile, target, honest, CONSTANT)
    assert ev.verdict is Verdict.INCORRECT, ev.feedback


async def test_nki_attack_precomputed_from_public_inputs(hostile, target, honest):
    """Regenerate the inputs with get_inputs and a guessed seed, and write the answer in.
    Beaten by the allowlist: get_inputs is called from the kernel, so it must pass the subset
    too (and it uses NumPy's RNG); private attributes are refused."""
    rejected(await attack(hostile, target, honest, PRECOMPUTED), "get_inputs", "private attribute")


async def test_nki_attack_modify_inputs(hostile, target, honest):
    """Write over an input tensor after using it. Beaten by the parent's check that inputs are
    unchanged after the run."""
    ev = await attack(hostile, target, honest, MODIFY_INPUTS)
    assert ev.verdict is Verdict.INCORRECT and "modified its input" in ev.feedback, ev.feedback


async def test_nki_attack_getattr_string(hostile, target, honest):
    """Dodge a name check with getattr and a computed attribute string. Beaten by the
    allowlist: getattr is not a kernel builtin."""
    rejected(await attack(hostile, target, honest, GETATTR_STRING), "`getattr` is not allowed")


async def test_nki_attack_exec_eval(hostile, target, honest):
    """Hide the payload in strings run with eval/exec. Beaten by the allowlist."""
    rejected(await attack(hostile, target, honest, EXEC_EVAL), "`eval` is not allowed", "`exec` is not allowed")


async def test_nki_attack_importlib(hostile, target, honest):
    """Import os through importlib with a computed name. Beaten by the allowlist (the import of
    importlib itself)."""
    rejected(await attack(hostile, target, honest, IMPORTLIB), "`import importlib` is not allowed")


async def test_nki_attack_sys_modules(hostile, target, honest):
    """Fetch os from sys.modules. Beaten by the allowlist (import sys; sys is a foreign module)."""
    rejected(await attack(hostile, target, honest, SYS_MODULES), "`import sys` is not allowed")


async def test_nki_attack_try_swallows_constraint_error(hostile, target, honest):
    """Catch the interpreter's constraint error (a 256-partition tile) and carry on. Beaten by
    the allowlist: try is not part of the subset."""
    rejected(await attack(hostile, target, honest, TRY_SWALLOW), "`try` is not allowed")


async def test_nki_attack_format_string_escape(hostile, target, honest):
    """str.format walks attributes ("{0.__class__...}") without an attribute node in the AST.
    Beaten by the allowlist: .format is not a tile attribute."""
    rejected(await attack(hostile, target, honest, FORMAT_STRING), "`.format`")


async def test_nki_attack_function_attribute_state(hostile, target, honest):
    """Keep the output on the function object between calls. Beaten by the allowlist (attribute
    assignment; a function used as a value)."""
    rejected(await attack(hostile, target, honest, FUNCTION_ATTRIBUTE), "assigning to an attribute")


async def test_nki_attack_decorator_runs_at_load(hostile, target, honest):
    """A decorator runs when the file is loaded, before any kernel call. Beaten by the
    allowlist: only @nki.jit may decorate."""
    rejected(await attack(hostile, target, honest, DECORATOR), "only @nki.jit")


# ---------------------------------------------------------------------------- allowlist bypassed
async def test_nki_bypass_shell_commands_cannot_touch_the_host(hostile, target, honest):
    """With the allowlist off, run shell commands three ways (os.system, subprocess, libc via
    numpy's ctypes) and then compute honestly. The sandbox's read-only host view (and private
    /tmp) keeps the forbidden path from coming to exist; the cost is the honest one."""
    code = kernel(before='''    import os
    import subprocess
    os.system("touch {{FORBIDDEN}}")
    subprocess.run(["touch", "{{FORBIDDEN}}"])
    np.ctypeslib.ctypes.CDLL(None).system(b"touch {{FORBIDDEN}}")
''')
    ev = await attack(hostile, target, honest, code, bypass=True)
    assert ev.verdict is Verdict.CORRECT, ev.feedback
    assert ev.metrics["cycles"].value == honest.metrics["cycles"].value


async def test_nki_bypass_environment_and_proc_hold_no_keys(hostile, target, honest):
    """With the allowlist off, read os.environ, /proc/self/environ and the parent's environ and
    raise them into the feedback. The child's environment is empty of host variables and there
    is no /proc: the feedback shows the dump happened and holds no key."""
    code = kernel(before='''    import os
    found = [repr(dict(os.environ))]
    for p in ("/proc/self/environ", "/proc/%d/environ" % os.getppid(), "/proc/1/environ"):
        try:
            found.append(open(p).read())
        except OSError as exc:
            found.append(type(exc).__name__)
    raise ValueError(" | ".join(found))
''')
    ev = await attack(hostile, target, honest, code, bypass=True)
    assert ev.verdict is Verdict.RUNTIME_ERROR
    assert "HOME" in ev.feedback and "FileNotFoundError" in ev.feedback, ev.feedback


async def test_nki_bypass_canary_is_out_of_reach(hostile, target, honest):
    """With the allowlist off, try to append to the canary and to read it into the feedback.
    The host file is not in the child's view."""
    code = kernel(before='''    found = []
    try:
        with open("{{CANARY}}", "a") as fh:
            fh.write("pwned")
    except OSError as exc:
        found.append("write: " + type(exc).__name__)
    try:
        found.append(open("{{CANARY}}").read())
    except OSError as exc:
        found.append("read: " + type(exc).__name__)
    raise ValueError(" | ".join(found))
''')
    ev = await attack(hostile, target, honest, code, bypass=True)
    assert "write: FileNotFoundError" in ev.feedback and "read: FileNotFoundError" in ev.feedback, ev.feedback


async def test_nki_bypass_rewriting_the_recorder_does_not_change_the_cost(hostile, target, honest):
    """With the allowlist off, replace the interpreter's recorder with a no-op, empty the
    trace and zero the cost model, then compute honestly. The kernel's Python runs in its own
    process, whose copy of the interpreter modules records nothing that counts: the real
    interpreter is another process, which streamed every instruction to the parent, where the
    cost is computed. The cycles are the honest ones."""
    code = kernel(before='''    import sys
    import autocomp.backends.nki.interp.core as core
    import autocomp.backends.nki.interp.isa as isa_impl
    import autocomp.backends.nki.cost as cost
    core.record = isa_impl.record = lambda *a, **k: 0
    core.STATE.trace.clear()
    cost.PARAMS.update({k: 0.0 for k in cost.PARAMS})
    cost.estimate = lambda *a, **k: None
''', after='''    core.STATE.trace.clear()
''')
    ev = await attack(hostile, target, honest, code, bypass=True)
    assert ev.verdict is Verdict.CORRECT, ev.feedback
    assert ev.metrics["cycles"].value == honest.metrics["cycles"].value
    assert ev.metrics["instructions"].value == honest.metrics["instructions"].value


async def test_nki_bypass_host_compute_finds_no_data(hostile, target, honest):
    """With the allowlist off, look for the input values to compute the answer on the host:
    in the tensor objects, among every object of the process (gc), in the files of the work
    directory, on stdin. The kernel's process holds handles only; the inputs reached the
    interpreter process on its stdin after the kernel process was forked with /dev/null as
    its stdin, and never touch a file. Nothing is found, so nothing can be computed without
    NKI instructions."""
    code = HEAD + '''    import gc
    import os
    arrays = [o for o in gc.get_objects() if isinstance(o, np.ndarray) and o.size >= 256 * 128]
    files = []
    for root, _, names in os.walk("."):
        files += [os.path.join(root, n) for n in names if not n.endswith((".py", ".pyc"))]
    slots = [s for s in dir(a) if s.startswith("_") and not s.startswith("__")]
    stdin = os.read(0, 1 << 20)
    raise ValueError("arrays=%d files=%r stdin=%d attrs=%r" % (len(arrays), files, len(stdin), slots))
'''
    ev = await attack(hostile, target, honest, code, bypass=True)
    assert "arrays=0 files=[] stdin=0" in ev.feedback, ev.feedback


async def test_nki_bypass_cannot_trace_or_read_the_interpreter(hostile, target, honest):
    """With the allowlist off, attach to the interpreter process with ptrace and read its
    memory with process_vm_readv, or open /proc/<ppid>/mem. The interpreter made itself
    non-dumpable and the kernel process has no capabilities, so both calls are refused, and
    there is no /proc."""
    code = HEAD + '''    import ctypes
    import os
    libc = ctypes.CDLL(None, use_errno=True)
    parent = os.getppid()
    attach = libc.ptrace(16, parent, 0, 0)  # PTRACE_ATTACH
    attach_errno = ctypes.get_errno()
    buf = ctypes.create_string_buffer(64)
    class IoVec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
    local = IoVec(ctypes.cast(buf, ctypes.c_void_p), 64)
    remote = IoVec(0x400000, 64)
    read = libc.process_vm_readv(parent, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    read_errno = ctypes.get_errno()
    try:
        open("/proc/%d/mem" % parent, "rb")
        mem = "opened"
    except OSError as exc:
        mem = type(exc).__name__
    raise ValueError("ptrace=%d/%d readv=%d/%d mem=%s" % (attach, attach_errno, read, read_errno, mem))
'''
    ev = await attack(hostile, target, honest, code, bypass=True)
    assert "ptrace=-1/1 readv=-1/1 mem=FileNotFoundError" in ev.feedback, ev.feedback


async def test_nki_bypass_precomputed_answer_cannot_become_tile_data(hostile, target, honest):
    """With the allowlist off, regenerate the inputs from the public seeds with the file's
    get_inputs, compute the answer on the host, and try to put it into tiles: as an nl.full
    fill value, a memset value, and an iota expression. The interpreter accepts host arrays
    only as indices, masks or affine iota expressions, so every attempt is refused."""
    code = HEAD + '''    pa, pb = get_inputs(np.random.default_rng(0))
    want = (2.0 * pa + pb) * 1e6
    tries = []
    for attempt in ("full", "memset", "iota"):
        try:
            t = nl.ndarray((128, a.shape[1]), dtype=nl.int32, buffer=nl.sbuf)
            if attempt == "full":
                nl.full((128, a.shape[1]), want[:128].astype(np.int32), dtype=nl.int32, buffer=nl.sbuf)
            elif attempt == "memset":
                nisa.memset(dst=t, value=want[:128].astype(np.int32))
            else:
                nisa.iota(dst=t, expr=want[:128].astype(np.int32), dtype=nl.int32)
            tries.append(attempt + ": accepted")
        except Exception as exc:
            tries.append(attempt + ": refused")
    raise ValueError(" ".join(tries))
'''
    ev = await attack(hostile, target, honest, code, bypass=True)
    assert ev.verdict is not Verdict.CORRECT
    assert "accepted" not in ev.feedback, ev.feedback


async def test_nki_bypass_killing_the_interpreter_is_no_win(hostile, target, honest):
    """With the allowlist off, kill the interpreter process (the kernel's parent) after an
    honest run's first instructions. No result reaches the parent: a crash, not a verdict."""
    code = kernel(before='''    import os
    import signal
    os.kill(os.getppid(), signal.SIGKILL)
''')
    ev = await attack(hostile, target, honest, code, bypass=True)
    assert ev.verdict is not Verdict.CORRECT


async def test_nki_bypass_default_argument_state_meets_a_fresh_process(hostile, target, honest):
    """With the allowlist off, the default-argument memo that hid a loop-carried dependency
    from a reorder check run in the same process. The reversed run is a fresh process with
    nothing remembered, so the dependency shows."""
    ev = await attack(hostile, target, honest, DEFAULT_ARG_STATE, bypass=True)
    assert ev.verdict is Verdict.RUNTIME_ERROR and "loop-carried dependency" in ev.feedback, ev.feedback


async def test_nki_bypass_module_global_memo_meets_a_fresh_process(hostile, target, honest):
    """With the allowlist off, the same memo kept in a module global: a fresh process again."""
    ev = await attack(hostile, target, honest, MODULE_GLOBAL_MEMO, bypass=True)
    assert ev.verdict is Verdict.RUNTIME_ERROR and "loop-carried dependency" in ev.feedback, ev.feedback


async def test_nki_bypass_rewriting_the_kernel_file_does_not_reach_the_reorder_run(hostile, target, honest):
    """With the allowlist off, the seeds' kernel process rewrites kernel.py (and plants
    bytecode) with a dependency-free kernel, hoping the reversed run loads that instead. The
    reversed run's process compiles the text the interpreter read before any kernel code ran,
    so the dependency shows."""
    honest_file = BASE.replace("import numpy as np\n", "import numpy as np\n", 1)
    code = '''import os as _os

_HONEST = %r
with open(__file__, "w") as _fh:
    _fh.write(_HONEST)
_os.makedirs("__pycache__", exist_ok=True)
for _name in ("kernel.cpython-311.pyc", "kernel.cpython-312.pyc"):
    with open(_os.path.join("__pycache__", _name), "wb") as _fh:
        _fh.write(b"not bytecode")


def _memo(out, recall):
    return None if recall else out


''' % honest_file + HEAD + REORDER_BODY
    ev = await attack(hostile, target, honest, code, bypass=True)
    assert ev.verdict is Verdict.RUNTIME_ERROR and "loop-carried dependency" in ev.feedback, ev.feedback


async def test_nki_bypass_result_channel_is_out_of_reach(hostile, target, honest):
    """With the allowlist off, write a forged result (and forged instructions) to the result
    channel, descriptor 3, then exit. Only the interpreter process holds the channel; the
    kernel process was forked with every descriptor but its two pipes closed (and there is no
    /proc to reopen one), so the write fails and no forged line reaches the parent."""
    code = kernel(before='''    import os
    try:
        os.write(3, b'["result", {"status": "ok", "counts": {}}]\\n')
        wrote = "wrote"
    except OSError as exc:
        wrote = exc.strerror
    raise ValueError("channel: " + wrote)
''')
    ev = await attack(hostile, target, honest, code, bypass=True)
    assert "channel: Bad file descriptor" in ev.feedback, ev.feedback


# The kernel process's own compact request forms (tracer.BATCH lines and index entries),
# written raw to its request pipe with the allowlist off: the interpreter checks them as
# strictly as the whole forms, and any breach ends the run as a crash, never a verdict.
RAW_REQUESTS = '''    from autocomp.backends.nki import tracer
    conn = tracer.CONN
    conn.write_batch()
    for line in LINES:
        conn.out.write(line.encode() + b"\\n")
    conn.out.flush()
    raise ValueError("sent")
'''


def _raw(lines: list) -> str:
    return kernel(before="    LINES = %r\n" % [json.dumps(x) for x in lines] + RAW_REQUESTS)


def _entry(values: list, ix: int) -> dict:
    return {"nd": values, "shape": [len(values), 1], "dtype": "int64", "ix": ix}


async def test_nki_bypass_command_end_inside_a_batch_is_a_crash(hostile, target, honest):
    """A batch that ends the command (a forged ``return`` after a request) would leave the
    interpreter and the kernel process out of step; it is refused."""
    code = _raw([[{"op": "getitem", "t": -1, "key": 0, "line": 1, "h": 900001}, {"op": "return", "value": None}]])
    ev = await attack(hostile, target, honest, code, bypass=True)
    assert "bad message from the kernel process" in ev.feedback, ev.feedback


async def test_nki_bypass_index_entry_cannot_be_redefined_after_its_check(hostile, target, honest):
    """Define an index entry with in-bounds values, then send the same entry number with
    values far out of bounds (an entry's bounds are computed once): the redefinition is
    refused."""
    code = _raw([{"op": "getitem", "t": -1, "key": {"T": [_entry(list(range(128)), 7), 0]}, "line": 1, "h": 900001},
                 {"op": "getitem", "t": -1, "key": {"T": [_entry([10 ** 9] * 128, 7), 0]}, "line": 1, "h": 900002}])
    ev = await attack(hostile, target, honest, code, bypass=True)
    assert "bad index array definition" in ev.feedback, ev.feedback


@pytest.mark.parametrize("view, words", [
    ({"v": [4242, {"T": [{"S": [0, 128, None]}, 0]}]}, "earlier kernel call"),  # a handle never made
    ({"v": [-1]}, "bad view"),
    ({"v": "t"}, "bad view"),
    ({"v": [-1, {"T": [{"ix": 4242}, 0]}]}, "undefined index array"),  # the key's rules still hold
    ({"v": [{"v": [-1, 0]}, 0]}, "earlier kernel call"),  # a view of a view: not a handle
])
async def test_nki_bypass_inline_view_is_checked_as_a_getitem_request(hostile, target, honest, view, words):
    """A view named where it is used (``{"v": [handle, key]}``, tracer.LazyView) gets what
    a getitem request gets: the handle must be one this run made (else the run fails, as
    for any request naming it), the key passes the same checks; a malformed one is refused.
    The kernel does not win."""
    code = _raw([{"op": "call", "mod": "new.isa", "name": "dma_copy", "args": {"L": []},
                  "kw": {"D": [["dst", {"t": -1}], ["src", view]]}, "line": 1}])
    ev = await attack(hostile, target, honest, code, bypass=True)
    assert words in ev.feedback, ev.feedback


async def test_nki_bypass_undefined_index_entry_is_refused(hostile, target, honest):
    """Name an index entry this run never defined (or one of an earlier run)."""
    code = _raw([{"op": "getitem", "t": -1, "key": {"T": [{"ix": 4242}, 0]}, "line": 1, "h": 900001}])
    ev = await attack(hostile, target, honest, code, bypass=True)
    assert "undefined index array" in ev.feedback, ev.feedback


def _serve_crafted_stream(tmp_path, requests, name="requests", **run):
    """Serve a crafted kernel-process request stream (what a hostile kernel process could
    write) to the interpreter, as the kernel ``k(a)`` on a (128, 4) float32 input: the run's
    result, or the KernelFailure it ends with. ``run`` goes to ``execute`` (prove_reorder=)."""
    import os

    import numpy as np

    from autocomp.backends.nki.interp import install
    from autocomp.backends.nki.interp.install import execute
    from autocomp.backends.nki.remote import KernelProcess
    from autocomp.testing.exited_process import ExitedProcess

    install()
    lines = [{"op": "ready", "names": ["a"], "grid": []}] + requests
    stream = tmp_path / f"{name}.jsonl"
    stream.write_bytes(b"".join(json.dumps(m).encode() + b"\n" for m in lines))
    rep_r, rep_w = os.pipe()
    proc = KernelProcess(str(tmp_path / "k.py"), "k", spawned=(ExitedProcess(), os.open(stream, os.O_RDONLY), rep_w),
                         source="")
    try:
        proc.load()
        return execute(proc.kernel, [np.arange(512, dtype=np.float32).reshape(128, 4)],
                       kernel_file=str(tmp_path / "k.py"), names=["a"], **run)
    finally:
        proc.close()
        os.close(rep_r)


def test_nki_bypass_inconsistent_loop_report_leaves_the_reversed_run(tmp_path):
    """The reorder proof trusts the kernel process's report of which affine_range iteration
    each request belongs to only as far as it hangs together: an ``affine`` path that does
    not end with the loop it names, repeats a loop or holds anything but small integers, or
    a loop named without one, makes the proof give up, so the reversed-loop run decides.
    Served straight from a crafted request stream."""

    def load(h, **extra):
        return {"op": "call", "mod": "old.language", "name": "load", "args": {"L": [{"t": -1}]}, "kw": {"D": []},
                "line": 1, "h": h, **extra}

    honest = [load(1, loop=[0, 4, 1, -1, 1], affine=[0, 1]), load(2, loop=[0, 4, 2, -1, 1], affine=[0, 2])]
    forged = {"ends elsewhere": [load(1, loop=[0, 4, 1, -1, 1], affine=[0, 3])],
              "repeats a loop": [load(1, loop=[0, 4, 1, -1, 1], affine=[0, 1, 0, 1])],
              "not integers": [load(1, loop=[0, 4, 1, -1, 1], affine=[0, "1"])],
              "missing": [load(1, loop=[0, 4, 1, -1, 1])]}
    for name, requests in [("honest", honest)] + sorted(forged.items()):
        res = _serve_crafted_stream(tmp_path, requests + [{"op": "return", "value": {"t": -1}}],
                                    name.replace(" ", "_"), prove_reorder=True)
        if name == "honest":
            assert res.reorder_conflict is None, res.reorder_conflict  # two reads of an input: independent
        else:
            assert res.reorder_conflict and "inconsistently" in res.reorder_conflict, (name, res.reorder_conflict)


def test_nki_bypass_omitted_loop_is_the_last_checked_one_of_this_command(tmp_path):
    """A request without ``loop`` belongs to the previous request's loop iteration (the
    compact form): what it inherits is the last loop the interpreter checked in the same
    command. A loop that fails the check (an iteration past its trip count, a non-integer)
    leaves the requests after it outside any loop, and a loop named while loading the kernel
    does not carry into its run. Served straight from a crafted request stream."""
    import os

    import numpy as np

    from autocomp.backends.nki.interp import install
    from autocomp.backends.nki.interp.install import execute
    from autocomp.backends.nki.remote import KernelProcess
    from autocomp.testing.exited_process import ExitedProcess

    def load(h, **extra):
        return {"op": "call", "mod": "old.language", "name": "load", "args": {"L": [{"t": -1}]}, "kw": {"D": []},
                "line": 1, "h": h, **extra}

    lines = [load(1, loop=[0, 4, 1, -1, 1]),  # while loading (no tensors yet: refused, the loop still noted)
             {"op": "ready", "names": ["a"], "grid": []},
             load(1),  # the run's first request: no loop, whatever the load named
             load(2, loop=[0, 4, 9, -1, 1]), load(3),  # past the trip count: none, then none
             load(4, loop=[0, "4", 0, -1, 1]), load(5),  # not integers
             load(6, loop=[0, 4, 2, -1, 1]), load(7),  # checked: both in iteration 2
             load(8, loop=None), load(9),
             {"op": "return", "value": {"t": -1}}]
    install()
    stream = tmp_path / "requests.jsonl"
    stream.write_bytes(b"".join(json.dumps(m).encode() + b"\n" for m in lines))

    rep_r, rep_w = os.pipe()
    proc = KernelProcess(str(tmp_path / "k.py"), "k", spawned=(ExitedProcess(), os.open(stream, os.O_RDONLY), rep_w), source="")
    try:
        proc.load()
        res = execute(proc.kernel, [np.zeros((128, 4), np.float32)], kernel_file=str(tmp_path / "k.py"), names=["a"])
    finally:
        proc.close()
        os.close(rep_r)
    loops = [ins.info.get("loop") for ins in res.trace]
    assert loops == [None, None, None, None, None, [0, 4, 2, -1, 1], [0, 4, 2, -1, 1], None, None], loops


PREFILLED = '''import numpy as np
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def double_into(a, out):
    for i in nl.affine_range(a.shape[0] // 128):
        t = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[i * 128:(i + 1) * 128, :])
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=t)


def get_inputs(rng):
    a = rng.standard_normal((256, 64)).astype(np.float32)
    out = np.zeros_like(a)
    out[128:] = 2.0 * a[128:]  # the second half already holds the answer
    return [a, out]
'''


def test_nki_attack_early_run_without_poison_is_not_the_verdict(tmp_path):
    """The candidate started beside the original (early start) gets no argument poisoned,
    since the oracle's output arguments are not known yet. A kernel writing only the first
    half of its output argument, counting on the rest already being right, would pass that
    run; the verdict comes from the run again with the argument poisoned, and it fails."""
    path = tmp_path / "prefilled.py"
    path.write_text(PREFILLED)
    backend = get_backend("nki", {"timeout": 20, "seeds": [0]})
    problem = backend.make_problem(str(path), PREFILLED)
    assert backend.harness.early_start
    half = problem.code.replace("a.shape[0] // 128", "1")
    honest, cheat = asyncio.run(backend.evaluate(problem, [problem.code, half]))
    assert honest.verdict is Verdict.CORRECT, honest.feedback
    assert cheat.verdict is Verdict.INCORRECT and "output argument 1" in cheat.feedback


@pytest.mark.parametrize("line", [
    b'{"op":"call","mod":"old.language","name":"load","args":{"L":[{"t":NaN}]},"kw":{"D":[]},"line":1,"h":1}',
    b'{"op":"call","mod":"old.language","name":"load","args":{"L":[{"t":-1}]},"kw":{"D":[]},"line":1,"h":1,'
    b'"loop":[0,Infinity,0,-1,1]}',
    b'{"op":"call","mod":"old.language","name":"load","args":{"L":[{"t":-1}]},"kw":{"D":[]},"line":1,'
    b'"h":18446744073709551617}',
    b'{"op":"getitem","t":-1,"key":{"T":[{"S":[0,1e400,null]},{"S":[0,4,null]}]},"line":1,"h":1}',
    b'{"op":"call","mod":"old.language","name":"load\\ud800","args":{"L":[{"t":-1}]},"kw":{"D":[]},"line":1,"h":1}',
    b'[{"op":"call","mod":"old.language","name":"load","args":{"L":[{"t":-1}]},"kw":{"D":[]},"line":1,"h":1},NaN]',
])
def test_nki_bypass_requests_only_the_fallback_json_reader_takes_are_read_as_json_alone_reads_them(tmp_path, monkeypatch, line):
    """Attack: the runner reads the kernel process's requests with orjson first and json when
    orjson refuses a line. A kernel process writes lines on that border (NaN and Infinity
    literals, integers beyond 64 bits, a float overflowing to infinity, a lone surrogate, a
    batch holding a non-request), hoping the two readers disagree or the second one is less
    careful. Whatever the run gives with both readers must be what json alone gives: the same
    trace and values, or the same refusal."""
    import os

    import numpy as np

    from autocomp.backends.nki import remote
    from autocomp.backends.nki.interp import install
    from autocomp.backends.nki.interp.install import execute
    from autocomp.backends.nki.remote import KernelFailure, KernelProcess
    from autocomp.testing.exited_process import ExitedProcess

    install()
    stream = tmp_path / "requests.jsonl"
    stream.write_bytes(b'{"op":"ready","names":["a"],"grid":[]}\n' + line + b"\n" + b'{"op":"return","value":{"t":1}}\n')

    def outcome():
        rep_r, rep_w = os.pipe()
        proc = KernelProcess(str(tmp_path / "k.py"), "k", spawned=(ExitedProcess(), os.open(stream, os.O_RDONLY), rep_w),
                             source="")
        try:
            proc.load()
            res = execute(proc.kernel, [np.zeros((128, 4), np.float32)], kernel_file=str(tmp_path / "k.py"), names=["a"])
            return ("ran", [i.to_list() for i in res.trace], [o.tolist() for o in res.outputs])
        except KernelFailure as exc:
            return ("refused", exc.error.get("kind"), exc.error.get("message"))
        except Exception as exc:  # noqa: BLE001 - compared, not hidden: both readers must agree
            return ("raised", type(exc).__name__, str(exc))
        finally:
            proc.close()
            os.close(rep_r)

    both = outcome()
    monkeypatch.setattr(remote, "_orjson", None)
    json_alone = outcome()
    assert both == json_alone
    # A refusal the runner reports, or the kernel's own NKI error: never another exception.
    assert both[0] != "raised" or both[1] == "NkiError", both


def test_nki_attack_a_near_copy_of_the_original_is_evaluated_in_full(tmp_path, monkeypatch):
    """Attack: the original's own text is not run as a candidate (the oracle's run of it
    stands, only the reversed run is left). A cheat that looks like the original (one
    constant changed, a comment saying it is the original, a trailing space) hopes to be
    taken for it and inherit its verdict. Only the exact file the oracle ran is; everything
    else runs the full candidate path and is judged on what it computes."""
    from autocomp.backends.nki.harness import Harness

    kinds = []
    orig = Harness._run_child

    async def run_child(self, file_text, function, mode, extra, *a, **k):
        kinds.append((mode, bool(extra.get("reverse_only"))))
        return await orig(self, file_text, function, mode, extra, *a, **k)

    monkeypatch.setattr(Harness, "_run_child", run_child)
    path = tmp_path / "scale_add.py"
    path.write_text(BASE)
    backend = get_backend("nki", {"timeout": 20, "seeds": [0]})
    problem = backend.make_problem(str(path), BASE)
    cheat = ORIGINAL.replace("operand0=2.0", "operand0=3.0").rstrip("\n") + "  # identical to the original\n"
    near = ORIGINAL.replace("\n", " \n", 1)
    ev_cheat, ev_near, ev_same = asyncio.run(backend.evaluate(problem, [cheat, near, ORIGINAL]))
    assert ev_cheat.verdict is Verdict.INCORRECT, ev_cheat.feedback
    assert ev_near.verdict is Verdict.CORRECT and ev_same.verdict is Verdict.CORRECT
    full = [k for k in kinds if k == ("candidate", False)]
    assert len(full) == 2 and ("candidate", True) in kinds  # the two look-alikes in full; the original not


def test_nki_attack_a_candidate_file_cannot_choose_the_inputs_it_is_judged_on(tmp_path, capsys):
    """Attack, on `autocomp eval FILE --against BASE`: BASE's original is the oracle of both
    evaluations and runs once (its key is BASE's alone). The candidate FILE brings its own
    `get_inputs` (all zeros) and a kernel that returns zeros, hoping the shared reference is
    computed on FILE's inputs, where zeros would be the right answer. The reference and the
    inputs are BASE's: the cheat is incorrect."""
    from autocomp.cli.main import main

    base = tmp_path / "base.py"
    base.write_text(BASE)
    zeros = ORIGINAL.replace(
        "nisa.scalar_tensor_tensor(dst=z, data=x, op0=nl.multiply, operand0=2.0, op1=nl.add, operand1=y)",
        "nisa.memset(dst=z, value=0.0)")
    assert zeros != ORIGINAL
    cand = tmp_path / "cheat.py"
    cand.write_text(BASE.replace(ORIGINAL, zeros).replace(
        "return [rng.standard_normal((256, 128)).astype(np.float32), rng.standard_normal((256, 128)).astype(np.float32)]",
        "return [np.zeros((256, 128), np.float32), np.zeros((256, 128), np.float32)]"))
    code = main(["eval", str(cand), "--against", str(base), "--json", "--no-cache"])
    result = json.loads(capsys.readouterr().out)
    assert code != 0 and result["verdict"] == "incorrect", result
    assert result["baseline"]["verdict"] == "correct"


@pytest.mark.parametrize("tail", [
    [5] + [7] * 4,  # more PSUM ids than the batch holds
    [-3],  # a negative count
    [1 << 20] + [1] * 8,  # a count past any instruction's operands
])
def test_nki_bypass_a_hostile_trace_batch_with_bad_psum_ids_is_a_malformed_channel(tail):
    """Bypass: the PSUM operand ids of an instruction now travel with it in the binary trace
    (not in its template). A child that could write the channel sends counts that overrun
    the batch, are negative or absurd, hoping the parent reads past the batch or builds a
    huge list. The parent refuses the channel, with nothing rebuilt from it."""
    from array import array

    from autocomp.backends.nki.harness import parse_channel

    ints = [0, 0, 128, 4, 4, 0, 1, 1, 0, 128, 0, 16, 0] + tail
    payload = array("q", ints).tobytes()
    raw = json.dumps(["tb", [[0, "memset", "vector", 3, {}]], len(payload)]).encode() + b"\n" + payload
    result, trace, _, problem = parse_channel(raw + b'["result", {"status": "ok"}]\n')
    assert result is None and "malformed" in problem and not trace


def test_nki_bypass_a_channel_cannot_end_the_trace_early_and_go_on():
    """Bypass: the parent starts the estimate when the child says the trace is whole
    (``["trace_end"]``). A child that could write the channel ends the trace after a cheap
    prefix, so the estimate (of the prefix) comes out fast, then sends the costly rest for
    the verdict's outputs. Anything that would change the trace after its end makes the
    channel malformed: the verdict never pairs an estimate with a trace it is not of."""
    from autocomp.backends.nki.harness import ChannelParser, parse_channel
    from autocomp.backends.nki.trace import Instr

    cheap = Instr("memset", "vector", 3, 128, 4, 4, (), ((1, 0, 128, 0, 16),), {}).to_list()
    costly = Instr("nc_matmul", "tensor", 4, 128, 512, 2, ((1, 0, 128, 0, 16),), ((2, 0, 128, 0, 2048),), {}).to_list()
    raw = (json.dumps(["t", [["i", cheap]]]).encode() + b"\n" + b'["trace_end"]\n'
           + json.dumps(["t", [["i", costly]] * 1000]).encode() + b"\n" + b'["result", {"status": "ok"}]\n')
    estimated = []
    parser = ChannelParser(on_trace=lambda trace: estimated.append(len(trace)))
    parser.feed(raw)
    assert parser.finish()[0] is None and estimated == [1]
    result, trace, _, problem = parse_channel(raw)
    assert result is None and not trace and "after the trace's end" in problem


@pytest.mark.parametrize("smuggle", [
    "    f = open\n    f('/etc/passwd')\n",
    "    f = getattr\n    f(a, 'shape')\n",
    "    f = print\n    f('PASS')\n",
    "    f = type(a)\n    f()\n",
    "    f = a.__class__\n    f()\n",
    "    f = eval\n    f('1')\n",
])
def test_nki_attack_a_local_cannot_call_what_a_direct_call_could_not(tmp_path, smuggle):
    """Attack: calling a local is allowed now (`act = nl.gelu; act(x)`), on the reasoning that
    what a local holds was checked where it was assigned. A kernel tries to launder a
    forbidden callable through a local (a builtin taken as a value, a class, a dunder, eval)
    and call it there. Each is refused where it is taken, before anything runs."""
    path = tmp_path / "scale_add.py"
    path.write_text(BASE)
    backend = get_backend("nki", {"timeout": 20, "seeds": [0]})
    problem = backend.make_problem(str(path), BASE)
    (ev,) = asyncio.run(backend.evaluate(problem, [kernel(before=smuggle)]))
    assert ev.verdict is Verdict.REJECTED, (smuggle, ev.verdict, ev.feedback)


async def test_nki_attack_dtype_cast_reads_no_tile_values(hostile, target, honest):
    """``np.float32(x)`` is allowed as a typed host scalar (``bias=np.float32(eps)`` compiles
    on hardware). The attack casts a loaded tile instead, to get its values on the host and
    compute the answer there. Beaten by construction: the kernel's process holds handles,
    never values, so the cast has nothing to read and the candidate fails; a cast of a list
    literal (a host array) is refused by the allowlist."""
    code = kernel(before='''    first = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=first, src=a[0:128, :])
    peek = np.float32(first)
    raise ValueError("read %r" % (peek,))
''')
    ev = await attack(hostile, target, honest, code)
    assert ev.verdict is not Verdict.CORRECT and "read " not in ev.feedback, ev.feedback
    literal = await attack(hostile, target, honest, kernel(before="    host = np.float32([1.0, 2.0])\n"))
    rejected(literal, "computes on the host")


@pytest.mark.parametrize("read", ["np.prod(first)", "sum(first)", "sorted(first)", "list(map(float, first))",
                                  "isinstance(first, float) or first", "np.ceil(first)", "np.dtype(first)",
                                  "np.finfo(first)", "np.arange(first)"])
async def test_nki_attack_host_builtins_read_no_tile_values(hostile, target, honest, read):
    """The allowlist lets kernels call a few host helpers on shapes, dtypes and index arrays
    (np.prod, np.dtype, np.finfo, np.ceil, np.arange, sum, sorted, map, isinstance against
    builtin types), as AWS's and Autocomp's own kernels do. The attack applies them to a
    loaded tile to pull its values into host Python. Beaten by construction: the kernel's
    process holds a handle, iterating a tile is refused, and nothing but NKI instructions
    moves data (what comes back is an error, the handle, or facts of the tile's dtype, which
    ``first.dtype`` says anyway)."""
    code = kernel(before=f'''    first = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=first, src=a[0:128, :])
    peek = {read}
    raise ValueError("read %r" % (peek,))
''')
    ev = await attack(hostile, target, honest, code)
    assert ev.verdict is not Verdict.CORRECT
    assert ("read " not in ev.feedback or "<nki tensor" in ev.feedback or "read dtype('float32')" in ev.feedback
            or "read finfo(" in ev.feedback), ev.feedback


async def test_nki_attack_host_array_as_tile_data(hostile, target, honest):
    """An array made on the host with np.arange handed to an instruction as its data, to
    write host-made values into the output. Beaten by the interpreter's request check: host
    arrays travel only as an index, a mask or an nl.shared_constant, so the instruction is
    refused at run time."""
    code = kernel(before='''    host = np.arange(a.shape[1], dtype=np.float32)
    t = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=t, src=host)
''')
    ev = await attack(hostile, target, honest, code)
    assert ev.verdict is Verdict.RUNTIME_ERROR and "a host array can only index a tile" in ev.feedback, ev.feedback


@pytest.mark.parametrize("use", [
    "nisa.tensor_copy(dst=t, src=smuggled)",
    "nl.store(out[0:128, :], value=smuggled)",
    "nl.store(out[0:128, :], value=nl.add(nl.load(a[0:128, :]), smuggled))",
    "nisa.tensor_copy_dynamic_src(dst=t, src=smuggled)",
    "nisa.scalar_tensor_tensor(dst=t, data=smuggled, op0=nl.multiply, operand0=1.0, op1=nl.add, operand1=t)",
])
async def test_nki_bypass_dynamic_offsets_carry_no_host_data(hostile, target, honest, use):
    """The interpreter now accepts ``offset_tile + host_array`` (a dynamic offset, as
    ``offsets[0, i] + i_f`` for nisa.tensor_copy_dynamic_src/dst). With the allowlist off, the
    attack computes the answer on the host and adds it to a one-element integer tile, hoping
    the sum becomes tile data: an instruction's operand, a stored value, an addend of a data
    tile, a dynamic copy's source. Beaten by construction: the sum is an index object that
    only indexes an on-chip tile, so every use as data is refused."""
    code = HEAD + f'''    pa, pb = get_inputs(np.random.default_rng(0))
    want = ((2.0 * pa + pb) * 1e6).astype(np.int32)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    off = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.iota(dst=off, expr=nl.arange(1)[None, :], dtype=nl.int32)
    t = nl.ndarray((128, a.shape[1]), dtype=nl.float32, buffer=nl.sbuf)
    smuggled = off + want[:128]
    {use}
    return out
'''
    ev = await attack(hostile, target, honest, code, bypass=True)
    assert ev.verdict is Verdict.RUNTIME_ERROR, (ev.verdict, ev.feedback)
    assert "DynamicIndex" in ev.feedback or "dynamic offset" in ev.feedback, ev.feedback


async def test_nki_attack_operator_and_functools_reach_no_attributes(hostile, target, honest):
    """functools.reduce and operator's arithmetic are allowed for shape arithmetic
    (``reduce(mul, shape, 1)``, as Autocomp's cumsum does). The attack takes the rest of those
    modules: ``operator.attrgetter("__globals__")`` and ``functools.partial`` to reach an
    object's internals by string. Beaten by the allowlist: the modules are trees of the
    allowed names only, so both are refused with their line."""
    code = kernel(prelude="import functools\nimport operator\n", before='''    grab = operator.attrgetter("__globals__")
    bound = functools.partial(grab, scale_add)
''')
    ev = await attack(hostile, target, honest, code)
    rejected(ev, "operator.attrgetter", "functools.partial")


def test_nki_attack_forged_range_forms_cannot_blow_up_or_wrap(tmp_path):
    """A kernel process may send a large index array as a range form ([first, axis] and a
    shape: the interpreter builds the array itself). A forged form must not make the
    interpreter build a huge array (the element bound of whole arrays applies), wrap around
    its integer type (a negative index from a range "past" int8), name an axis the shape
    lacks, or slip host data into a tile: each ends the kernel with an error, and an honest
    form selects what its array selects. Served straight from a crafted request stream."""
    from autocomp.backends.nki.remote import KernelFailure

    def rg(form, shape, dtype="int64"):
        return {"rg": form, "shape": shape, "dtype": dtype}

    def view(key, h=1):
        return {"op": "getitem", "t": -1, "key": {"T": key}, "line": 1, "h": h}

    def load(src, h):
        return {"op": "call", "mod": "old.language", "name": "load", "args": {"L": [{"t": src}]}, "kw": {"D": []},
                "line": 1, "h": h}

    def serve(requests):
        return _serve_crafted_stream(tmp_path, requests)

    honest = serve([view([rg([0, 0], [128, 2]), rg([2, 1], [128, 2])]), load(1, 2), {"op": "return", "value": {"t": -1}}])
    assert honest.trace[-1].op == "dma_copy" and honest.trace[-1].partitions == 128 and honest.trace[-1].free == 2
    forged = {
        "huge": [view([rg([0, 0], [1 << 16, 1 << 16]), 0]), load(1, 2)],
        "wraps int8": [view([rg([100, 0], [128, 1], "int8"), 0]), load(1, 2)],
        "axis it lacks": [view([rg([0, 3], [128, 1]), 0]), load(1, 2)],
        "float": [view([rg([0, 0], [128, 1], "float64"), 0]), load(1, 2)],
        "as tile data": [{"op": "binary", "name": "add", "a": {"t": -1}, "b": rg([0, 0], [128, 4]), "line": 1, "h": 2}],
    }
    for name, requests in forged.items():
        with pytest.raises(KernelFailure):
            serve(requests + [{"op": "return", "value": {"t": -1}}])
