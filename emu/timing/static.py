"""What the timing model needs to know about each static instruction of a program.

One `Op` per instruction: the unit it issues to, how long it holds that unit, when its result is
ready, which registers it reads and writes (dependency tracking), and for memory and wait
instructions the counter it bumps or the counts it waits for.
"""
import re
import weakref
from dataclasses import dataclass

from .. import isa

T = isa.load(isa.ARCH).timing

# unit kinds
VALU, MFMA, SALU, BRANCH, SMEM, VMEM, LDS, WAITCNT, NOP, BARRIER, END, OTHER = range(12)

_TRANS = re.compile(r"v_(exp|log|rcp|rsq|sqrt|sin|cos)(_legacy)?_(f16|f32|f64)|v_rcp_iflag_f32")
_QUARTER = re.compile(r"v_(mul_lo_u32|mul_hi_u32|mul_hi_i32|mad_u64_u32|mad_i64_i32|mul_lo_i32)")
_WIDE = re.compile(r"v_(lshl_add_u64|lshlrev_b64|lshrrev_b64|ashrrev_i64|add_u64|sub_u64|mov_b64)")
_CROSS = re.compile(r"v_permlane|v_readlane|v_writelane")
_SCALED_CVT = re.compile(r"v_cvt_scalef32_")
_MFMA_SHAPE = re.compile(r"v_(?:s?mfma|smfmac)(?:_scale)?_([fi]\d+)_(\d+)x(\d+)x(\d+)(?:_(\d+)b)?_?(\w*)")


@dataclass(frozen=True)
class Op:
    unit: int
    cycles: int                 # time the unit stays busy
    latency: int                # issue -> result ready (ALU results)
    reads: tuple                # register keys
    writes: tuple
    vm: bool = False            # bumps vmcnt
    lgkm: bool = False          # bumps lgkmcnt
    store: bool = False
    wait: tuple = ()            # s_waitcnt: (vmcnt, lgkmcnt)
    nbytes: int = 0             # bytes per lane of a memory access
    scaled_cvt: bool = False    # an MX block-scaled conversion: its VALU time is a fitted parameter


_SPECIAL = {"vcc": (2000, 2001), "vcc_lo": (2000,), "vcc_hi": (2001,), "exec": (2002, 2003),
            "exec_lo": (2002,), "exec_hi": (2003,), "scc": (2004,), "m0": (2005,)}


def _keys(op, agpr_base) -> tuple:
    k = op.kind
    if k == "sgpr":
        return tuple(range(op.index, op.index + op.count))
    if k == "vgpr":
        return tuple(range(1000 + op.index, 1000 + op.index + op.count))
    if k == "agpr":
        b = 1000 + agpr_base + op.index
        return tuple(range(b, b + op.count))
    if k == "special":
        return _SPECIAL.get(op.name, ())
    return ()


