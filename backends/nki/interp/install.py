"""Module objects for ``nki`` / ``neuronxcc.nki`` and running a kernel on them.

:func:`install` puts the interpreter's modules into ``sys.modules`` of the *current*
process (the harness child that runs one kernel) — and only for an API family whose real
Neuron SDK does not import, so a working SDK is never shadowed. :func:`execute` runs one
kernel on host arrays and returns its outputs, its arguments afterwards and the trace.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import itertools
import importlib
import sys
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from autocomp.backends.nki.interp import compiler, core, isa, language, torch_bridge
from autocomp.backends.nki.interp.core import STATE, Tensor, fail
from autocomp.backends.nki.interp.errors import NkiError
from autocomp.backends.nki.trace import Instr

FAMILIES: dict[str, str] = {"new": "nki", "old": "neuronxcc"}
_MARK = "__autocomp_nki_interpreter__"


def _enter(style: str, name: str) -> None:
    if STATE.style is None:
        STATE.style = style
    elif STATE.style != style:
        other = "neuronxcc.nki (older API)" if STATE.style == "old" else "nki (current API)"
        this = "nki" if style == "new" else "neuronxcc.nki"
        raise fail("mixed-api", f"{this}.{name} mixes API styles: this kernel already uses {other}; use one API per kernel",
                   name, static=True)


def _styled(style: str, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        _enter(style, name)
        if STATE.site is not None or STATE.remote_line is not None:
            return fn(*args, **kwargs)
        # Called from the kernel's own code (this process runs it): every instruction and
        # error of this call is at that line, found once here instead of by a frame walk
        # per instruction (nothing a call runs goes back into kernel code).
        site = core.kernel_site(sys._getframe(1))
        if site is None:
            return fn(*args, **kwargs)
        STATE.site = site
        try:
            return fn(*args, **kwargs)
        finally:
            STATE.site = None

    return call


# ---------------------------------------------------------------------------- running
@dataclass
class RunResult:
    outputs: list[np.ndarray]
    args_after: list[np.ndarray]
    trace: list[Instr] = field(default_factory=list)
    access_log: Any = None  # with prove_reorder: the run's reorder_proof.AccessLog

    @property
    def reorder_conflict(self) -> str | None:
        """With prove_reorder: None when the affine_range iterations provably commute (see
        reorder_proof), else why that could not be shown; "" when not asked. Computed when
        first asked (the runner sends the trace's end first)."""
        if self.access_log is None:
            return ""
        if not hasattr(self, "_conflict"):
            self._conflict = self.access_log.conflict()
        return self._conflict


def _to_host(t: Any, what: str) -> np.ndarray:
    if isinstance(t, Tensor):
        if not t.is_hbm:
            raise NkiError("output", f"{what} is a {t._alloc.buffer} tile; a kernel returns HBM tensors (nl.ndarray(..., "
                           "buffer=nl.shared_hbm) written with a DMA)", call="return")
        w = t._written_mask()
        if not w.all():
            missing = int(w.size - np.count_nonzero(w))
            raise NkiError("output-unwritten", f"{what} (allocated at line {t._alloc.line}): {missing} of {w.size} elements "
                           "were never written", call="return", limit="every output element must be stored",
                           file=STATE.kernel_file, line=t._alloc.line)
        return core._host_copy(t._values())  # (an all-zero output as zeroed memory: see _host_copy)
    if isinstance(t, np.ndarray):
        raise NkiError("output", f"{what} is a host NumPy array, not an NKI tensor: kernels must compute with NKI "
                       "instructions and return an HBM tensor", call="return")
    raise NkiError("output", f"{what} is a {type(t).__name__}; a kernel returns HBM tensors", call="return")


def _collect(result: Any) -> list[np.ndarray]:
    if result is None:
        return []
    if isinstance(result, (tuple, list)):
        return [_to_host(r, f"output {i}") for i, r in enumerate(result)]
    return [_to_host(result, "output")]


# The cyclic garbage collector's first threshold while a kernel runs. Every NKI instruction
# makes a dozen small containers (its trace entry, views, masks) and almost none become
# cyclic garbage (a GEMM at its published shape leaves under a thousand cyclic objects
# behind), but at Python's default of 700 the collector ran over a heap the growing trace
# keeps large more than a thousand times a run: about 2 of 15 CPU seconds. It still runs,
# every this many container allocations; the thresholds are restored after the run.
GC_THRESHOLDS = (100_000, 50, 100)


@contextlib.contextmanager
def relaxed_gc() -> Any:
    """Collect cyclic garbage rarely while a kernel runs (see GC_THRESHOLDS); a collector
    that is off stays off."""
    before = gc.get_threshold()
    if before[0] > 0:
        gc.set_threshold(*(max(a, b) for a, b in zip(GC_THRESHOLDS, before)))
    try:
        yield
    finally:
        gc.set_threshold(*before)


def execute(fn: Callable[..., Any], arrays: Sequence[np.ndarray], *, kernel_file: str = "", reverse_affine: bool = False,
            grid: tuple[int, ...] = (), names: Sequence[str] = (), kwargs: dict[str, Any] | None = None,
            traced: bool = True, prove_reorder: bool = False) -> RunResult:
    """Run ``fn`` on host ``arrays`` (each becomes an HBM argument) and collect results.
    ``traced=False`` (the reversed-loop run, whose outputs are all that is compared) skips
    the trace's regions and liveness: the result's trace is then empty, and the capacity
    check over live ranges is left to the traced run of the same kernel. ``prove_reorder``
    (a traced run) also tries to show that the affine_range iterations commute
    (``RunResult.reorder_conflict``)."""
    fn = getattr(fn, "func", fn)
    with relaxed_gc():
        return _execute(fn, arrays, kernel_file, reverse_affine, grid, names, kwargs, traced, prove_reorder)


def _execute(fn: Callable[..., Any], arrays: Sequence[np.ndarray], kernel_file: str, reverse_affine: bool,
             grid: tuple[int, ...], names: Sequence[str], kwargs: dict[str, Any] | None, traced: bool,
             prove_reorder: bool = False) -> RunResult:
    core.begin_run(kernel_file, reverse_affine, traced, prove_reorder)
    try:
        # Arrays are HBM tensors; 0-d values and tuples of numbers are compile-time constants.
        args = [_argument(a, names[i] if i < len(names) else f"arg{i}") for i, a in enumerate(arrays)]
        # Array keyword arguments are HBM inputs too (numbers and tuples stay constants).
        kwargs = {k: core.input_tensor(v, k) if isinstance(v, np.ndarray) and v.ndim > 0 else v
                  for k, v in (kwargs or {}).items()}
        outputs: list[np.ndarray] = []
        if grid:
            STATE.grid = tuple(int(g) for g in grid)
            result = None
            for pid in np.ndindex(*STATE.grid):
                STATE.program_ids = tuple(int(i) for i in pid)
                STATE.shared_counter = itertools.count()  # each instance names the same shared outputs
                result = fn(*args, **(kwargs or {}))
            outputs = _collect(result)
        else:
            outputs = _collect(fn(*args, **(kwargs or {})))
        core.check_live_capacity()
        # The arguments' own arrays (input_tensor's copies, which nothing touches once the run
        # is over): no second copy of inputs that may be hundreds of MB.
        after = [a._data if isinstance(a, Tensor) else
                 tuple(e._data if isinstance(e, Tensor) else e for e in a) if isinstance(a, tuple) else
                 np.asarray(arrays[i]).copy()
                 for i, a in enumerate(args)]
        return RunResult(outputs, after, list(STATE.trace) if STATE.traced else [], STATE.proof)
    finally:
        core.end_run()


def _is_array(x: Any) -> bool:
    return isinstance(x, np.ndarray) and x.ndim > 0


def _argument(a: Any, name: str) -> Any:
    """One host argument as the kernel sees it: an array is an HBM tensor; a tuple holding
    arrays (``past_key_value = (k_cache, v_cache)``) a tuple of HBM tensors; other tuples (a
    shape, a pool size) and 0-d values compile-time constants."""
    if isinstance(a, tuple):
        return tuple(core.input_tensor(e, f"{name}[{j}]") if _is_array(e) else e for j, e in enumerate(a))
    if np.ndim(a) == 0:
        return np.asarray(a).item()
    return core.input_tensor(a, name)


def _host_argument(a: Any) -> Any:
    """A host-code argument as :func:`execute` takes it: torch tensors as NumPy arrays, a
    tuple or list of tensors as a tuple of arrays."""
    if isinstance(a, (tuple, list)) and any(torch_bridge.is_torch(e) or _is_array(e) for e in a):
        return tuple(np.asarray(torch_bridge.to_host(e)) if torch_bridge.is_torch(e) or _is_array(e) else e for e in a)
    return a if isinstance(a, tuple) else np.asarray(torch_bridge.to_host(a))


class Kernel:
    """What ``@nki.jit`` returns: callable on NumPy arrays (runs the interpreter) and
    indexable with a launch grid (``kernel[2, 2](a, b)``)."""

    def __init__(self, func: Callable[..., Any]) -> None:
        self.func = func
        functools.update_wrapper(self, func)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if STATE.active or any(isinstance(a, Tensor) for a in args):
            return self.func(*args, **kwargs)
        return _host_call(self.func, args, kwargs, ())

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        grid = grid if isinstance(grid, tuple) else (grid,)

        def launch(*args: Any, **kwargs: Any) -> Any:
            return _host_call(self.func, args, kwargs, grid)

        return launch


def _host_call(func: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any], grid: tuple) -> Any:
    """One run of a kernel called from host code, on NumPy arrays or torch tensors (which
    get torch tensors back, as under torch_xla)."""
    from_torch = any(torch_bridge.is_torch(a) or isinstance(a, (tuple, list)) and any(map(torch_bridge.is_torch, a))
                     for a in list(args) + list(kwargs.values()))
    arrays = [_host_argument(a) for a in args]
    kwargs = {k: torch_bridge.to_host(v) for k, v in kwargs.items()}
    res = execute(func, arrays, grid=grid, kwargs=kwargs)
    out = res.outputs[0] if len(res.outputs) == 1 else tuple(res.outputs)
    return torch_bridge.to_torch(out) if from_torch else out


