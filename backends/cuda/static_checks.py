"""The static tier: refuse candidates that cheat or fall back, before anything is built.

The rules follow what KernelBench's checker and published post-mortems of withdrawn
LLM-kernel results caught: calling the reference or PyTorch ops instead of a kernel,
try/except fallbacks, work on side streams or threads, tampering with timing or inputs,
silently lowering precision, caching results across calls, and reaching outside the
process (files, exits, dynamic loading) where a verdict could be forged. Each finding
carries a rule id, a reason the LLM can act on, and a line relative to the kernel.
The dynamic checks (poisoned outputs, inputs compared after the run, several seeds)
catch what text cannot show; these rules make the cheap cases cheap to reject.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from autocomp.backends import cscan


@dataclass(frozen=True)
class Finding:
    rule: str
    reason: str
    line: int | None = None  # 1-based, relative to the kernel span

    def render(self) -> str:
        where = f" (kernel line {self.line})" if self.line else ""
        return f"static check `{self.rule}`{where}: {self.reason}"


# -- CUDA C++ rules (both .cu candidates and inline sources) -----------------------------
_CUDA_RULES: list[tuple[str, re.Pattern[str], str]] = [
    ("side-stream", re.compile(r"\bcudaStreamCreate\w*|\bgetStreamFromPool\b|\bcudaStreamNonBlocking\b|\bcudaGraphLaunch\b"),
     "creates or uses a side stream; all work must run on the caller's stream so timing and ordering see it"),
    ("threads", re.compile(r"\bstd::thread\b|\bpthread_create\b|\bstd::async\b|#\s*include\s*<thread>|\bfork\s*\("),
     "starts host threads or processes; work must happen in the kernels launched by the entry"),
    ("timing-tamper", re.compile(r"\bcudaEvent(Create|Record|ElapsedTime|Synchronize)\w*|\bcudaProfiler\w+|\bclock_gettime\b|\bstd::chrono\b"),
     "touches CUDA events or clocks; timing belongs to the harness alone"),
    ("process-control", re.compile(r"(?<![\w.])(exit|_exit|quick_exit|abort|system|popen|execv\w*)\s*\(|\bcudaDeviceReset\b|\bcudaSetDevice\b"),
     "exits, resets the device or runs other programs; a candidate must only compute"),
    ("file-access", re.compile(r"\b(fopen|freopen|fwrite|fputs|ofstream|ifstream|fstream|dlopen|dlsym|getenv)\b"),
     "opens files, loads libraries or reads the environment; a candidate cannot touch the harness's results"),
    ("host-main", re.compile(r"\bint\s+main\s*\("),
     "defines main(); the harness provides the program, the candidate provides kernels and the entry"),
]


def check_cuda(source: str, line_base: int = 0, original: str | None = None) -> list[Finding]:
    """Rules for CUDA C++ text. ``line_base`` is added to 0-based line numbers of
    ``source`` to give 1-based kernel lines; ``original`` enables the precision rule."""
    findings: list[Finding] = []
    masked = cscan.mask(source)
    # keep #include lines visible for the include-based rules
    visible = "".join(
        raw if raw.lstrip().startswith("#") else m
        for raw, m in zip(source.splitlines(keepends=True), masked.splitlines(keepends=True))
    )
    for rule, pattern, reason in _CUDA_RULES:
        m = pattern.search(visible)
        if m:
            findings.append(Finding(rule, f"{reason} (found `{m.group(0).strip()}`)", line_base + cscan.line_of(visible, m.start()) + 1))
    for f in cscan.find_functions(source, cxx=True, closed_only=True):
        if f.is_global and not cscan.mask(f.body(source)).strip("{} \n\t\r"):
            findings.append(Finding("empty-kernel", f"kernel `{f.name}` has an empty body; it does no work",
                                    line_base + cscan.line_of(source, f.start) + 1))
    if original is not None:
        low = re.compile(r"\b(__half2?|__nv_bfloat162?|__float2half\w*|__float2bfloat16\w*|half2)\b")
        m = low.search(masked)
        if m and not low.search(cscan.mask(original)):
            findings.append(Finding("precision", f"computes in reduced precision (`{m.group(0)}`) where the original "
                                    "does not; keep the original's data types", line_base + cscan.line_of(masked, m.start()) + 1))
    return findings


# -- KernelBench-style Python rules ------------------------------------------------------
TORCH_COMPUTE = {
    "matmul", "mm", "bmm", "addmm", "addbmm", "baddbmm", "einsum", "tensordot", "dot", "mv", "outer", "linear",
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "softmax", "log_softmax", "layer_norm", "group_norm", "batch_norm", "instance_norm", "rms_norm", "normalize",
    "sum", "mean", "var", "std", "var_mean", "std_mean", "prod", "cumsum", "cumprod", "logsumexp", "norm",
    "max", "min", "amax", "amin", "argmax", "argmin", "topk", "sort", "argsort", "median", "mode", "kthvalue",
    "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "pow", "tanh", "sigmoid", "relu", "relu_", "gelu", "silu",
    "elu", "selu", "leaky_relu", "hardtanh", "softplus", "mish", "erf", "sin", "cos", "abs", "clamp", "clip",
    "add", "sub", "mul", "div", "where", "maximum", "minimum", "scaled_dot_product_attention", "dropout",
    "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool2d",
    "cross_entropy", "mse_loss", "nll_loss", "kl_div", "smooth_l1_loss", "hinge_embedding_loss", "cosine_similarity",
    "triu", "tril", "diag", "cat", "stack", "compile", "addcmul", "addcdiv", "lerp", "square", "reciprocal",
}
# tensor-creating or layout-only torch calls a kernel wrapper legitimately needs
TORCH_ALLOWED = {"empty", "empty_like", "empty_strided", "zeros", "zeros_like", "tensor", "device", "Size", "is_tensor"}
# roots whose .exp()/.sqrt()/... are not tensor ops
NOT_TENSORS = {"self", "math", "cmath", "np", "numpy", "operator", "random", "os", "sys"}
NN_CONTAINERS = {"Parameter", "ParameterList", "ParameterDict", "Module"}
REFERENCE_NAMES = {"Model"}
_IMPORT_RULES = {
    "threading": ("threads", "imports threading; work must run in the CUDA kernels on the caller's stream"),
    "multiprocessing": ("threads", "imports multiprocessing; work must run in the CUDA kernels"),
    "concurrent": ("threads", "imports concurrent.futures; work must run in the CUDA kernels"),
    "asyncio": ("threads", "imports asyncio; work must run in the CUDA kernels"),
    "subprocess": ("process-control", "imports subprocess; a candidate must only compute"),
    "time": ("timing-tamper", "imports time; timing belongs to the harness"),
    "timeit": ("timing-tamper", "imports timeit; timing belongs to the harness"),
    "inspect": ("timing-tamper", "imports inspect; reading the harness's frames is tampering"),
    "gc": ("timing-tamper", "imports gc; walking the harness's objects is tampering"),
    "builtins": ("timing-tamper", "imports builtins; patching the interpreter is tampering"),
    "ctypes": ("file-access", "imports ctypes; kernels must be built with torch.utils.cpp_extension"),
    "triton": ("not-cuda", "uses Triton; this target evaluates CUDA C++ kernels (load_inline)"),
    "functools": ("result-caching", "imports functools (lru_cache/cache); results must be computed on every call"),
}


class _PyChecker(ast.NodeVisitor):
    def __init__(self, f_aliases: set[str], nn_aliases: set[str], torch_aliases: set[str], extensions: set[str]) -> None:
        self.findings: list[Finding] = []
        self.extensions = extensions  # names bound to load_inline(...) results
        self.f_aliases = f_aliases
        self.nn_aliases = nn_aliases
        self.torch_aliases = torch_aliases
        self.nn_attrs: set[str] = set()  # self.<attr> = nn.Layer(...) in ModelNew.__init__
        self.in_compute = False  # inside a method/function other than __init__
        self.forward_args: set[str] = set()

    def add(self, rule: str, reason: str, node: ast.AST) -> None:
        self.findings.append(Finding(rule, reason, getattr(node, "lineno", None)))

    # helpers
    def _dotted(self, node: ast.AST) -> list[str]:
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name):
            parts.append(node.id)
            return parts[::-1]
        if isinstance(node, ast.Call):
            inner = self._dotted(node.func)
            return inner + ["()"] + parts[::-1] if inner else []
        return []

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._import(alias.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self._import(node.module or "", node)

    def _import(self, module: str, node: ast.AST) -> None:
        root = module.split(".")[0]
        if root in _IMPORT_RULES:
            rule, reason = _IMPORT_RULES[root]
            self.add(rule, reason, node)

    def visit_Try(self, node: ast.AST) -> None:
        self.add("try-except", "uses try/except, which can hide a fallback to PyTorch or the reference; "
                 "let failures surface", node)
        self.generic_visit(node)

    visit_TryStar = visit_Try

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if node.name in REFERENCE_NAMES:
            return  # a copy of the reference kept beside ModelNew is the reference, not the candidate
        for base in node.bases:
            name = self._dotted(base)
            if name and name[-1] in REFERENCE_NAMES:
                self.add("reference-fallback", f"class {node.name} inherits from the reference `{name[-1]}`; "
                         "ModelNew must compute with its own kernels", node)
        if node.name == "ModelNew":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    for sub in ast.walk(item):
                        if isinstance(sub, ast.Assign) and isinstance(sub.value, ast.Call):
                            fn = self._dotted(sub.value.func)
                            if len(fn) >= 2 and fn[-2] in self.nn_aliases | {"nn"} and fn[-1] not in NN_CONTAINERS:
                                for t in sub.targets:
                                    if isinstance(t, ast.Attribute):
                                        self.nn_attrs.add(t.attr)
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if node.name in ("get_inputs", "get_init_inputs"):
            self.add("input-tamper", f"redefines {node.name}(); inputs come from the problem, not the candidate", node)
        for deco in node.decorator_list:
            name = self._dotted(deco.func if isinstance(deco, ast.Call) else deco)
            if name and name[-1] in ("lru_cache", "cache", "cached_property"):
                self.add("result-caching", "caches results across calls; every call must compute", node)
        was, was_args = self.in_compute, self.forward_args
        self.in_compute = node.name != "__init__"
        if node.name == "forward":
            self.forward_args = {a.arg for a in node.args.args[1:]} | {a.arg for a in node.args.kwonlyargs}
            if node.args.vararg:
                self.forward_args.add(node.args.vararg.arg)
        self.generic_visit(node)
        self.in_compute, self.forward_args = was, was_args

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in REFERENCE_NAMES and isinstance(node.ctx, ast.Load):
            self.add("reference-fallback", "uses the reference `Model`; ModelNew must compute with its own kernels", node)
        if node.id == "open":
            self.add("file-access", "opens files; a candidate cannot touch the harness's results", node)
        elif node.id in ("globals", "locals", "vars", "setattr", "__import__", "exec", "eval"):
            self.add("timing-tamper", f"uses {node.id}(), which can patch or inspect the harness", node)

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self._store(t)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._store(node.target)
        self.generic_visit(node)

    def _store(self, target: ast.AST) -> None:
        dotted = self._dotted(target if not isinstance(target, ast.Subscript) else target.value)
        if dotted and dotted[0] in self.torch_aliases and ("backends" in dotted or "allow_tf32" in dotted[-1]):
            self.add("precision", f"changes torch backend settings (`{'.'.join(dotted)}`); keep the reference's numerics", target)
        elif dotted and dotted[0] in self.torch_aliases | {"time", "sys", "os", "np", "numpy", "random"} and isinstance(target, ast.Attribute):
            self.add("timing-tamper", f"assigns to `{'.'.join(dotted)}`; patching library or harness functions is tampering", target)
        if self.forward_args and dotted and dotted[0] in self.forward_args:
            if isinstance(target, ast.Subscript) or (isinstance(target, ast.Attribute) and target.attr == "data"):
                self.add("input-tamper", f"writes into the input `{dotted[0]}`; inputs must be left unchanged", target)
        if isinstance(target, ast.Attribute) and "cache" in target.attr.lower() and self.in_compute:
            self.add("result-caching", f"stores `{target.attr}` while computing; results must not be cached across calls", target)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult) and self.in_compute:
            self.add("torch-op", "uses the @ operator (a PyTorch matmul); compute it in your CUDA kernel", node)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        fn = self._dotted(node.func)
        text = ".".join(fn)
        if fn:
            root, last = fn[0], fn[-1]
            if "Stream" in fn or (root in self.torch_aliases and last == "stream"):
                self.add("side-stream", f"uses `{text}`; all work must run on the current stream", node)
            if "Event" in fn and root in self.torch_aliases:
                self.add("timing-tamper", f"uses `{text}`; timing belongs to the harness", node)
            if last in ("manual_seed", "seed", "manual_seed_all", "set_rng_state"):
                self.add("input-tamper", f"calls `{text}`, which changes how inputs are generated", node)
            if last in ("allow_tf32", "set_float32_matmul_precision") or "allow_tf32" in fn or "backends" in fn:
                self.add("precision", f"changes torch backend settings (`{text}`); keep the reference's numerics", node)
            if last in ("exit", "_exit", "system", "kill", "abort") and root in ("sys", "os"):
                self.add("process-control", f"calls `{text}`; a candidate must only compute", node)
            if self.in_compute:
                is_torch = root in self.torch_aliases and (len(fn) == 2 or fn[1] in ("nn", "special", "linalg", "fft"))
                is_functional = root in self.f_aliases or (root in self.torch_aliases and "functional" in fn)
                if (is_torch or is_functional) and last in TORCH_COMPUTE | {"einsum"} and last not in TORCH_ALLOWED:
                    self.add("torch-op", f"calls `{text}`, a PyTorch op, instead of a CUDA kernel", node)
                elif isinstance(node.func, ast.Attribute) and last in TORCH_COMPUTE and len(fn) == 2 \
                        and root not in self.torch_aliases | self.f_aliases | self.extensions | NOT_TENSORS:
                    self.add("torch-op", f"calls the tensor method `.{last}()`, a PyTorch op, instead of a CUDA kernel", node)
                elif root == "self" and len(fn) == 2 and fn[1] in self.nn_attrs:
                    self.add("torch-op", f"calls the PyTorch layer `self.{fn[1]}`; use its weights in your own kernel", node)
                elif len(fn) >= 2 and fn[-2] in self.nn_aliases and fn[-1] not in NN_CONTAINERS:
                    self.add("torch-op", f"builds PyTorch layer `{text}` while computing", node)
                if self.forward_args and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
                        and node.func.value.id in self.forward_args and last.endswith("_") and not last.endswith("__"):
                    self.add("input-tamper", f"modifies the input `{node.func.value.id}` in place (`.{last}()`)", node)
                if root == "super" and last == "forward":
                    self.add("reference-fallback", "calls super().forward(), the reference computation", node)
        self.generic_visit(node)


def _aliases(tree: ast.AST) -> tuple[set[str], set[str], set[str], set[str]]:
    """Names for torch.nn.functional, torch.nn, torch, and compiled extension modules."""
    f_aliases, nn_aliases, torch_aliases, extensions = set(), {"nn"}, {"torch"}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            fn = node.value.func
            called = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            if called in ("load_inline", "load"):
                extensions |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "torch.nn.functional":
                    f_aliases.add(a.asname or a.name)
                elif a.name == "torch.nn":
                    nn_aliases.add(a.asname or "nn")
                elif a.name == "torch":
                    torch_aliases.add(a.asname or "torch")
        elif isinstance(node, ast.ImportFrom) and node.module in ("torch.nn", "torch"):
            for a in node.names:
                if a.name == "functional":
                    f_aliases.add(a.asname or "functional")
                elif a.name == "nn":
                    nn_aliases.add(a.asname or "nn")
    return f_aliases, nn_aliases, torch_aliases, extensions


_LOW_PY = re.compile(r"\b(float16|bfloat16|half|__half|__nv_bfloat16|__float2half\w*|half2)\b")


def check_python(code: str, original_file: str, candidate_file: str) -> list[Finding]:
    """Rules for a KernelBench-style candidate: ``code`` is the candidate's replacement
    for the kernel span (line numbers are relative to it)."""
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return [Finding("syntax", f"the candidate is not valid Python: {exc.msg}", exc.lineno)]
    try:
        file_tree = ast.parse(candidate_file)
    except SyntaxError as exc:
        return [Finding("syntax", f"the file with the candidate in place is not valid Python: {exc.msg}")]
    findings: list[Finding] = []
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    if "ModelNew" not in classes:
        findings.append(Finding("no-modelnew", "defines no top-level `class ModelNew`; the candidate must define "
                                "ModelNew with the same constructor and forward signature as Model"))
    from autocomp.backends.cuda.inline import cuda_strings

    sources = cuda_strings(code)
    if not sources:
        findings.append(Finding("no-cuda-kernel", "contains no CUDA kernel (no string with a `__global__` function); "
                                "falling back to PyTorch is not an optimization"))
    checker = _PyChecker(*_aliases(file_tree))
    checker.visit(tree)
    findings.extend(checker.findings)
    for src in sources:
        findings.extend(check_cuda(src.source, line_base=src.first_line))
    m = _LOW_PY.search(code)
    if m and not _LOW_PY.search(original_file):
        line = code.count("\n", 0, m.start()) + 1
        findings.append(Finding("precision", f"uses reduced precision (`{m.group(0)}`) where the reference does not; "
                                "keep the reference's data types", line))
    # one finding per rule and line is enough
    seen: set[tuple[str, int | None]] = set()
    unique = []
    for f in findings:
        if (f.rule, f.line) not in seen:
            seen.add((f.rule, f.line))
            unique.append(f)
    return unique


def check_cu(code: str, original: str) -> list[Finding]:
    """Rules for a ``.cu`` candidate (the replacement for the kernel span)."""
    findings = check_cuda(code, original=original)
    if "__global__" not in cscan.mask(code):
        findings.append(Finding("no-cuda-kernel", "defines no `__global__` kernel; the entry must launch a CUDA kernel"))
    return findings
