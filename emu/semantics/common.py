"""Shared pieces of the vector semantics: modifier fields, DPP lane movement, SDWA selects,
typed operand reads and masked writes.

Modifier fields in `Instr.mods` may be an int bit mask (bit i = source i, as encoded) or a
sequence of flags; `mbit` accepts both. DPP is `mods['dpp'] = {ctrl, row_mask, bank_mask,
bound_ctrl}` with the raw 9-bit dpp_ctrl; SDWA is `mods['sdwa']` with dst_sel/dst_unused/
src0_sel/src1_sel (ints as encoded or llvm's names) and src0_sext/src1_sext.
"""
import numpy as np

from ..wave import EmuError, LANES, N_SGPR, N_VGPR

LANE = np.arange(LANES)
U64_32 = np.uint64(32)
M32 = np.uint64(0xFFFFFFFF)


def mbit(mods: dict, key: str, i: int) -> bool:
    v = mods.get(key)
    if not v:
        return False
    if isinstance(v, int):
        return bool((v >> i) & 1)
    return i < len(v) and bool(v[i])


# ----- DPP -----
_DPP_CACHE: dict = {}


def _dpp_pattern(ctrl: int):
    """(source lane, valid) for every lane under dpp_ctrl `ctrl` (gfx9/gfx90a encoding)."""
    row, pos = LANE // 16 * 16, LANE % 16
    valid = np.ones(LANES, dtype=bool)
    if ctrl <= 0xFF:                                   # quad_perm
        sel = np.array([(ctrl >> (2 * k)) & 3 for k in range(4)])
        src = LANE // 4 * 4 + sel[LANE % 4]
    elif 0x101 <= ctrl <= 0x10F:                       # row_shl:n  lane i reads i+n
        n = ctrl & 0xF
        src, valid = row + pos + n, pos + n < 16
    elif 0x111 <= ctrl <= 0x11F:                       # row_shr:n  lane i reads i-n
        n = ctrl & 0xF
        src, valid = row + pos - n, pos - n >= 0
    elif 0x121 <= ctrl <= 0x12F:                       # row_ror:n
        src = row + (pos - (ctrl & 0xF)) % 16
    elif ctrl == 0x130:                                # wave_shl:1
        src, valid = LANE + 1, LANE + 1 < LANES
    elif ctrl == 0x134:                                # wave_rol:1
        src = (LANE + 1) % LANES
    elif ctrl == 0x138:                                # wave_shr:1
        src, valid = LANE - 1, LANE >= 1
    elif ctrl == 0x13C:                                # wave_ror:1
        src = (LANE - 1) % LANES
    elif ctrl == 0x140:                                # row_mirror
        src = row + 15 - pos
    elif ctrl == 0x141:                                # row_half_mirror
        src = LANE // 8 * 8 + 7 - LANE % 8
    elif ctrl == 0x142:                                # row_bcast:15  lane 15 of the previous row
        src, valid = row - 1, row >= 16
    elif ctrl == 0x143:                                # row_bcast:31  lane 31 to rows 2 and 3
        src, valid = np.full(LANES, 31), row >= 32
    elif 0x150 <= ctrl <= 0x15F:                       # row_newbcast:n (gfx90a+): lane n of the row
        src = row + (ctrl & 0xF)
    else:
        raise EmuError(f"DPP control 0x{ctrl:x} is not implemented")
    src = np.where(valid, src, 0).astype(np.intp)
    return src, valid