def jit(func: Callable[..., Any] | None = None, **options: Any) -> Any:
    if func is None:
        return lambda f: f if isinstance(f, Kernel) else Kernel(f)
    return func if isinstance(func, Kernel) else Kernel(func)


def simulate_kernel(kernel: Any, *args: Any, **kwargs: Any) -> Any:
    """Run a kernel (or a launch ``kernel[grid]``, already a host-level callable)."""
    if isinstance(kernel, Kernel) or getattr(kernel, "__name__", "") != "launch":
        kernel = kernel if isinstance(kernel, Kernel) else Kernel(kernel)
    return kernel(*args, **kwargs)


# ---------------------------------------------------------------------------- modules
def _module(name: str, attrs: dict[str, Any]) -> types.ModuleType:
    mod = types.ModuleType(name, f"Autocomp's NumPy interpreter of {name} (not the AWS Neuron SDK).")
    mod.__dict__.update(attrs)
    setattr(mod, _MARK, True)
    return mod


def _language_attrs(style: str) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    for name, value in core.DTYPES.items():
        attrs[name] = value
    for name, value in language.SHARED.items():
        attrs[name] = _styled(style, f"language.{name}", value) if callable(value) and not isinstance(value, type) else value
    attrs["mgrid"] = language.mgrid
    for name, value in language.OLDER_ONLY.items():
        attrs[name] = _styled(style, f"language.{name}", value)
    for name, op in language.OPS.items():
        # Each module style has operator objects of its own, so that `onl.exp(t)` of
        # neuronxcc.nki in an `import nki` kernel is still caught as mixing the two APIs; as
        # op= they travel by name, the same operator in either style.
        attrs[name] = isa.Op(op.name, op.fn, op.arity, op.engine,
                             call=_styled(style, f"language.{name}", op._call) if op._call is not None else None)
    attrs["tile_size"] = language.tile_size
    return attrs


