"""A kernel's decoded program plus the launch facts its kernel descriptor states.

`Program.from_code_object(code_object, kernel_name)` decodes the kernel's instructions once (from its
entry to the end of its function symbol) and caches the result by sha256 of the code object bytes.
Instruction addresses are the ELF virtual addresses llvm-objdump prints; branch targets ('label'
operands) use the same addresses, so `index_of(addr)` / `instr_at(addr)` resolve them.

Launch facts follow the AMDGPU ABI's kernel descriptor (GFX9 / GFX90A+ layout) and initial kernel
execution state (docs/emulator.md#execution-model): user SGPRs are set up in the order private
segment buffer (4), dispatch ptr (2), queue ptr (2), kernarg segment ptr (2), dispatch id (2), flat
scratch init (2), private segment size (1), preloaded kernarg dwords; system SGPRs follow (workgroup
id x, y, z, workgroup info, private segment wave offset), each only if enabled. gfx90a and later
pack the work-item ids into v0 (x bits 9:0, y bits 19:10, z bits 29:20).
"""
import hashlib
import logging
import threading
from dataclasses import dataclass

from flyaot.formats import codeobject

from .decode import DecodeError, decode_range

log = logging.getLogger("flyaot.emu")

_CACHE = {}
_LOCK = threading.Lock()
_PACKED_TID = {"gfx90a", "gfx940", "gfx941", "gfx942", "gfx950"}


@dataclass(frozen=True)
class LaunchFacts:
    user_sgpr_count: int
    sgpr_private_segment_buffer: int      # first SGPR of each enabled input, or -1 when absent
    sgpr_dispatch_ptr: int
    sgpr_queue_ptr: int
    sgpr_kernarg_segment_ptr: int
    sgpr_dispatch_id: int
    sgpr_flat_scratch_init: int
    sgpr_private_segment_size: int
    sgpr_kernarg_preload: int             # first SGPR of preloaded kernarg dwords, -1 if none
    kernarg_preload_dwords: int
    kernarg_preload_offset: int           # byte offset in the kernarg segment of the first preloaded dword
    sgpr_workgroup_id: tuple              # (x, y, z) SGPR index, -1 when not enabled
    sgpr_workgroup_info: int
    sgpr_private_segment_wave_offset: int
    workitem_id_dims: int                 # 1: x, 2: x and y, 3: x, y and z
    packed_workitem_ids: bool             # True: all ids in v0 (gfx90a+); False: v0, v1, v2
    accum_offset: int                     # first AGPR-backed register of the unified file
    vgpr_granules: int                    # raw GRANULATED_WORKITEM_VGPR_COUNT
    lds_size: int                         # group_segment_fixed_size, bytes
    scratch_size: int                     # private_segment_fixed_size, bytes per lane
    kernarg_size: int
    wavefront_size: int
    uses_dynamic_stack: bool


