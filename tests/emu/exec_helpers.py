"""Build tiny programs from hand-written Instr values and run them on the emulator."""
from types import SimpleNamespace

import numpy as np

from flyaot.emu.instr import Instr, Operand
from flyaot.emu.machine import Launch, Prepared
from flyaot.emu.memory import Memory
from flyaot.emu.program import LaunchFacts
from flyaot.emu.semantics import HANDLERS
from flyaot.emu.wave import Wave


def v(i, n=1):
    return Operand("vgpr", i, n, name=f"v{i}")


def s(i, n=1):
    return Operand("sgpr", i, n, name=f"s{i}")


def c(value, name=None):
    return Operand("const", 0, 1, value & 0xFFFFFFFF, name if name is not None else str(value))


def lit(value):
    return Operand("literal", 0, 1, value & 0xFFFFFFFF)


def sp(name, n=2):
    return Operand("special", 0, n, name=name)


def label(addr):
    return Operand("label", 0, 1, addr)


VCC = sp("vcc")
EXEC = sp("exec")

_ENC = {"s_": "SOP2", "v_": "VOP3", "ds": "DS", "bu": "MUBUF", "gl": "GLOBAL"}


def ins(op, dst=(), src=(), enc=None, **mods):
    return Instr(0, 8, enc or _ENC.get(op[:2], "VOP3"), op, tuple(dst), tuple(src), dict(mods), op)


def run(w, *instrs):
    """Execute instructions one by one on wave `w` (no control flow)."""
    for i in instrs:
        HANDLERS[i.op](w, i)
    return w


def wave(mem=None, lds_bytes=0):
    return Wave(mem=mem or Memory(), lds=np.zeros(lds_bytes, dtype=np.uint8))


def program(instrs, lds=0, kernarg_ptr_sgpr=0, wg_id_sgpr=2, packed=True):
    """A Program-like object with addresses assigned in order (4-byte steps from 0x100)."""
    laid = []
    addr = 0x100
    for i in instrs:
        laid.append(Instr(addr, 4, i.enc, i.op, i.dst, i.src, i.mods, i.text))
        addr += 4
    facts = LaunchFacts(
        user_sgpr_count=2, sgpr_private_segment_buffer=-1, sgpr_dispatch_ptr=-1, sgpr_queue_ptr=-1,
        sgpr_kernarg_segment_ptr=kernarg_ptr_sgpr, sgpr_dispatch_id=-1, sgpr_flat_scratch_init=-1,
        sgpr_private_segment_size=-1, sgpr_kernarg_preload=-1, kernarg_preload_dwords=0,
        kernarg_preload_offset=0, sgpr_workgroup_id=(wg_id_sgpr, -1, -1), sgpr_workgroup_info=-1,
        sgpr_private_segment_wave_offset=-1, workitem_id_dims=1, packed_workitem_ids=packed,
        accum_offset=256, vgpr_granules=0, lds_size=lds, scratch_size=0, kernarg_size=64,
        wavefront_size=64, uses_dynamic_stack=False)
    return SimpleNamespace(name="test_kernel", instrs=laid, facts=facts, entry=0x100)


def addr_of(prog, k):
    return prog.instrs[k].addr


def launch(prog, grid, block, kernarg=b"", mem=None):
    mem = mem or Memory()
    return Launch(Prepared(prog), grid, block, kernarg, mem).run()