def _isa_attrs(style: str) -> dict[str, Any]:
    table = isa.FUNCTIONS if style == "new" else isa.OLD_FUNCTIONS
    attrs: dict[str, Any] = {name: _styled(style, f"isa.{name}", fn) for name, fn in table.items()}
    attrs.update(
        engine=isa.engine, reduce_cmd=isa.reduce_cmd, oob_mode=isa.oob_mode, dge_mode=isa.dge_mode,
        matmul_perf_mode=isa.matmul_perf_mode,
        tensor_engine="tensor", vector_engine="vector", scalar_engine="scalar", gpsimd_engine="gpsimd", unknown_engine=None,
        nc_version=types.SimpleNamespace(gen2="gen2", gen3="gen3"),
        get_nc_version=lambda: "gen2",
    )
    return attrs


def build_modules(style: str) -> dict[str, types.ModuleType]:
    """The module objects for one API family, keyed by their import names."""
    lang = _module(("nki" if style == "new" else "neuronxcc.nki") + ".language", _language_attrs(style))
    isa_mod = _module(("nki" if style == "new" else "neuronxcc.nki") + ".isa", _isa_attrs(style))
    ncc = _module(("nki" if style == "new" else "neuronxcc.nki") + ".compiler", dict(compiler.ATTRS))
    common = {"compiler": ncc, "tensor": Tensor, "jit": jit, "baremetal": jit, "benchmark": jit, "profile": jit, "trace": jit, "simulate_kernel": simulate_kernel,
              "simulate": lambda kernel, *a, **k: simulate_kernel(kernel, *a, **k), "language": lang, "isa": isa_mod,
              "Kernel": Kernel}
    if style == "new":
        root = _module("nki", common)
        root.__path__ = []  # a package, so `import nki.language` works
        return {"nki": root, "nki.language": lang, "nki.isa": isa_mod, "nki.compiler": ncc}
    nki_mod = _module("neuronxcc.nki", common)
    nki_mod.__path__ = []
    typing_mod = _module("neuronxcc.nki.typing", {"tensor": Tensor})
    nki_mod.typing = typing_mod
    root = _module("neuronxcc", {"nki": nki_mod})
    root.__path__ = []
    return {"neuronxcc": root, "neuronxcc.nki": nki_mod, "neuronxcc.nki.language": lang, "neuronxcc.nki.isa": isa_mod,
            "neuronxcc.nki.typing": typing_mod, "neuronxcc.nki.compiler": ncc, **annotation_modules(lang, ncc, Tensor)}


