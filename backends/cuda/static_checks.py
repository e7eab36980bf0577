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
import os
import re
from dataclasses import dataclass

from autocomp.backends import cscan


@dataclass(frozen=True)
class Finding:
    rule: str
    reason: str
    line: int | None = None  # 1-based, relative to the kernel span
    file_line: int | None = None  # 1-based line of the file, for findings outside the kernel span

    def render(self) -> str:
        where = f" (kernel line {self.line})" if self.line else f" (file line {self.file_line})" if self.file_line else ""
        return f"static check `{self.rule}`{where}: {self.reason}"


# -- CUDA C++ rules (both .cu candidates and every load_inline source) ---------------------
_CUDA_RULES: list[tuple[str, re.Pattern[str], str]] = [
    ("side-stream", re.compile(r"\bcudaStreamCreate\w*|\bgetStreamFromPool\b|\bcudaStreamNonBlocking\b|\bcudaGraphLaunch\b"),
     "creates or uses a side stream; all work must run on the caller's stream so timing and ordering see it"),
    ("threads", re.compile(r"\bstd::thread\b|\bpthread_create\b|\bstd::async\b|#\s*include\s*<thread>|\bfork\s*\("),
     "starts host threads or processes; work must happen in the kernels launched by the entry"),
    ("timing-tamper", re.compile(r"\bcudaEvent(Create|Record|ElapsedTime|Synchronize)\w*|\bcudaProfiler\w+|\bclock_gettime\b|\bstd::chrono\b"),
     "touches CUDA events or clocks; timing belongs to the harness alone"),
    ("process-control", re.compile(r"(?<![\w.])(exit|_exit|quick_exit|abort|system|popen|execv\w*)\s*\(|\bcudaDeviceReset\b|\bcudaSetDevice\b"),
     "exits, resets the device or runs other programs; a candidate must only compute"),
    ("file-access", re.compile(r"\b(fopen|freopen|fwrite|fputs|ofstream|ifstream|fstream|dlopen|dlsym|getenv|open|openat|mmap|syscall)\s*\(|\b(ofstream|ifstream|fstream)\b"),
     "opens files, loads libraries or reads the environment; a candidate cannot touch the harness's results"),
    ("host-main", re.compile(r"\bint\s+main\s*\("),
     "defines main(); the harness provides the program, the candidate provides kernels and the entry"),
    ("library-fallback", re.compile(r"\b(cublas\w*|cublasLt\w*|cudnn\w*|cufft\w*|cusparse\w*|cusolver\w*|curand(Create|Generate)\w*"
                                    r"|cutlass|cute::|thrust::|nvrtc\w*|cuModule\w*|cuLaunch\w*|cuGetProcAddress\w*"
                                    r"|cudaGetDriverEntryPoint\w*|cudaLaunchKernel\w*|cudaMemcpy(To|From)Symbol\w*)"),
     "calls a vendor library or loads code at run time (cuBLAS, cuDNN, CUTLASS, Thrust, NVRTC, the driver API); "
     "the computation must be in the candidate's own __global__ kernels"),
    ("hidden-code", re.compile(r"__attribute__\s*\(\(\s*(constructor|destructor|section)|\bextern\s*\"C\"|\bextern\s+(?!__shared__)\w+[^;{]*\("),
     "declares external functions, constructors or custom sections; only the candidate's own code may run"),
]
_HIP = re.compile(r"\bhipLaunchKernelGGL\b|#\s*include\s*[<\"]hip/|\bhip(Malloc|Memcpy|DeviceSynchronize|Stream_t|GetLastError)\b|__HIP_PLATFORM")
_INCLUDE = re.compile(r"^[ \t]*#[ \t]*(?:include_next|include|import)[ \t]*([<\"]|[A-Za-z_])([^>\"\n]*)[>\"]?",
                      re.MULTILINE)
