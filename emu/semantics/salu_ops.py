"""Scalar ALU (SOP1/SOP2/SOPK/SOPC) and program control (SOPP branches, barrier, endpgm).

Scalar values are Python ints here (cheaper than numpy scalars for one-dword math).
"""
import logging

from ..wave import EmuError, int_to_mask, mask_to_int
from . import handles

log = logging.getLogger(__name__)
M32 = 0xFFFFFFFF
M64 = 0xFFFFFFFFFFFFFFFF


class WaveYield(Exception):
    """Raised by s_barrier / s_endpgm to hand control back to the workgroup scheduler."""


def s32(w, op) -> int:
    k = op.kind
    if k == "sgpr":
        return int(w.sgpr[op.index])
    if k in ("const", "literal"):
        return op.value & M32
    return int(w.read_scalar(op, 1)[0])


def s64(w, op) -> int:
    k = op.kind
    if k == "sgpr":
        i = op.index
        return int(w.sgpr[i]) | (int(w.sgpr[i + 1]) << 32)
    if k == "special" and op.name == "exec":
        return mask_to_int(w.exec)
    if k == "special" and op.name == "vcc":
        return mask_to_int(w.vcc)
    return w.read_u64(op)


def set32(w, op, v: int) -> None:
    if op.kind == "sgpr":
        w.sgpr[op.index] = v & M32
    else:
        w.write_scalar(op, [v & M32])


def set64(w, op, v: int) -> None:
    v &= M64
    if op.kind == "sgpr":
        i = op.index
        w.sgpr[i] = v & M32
        w.sgpr[i + 1] = v >> 32
    elif op.kind == "special" and op.name in ("exec", "vcc"):
        m = int_to_mask(v).copy()
        if op.name == "exec":
            w.exec = m
        else:
            w.vcc = m
    else:
        w.write_scalar(op, [v & M32, v >> 32])


