"""Just enough of ELF64 (little endian) to read AMDGPU code objects: sections, symbols, notes."""
import struct
from dataclasses import dataclass

EM_AMDGPU = 224
SHT_SYMTAB = 2
SHT_NOTE = 7
SHT_DYNSYM = 11


class ElfError(ValueError):
    pass


@dataclass(frozen=True)
class Section:
    name: str
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    link: int
    entsize: int


@dataclass(frozen=True)
class Symbol:
    name: str
    value: int
    size: int
    info: int
    shndx: int

    @property
    def type(self) -> int:
        return self.info & 0xF


@dataclass(frozen=True)
class Note:
    owner: str
    type: int
    desc: bytes


class Elf:
    """An ELF64 little-endian image held in memory."""

    def __init__(self, data: bytes):
        self.data = bytes(data)
        if len(self.data) < 64 or self.data[:4] != b"\x7fELF":
            raise ElfError("not an ELF file")
        if self.data[4] != 2 or self.data[5] != 1:
            raise ElfError("not a 64-bit little-endian ELF file")
        (self.e_type, self.machine, _, _, _, shoff, self.flags, _, _, _,
         shentsize, shnum, shstrndx) = struct.unpack_from("<HHIQQQIHHHHHH", self.data, 16)
        self.os_abi = self.data[7]
        self.abi_version = self.data[8]
        if shoff == 0 or shentsize != 64 or shoff + shnum * 64 > len(self.data):
            raise ElfError("bad or missing ELF section header table")
        raw = [struct.unpack_from("<IIQQQQIIQQ", self.data, shoff + i * 64) for i in range(shnum)]
        if shstrndx >= shnum:
            raise ElfError("bad section name string table index")
        strtab = raw[shstrndx]
        self.sections = [
            Section(self._cstr(strtab[4], n), t, fl, a, o, s, lk, es)
            for (n, t, fl, a, o, s, lk, _, _, es) in raw
        ]

    def _cstr(self, table_off: int, index: int) -> str:
        start = table_off + index
        end = self.data.find(b"\0", start)
        if end < 0:
            raise ElfError("unterminated string in ELF string table")
        return self.data[start:end].decode("utf-8", "replace")

    def section(self, name: str) -> Section:
        for s in self.sections:
            if s.name == name:
                return s
        raise ElfError(f"ELF has no section {name!r}")

    def section_bytes(self, sec: Section) -> bytes:
        if sec.offset + sec.size > len(self.data):
            raise ElfError(f"section {sec.name!r} runs past the end of the file")
        return self.data[sec.offset:sec.offset + sec.size]

    def symbols(self) -> list:
        out = []
        for sec in self.sections:
            if sec.type not in (SHT_SYMTAB, SHT_DYNSYM):
                continue
            names = self.sections[sec.link].offset
            body = self.section_bytes(sec)
            for off in range(0, len(body) - 23, 24):
                name, info, _, shndx, value, size = struct.unpack_from("<IBBHQQ", body, off)
                if name:
                    out.append(Symbol(self._cstr(names, name), value, size, info, shndx))
        return out

    def symbol(self, name: str) -> Symbol:
        for s in self.symbols():
            if s.name == name:
                return s
        raise ElfError(f"ELF has no symbol {name!r}")

    def bytes_at_vaddr(self, addr: int, size: int) -> bytes:
        """Bytes of the section that holds virtual address range [addr, addr + size)."""
        for s in self.sections:
            if s.addr and s.addr <= addr and addr + size <= s.addr + s.size:
                start = s.offset + (addr - s.addr)
                return self.data[start:start + size]
        raise ElfError(f"no section holds address 0x{addr:x} (+{size})")

    def notes(self) -> list:
        out = []
        for sec in self.sections:
            if sec.type != SHT_NOTE:
                continue
            body = self.section_bytes(sec)
            pos = 0
            while pos + 12 <= len(body):
                namesz, descsz, ntype = struct.unpack_from("<III", body, pos)
                pos += 12
                name = body[pos:pos + namesz].rstrip(b"\0").decode("utf-8", "replace")
                pos += (namesz + 3) & ~3
                desc = body[pos:pos + descsz]
                pos += (descsz + 3) & ~3
                out.append(Note(name, ntype, desc))
        return out
