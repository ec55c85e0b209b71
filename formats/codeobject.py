"""AMDGPU code objects: the kernel's ABI and resources as its own metadata note states them.

The code object is the source of truth for argument offsets and sizes, kernarg segment size,
registers, LDS, scratch and target. Build gates and runtime load checks both read it through here.
"""
import struct
from dataclasses import dataclass

from . import msgpack
from .elf import EM_AMDGPU, Elf, ElfError

NT_AMDGPU_METADATA = 32

# e_flags: EF_AMDGPU_MACH in the low byte; xnack / sramecc feature settings above it (code object v4+).
EF_AMDGPU_MACH = 0x0FF
MACH_NAMES = {0x40: "gfx940", 0x4B: "gfx941", 0x4C: "gfx942", 0x4F: "gfx950", 0x30: "gfx90a"}
_FEATURE = {0x000: "unsupported", 0x100: "any", 0x200: "off", 0x300: "on"}


class CodeObjectError(ValueError):
    pass


@dataclass(frozen=True)
class KernelArg:
    offset: int
    size: int
    value_kind: str          # global_buffer, by_value, hidden_*, ...
    address_space: str = ""


@dataclass(frozen=True)
class Resources:
    vgpr: int
    agpr: int
    sgpr: int
    lds: int                 # group_segment_fixed_size, bytes
    scratch: int             # private_segment_fixed_size, bytes per lane
    vgpr_spill: int
    sgpr_spill: int
    wavefront_size: int
    max_workgroup_size: int
    uses_dynamic_stack: bool

    def as_dict(self) -> dict:
        return dict(self.__dict__)

    def registers(self, unified: bool) -> tuple:
        """(architectural VGPRs, AGPRs, registers of the VGPR file) per lane. On a unified file
        (gfx90a-class) `.vgpr_count` is already the total: the architectural VGPRs rounded up to the
        4-register AGPR-offset granule plus the AGPRs, so the architectural part is the difference.
        On split files the two counts are separate."""
        if unified:
            if self.vgpr < self.agpr:
                raise CodeObjectError(f".vgpr_count {self.vgpr} is below .agpr_count {self.agpr}, "
                                      "impossible on a unified VGPR file")
            return self.vgpr - self.agpr, self.agpr, self.vgpr
        return self.vgpr, self.agpr, self.vgpr + self.agpr


@dataclass(frozen=True)
class KernelDescriptor:
    """The 64-byte amdhsa kernel descriptor (`<name>.kd`), fields as LLVM AMDGPUUsage lays them out."""
    group_segment_fixed_size: int
    private_segment_fixed_size: int
    kernarg_size: int
    entry_offset: int        # kernel code entry, relative to the descriptor's own address
    pgm_rsrc3: int
    pgm_rsrc1: int
    pgm_rsrc2: int
    kernel_code_properties: int
    kernarg_preload: int

    @classmethod
    def parse(cls, raw: bytes) -> "KernelDescriptor":
        if len(raw) != 64:
            raise CodeObjectError(f"kernel descriptor must be 64 bytes, got {len(raw)}")
        g, p, k = struct.unpack_from("<III", raw, 0)
        (entry,) = struct.unpack_from("<q", raw, 16)
        r3, r1, r2 = struct.unpack_from("<III", raw, 44)
        props, preload = struct.unpack_from("<HH", raw, 56)
        return cls(g, p, k, entry, r3, r1, r2, props, preload)

    @property
    def user_sgpr_count(self) -> int:
        return (self.pgm_rsrc2 >> 1) & 0x1F

    @property
    def accum_offset(self) -> int:
        """First AGPR-backed VGPR index for gfx90a+ unified register files."""
        return ((self.pgm_rsrc3 & 0x3F) + 1) * 4


@dataclass(frozen=True)
class KernelInfo:
    name: str
    symbol: str              # the descriptor symbol, `<name>.kd`
    args: tuple
    kernarg_size: int
    kernarg_align: int
    reqd_workgroup_size: tuple
    resources: Resources


