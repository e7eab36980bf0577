"""Checks on what will run: the candidate's compiled object file, not its text.

The kernel is compiled alone into ``kernel.o`` (see :mod:`.harness`); before it is linked
with the harness, this module reads the object's ELF headers, symbol table and machine code
and rejects it, naming the offending section, instruction or symbol, when it could step
outside the kernel call:

* **sections** only from an allowlist (code, read-only and writable data, zero-initialised
  data, and notes/debug/attributes that do not load); nothing the startup code runs
  (``.init_array``, ``.fini_array``, ``.preinit_array``, ``.ctors``, ``.dtors``, by name or
  by type) and no section named after the harness;
* **instructions** in every executable section: no CSR write (``csrrw``/``csrrs``/``csrrc``
  with a source register other than ``x0``, the immediate forms with a non-zero immediate,
  except the floating-point ``fflags``/``frm``/``fcsr``), no ``ecall``/``ebreak``/``mret``/
  ``sret``/``wfi``/``sfence``, no ``fence.i``, custom-3 (RoCC) instructions only with
  Gemmini's public funct7 values (0-21, 126, and the model's abort 31; never the harness
  markers 120-123), no other
  custom opcode;
* **symbols**: undefined (external) names only from an allowlist of libc/libm/compiler
  runtime functions; no name containing ``autocomp`` (the harness's) anywhere in the table.

These are a second line, and their messages are meant for the LLM: what actually holds the
line is that candidate code never runs inside the harness's code range, the simulator checks
the harness's bytes and the measurement protocol itself, the clock cannot be written, and
the simulator runs in a sandbox with no host files.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from pathlib import Path

SHF_WRITE = 0x1
SHF_ALLOC = 0x2
SHF_EXECINSTR = 0x4
SHT_NOBITS = 8
SHT_INIT_ARRAY = 14
SHT_FINI_ARRAY = 15
SHT_PREINIT_ARRAY = 16
SHN_UNDEF = 0
SHN_ABS = 0xFFF1
SHN_COMMON = 0xFFF2

# Gemmini's public RoCC commands (gemmini.h): 0-21, the counter command 126, and the model's
# gemmini_abort (31, stops the run with an error; the library's replacement for exit()).
# 120-123 are Autocomp's harness markers; anything else is unknown to the model.
GEMMINI_FUNCT7 = frozenset(range(0, 22)) | {31, 126}

_SECTION_OK = re.compile(
    r"^(?:"
    r"\.text(?:\..*)?|\.rodata(?:\..*)?|\.srodata(?:\..*)?|\.data(?:\..*)?|\.sdata(?:\..*)?|"
    r"\.bss(?:\..*)?|\.sbss(?:\..*)?|\.tbss(?:\..*)?|\.tdata(?:\..*)?|"
    r"\.comment|\.note(?:\..*)?|\.debug_.*|\.riscv\.attributes|\.eh_frame|\.group|"
    r"\.symtab|\.strtab|\.shstrtab|\.rela?\..*|"
    r")$"
)
# Startup/shutdown input sections of picolibc's linker script (.init, .text.init.enter,
# .init_array.*, .ctors, .preserve, ...), whatever prefix they hide behind.
_STARTUP_NAMES = re.compile(r"(?:^|\.)(?:init|fini|init_array|fini_array|preinit_array|ctors|dtors|preserve)(?:\.|$)")

# External functions a kernel may call: the C library pieces the gemmini.h API and ordinary
# kernels use, math, and the compiler's runtime helpers.
_ALLOWED_EXTERNAL = frozenset(
    """
    memcpy memset memmove memcmp bzero strlen strcmp strncmp strcpy strncpy strchr
    printf puts putchar fputs fputc putc fflush fprintf sprintf snprintf vprintf vfprintf vsnprintf vsprintf
    iprintf siprintf sniprintf
    stdout stderr errno __errno
    malloc calloc realloc free aligned_alloc posix_memalign memalign
    abs labs llabs div ldiv rand srand qsort
    sqrt sqrtf fabs fabsf floor floorf ceil ceilf round roundf lround lroundf llround llroundf
    nearbyint nearbyintf rint rintf lrint lrintf trunc truncf fmod fmodf
    exp expf exp2 exp2f expm1 expm1f log logf log2 log2f log10 log10f log1p log1pf pow powf
    sin sinf cos cosf tan tanf asin asinf acos acosf atan atanf atan2 atan2f
    sinh sinhf cosh coshf tanh tanhf erf erff erfc erfcf
    fmin fminf fmax fmaxf fma fmaf ldexp ldexpf frexp frexpf modf modff copysign copysignf
    isnan isinf __fpclassifyf __fpclassifyd __isnanf __isnand __isinff __isinfd
    """.split()
)
# libgcc: __muldi3, __divti3, __addtf3, __extendsftf2, __floatditf, __clzdi2, __bswapsi2, ...
_LIBGCC = re.compile(r"^__(?:[a-z]+)(?:qi|hi|si|di|ti|sf|df|tf|hf|bf|xf)[0-9]$|^__riscv_(?:save|restore)_\d+$")

_CSR_NAMES = {
    0x001: "fflags", 0x002: "frm", 0x003: "fcsr", 0x300: "mstatus", 0x301: "misa", 0x304: "mie",
    0x305: "mtvec", 0x306: "mcounteren", 0x320: "mcountinhibit", 0x321: "mcyclecfg", 0x322: "minstretcfg",
    0x340: "mscratch", 0x341: "mepc", 0x342: "mcause", 0x343: "mtval", 0x344: "mip", 0x3A0: "pmpcfg0",
    0x3B0: "pmpaddr0", 0x7B0: "dcsr", 0x7B1: "dpc", 0xB00: "mcycle", 0xB02: "minstret", 0xC00: "cycle",
    0xC01: "time", 0xC02: "instret", 0x100: "sstatus", 0x105: "stvec", 0x180: "satp",
}
_FP_CSRS = {0x001, 0x002, 0x003}


@dataclass
class Section:
    index: int
    name: str
    type: int
    flags: int
    offset: int
    size: int
    addr: int = 0


@dataclass
class ObjSymbol:
    name: str
    bind: int  # 0 local, 1 global, 2 weak
    type: int  # STT_*
    shndx: int
    value: int
    size: int


@dataclass
class ObjectFile:
    path: str
    sections: list[Section] = field(default_factory=list)
    symbols: list[ObjSymbol] = field(default_factory=list)
    data: bytes = b""

    def content(self, s: Section) -> bytes:
        return b"" if s.type == SHT_NOBITS else self.data[s.offset : s.offset + s.size]


class ObjectError(Exception):
    pass


def read_object(path: str) -> ObjectFile:
    """Sections and symbols of a 64-bit little-endian ELF file."""
    data = Path(path).read_bytes()
    if data[:4] != b"\x7fELF" or len(data) < 64 or data[4] != 2 or data[5] != 1:
        raise ObjectError(f"{path}: not a 64-bit little-endian ELF file")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if shoff + shnum * shentsize > len(data) or shstrndx >= max(shnum, 1):
        raise ObjectError(f"{path}: section table out of range")
    raw = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab = raw[shstrndx][4]

    def cstr(base: int, idx: int) -> str:
        end = data.find(b"\0", base + idx)
        if end < 0:
            raise ObjectError(f"{path}: unterminated name")
        return data[base + idx : end].decode("utf-8", "replace")

    obj = ObjectFile(path, data=data)
    for i, (name, typ, flags, addr, off, size, _link, _info, _align, _ent) in enumerate(raw):
        obj.sections.append(Section(i, cstr(strtab, name), typ, flags, off, size, addr))
    for name, typ, _flags, _addr, off, size, link, _info, _align, ent in raw:
        if typ != 2 or not ent:  # SHT_SYMTAB
            continue
        names = raw[link][4]
        for k in range(size // ent):
            st_name, info, _other, shndx, value, st_size = struct.unpack_from("<IBBHQQ", data, off + k * ent)
            obj.symbols.append(ObjSymbol(cstr(names, st_name) if st_name else "", info >> 4, info & 0xF, shndx, value, st_size))
    return obj


# -- instructions --------------------------------------------------------------------------


def _reg(n: int) -> str:
    return f"x{n}"


def _bad_instruction(word: int, length: int) -> str | None:
    """Why this instruction may not appear in a kernel, or None."""
    if length == 2:
        if word == 0x9002:
            return "c.ebreak"
        return None
    opcode = word & 0x7F
    funct3 = (word >> 12) & 7
    rs1 = (word >> 15) & 0x1F
    csr = word >> 20
    if opcode == 0x73:  # SYSTEM
        if funct3 == 0:
            names = {0x00000073: "ecall", 0x00100073: "ebreak", 0x30200073: "mret", 0x10200073: "sret",
                     0x10500073: "wfi", 0x7B200073: "dret"}
            return names.get(word, "a privileged SYSTEM instruction (sfence/hfence/...)")
        if funct3 == 4:
            return "a hypervisor load/store"
        name = _CSR_NAMES.get(csr, f"csr {csr:#x}")
        writes = funct3 in (1, 5) or rs1 != 0  # csrrw/csrrwi always write; the others when rs1/uimm != 0
        if writes and csr not in _FP_CSRS:
            op = {1: "csrrw", 2: "csrrs", 3: "csrrc", 5: "csrrwi", 6: "csrrsi", 7: "csrrci"}[funct3]
            return f"{op} {name} (a CSR write)"
        return None
    if opcode == 0x0F and funct3 == 1:
        return "fence.i"
    if opcode == 0x7B:  # custom-3: RoCC, Gemmini
        funct7 = word >> 25
        if funct7 not in GEMMINI_FUNCT7:
            return f"custom-3 instruction with funct7 {funct7} (not a Gemmini command; 120-127 are reserved for the harness)"
        return None
    if opcode in (0x0B, 0x2B, 0x5B):
        return f"custom opcode {opcode:#x} (only Gemmini's custom-3 commands are allowed)"
    return None


def _decode_issues(obj: ObjectFile, s: Section) -> list[tuple[int, str]]:
    code = obj.content(s)
    issues = []
    pos = 0
    while pos + 2 <= len(code):
        (half,) = struct.unpack_from("<H", code, pos)
        if half & 3 != 3:
            bad = _bad_instruction(half, 2)
            step = 2
        elif pos + 4 <= len(code):
            (word,) = struct.unpack_from("<I", code, pos)
            bad = _bad_instruction(word, 4)
            step = 4
        else:
            break
        if bad:
            issues.append((pos, bad))
        pos += step
    return issues


def _where(obj: ObjectFile, s: Section, offset: int) -> str:
    best: ObjSymbol | None = None
    for sym in obj.symbols:
        if sym.shndx == s.index and sym.type == 2 and sym.name and sym.value <= offset:  # STT_FUNC
            if best is None or sym.value > best.value:
                best = sym
    if best is not None:
        return f"{best.name}+{offset - best.value:#x}"
    return f"{s.name}+{offset:#x}"


# -- the check -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Allowance:
    """What a given build may have beyond the defaults (substitute mode: the whole test
    program is checked, and it may call exit() and the harness's measure functions)."""

    undefined: frozenset[str] = frozenset()
    reserved: frozenset[str] = frozenset()  # autocomp_* names the host itself put there


def check_object(path: str, allowance: Allowance = Allowance()) -> list[str]:
    """Every reason ``path`` may not be linked with the harness (empty when it passes)."""
    try:
        obj = read_object(path)
    except (OSError, ObjectError, struct.error, IndexError) as exc:
        return [f"cannot read the compiled object: {exc}"]
    problems: list[str] = []
    for s in obj.sections:
        if s.index == 0:
            continue
        if s.type in (SHT_INIT_ARRAY, SHT_FINI_ARRAY, SHT_PREINIT_ARRAY) or _STARTUP_NAMES.search(s.name):
            problems.append(
                f"section `{s.name}`: code that runs outside the kernel call (constructors, destructors, init/fini "
                f"arrays) is not allowed"
            )
            continue
        if "autocomp" in s.name.lower():
            problems.append(f"section `{s.name}`: names containing `autocomp` are reserved for the harness")
            continue
        if not _SECTION_OK.match(s.name):
            problems.append(
                f"section `{s.name}` is not allowed (only .text*, .rodata*, .data*, .bss* and their small-data forms)"
            )
            continue
        if s.flags & SHF_EXECINSTR:
            if not s.name.startswith(".text"):
                problems.append(f"section `{s.name}` is executable; code belongs in .text")
            elif s.flags & SHF_WRITE:
                problems.append(f"section `{s.name}` is writable code")
            for offset, why in _decode_issues(obj, s)[:5]:
                problems.append(f"instruction at {_where(obj, s, offset)}: {why} is not allowed in a kernel")
    for sym in obj.symbols:
        if not sym.name or sym.type in (3, 4):  # STT_SECTION, STT_FILE
            continue
        if "autocomp" in sym.name.lower() and sym.name not in allowance.reserved:
            problems.append(f"symbol `{sym.name}`: names containing `autocomp` are reserved for the harness")
            continue
        if sym.shndx == SHN_UNDEF and sym.bind in (1, 2):
            if sym.name in _ALLOWED_EXTERNAL or sym.name in allowance.undefined or _LIBGCC.match(sym.name):
                continue
            problems.append(
                f"external symbol `{sym.name}` is not allowed (a kernel may call the C library's memory, printing "
                f"and math functions and gemmini.h; not the runtime, exit, files or the harness)"
            )
        if sym.type == 10:  # STT_GNU_IFUNC: a resolver the startup code would run
            problems.append(f"symbol `{sym.name}` is an indirect function (ifunc); its resolver would run before the kernel")
        if sym.shndx == SHN_COMMON:
            problems.append(f"symbol `{sym.name}` is a common symbol; define it (the build uses -fno-common)")
    # One message per distinct problem, in order.
    seen: set[str] = set()
    unique = []
    for p in problems:
        if p not in seen:
            seen.add(p)
            unique.append(p)
    return unique