ALLOWED_INCLUDES = {
    "torch/extension.h", "torch/types.h", "torch/torch.h", "ATen/ATen.h", "ATen/cuda/CUDAContext.h",
    "c10/cuda/CUDAGuard.h", "c10/cuda/CUDAStream.h", "c10/cuda/CUDAException.h", "ATen/cuda/Exceptions.h",
    "cuda.h", "cuda_runtime.h", "cuda_runtime_api.h", "device_launch_parameters.h", "device_functions.h",
    "cuda_fp16.h", "cuda_bf16.h", "cuda_fp8.h", "mma.h", "cooperative_groups.h", "cooperative_groups/reduce.h",
    "cooperative_groups/memcpy_async.h", "cuda/pipeline", "cuda/barrier", "cuda/std/cstdint", "cuda/atomic",
    "cuda_pipeline.h", "cuda_pipeline_primitives.h",  # __pipeline_* async-copy intrinsics (device code only)
    "math.h", "cmath", "math_constants.h", "stdint.h", "cstdint", "cstddef", "stddef.h", "cfloat", "float.h", "climits",
    "limits.h", "limits", "algorithm", "vector", "array", "tuple", "utility", "type_traits", "cassert", "assert.h",
    "stdio.h", "cstdio", "initializer_list", "numeric", "functional", "string", "sstream", "iostream", "cub/cub.cuh",
    "cub/block/block_reduce.cuh", "cub/warp/warp_reduce.cuh", "cub/block/block_scan.cuh", "cub/block/block_load.cuh",
    "cub/block/block_store.cuh", "vector_types.h", "sm_60_atomic_functions.h",
}
# names under torch:: / at:: / c10:: a kernel wrapper may use: tensors, allocation, dtypes,
# devices, streams and checks -- never an ATen compute op (at::matmul, torch::mm, ...)
ALLOWED_QUALIFIED = {
    "Tensor", "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "TensorOptions", "ScalarType", "Device", "DeviceType", "dtype", "device", "kFloat32", "kFloat", "kDouble",
    "kFloat64", "kInt32", "kInt", "kInt64", "kLong", "kInt16", "kInt8", "kUInt8", "kByte", "kBool", "kCUDA", "kCPU",
    "kStrided", "IntArrayRef", "ArrayRef", "optional", "nullopt", "Scalar", "cuda", "getCurrentCUDAStream",
    "CUDAGuard", "OptionalCUDAGuard", "CUDAStream", "MemoryFormat", "Contiguous", "Half", "BFloat16", "kHalf",
    "kFloat16", "kBFloat16", "indexing", "Slice", "None", "Ellipsis", "elementSize", "toString", "typeMetaToScalarType",
    "TensorAccessor", "PackedTensorAccessor", "PackedTensorAccessor32", "PackedTensorAccessor64", "RestrictPtrTraits",
    "DefaultPtrTraits", "detail", "check", "Layout", "kStrided", "Error", "IValue", "SmallVector", "irange",
}
_QUALIFIED = re.compile(r"\b(torch|at|c10|ATen|caffe2|pybind11|py)\s*::\s*((?:\w+\s*::\s*)*)(\w+)")
_USING = re.compile(r"\busing\s+namespace\s+(torch|at|c10|std::placeholders|pybind11)\b|\bnamespace\s+\w+\s*=\s*(torch|at|c10)\b"
                    r"|\busing\s+(torch|at|c10)::")
# tensor and container methods host code may call (device code cannot reach ATen)
ALLOWED_METHODS = {
    "size", "sizes", "stride", "strides", "dim", "numel", "data_ptr", "data", "contiguous", "is_contiguous", "options",
    "dtype", "scalar_type", "device", "is_cuda", "view", "reshape", "permute", "transpose", "t", "unsqueeze",
    "squeeze", "expand", "narrow", "select", "to", "type", "defined", "get_device", "element_size", "itemsize",
    "nbytes", "storage_offset", "push_back", "emplace_back", "begin", "end", "front", "back", "empty", "resize",
    "reserve", "c_str", "is_floating_point", "zero_", "fill_", "clone", "new_empty", "new_zeros", "item",
    "value", "has_value", "stream", "accessor", "packed_accessor32", "packed_accessor64", "index", "sync",
    "thread_rank", "meta_group_rank", "meta_group_size", "num_threads", "group_index", "thread_index", "shfl",
    "shfl_down", "shfl_up", "shfl_xor", "any", "all", "ballot", "layout", "requires_grad", "flatten", "chunk",
    "device_type", "is_same", "load", "store", "x", "y", "z", "w", "max", "min", "lowest", "infinity", "epsilon",
    "quiet_NaN", "size_bytes", "set_", "str", "length", "at", "dtype_name", "name", "memory_format", "layout_",
    "cuda", "float_", "toType", "scalarType", "get", "reset", "producer_acquire", "producer_commit",
    "consumer_wait", "consumer_release", "arrive_and_wait", "wait", "arrive", "init", "swap", "fetch_add",
}
_METHOD_CALL = re.compile(r"(?:\.|->)\s*(\w+)\s*(?:<[^<>;(){}]*>)?\s*\(")
_LOW_CUDA = re.compile(r"\b(__half2?|__nv_bfloat162?|__float2half\w*|__float2bfloat16\w*|half2|__nv_fp8\w*|kHalf|kFloat16"
                       r"|kBFloat16|at::Half|c10::Half|at::BFloat16|c10::BFloat16|__float_to_tf32|precision::tf32|tf32"
                       r"|__hmul\w*|__hadd\w*|__hfma\w*|hexp|hsqrt)\b")