class TileIndex:
    """``neuronxcc.nki.compiler.backends.neuron.indexing.TileIndex``: the SDK's type of index
    expressions, which AWS's reference kernels import only to annotate parameters."""


def annotation_modules(lang: types.ModuleType, ncc: types.ModuleType, tensor: Any) -> dict[str, types.ModuleType]:
    """The SDK-internal modules AWS's reference kernels import names from for annotations and
    sizes (``...compiler.backends.neuron.tensor.local_tile``, ``...indexing.TileIndex``,
    ``neuronxcc.nki.language.constants.sizeinbytes``). Nothing in them touches data."""
    lang.__path__ = []
    ncc.__path__ = []
    consts = _module("neuronxcc.nki.language.constants", {"sizeinbytes": lambda dt: int(core.as_dtype(dt).itemsize)})
    backends = _module("neuronxcc.nki.compiler.backends", {})
    neuron = _module("neuronxcc.nki.compiler.backends.neuron", {})
    tmod = _module("neuronxcc.nki.compiler.backends.neuron.tensor", {"local_tile": tensor, "Tensor": tensor})
    imod = _module("neuronxcc.nki.compiler.backends.neuron.indexing", {"TileIndex": TileIndex})
    for m in (backends, neuron):
        m.__path__ = []
    backends.neuron, neuron.tensor, neuron.indexing, lang.constants = neuron, tmod, imod, consts
    return {"neuronxcc.nki.language.constants": consts, "neuronxcc.nki.compiler.backends": backends,
            "neuronxcc.nki.compiler.backends.neuron": neuron, "neuronxcc.nki.compiler.backends.neuron.tensor": tmod,
            "neuronxcc.nki.compiler.backends.neuron.indexing": imod}


def real_sdk(style: str) -> str | None:
    """The version of a working Neuron SDK for this family, or None (placeholders don't count)."""
    mod_name = "nki.language" if style == "new" else "neuronxcc.nki.language"
    existing = sys.modules.get(mod_name)
    if existing is not None and getattr(existing, _MARK, False):
        return None
    try:
        mod = importlib.import_module(mod_name)
    except Exception:
        return None
    if getattr(mod, _MARK, False):
        return None
    root = importlib.import_module(FAMILIES[style])
    return str(getattr(root, "__version__", "unknown version"))


def install(styles: Sequence[str] = ("new", "old")) -> dict[str, str]:
    """Provide the interpreter's modules for each family without a working real SDK.

    Returns {style: "interpreter" | "real <version>"}.
    """
    done: dict[str, str] = {}
    for style in styles:
        version = real_sdk(style)
        if version is not None:
            done[style] = f"real {version}"
            continue
        for name in list(sys.modules):  # drop a placeholder package that does not work
            if name == FAMILIES[style] or name.startswith(FAMILIES[style] + "."):
                if not getattr(sys.modules[name], _MARK, False):
                    del sys.modules[name]
        sys.modules.update(build_modules(style))
        done[style] = "interpreter"
    if done.get("old") == "interpreter":
        _install_nki_jit_shim()
    return done


def _install_nki_jit_shim() -> None:
    """``from torch_neuronx import nki_jit`` (PyTorch-Neuron kernels) when torch_neuronx is
    absent; a working torch_neuronx is left alone."""
    try:
        importlib.import_module("torch_neuronx")
        return
    except Exception:
        pass
    ops = _module("torch_neuronx.xla_impl.ops", {"nki_jit": jit})
    xla = _module("torch_neuronx.xla_impl", {"ops": ops})
    xla.__path__ = []
    root = _module("torch_neuronx", {"nki_jit": jit, "xla_impl": xla})
    root.__path__ = []
    sys.modules.update({"torch_neuronx": root, "torch_neuronx.xla_impl": xla, "torch_neuronx.xla_impl.ops": ops})