def mfma_cycles(ins) -> int:
    """Matrix-core time of one MFMA: its dense FLOPs over the per-SIMD peak of its format."""
    m = _MFMA_SHAPE.match(ins.op)
    if not m:
        return 4 * T.MFMA_MIN_CYCLES
    _, mm, nn, kk, blocks, kind = m.groups()
    flops = 2 * int(mm) * int(nn) * int(kk) * (int(blocks) if blocks else 1)
    if "f8f6f4" in kind:
        fa = T.MFMA_F8F6F4_FORMATS.get(int(ins.mods.get("cbsz", 0)), "fp8")
        fb = T.MFMA_F8F6F4_FORMATS.get(int(ins.mods.get("blgp", 0)), "fp8")
        rate = min(T.MFMA_FLOPS_PER_CLK_PER_SIMD[fa], T.MFMA_FLOPS_PER_CLK_PER_SIMD[fb])
    else:
        fmt = next((f for f in ("bf16", "f16", "xf32", "f64", "f32", "i8", "fp8", "bf8")
                    if kind.startswith(f) or kind.endswith(f)), "f32")
        fmt = {"bf8": "fp8"}.get(fmt, fmt)
        rate = T.MFMA_FLOPS_PER_CLK_PER_SIMD[fmt]
    if ins.op.startswith("v_smfmac"):
        flops //= 2
    return max(T.MFMA_MIN_CYCLES, -(-flops // rate))


def valu_cycles(op: str) -> int:
    if _TRANS.match(op):
        return T.VALU_TRANS_CYCLES
    if _QUARTER.match(op):
        return T.VALU_QUARTER_CYCLES
    if _WIDE.match(op):
        return T.VALU_64BIT_CYCLES
    if _CROSS.match(op):
        return T.VALU_CROSSLANE_CYCLES
    return T.VALU_CYCLES


def _mem_bytes(op: str) -> int:
    tail = op.rsplit("_", 1)[-1]
    for suf, n in (("dwordx4", 16), ("dwordx3", 12), ("dwordx2", 8), ("dword", 4), ("b128", 16),
                   ("b96", 12), ("b64", 8), ("b32", 4), ("short", 2), ("ushort", 2), ("sshort", 2),
                   ("byte", 1), ("ubyte", 1), ("sbyte", 1), ("b16", 2), ("b8", 1)):
        if tail == suf or op.endswith(suf):
            return n
    return 4


def op_of(ins, agpr_base: int) -> Op:
    name, enc = ins.op, ins.enc
    reads = tuple(k for o in ins.src for k in _keys(o, agpr_base))
    writes = tuple(k for o in ins.dst for k in _keys(o, agpr_base))
    if enc == "SOPP":
        if name == "s_waitcnt":
            return Op(WAITCNT, 0, 0, (), (), wait=(int(ins.mods.get("vmcnt", 63)),
                                                   int(ins.mods.get("lgkmcnt", 15))))
        if name == "s_waitcnt_vmcnt":
            return Op(WAITCNT, 0, 0, (), (), wait=(int(ins.mods.get("simm16", 63)), 15))
        if name == "s_waitcnt_lgkmcnt":
            return Op(WAITCNT, 0, 0, (), (), wait=(63, int(ins.mods.get("simm16", 15))))
        if name == "s_nop":
            n = int(ins.mods.get("simm16", 0)) & 0xF
            return Op(NOP, (n + 1) * T.WAIT_STATE_CYCLES, 0, (), ())
        if name == "s_sleep":
            n = int(ins.mods.get("simm16", 0)) & 0x7F
            return Op(NOP, 64 * max(n, 1), 0, (), ())
        if name == "s_barrier":
            return Op(BARRIER, T.SALU_CYCLES, 0, (), ())
        if name == "s_endpgm":
            return Op(END, T.SALU_CYCLES, 0, (), ())
        if name.startswith(("s_cbranch", "s_branch")):
            return Op(BRANCH, T.SALU_CYCLES, T.SALU_CYCLES, reads, ())
        return Op(OTHER, T.SALU_CYCLES, 0, (), ())
    if enc in ("SOP1", "SOP2", "SOPK", "SOPC"):
        if name in ("s_setpc_b64", "s_swappc_b64"):
            return Op(BRANCH, T.SALU_CYCLES, T.SALU_CYCLES, reads, writes)
        return Op(SALU, T.SALU_CYCLES, T.SALU_CYCLES, reads, writes + (2004,))
    if enc == "SMEM":
        return Op(SMEM, T.SALU_CYCLES, 0, reads, writes, lgkm=True, store="store" in name,
                  nbytes=_mem_bytes(name))
    if enc == "MAI" or name.startswith(("v_mfma", "v_smfmac")):
        c = mfma_cycles(ins)
        return Op(MFMA, c, c, reads, writes)
    if enc in ("MUBUF", "MTBUF", "FLAT", "GLOBAL", "SCRATCH"):
        if name in ("buffer_wbl2", "buffer_inv"):
            return Op(OTHER, T.SALU_CYCLES, 0, (), ())
        st = "store" in name or "atomic" in name and "rtn" not in name
        return Op(VMEM, T.ISSUE_CYCLES, 0, reads, writes, vm=True, store=st, nbytes=_mem_bytes(name))
    if enc == "DS":
        return Op(LDS, T.LDS_MIN_CYCLES, 0, reads, writes, lgkm=True, store="write" in name,
                  nbytes=_mem_bytes(name))
    if enc.startswith("VOP"):
        if _SCALED_CVT.match(name):
            # no published rate for gfx950's MX block-scaled conversions: their cost is fitted
            return Op(VALU, T.SCALED_CVT_CYCLES, T.SCALED_CVT_CYCLES, reads, writes, scaled_cvt=True)
        c = valu_cycles(name)
        return Op(VALU, c, c, reads, writes)
    return Op(OTHER, T.ISSUE_CYCLES, 0, reads, writes)


_OPS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def ops_of(prep) -> list:
    """The Op of every instruction of a Prepared program (built once per program)."""
    ops = _OPS.get(prep)
    if ops is None:
        base = prep.program.facts.accum_offset
        ops = _OPS[prep] = [op_of(i, base) for i in prep.instrs]
    return ops