def user_args(kernel: KernelInfo) -> list:
    """The kernel's own arguments (compiler-added hidden_* arguments excluded)."""
    return [a for a in kernel.args if not a.value_kind.startswith("hidden_")]


@dataclass(frozen=True)
class CodeObject:
    data: bytes
    elf: Elf
    target: str              # e.g. "amdgcn-amd-amdhsa--gfx950"
    mach: str                # e.g. "gfx950"
    e_flags: int
    xnack: str
    sramecc: str
    kernels: tuple

    def kernel(self, name: str) -> KernelInfo:
        for k in self.kernels:
            if k.name == name:
                return k
        names = ", ".join(k.name for k in self.kernels) or "none"
        raise CodeObjectError(f"code object has no kernel {name!r} (it has: {names})")

    def descriptor(self, name: str) -> KernelDescriptor:
        sym = self.elf.symbol(self.kernel(name).symbol)
        return KernelDescriptor.parse(self.elf.bytes_at_vaddr(sym.value, 64))

    def descriptor_address(self, name: str) -> int:
        return self.elf.symbol(self.kernel(name).symbol).value


def parse(data: bytes) -> CodeObject:
    """Parse an AMDGPU code object; raise CodeObjectError if it is not one or lacks metadata."""
    try:
        elf = Elf(data)
    except ElfError as e:
        raise CodeObjectError(f"not an AMDGPU code object: {e}") from None
    if elf.machine != EM_AMDGPU:
        raise CodeObjectError(f"ELF machine {elf.machine} is not EM_AMDGPU ({EM_AMDGPU})")
    try:
        meta = None
        for note in elf.notes():
            if note.owner == "AMDGPU" and note.type == NT_AMDGPU_METADATA:
                meta = msgpack.unpackb(note.desc)
        if meta is None:
            raise CodeObjectError("code object has no NT_AMDGPU_METADATA note")
        kernels = tuple(_kernel_info(k) for k in meta.get("amdhsa.kernels", []))
    except (ElfError, msgpack.MsgpackError, KeyError, TypeError, ValueError, struct.error) as e:
        if isinstance(e, CodeObjectError):
            raise
        raise CodeObjectError(f"malformed AMDGPU metadata: {type(e).__name__}: {e}") from None
    mach = MACH_NAMES.get(elf.flags & EF_AMDGPU_MACH, f"mach-0x{elf.flags & EF_AMDGPU_MACH:x}")
    return CodeObject(
        data=bytes(data), elf=elf, target=str(meta.get("amdhsa.target", "")), mach=mach,
        e_flags=elf.flags, xnack=_FEATURE.get(elf.flags & 0x300, "?"),
        sramecc=_FEATURE.get((elf.flags & 0xC00) >> 2, "?"),
        kernels=kernels,
    )


def _kernel_info(k: dict) -> KernelInfo:
    args = tuple(
        KernelArg(int(a[".offset"]), int(a[".size"]), str(a[".value_kind"]), str(a.get(".address_space", "")))
        for a in k.get(".args", [])
    )
    res = Resources(
        vgpr=int(k.get(".vgpr_count", 0)), agpr=int(k.get(".agpr_count", 0)), sgpr=int(k.get(".sgpr_count", 0)),
        lds=int(k.get(".group_segment_fixed_size", 0)), scratch=int(k.get(".private_segment_fixed_size", 0)),
        vgpr_spill=int(k.get(".vgpr_spill_count", 0)), sgpr_spill=int(k.get(".sgpr_spill_count", 0)),
        wavefront_size=int(k.get(".wavefront_size", 64)), max_workgroup_size=int(k.get(".max_flat_workgroup_size", 0)),
        uses_dynamic_stack=bool(k.get(".uses_dynamic_stack", False)),
    )
    return KernelInfo(
        name=str(k[".name"]), symbol=str(k[".symbol"]), args=args,
        kernarg_size=int(k.get(".kernarg_segment_size", 0)), kernarg_align=int(k.get(".kernarg_segment_align", 8)),
        reqd_workgroup_size=tuple(int(x) for x in k.get(".reqd_workgroup_size", ())), resources=res,
    )