def _device_ranges(masked: str, source: str) -> list[tuple[int, int]]:
    """Offsets of __global__/__device__ function bodies (device code cannot call ATen)."""
    from autocomp.backends import cscan as _c

    return [(f.start, f.body_end) for f in _c.find_functions(source, cxx=True, closed_only=True)
            if f.is_global or f.is_device]


def _in_user_dirs(header: str, include_dirs: tuple[str, ...]) -> bool:
    """A relative header that exists in one of the include directories the user's own
    file gives load_inline (``extra_include_paths``)."""
    if not header or header.startswith("/") or ".." in header.split("/"):
        return False
    return any(os.path.isfile(os.path.join(d, header)) for d in include_dirs)


def check_cuda(source: str, line_base: int = 0, original: str | None = None,
               low_precision_ok: bool | None = None, include_dirs: tuple[str, ...] = ()) -> list[Finding]:
    """Rules for CUDA C++ text. ``line_base`` is added to 0-based line numbers of
    ``source`` to give 1-based lines; ``original`` (a .cu reference) or
    ``low_precision_ok`` (from the Python reference) decides the precision rule."""
    findings: list[Finding] = []
    masked = cscan.mask(source)

    def at(offset: int) -> int:
        return line_base + cscan.line_of(source, offset) + 1

    # keep #include lines visible for the include-based rules
    visible = "".join(
        raw if raw.lstrip().startswith("#") else m
        for raw, m in zip(source.splitlines(keepends=True), masked.splitlines(keepends=True))
    )
    m = _HIP.search(visible)
    if m:
        findings.append(Finding("not-cuda", f"this is HIP (ROCm) code (`{m.group(0).strip()}`), not CUDA; this target "
                                "builds CUDA C++ with nvcc", at(m.start())))
        return findings
    for rule, pattern, reason in _CUDA_RULES:
        m = pattern.search(visible)
        if m:
            findings.append(Finding(rule, f"{reason} (found `{m.group(0).strip()}`)", at(m.start())))
    for m in _INCLUDE.finditer(source):
        kind, header = m.group(1), m.group(2).strip()
        if kind not in "<\"":  # `#include MACRO`: the header's name is computed
            findings.append(Finding("include", "includes a header named through a macro; name it literally",
                                    at(m.start())))
            continue
        if "include_next" in m.group(0) or "import" in m.group(0).split(kind)[0]:
            findings.append(Finding("include", f"`{m.group(0).strip()}`: only plain #include is allowed", at(m.start())))
            continue
        if _in_user_dirs(header, include_dirs):
            continue
        if kind == '"' or header not in ALLOWED_INCLUDES:
            findings.append(Finding("include", f"includes `{kind}{header}{'>' if kind == '<' else kind}`; only the CUDA "
                                    "toolkit's, the C++ standard library's and torch/extension.h headers may be "
                                    "included (no host files, no vendor libraries)", at(m.start())))
    # macros must not hide what the checks below look for (`#define NS at`, token pasting)
    for m in re.finditer(r"^[ \t]*#[ \t]*define[ \t]+(\w+)(.*(?:\\\n.*)*)$", source, re.MULTILINE):
        body = m.group(2)
        if "##" in body or re.search(r"\b(torch|at|c10|ATen|caffe2|namespace)\b|\bcublas|\bcudnn", body):
            findings.append(Finding("macro", f"macro `{m.group(1)}` pastes tokens or names a torch/ATen namespace, which "
                                    "would hide library calls from the checks; write the call out", at(m.start())))
    # the checks below read preprocessor lines too (a #define can hold a call)
    masked = visible
    m = _USING.search(masked)
    if m:
        findings.append(Finding("library-fallback", f"`{m.group(0)}` makes library functions callable unqualified; "
                                "name torch/ATen types explicitly", at(m.start())))
    for m in _QUALIFIED.finditer(masked):
        ns, middle, last = m.group(1), re.sub(r"\s", "", m.group(2)), m.group(3)
        parts = [p for p in middle.split("::") if p] + [last]
        if ns in ("pybind11", "py"):
            continue  # PYBIND11_MODULE bindings
        bad = [p for p in parts if p not in ALLOWED_QUALIFIED]
        if bad:
            findings.append(Finding("torch-op", f"uses `{ns}::{'::'.join(parts)}`, which is not on the allowlist of "
                                    "torch/ATen names (tensors, allocation, dtypes, streams, checks); ATen compute ops "
                                    "are a fallback to PyTorch", at(m.start())))
    device = _device_ranges(masked, source)
    for m in _METHOD_CALL.finditer(masked):
        if any(a <= m.start() < b for a, b in device):
            continue
        name = m.group(1)
        if name not in ALLOWED_METHODS:
            findings.append(Finding("torch-op", f"host code calls the method `.{name}()`, which is not on the allowlist "
                                    "(tensor shape/allocation/dtype methods); tensor compute methods are a fallback to "
                                    "PyTorch", at(m.start())))
    for f in cscan.find_functions(source, cxx=True, closed_only=True):
        if f.is_global and not cscan.mask(f.body(source)).strip("{} \n\t\r"):
            findings.append(Finding("empty-kernel", f"kernel `{f.name}` has an empty body; it does no work", at(f.start)))
    if low_precision_ok is None and original is not None:
        low_precision_ok = bool(_LOW_CUDA.search(cscan.mask(original)))
    if low_precision_ok is False:
        no_comments = re.sub(r"//[^\n]*|/\*.*?\*/", lambda x: re.sub(r"[^\n]", " ", x.group(0)), source, flags=re.DOTALL)
        m = _LOW_CUDA.search(no_comments)
        if m:
            findings.append(Finding("precision", f"computes in another precision (`{m.group(0)}`) than the reference; "
                                    "keep the reference's data types (no fp16/bf16/TF32/fp8)", at(m.start())))
    return findings


