"""Reading object symbols (name -> address, size) from a 64-bit little-endian ELF.

The backend asks the simulator to snapshot memory regions by symbol and length; the
lengths come from the symbol table, so array sizes written with any constant expression
(``DIM*4``, ``sizeof``) are exactly what the compiler laid out, with no C evaluation here.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

STT_OBJECT = 1


@dataclass(frozen=True)
class Symbol:
    name: str
    address: int
    size: int
    kind: int  # STT_* value


class ElfError(Exception):
    pass


def read_symbols(path: str) -> dict[str, Symbol]:
    """Every named symbol in ``path``'s ``.symtab``; later duplicates (local statics with the
    same name in different files) do not replace the first."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ElfError(f"{path}: not a 64-bit little-endian ELF file")
    (e_shoff,) = struct.unpack_from("<Q", data, 0x28)
    e_shentsize, e_shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = []
    for i in range(e_shnum):
        off = e_shoff + i * e_shentsize
        sh_name, sh_type, _flags, _addr, sh_offset, sh_size, sh_link, _info, _align, sh_entsize = struct.unpack_from(
            "<IIQQQQIIQQ", data, off
        )
        sections.append((sh_type, sh_offset, sh_size, sh_link, sh_entsize))
    symbols: dict[str, Symbol] = {}
    for sh_type, sh_offset, sh_size, sh_link, sh_entsize in sections:
        if sh_type != 2:  # SHT_SYMTAB
            continue
        str_off = sections[sh_link][1]
        entsize = sh_entsize or 24
        for k in range(sh_size // entsize):
            st_name, st_info, _other, _shndx, st_value, st_size = struct.unpack_from(
                "<IBBHQQ", data, sh_offset + k * entsize
            )
            if not st_name:
                continue
            end = data.index(b"\0", str_off + st_name)
            name = data[str_off + st_name : end].decode("ascii", "replace")
            symbols.setdefault(name, Symbol(name, st_value, st_size, st_info & 0xF))
    return symbols