def launch_facts(desc, mach) -> LaunchFacts:
    props = desc.kernel_code_properties
    rsrc2 = desc.pgm_rsrc2
    nxt = 0
    slots = {}
    for bit, name, size in ((0, "private_segment_buffer", 4), (1, "dispatch_ptr", 2), (2, "queue_ptr", 2),
                            (3, "kernarg_segment_ptr", 2), (4, "dispatch_id", 2),
                            (5, "flat_scratch_init", 2), (6, "private_segment_size", 1)):
        if (props >> bit) & 1:
            slots[name] = nxt
            nxt += size
        else:
            slots[name] = -1
    preload_dwords = desc.kernarg_preload & 0x7F
    preload_offset = ((desc.kernarg_preload >> 7) & 0x1FF) * 4
    preload_sgpr = nxt if preload_dwords else -1
    nxt += preload_dwords
    user = (rsrc2 >> 1) & 0x1F
    if nxt > user:
        raise DecodeError(f"kernel descriptor enables {nxt} user SGPRs but USER_SGPR_COUNT is {user}")
    nxt = user
    wg = []
    for bit in (7, 8, 9):
        if (rsrc2 >> bit) & 1:
            wg.append(nxt)
            nxt += 1
        else:
            wg.append(-1)
    info = -1
    if (rsrc2 >> 10) & 1:
        info, nxt = nxt, nxt + 1
    wave_off = nxt if rsrc2 & 1 else -1
    return LaunchFacts(
        user_sgpr_count=user,
        sgpr_private_segment_buffer=slots["private_segment_buffer"], sgpr_dispatch_ptr=slots["dispatch_ptr"],
        sgpr_queue_ptr=slots["queue_ptr"], sgpr_kernarg_segment_ptr=slots["kernarg_segment_ptr"],
        sgpr_dispatch_id=slots["dispatch_id"], sgpr_flat_scratch_init=slots["flat_scratch_init"],
        sgpr_private_segment_size=slots["private_segment_size"],
        sgpr_kernarg_preload=preload_sgpr, kernarg_preload_dwords=preload_dwords,
        kernarg_preload_offset=preload_offset,
        sgpr_workgroup_id=tuple(wg), sgpr_workgroup_info=info, sgpr_private_segment_wave_offset=wave_off,
        workitem_id_dims=((rsrc2 >> 11) & 3) + 1, packed_workitem_ids=mach in _PACKED_TID,
        accum_offset=desc.accum_offset, vgpr_granules=desc.pgm_rsrc1 & 0x3F,
        lds_size=desc.group_segment_fixed_size, scratch_size=desc.private_segment_fixed_size,
        kernarg_size=desc.kernarg_size, wavefront_size=32 if (props >> 10) & 1 else 64,
        uses_dynamic_stack=bool((props >> 11) & 1),
    )


class Program:
    """One kernel's instructions (decoded once) and launch facts."""

    def __init__(self, name, instrs, facts, entry, end, code_object):
        self.name = name
        self.instrs = instrs
        self.facts = facts
        self.entry = entry
        self.end = end
        self.code_object = code_object
        self._index = {ins.addr: i for i, ins in enumerate(instrs)}

    @classmethod
    def from_code_object(cls, data: bytes, kernel_name: str) -> "Program":
        key = (hashlib.sha256(data).hexdigest(), kernel_name)
        with _LOCK:
            prog = _CACHE.get(key)
        if prog is None:
            prog = cls._load(data, kernel_name)
            with _LOCK:
                _CACHE[key] = prog
        return prog

    @classmethod
    def _load(cls, data, kernel_name):
        co = codeobject.parse(data)
        desc = co.descriptor(kernel_name)
        entry = co.descriptor_address(kernel_name) + desc.entry_offset
        end = entry + function_size(co, kernel_name, entry)
        text = co.elf.bytes_at_vaddr(entry, end - entry)
        instrs = decode_range(text, 0, len(text), base_addr=entry)
        log.debug("decoded %s: %d instructions", kernel_name, len(instrs))
        return cls(kernel_name, instrs, launch_facts(desc, co.mach), entry, end, co)

    def index_of(self, addr: int) -> int:
        try:
            return self._index[addr]
        except KeyError:
            raise DecodeError(f"{self.name}: no instruction starts at 0x{addr:x}") from None

    def instr_at(self, addr: int):
        return self.instrs[self.index_of(addr)]

    def mnemonics(self) -> set:
        return {ins.op for ins in self.instrs}


def function_size(co, kernel_name, entry) -> int:
    """Size of the kernel's function symbol (the code llvm emitted for it, padding excluded)."""
    for sym in co.elf.symbols():
        if sym.value == entry and sym.type == 2 and sym.size:       # STT_FUNC
            return sym.size
    raise DecodeError(f"{kernel_name}: no function symbol with a size at entry 0x{entry:x}")


def code_object_mnemonics(data: bytes) -> set:
    """Every mnemonic (llvm spelling, no encoding suffix) in every kernel of a code object."""
    co = codeobject.parse(data)
    out = set()
    for k in co.kernels:
        out |= Program.from_code_object(data, k.name).mnemonics()
    return out