# -- KernelBench-style Python: the AST allowlist (pyvalidate) plus the C++ rules ------------
def check_python(code: str, reference_file: str, candidate_file: str, code_start: int | None = None) -> list[Finding]:
    """Rules for a KernelBench-style candidate.

    ``candidate_file`` is the module the GPU runner will import (every statement of it is
    checked, except statements identical to the reference's own); ``reference_file`` is
    the user's problem without any starting ``ModelNew`` (the precision and compute-op
    comparisons are made against it, never against the merged file); ``code`` is the
    candidate's kernel text, at 0-based line ``code_start`` of ``candidate_file``: findings
    inside it carry kernel-relative lines, others file lines."""
    from autocomp.backends.cuda import pyvalidate

    if code_start is None:
        at = candidate_file.find(code) if code else -1
        code_start = candidate_file.count("\n", 0, at) if at >= 0 else 0
    n_code = len(code.splitlines())
    report = pyvalidate.validate(candidate_file, reference_file)
    low_ok = pyvalidate.reference_uses_low_precision(reference_file)

    def placed(rule: str, reason: str, file_line: int | None) -> Finding:
        if file_line is not None and code_start < file_line <= code_start + n_code:
            return Finding(rule, reason, file_line - code_start)
        return Finding(rule, reason, None, file_line)

    findings = [placed(f.rule, f.reason, f.line) for f in report.findings]
    seen_sources: set[tuple[str, int]] = set()
    for ext in report.extensions.values():
        for text, first_line in ext.sources:
            if (text, first_line) in seen_sources:
                continue
            seen_sources.add((text, first_line))
            dirs = tuple(p for p in ext.include_paths if p in pyvalidate._reference_include_paths(_ref_tree(reference_file)))
            for f in check_cuda(text, line_base=first_line, low_precision_ok=low_ok, include_dirs=dirs):
                findings.append(placed(f.rule, f.reason, f.line))
    seen: set[tuple[str, int | None, int | None]] = set()
    unique = []
    for f in findings:
        if (f.rule, f.line, f.file_line) not in seen:
            seen.add((f.rule, f.line, f.file_line))
            unique.append(f)
    return unique


def _ref_tree(reference_file: str) -> ast.Module:
    try:
        return ast.parse(reference_file)
    except SyntaxError:
        return ast.Module(body=[], type_ignores=[])


def kernel_names(candidate_file: str, reference_file: str) -> list[str]:
    """Names of the ``__global__`` functions the candidate's load_inline sources define
    (the GPU tier confirms that at least one of them ran)."""
    from autocomp.backends.cuda import pyvalidate

    return pyvalidate.validate(candidate_file, reference_file).kernel_names


def check_cu(code: str, original: str) -> list[Finding]:
    """Rules for a ``.cu`` candidate (the replacement for the kernel span)."""
    findings = check_cuda(code, original=original)
    if "__global__" not in cscan.mask(code):
        findings.append(Finding("no-cuda-kernel", "defines no `__global__` kernel; the entry must launch a CUDA kernel"))
    return findings