def _sx(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def _clz(v: int, bits: int) -> int:
    return bits - v.bit_length()


# ---- SOP2 ----
def _add_u32(a, b, scc):
    r = a + b
    return r, r >> 32


def _sub_u32(a, b, scc):
    return a - b, int(b > a)


def _addc(a, b, scc):
    r = a + b + scc
    return r, r >> 32


def _subb(a, b, scc):
    return a - b - scc, int(b + scc > a)


def _add_i32(a, b, scc):
    r = _sx(a, 32) + _sx(b, 32)
    return r, int(not -2**31 <= r < 2**31)


def _sub_i32(a, b, scc):
    r = _sx(a, 32) - _sx(b, 32)
    return r, int(not -2**31 <= r < 2**31)


def _bfe(a, b, bits, signed):
    off = b & (bits - 1)
    width = (b >> 16) & 0x7F
    r = (a >> off) & ((1 << width) - 1) if width else 0
    if signed and width:
        r = _sx(r, width) & ((1 << bits) - 1)
    return r


def _lshl_add(n):
    def f(a, b, scc):
        r = ((a << n) & M32) + b
        return r, r >> 32
    return f


SOP2 = {
    "s_add_u32": (32, _add_u32), "s_sub_u32": (32, _sub_u32), "s_addc_u32": (32, _addc),
    "s_subb_u32": (32, _subb), "s_add_i32": (32, _add_i32), "s_sub_i32": (32, _sub_i32),
    "s_min_i32": (32, lambda a, b, s: (a, 1) if _sx(a, 32) < _sx(b, 32) else (b, 0)),
    "s_max_i32": (32, lambda a, b, s: (a, 1) if _sx(a, 32) > _sx(b, 32) else (b, 0)),
    "s_min_u32": (32, lambda a, b, s: (a, 1) if a < b else (b, 0)),
    "s_max_u32": (32, lambda a, b, s: (a, 1) if a > b else (b, 0)),
    "s_cselect_b32": (32, lambda a, b, s: (a if s else b, None)),
    "s_cselect_b64": (64, lambda a, b, s: (a if s else b, None)),
    "s_mul_i32": (32, lambda a, b, s: (a * b, None)),
    "s_mul_hi_u32": (32, lambda a, b, s: ((a * b) >> 32, None)),
    "s_mul_hi_i32": (32, lambda a, b, s: ((_sx(a, 32) * _sx(b, 32)) >> 32, None)),
    "s_bfm_b32": (32, lambda a, b, s: (((1 << (a & 31)) - 1) << (b & 31), None)),
    "s_bfe_u32": (32, lambda a, b, s: (_bfe(a, b, 32, False),) * 2),
    "s_bfe_i32": (32, lambda a, b, s: (_bfe(a, b, 32, True),) * 2),
    "s_absdiff_i32": (32, lambda a, b, s: (abs(_sx(a, 32) - _sx(b, 32)),) * 2),
    "s_lshl1_add_u32": (32, _lshl_add(1)), "s_lshl2_add_u32": (32, _lshl_add(2)),
    "s_lshl3_add_u32": (32, _lshl_add(3)), "s_lshl4_add_u32": (32, _lshl_add(4)),
    "s_pack_ll_b32_b16": (32, lambda a, b, s: ((a & 0xFFFF) | ((b & 0xFFFF) << 16), None)),
    "s_pack_lh_b32_b16": (32, lambda a, b, s: ((a & 0xFFFF) | (b & 0xFFFF0000), None)),
    "s_pack_hh_b32_b16": (32, lambda a, b, s: ((a >> 16) | (b & 0xFFFF0000), None)),
}
# Ops whose SCC is "result != 0".
for _w, _m in ((32, M32), (64, M64)):
    for _name, _fn in {
        "and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b,
        "andn2": lambda a, b: a & ~b, "orn2": lambda a, b: a | ~b, "nand": lambda a, b: ~(a & b),
        "nor": lambda a, b: ~(a | b), "xnor": lambda a, b: ~(a ^ b),
    }.items():
        SOP2[f"s_{_name}_b{_w}"] = (_w, lambda a, b, s, fn=_fn, m=_m: ((fn(a, b) & m), "nz"))
    SOP2[f"s_lshl_b{_w}"] = (_w, lambda a, b, s, w_=_w: ((a << (b & (w_ - 1))), "nz"))
    SOP2[f"s_lshr_b{_w}"] = (_w, lambda a, b, s, w_=_w: ((a >> (b & (w_ - 1))), "nz"))
    SOP2[f"s_ashr_i{_w}"] = (_w, lambda a, b, s, w_=_w: ((_sx(a, w_) >> (b & (w_ - 1))), "nz"))
SOP2["s_bfm_b64"] = (64, lambda a, b, s: (((1 << (a & 63)) - 1) << (b & 63), None))
SOP2["s_bfe_u64"] = (64, lambda a, b, s: (_bfe(a, b, 64, False),) * 2)
SOP2["s_bfe_i64"] = (64, lambda a, b, s: (_bfe(a, b, 64, True),) * 2)


@handles(*SOP2)
def _sop2(w, ins):
    width, fn = SOP2[ins.op]
    a_op, b_op = ins.src[0], ins.src[1]
    # 64-bit ops: shift amounts and bfe controls are 32-bit second operands.
    b_is64 = width == 64 and not ins.op.startswith(("s_lshl", "s_lshr", "s_ashr", "s_bfe", "s_bfm"))
    if width == 64 and ins.op.startswith("s_bfm"):
        a, b = s32(w, a_op), s32(w, b_op)
    else:
        a = s64(w, a_op) if width == 64 else s32(w, a_op)
        b = s64(w, b_op) if b_is64 else s32(w, b_op)
    r, scc = fn(a, b, w.scc)
    m = M64 if width == 64 else M32
    r &= m
    if scc == "nz":
        scc = int(r != 0)
    if width == 64:
        set64(w, ins.dst[0], r)
    else:
        set32(w, ins.dst[0], r)
    if scc is not None:
        w.scc = int(scc) & 1


# ---- SOP1 ----
def _brev(v, bits):
    return int(format(v, f"0{bits}b")[::-1], 2)


def _ff1(v, bits):
    return (v & -v).bit_length() - 1 if v else M32


def _flbit(v, bits):
    return _clz(v, bits) if v else M32


def _flbit_i32(v, bits):
    s = _sx(v, 32)
    if s in (0, -1):
        return M32
    return _clz(v if s >= 0 else ~v & M32, 32)


SOP1 = {   # name: (width, fn(value, scc) -> (result, scc or None or "nz"), result width)
    "s_mov_b32": (32, lambda v, s: (v, None)), "s_mov_b64": (64, lambda v, s: (v, None)),
    "s_not_b32": (32, lambda v, s: (~v & M32, "nz")), "s_not_b64": (64, lambda v, s: (~v & M64, "nz")),
    "s_brev_b32": (32, lambda v, s: (_brev(v, 32), None)), "s_brev_b64": (64, lambda v, s: (_brev(v, 64), None)),
    "s_bcnt0_i32_b32": (32, lambda v, s: (32 - bin(v).count("1"), "nz")),
    "s_bcnt0_i32_b64": (64, lambda v, s: (64 - bin(v).count("1"), "nz")),
    "s_bcnt1_i32_b32": (32, lambda v, s: (bin(v).count("1"), "nz")),
    "s_bcnt1_i32_b64": (64, lambda v, s: (bin(v).count("1"), "nz")),
    "s_ff1_i32_b32": (32, lambda v, s: (_ff1(v, 32), None)),
    "s_ff1_i32_b64": (64, lambda v, s: (_ff1(v, 64), None)),
    "s_ff0_i32_b32": (32, lambda v, s: (_ff1(~v & M32, 32), None)),
    "s_ff0_i32_b64": (64, lambda v, s: (_ff1(~v & M64, 64), None)),
    "s_flbit_i32_b32": (32, lambda v, s: (_flbit(v, 32), None)),
    "s_flbit_i32_b64": (64, lambda v, s: (_flbit(v, 64), None)),
    "s_flbit_i32": (32, lambda v, s: (_flbit_i32(v, 32), None)),
    "s_sext_i32_i8": (32, lambda v, s: (_sx(v, 8), None)),
    "s_sext_i32_i16": (32, lambda v, s: (_sx(v, 16), None)),
    "s_abs_i32": (32, lambda v, s: (abs(_sx(v, 32)), "nz")),
}
_RES32 = {k for k in SOP1 if "_i32_b64" in k}   # 64-bit source, 32-bit result


@handles(*SOP1)
def _sop1(w, ins):
    width, fn = SOP1[ins.op]
    v = s64(w, ins.src[0]) if width == 64 else s32(w, ins.src[0])
    r, scc = fn(v, w.scc)
    if width == 64 and ins.op not in _RES32:
        r &= M64
        set64(w, ins.dst[0], r)
    else:
        r &= M32
        set32(w, ins.dst[0], r)
    if scc == "nz":
        w.scc = int(r != 0)


@handles("s_cmov_b32", "s_cmov_b64")
def _cmov(w, ins):
    if w.scc:
        if ins.op.endswith("64"):
            set64(w, ins.dst[0], s64(w, ins.src[0]))
        else:
            set32(w, ins.dst[0], s32(w, ins.src[0]))


@handles("s_bitset0_b32", "s_bitset1_b32", "s_bitset0_b64", "s_bitset1_b64")
def _bitset(w, ins):
    wide = ins.op.endswith("64")
    d = s64(w, ins.dst[0]) if wide else s32(w, ins.dst[0])
    bit = s32(w, ins.src[0]) & (63 if wide else 31)
    d = d | (1 << bit) if "bitset1" in ins.op else d & ~(1 << bit)
    (set64 if wide else set32)(w, ins.dst[0], d)


_SAVEEXEC = {
    "s_and_saveexec_b64": lambda s, e: s & e, "s_or_saveexec_b64": lambda s, e: s | e,
    "s_xor_saveexec_b64": lambda s, e: s ^ e, "s_andn2_saveexec_b64": lambda s, e: s & ~e,
    "s_orn2_saveexec_b64": lambda s, e: s | ~e, "s_nand_saveexec_b64": lambda s, e: ~(s & e),
    "s_nor_saveexec_b64": lambda s, e: ~(s | e), "s_xnor_saveexec_b64": lambda s, e: ~(s ^ e),
    "s_andn1_saveexec_b64": lambda s, e: ~s & e, "s_orn1_saveexec_b64": lambda s, e: ~s | e,
}


@handles(*_SAVEEXEC)
def _saveexec(w, ins):
    old = mask_to_int(w.exec)
    new = _SAVEEXEC[ins.op](s64(w, ins.src[0]), old) & M64
    set64(w, ins.dst[0], old)
    w.exec = int_to_mask(new).copy()
    w.scc = int(new != 0)


@handles("s_andn1_wrexec_b64", "s_andn2_wrexec_b64")
def _wrexec(w, ins):
    s, e = s64(w, ins.src[0]), mask_to_int(w.exec)
    new = (~s & e if "andn1" in ins.op else s & ~e) & M64
    w.exec = int_to_mask(new).copy()
    set64(w, ins.dst[0], new)
    w.scc = int(new != 0)


@handles("s_getpc_b64")
def _getpc(w, ins):
    set64(w, ins.dst[0], w.pc)           # w.pc already holds the next instruction's address


@handles("s_setpc_b64")
def _setpc(w, ins):
    w.pc = s64(w, ins.src[0])


@handles("s_swappc_b64")
def _swappc(w, ins):
    target = s64(w, ins.src[0])
    set64(w, ins.dst[0], w.pc)
    w.pc = target


@handles("s_movrels_b32", "s_movrels_b64")
def _movrels(w, ins):
    src = ins.src[0]
    n = 2 if ins.op.endswith("64") else 1
    i = src.index + w.m0
    vals = w.sgpr[i:i + n]
    (set64 if n == 2 else set32)(w, ins.dst[0], int(vals[0]) | (int(vals[-1]) << 32 if n == 2 else 0))


@handles("s_movreld_b32", "s_movreld_b64")
def _movreld(w, ins):
    n = 2 if ins.op.endswith("64") else 1
    i = ins.dst[0].index + w.m0
    v = s64(w, ins.src[0]) if n == 2 else s32(w, ins.src[0])
    w.sgpr[i] = v & M32
    if n == 2:
        w.sgpr[i + 1] = v >> 32


# ---- SOPK ----
def _simm16(ins) -> int:
    if "simm16" in ins.mods:
        return int(ins.mods["simm16"]) & 0xFFFF
    for op in reversed(ins.src):
        if op.kind in ("const", "literal"):
            return op.value & 0xFFFF
    raise EmuError(f"{ins.op}: no 16-bit immediate found")


@handles("s_movk_i32")
def _movk(w, ins):
    set32(w, ins.dst[0], _sx(_simm16(ins), 16))


@handles("s_cmovk_i32")
def _cmovk(w, ins):
    if w.scc:
        set32(w, ins.dst[0], _sx(_simm16(ins), 16))


@handles("s_addk_i32")
def _addk(w, ins):
    d = ins.dst[0]
    r = _sx(s32(w, d), 32) + _sx(_simm16(ins), 16)
    set32(w, d, r)
    w.scc = int(not -2**31 <= r < 2**31)


@handles("s_mulk_i32")
def _mulk(w, ins):
    d = ins.dst[0]
    set32(w, d, _sx(s32(w, d), 32) * _sx(_simm16(ins), 16))


@handles("s_call_b64")
def _call(w, ins):
    set64(w, ins.dst[0], w.pc)
    w.pc = _branch_target(w, ins)


@handles("s_setreg_b32", "s_setreg_imm32_b32", "s_getreg_b32")
def _hwreg(w, ins):
    # MODE/STATUS hardware registers: the emulator keeps IEEE round-to-nearest with denormals, so a
    # mode write is accepted and logged; reads return 0.
    if ins.op == "s_getreg_b32":
        set32(w, ins.dst[0], 0)
    else:
        log.debug("ignoring %s", ins.text or ins.op)


# ---- SOPC ----
_CMP = {"eq": lambda a, b: a == b, "lg": lambda a, b: a != b, "gt": lambda a, b: a > b,
        "ge": lambda a, b: a >= b, "lt": lambda a, b: a < b, "le": lambda a, b: a <= b}


def _sopc(w, ins):
    _, _, cond, t = ins.op.split("_")
    if t == "u64":
        a, b = s64(w, ins.src[0]), s64(w, ins.src[1])
    else:
        a, b = s32(w, ins.src[0]), s32(w, ins.src[1])
        if t == "i32":
            a, b = _sx(a, 32), _sx(b, 32)
    w.scc = int(_CMP[cond](a, b))


def _sopk_cmp(w, ins):
    _, _, cond, t = ins.op.split("_")
    a, k = s32(w, ins.src[0]), _simm16(ins)
    if t == "i32":
        a, k = _sx(a, 32), _sx(k, 16)
    w.scc = int(_CMP[cond](a, k))


for _c in _CMP:
    handles(f"s_cmp_{_c}_i32", f"s_cmp_{_c}_u32")(_sopc)
    handles(f"s_cmpk_{_c}_i32", f"s_cmpk_{_c}_u32")(_sopk_cmp)
handles("s_cmp_eq_u64", "s_cmp_lg_u64")(_sopc)


@handles("s_bitcmp0_b32", "s_bitcmp1_b32", "s_bitcmp0_b64", "s_bitcmp1_b64")
def _bitcmp(w, ins):
    wide = ins.op.endswith("64")
    v = s64(w, ins.src[0]) if wide else s32(w, ins.src[0])
    bit = (v >> (s32(w, ins.src[1]) & (63 if wide else 31))) & 1
    w.scc = int(bit == (1 if "bitcmp1" in ins.op else 0))


# ---- SOPP ----
def _branch_target(w, ins) -> int:
    for op in ins.src:
        if op.kind == "label":
            return op.value
    if "simm16" in ins.mods:
        return ins.addr + 4 + 4 * _sx(int(ins.mods["simm16"]), 16)
    raise EmuError(f"{ins.op}: no branch target")


@handles("s_branch")
def _branch(w, ins):
    w.pc = _branch_target(w, ins)


_COND = {
    "s_cbranch_scc0": lambda w: not w.scc, "s_cbranch_scc1": lambda w: w.scc,
    "s_cbranch_vccz": lambda w: not w.vcc.any(), "s_cbranch_vccnz": lambda w: w.vcc.any(),
    "s_cbranch_execz": lambda w: not w.exec.any(), "s_cbranch_execnz": lambda w: w.exec.any(),
}


@handles(*_COND)
def _cbranch(w, ins):
    if _COND[ins.op](w):
        w.pc = _branch_target(w, ins)


@handles("s_endpgm")
def _endpgm(w, ins):
    w.done = True
    raise WaveYield


@handles("s_barrier")
def _barrier(w, ins):
    w.at_barrier = True
    w.counters.barriers += 1
    raise WaveYield


@handles("s_nop", "s_waitcnt", "s_waitcnt_vmcnt", "s_waitcnt_lgkmcnt", "s_waitcnt_expcnt",
         "s_setprio", "s_sleep", "s_icache_inv", "s_incperflevel", "s_decperflevel",
         "s_ttracedata", "s_sched_barrier", "s_dcache_inv", "s_dcache_wb", "s_wakeup",
         "s_set_gpr_idx_mode", "buffer_wbl2", "buffer_inv", "s_dcache_inv_vol", "s_dcache_wb_vol")
def _nop(w, ins):
    pass


@handles("s_trap")
def _trap(w, ins):
    raise EmuError(f"s_trap reached at 0x{ins.addr:x} (kernel abort/assert)")