def dpp_prepare(w, dpp: dict):
    """(source lane per lane, source-valid mask, write mask) for this DPP instruction.

    A source lane is invalid when it lies outside the row/wave or is inactive in EXEC; invalid
    lanes read 0 when bound_ctrl is set, otherwise they are not written. row_mask/bank_mask
    disable writes to whole rows / banks (4-lane groups within each row).
    """
    ctrl = int(dpp.get("ctrl", 0))
    pat = _DPP_CACHE.get(ctrl)
    if pat is None:
        pat = _DPP_CACHE[ctrl] = _dpp_pattern(ctrl)
    src, valid = pat
    ok = valid & w.exec[src]
    row_mask = int(dpp.get("row_mask", 0xF))
    bank_mask = int(dpp.get("bank_mask", 0xF))
    write = w.exec.copy()
    if row_mask != 0xF:
        write &= ((row_mask >> (LANE // 16)) & 1).astype(bool)
    if bank_mask != 0xF:
        write &= ((bank_mask >> (LANE % 16 // 4)) & 1).astype(bool)
    bound_zero = bool(dpp.get("bound_ctrl", 0))
    if not bound_zero:
        write &= ok
    return src, ok, write


def dpp_apply(vals: np.ndarray, src, ok) -> np.ndarray:
    """Move lanes of [n, 64] `vals` per the DPP pattern; invalid sources read 0."""
    out = vals[:, src]
    if not ok.all():
        out = np.where(ok, out, np.uint32(0)).astype(np.uint32)
    return out


# ----- SDWA -----
_SEL = {"BYTE_0": 0, "BYTE_1": 1, "BYTE_2": 2, "BYTE_3": 3, "WORD_0": 4, "WORD_1": 5, "DWORD": 6}
_UNUSED = {"UNUSED_PAD": 0, "UNUSED_SEXT": 1, "UNUSED_PRESERVE": 2}


def _sel(v, default=6) -> int:
    if v is None:
        return default
    return _SEL[v] if isinstance(v, str) else int(v)


def sdwa_src(x: np.ndarray, sel, sext) -> np.ndarray:
    """Select byte/word `sel` of u32 lanes, zero- or sign-extended to 32 bits."""
    sel = _sel(sel)
    if sel == 6:
        return x
    if sel <= 3:
        v = (x >> np.uint32(8 * sel)) & np.uint32(0xFF)
        return ((v.astype(np.int32) << 24) >> 24).view(np.uint32) if sext else v
    v = (x >> np.uint32(16 * (sel - 4))) & np.uint32(0xFFFF)
    return ((v.astype(np.int32) << 16) >> 16).view(np.uint32) if sext else v


def sdwa_dst(old: np.ndarray, val: np.ndarray, sel, unused) -> np.ndarray:
    """Place the result in the dst_sel field; the rest is zero, sign-extended or preserved."""
    sel = _sel(sel)
    if sel == 6:
        return val
    unused = _UNUSED[unused] if isinstance(unused, str) else int(unused or 0)
    shift, width = (8 * sel, 8) if sel <= 3 else (16 * (sel - 4), 16)
    field_mask = np.uint32(((1 << width) - 1) << shift)
    placed = (val << np.uint32(shift)) & field_mask
    if unused == 2:
        return (old & ~field_mask) | placed
    if unused == 1:
        top = shift + width
        ext = (placed.view(np.int32) << (32 - top)) >> (32 - top) if top < 32 else placed.view(np.int32)
        return ext.view(np.uint32)
    return placed


# ----- typed reads -----
def src_raw(w, ins, i: int, dwords: int = 1, fp64: bool = False) -> np.ndarray:
    """Source i as uint32 [dwords, 64], with DPP (src0) and SDWA selection applied."""
    v = w.read(ins.src[i], dwords, fp64=fp64)
    mods = ins.mods
    if i == 0:
        dpp = mods.get("dpp")
        if dpp:
            src, ok, _ = dpp_prepare(w, dpp)
            v = dpp_apply(v, src, ok)
    sd = mods.get("sdwa")
    if sd and i < 2:
        v = sdwa_src(v[0], sd.get(f"src{i}_sel"), sd.get(f"src{i}_sext"))[None]
    return v


def _float_mods(x, mods, i):
    sd = mods.get("sdwa") or {}
    if mbit(mods, "abs", i) or mbit(sd, "abs", i):
        x = np.abs(x)
    if mbit(mods, "neg", i) or mbit(sd, "neg", i):
        x = -x
    return x


def src_u32(w, ins, i):
    return src_raw(w, ins, i)[0]


def src_f32(w, ins, i):
    x = src_raw(w, ins, i)[0]
    x = np.ascontiguousarray(x).view(np.float32)
    return _float_mods(x, ins.mods, i)


def src_u64(w, ins, i):
    v = src_raw(w, ins, i, 2)
    return v[0].astype(np.uint64) | (v[1].astype(np.uint64) << U64_32)


def src_f64(w, ins, i):
    v = src_raw(w, ins, i, 2, fp64=True)
    x = (v[0].astype(np.uint64) | (v[1].astype(np.uint64) << U64_32)).view(np.float64)
    return _float_mods(x, ins.mods, i)


def src_u16(w, ins, i):
    """16-bit source: low half, or high half when op_sel selects it."""
    x = src_raw(w, ins, i)[0]
    if mbit(ins.mods, "op_sel", i):
        x = x >> np.uint32(16)
    return (x & np.uint32(0xFFFF)).astype(np.uint16)


def src_f16(w, ins, i):
    op = ins.src[i]
    if op.kind == "const":
        x = np.full(LANES, f16_const(op), dtype=np.uint16)
    else:
        x = src_u16(w, ins, i)
    return _float_mods(x.view(np.float16), ins.mods, i)


_F16_INLINE = {"0.5": 0x3800, "-0.5": 0xB800, "1.0": 0x3C00, "-1.0": 0xBC00, "2.0": 0x4000,
               "-2.0": 0xC000, "4.0": 0x4400, "-4.0": 0xC400, "0.15915494": 0x3118}


def f16_const(op) -> int:
    """An inline constant as a 16-bit operand sees it (floats in f16 encoding)."""
    if op.name in _F16_INLINE:
        return _F16_INLINE[op.name]
    return op.value & 0xFFFF


# ----- results -----
def f32_post(x: np.ndarray, mods: dict) -> np.ndarray:
    """Output modifiers of float results: omod scaling then clamp to [0, 1]."""
    omod = mods.get("omod") or 0
    sd = mods.get("sdwa")
    if sd:
        omod = omod or sd.get("omod") or 0
    if omod:
        x = x * x.dtype.type((2.0, 4.0, 0.5)[int(omod) - 1])
    if mods.get("clamp") or (sd and sd.get("clamp")):
        x = np.clip(x, 0, 1)     # NaN stays NaN here; hardware clamps NaN to 0
        x = np.where(np.isnan(x), x.dtype.type(0), x)
    return x


def write_mask(w, ins):
    dpp = ins.mods.get("dpp")
    if dpp:
        return dpp_prepare(w, dpp)[2]
    return w.exec


def write_u32(w, ins, vals, dst: int = 0):
    """Write a u32 [64] result to dst operand `dst` under EXEC (and DPP's write mask)."""
    op = ins.dst[dst]
    vals = np.asarray(vals)
    if vals.dtype != np.uint32:
        vals = vals.view(np.uint32) if vals.dtype.itemsize == 4 else vals.astype(np.uint32)
    sd = ins.mods.get("sdwa")
    if sd and op.kind == "vgpr":
        old = w.read(op, 1)[0]
        vals = sdwa_dst(old, vals, sd.get("dst_sel"), sd.get("dst_unused"))
    w.write(op, vals[None] if vals.ndim == 1 else vals, write_mask(w, ins))


def write_u64(w, ins, vals, dst: int = 0):
    vals = np.asarray(vals)
    if vals.dtype != np.uint64:
        vals = vals.view(np.uint64)
    out = np.empty((2, LANES), dtype=np.uint32)
    out[0] = vals & M32
    out[1] = vals >> U64_32
    w.write(ins.dst[dst], out, write_mask(w, ins))


def write_u16(w, ins, vals, dst: int = 0):
    """16-bit result: low half with the high half zeroed (gfx9 16-bit VALU), or the high half
    with the low half kept when op_sel's destination bit is set."""
    v = np.asarray(vals).view(np.uint16).astype(np.uint32)
    if mbit(ins.mods, "op_sel", 3):
        old = w.read(ins.dst[dst], 1)[0]
        v = (old & np.uint32(0xFFFF)) | (v << np.uint32(16))
    write_u32(w, ins, v, dst)


# ----- specialization helpers (see semantics/__init__.py, SPECIALIZERS) -----
_INERT_MODS = {"suffix"}        # printed-form detail with no effect on values


def plain(ins, allowed=()) -> bool:
    """True when no modifier that changes values is set on `ins` (abs/neg/clamp/omod/op_sel,
    DPP, SDWA ...), apart from the keys in `allowed`."""
    for k, v in ins.mods.items():
        if v and k not in _INERT_MODS and k not in allowed:
            return False
    return True


def fast_src(op, dtype=None):
    """w -> the 32-bit lanes of source operand `op` viewed as `dtype`: a [64] view of a VGPR/AGPR
    row, or a [1] array (broadcasting like the general path's [64] copy) for an SGPR, inline
    constant or literal. None for operands that need the general path."""
    k, i = op.kind, op.index
    if op.count != 1:
        return None
    if k == "vgpr":
        if dtype is None:
            return lambda w: w.vgpr[i]
        return lambda w: w.vgpr[i].view(dtype)
    if k == "agpr":
        if dtype is None:
            return lambda w: w.vgpr[w.agpr_base + i]
        return lambda w: w.vgpr[w.agpr_base + i].view(dtype)
    if k == "sgpr" and i < N_SGPR:
        if dtype is None:
            return lambda w: w.sgpr[i:i + 1]
        return lambda w: w.sgpr[i:i + 1].view(dtype)
    if k in ("const", "literal"):
        c = np.array([op.value & 0xFFFFFFFF], dtype=np.uint32)
        if dtype is not None:
            c = c.view(dtype)
        c.flags.writeable = False
        return lambda w: c
    return None


def fast_dst32(op, typ: str):
    """(w, result) -> None writing a 32-bit result of type typ ('u32'/'b32'/'i32'/'f32') to the
    VGPR/AGPR `op` under EXEC, converting exactly as write_u32 does; None if not a single
    vector register."""
    if op.count != 1 or op.kind not in ("vgpr", "agpr"):
        return None
    i = op.index
    if op.kind == "vgpr" and i >= N_VGPR:
        return None
    agpr = op.kind == "agpr"
    to = {"f32": np.float32, "i32": np.int32}.get(typ, np.uint32)

    def put(w, r):
        r = np.asarray(r)
        if r.dtype != to:
            r = r.astype(to)
        np.copyto(w.vgpr[w.agpr_base + i if agpr else i], r.view(np.uint32), where=w.exec)
    return put
