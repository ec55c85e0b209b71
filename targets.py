"""The GPU targets flyaot knows, as data: the one place a target's facts are stated.

A target is what a code object is compiled for and what a store holds (`prebuilt/<arch>/`). Build
gates, the toolchain, stores, the JIT, the CLI and the drivers read these rows, and the build hands
the row itself to each family (specs, block, budget) and kernel launcher. Outside this table an arch
is spelled only where a fact is not a row's: the ISA the emulator implements (`emu/isa/`) and the ELF
mach names formats/codeobject.py can print. The vocabulary follows FlyDSL's and Triton's
`GPUTarget(backend, arch, warp_size)`. What adding a target touches is counted in
docs/architecture.md#what-a-change-touches.
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class GPUTarget:
    backend: str          # the driver API that runs it: "hip"
    arch: str             # as LLVM, stores and `gcnArchName` spell it: "gfx950"
    warp_size: int        # lanes per wave
    mach: int             # EF_AMDGPU_MACH value in the code object's ELF e_flags
    lds_bytes: int        # LDS one workgroup may allocate
    vgprs: int            # architectural VGPRs per wave
    agprs: int            # accumulation VGPRs per wave
    sgprs: int            # addressable SGPRs per wave
    unified_vgprs: bool   # one file holds both (gfx90a-class): metadata `.vgpr_count` is their total
    emulated: bool        # whether flyaot's emulator (`emu`) executes its code objects
    description: str = ""

    @property
    def triple(self) -> str:
        return "amdgcn-amd-amdhsa"

    def wave(self, lanes: int, who: str) -> int:
        """`lanes` when this target's waves have that many lanes, else a ValueError naming `who`: a
        kernel's lane layouts are written for one wave size."""
        if self.warp_size != lanes:
            raise ValueError(f"{who}: its lane layouts are written for {lanes}-lane waves; target {self.arch} "
                             f"runs {self.warp_size}-lane waves")
        return lanes


# gfx950 (CDNA4, MI350X / MI355X): 160 KiB LDS per workgroup, 512 VGPRs per wave split 256 + 256
# between architectural and accumulation registers, 102 addressable SGPRs, wave64.
_ROWS = (
    GPUTarget(backend="hip", arch="gfx950", warp_size=64, mach=0x4F, lds_bytes=160 * 1024,
              vgprs=256, agprs=256, sgprs=102, unified_vgprs=True, emulated=True, description="AMD CDNA4 (MI350X, MI355X)"),
)
TARGETS = {t.arch: t for t in _ROWS}

# The target the prebuilt set and the user cache default to: the first row.
DEFAULT_TARGET = _ROWS[0].arch


class UnknownTargetError(ValueError):
    pass


def get(arch: str) -> GPUTarget:
    """The row for `arch` ("gfx950", or a full "amdgcn-amd-amdhsa--gfx950:sramecc+" spelling)."""
    base = arch.split(":")[0].rsplit("-", 1)[-1]
    try:
        return TARGETS[base]
    except KeyError:
        raise UnknownTargetError(f"unknown GPU target {arch!r}; known: {', '.join(sorted(TARGETS))}") from None


def by_mach(mach: int):
    """The row whose ELF mach id is `mach`, or None."""
    for t in TARGETS.values():
        if t.mach == mach:
            return t
    return None
