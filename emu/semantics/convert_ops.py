"""Conversions to and from the narrow formats (bf16, FP8/BF8, FP6/BF6, FP4), per the CDNA4
ISA pseudocode (docs/emulator.md#sources).

op_sel is read as encoded (bit i = instruction bit 11+i, common.mbit), which is how the ISA's
OPSEL[3:0] is defined: byte/word selects of a narrow source use OPSEL[1:0] / OPSEL[0], the
byte/word written by a narrowing conversion OPSEL[3:2] / OPSEL[3] (other destination bits are
preserved). The v_cvt_scalef32_* scale operand is an f32 whose biased exponent is the E8M0
scale (scale = exponent(S.f32)); narrowing divides by it and saturates, widening multiplies.
"""
from functools import lru_cache

import numpy as np

from . import handles, specializes
from .common import f32_post, fast_dst32, fast_src, mbit, plain, src_f32, src_raw, write_mask, \
    write_u16, write_u32
from ..numerics import BF6, BF8, FP4, FP6, FP8, bits_f32, bf16_to_f32, f16_to_f32, \
    f32_exponent, f32_to_bf16, f32_to_f16, fp4_unpack, fp6_pack, fp6_unpack, scaled_decode, \
    scaled_encode, to_bf16, to_f16, to_f32
from ..wave import EmuError, LANES

_NARROW = {"fp8": FP8, "bf8": BF8, "fp4": FP4, "fp6": FP6, "bf6": BF6}
_U = np.uint32


def _opsel(ins) -> int:
    return sum(int(mbit(ins.mods, "op_sel", i)) << i for i in range(4))


def _no_clamp(ins) -> None:
    if ins.mods.get("clamp") or ins.mods.get("omod"):
        raise EmuError(f"{ins.op}: clamp/omod on a scaled conversion is not implemented")


def _halves(v: np.ndarray) -> np.ndarray:
    """uint32 [n, 64] -> uint16 [64, 2n]: each lane's 16-bit elements, low half first."""
    return np.ascontiguousarray(v.T).view(np.uint16).reshape(LANES, -1)


def _from_halves(h: np.ndarray) -> np.ndarray:
    """uint16 [64, 2n] -> uint32 [n, 64]."""
    return np.ascontiguousarray(h, dtype=np.uint16).view(np.uint32).reshape(LANES, -1).T


def _wide_values(v: np.ndarray, wide: str) -> np.ndarray:
    """Registers [n, 64] of f32 / packed f16 / packed bf16 -> float64 [64, elements]."""
    if wide == "f32":
        return bits_f32(v).T.astype(np.float64)
    h = _halves(v)
    return (bf16_to_f32(h) if wide == "bf16" else f16_to_f32(h)).astype(np.float64)


def _wide_regs(x64: np.ndarray, wide: str) -> np.ndarray:
    """float64 [64, elements] -> registers [n, 64] of f32 / packed f16 / packed bf16."""
    if wide == "f32":
        return np.ascontiguousarray(to_f32(x64).T).view(np.uint32)
    return _from_halves(to_bf16(x64) if wide == "bf16" else to_f16(x64))


def _scale(w, ins, i: int) -> np.ndarray:
    return f32_exponent(src_raw(w, ins, i)[0])


def _insert(w, ins, field: np.ndarray, shift: int, width: int) -> None:
    """Write `field` into bits [shift, shift+width) of the destination, keeping the rest."""
    old = w.read(ins.dst[0], 1)[0]
    mask = _U(((1 << width) - 1) << shift)
    new = (old & ~mask) | ((field.astype(_U) << _U(shift)) & mask)
    w.write(ins.dst[0], new[None], write_mask(w, ins))


# ----- plain conversions -----
@handles("v_cvt_pk_bf16_f32")
def cvt_pk_bf16_f32(w, ins):
    h = f32_to_bf16(np.stack([src_f32(w, ins, 0), src_f32(w, ins, 1)], axis=1))
    write_u32(w, ins, h.view(np.uint32)[:, 0])         # lane's (S0, S1) halves = one dword


@specializes("v_cvt_pk_bf16_f32")
def _fast_cvt_pk_bf16_f32(ins):
    # both sources in vector registers: one [2, 64] gather, then f32_to_bf16's rounding
    a, b = ins.src[:2] if len(ins.src) == 2 else (None, None)
    put = fast_dst32(ins.dst[0], "u32")
    if not plain(ins) or put is None or a.kind != "vgpr" or b.kind != "vgpr" or \
            a.count != 1 or b.count != 1:
        return None
    rows = [a.index, b.index]

    def run(w, ins):
        u = w.vgpr[rows]
        r = (u + ((u >> _U(16)) & _U(1)) + _U(0x7FFF)) >> _U(16)
        nan = (u & _U(0x7FFFFFFF)) > _U(0x7F800000)
        if nan.any():
            r = np.where(nan, (u >> _U(16)) | _U(0x0040), r)
        put(w, r[0] | (r[1] << _U(16)))
    return run


@handles("v_cvt_pk_f16_f32")
def cvt_pk_f16_f32(w, ins):
    # D = f16(S0) | f16(S1) << 16, each rounded to nearest even (overflow -> inf, NaN -> quiet
    # NaN). clamp commutes with the rounding ([0, 1] ends are exact in f16); omod would not.
    if ins.mods.get("omod"):
        raise EmuError(f"{ins.op}: omod is not implemented")
    x = f32_post(np.stack([src_f32(w, ins, 0), src_f32(w, ins, 1)], axis=1), ins.mods)
    h = f32_to_f16(x)
    h = np.where(np.isnan(x), h | np.uint16(0x0200), h)
    write_u32(w, ins, np.ascontiguousarray(h).view(np.uint32)[:, 0])


@handles("v_cvt_f32_bf16")
def cvt_f32_bf16(w, ins):
    x = src_raw(w, ins, 0)[0]
    if mbit(ins.mods, "op_sel", 0):
        x = x >> _U(16)
    v = bits_f32((x & _U(0xFFFF)) << _U(16))
    if mbit(ins.mods, "abs", 0):
        v = np.abs(v)
    if mbit(ins.mods, "neg", 0):
        v = -v
    write_u32(w, ins, f32_post(v, ins.mods))


@handles("v_cvt_f32_fp8", "v_cvt_f32_bf8")
def cvt_f32_f8(w, ins):
    fmt = FP8 if ins.op.endswith("fp8") else BF8
    x = src_raw(w, ins, 0)[0] >> _U(8 * (_opsel(ins) & 3))   # SDWA byte select already applied
    write_u32(w, ins, fmt.decode(x & _U(0xFF)))


@handles("v_cvt_pk_f32_fp8", "v_cvt_pk_f32_bf8")
def cvt_pk_f32_f8(w, ins):
    fmt = FP8 if ins.op.endswith("fp8") else BF8
    x = src_raw(w, ins, 0)[0] >> _U(16 * (_opsel(ins) & 1))  # SDWA WORD_1 already applied
    out = np.stack([fmt.decode(x & _U(0xFF)), fmt.decode((x >> _U(8)) & _U(0xFF))])
    w.write(ins.dst[0], out.view(np.uint32), write_mask(w, ins))


@handles("v_cvt_pk_fp8_f32", "v_cvt_pk_bf8_f32")
def cvt_pk_f8_f32(w, ins):
    # RNE; the clamp bit selects saturation, otherwise overflow gives NaN (E4M3) / inf (E5M2)
    fmt = FP8 if "fp8" in ins.op else BF8
    sat = bool(ins.mods.get("clamp"))
    lo = fmt.encode(src_f32(w, ins, 0), sat).astype(_U)
    hi = fmt.encode(src_f32(w, ins, 1), sat).astype(_U)
    _insert(w, ins, lo | (hi << _U(8)), 16 * ((_opsel(ins) >> 3) & 1), 16)


# ----- scaled conversions: narrowing -----
def _scaled_pk_down(w, ins, narrow: str, wide: str):
    """v_cvt_scalef32_pk_{narrow}_{wide}: two values -> two codes in a byte (FP4) / word."""
    _no_clamp(ins)
    fmt = _NARROW[narrow]
    if wide == "f32":
        x = np.stack([bits_f32(src_raw(w, ins, 0)[0]), bits_f32(src_raw(w, ins, 1)[0])], -1)
        scale = _scale(w, ins, 2)
    else:
        x = _wide_values(src_raw(w, ins, 0), wide)
        scale = _scale(w, ins, 1)
    codes = scaled_encode(fmt, x, scale[:, None]).astype(_U)
    sel = _opsel(ins)
    if fmt is FP4:
        _insert(w, ins, codes[:, 0] | (codes[:, 1] << _U(4)), 8 * ((sel >> 2) & 3), 8)
    else:
        _insert(w, ins, codes[:, 0] | (codes[:, 1] << _U(8)), 16 * ((sel >> 3) & 1), 16)


def _scaled_fp6_down(w, ins, narrow: str, wide: str, interleaved: bool):
    """v_cvt_scalef32_pk32_{fp6,bf6}_{f16,bf16} and _2xpk16_{fp6,bf6}_f32: 32 values -> 6 dwords."""
    _no_clamp(ins)
    if interleaved:                       # S0 gives the even elements, S1 the odd ones
        s0, s1 = bits_f32(src_raw(w, ins, 0, 16)), bits_f32(src_raw(w, ins, 1, 16))
        x = np.empty((LANES, 32), dtype=np.float64)
        x[:, 0::2], x[:, 1::2] = s0.T, s1.T
        scale = _scale(w, ins, 2)
    else:
        x = _wide_values(src_raw(w, ins, 0, 16), wide)
        scale = _scale(w, ins, 1)
    codes = scaled_encode(_NARROW[narrow], x, scale[:, None])
    regs = np.ascontiguousarray(fp6_pack(codes)).view(np.uint32).T
    w.write(ins.dst[0], regs, write_mask(w, ins))


# ----- scaled conversions: widening -----
@lru_cache(maxsize=None)
def _fp4_up_table(wide: str) -> np.ndarray:
    """Result registers of v_cvt_scalef32_pk_{wide}_fp4 for every (scale, byte), indexed by
    scale << 8 | byte: [65536, dwords] (the hot dequantisation path of the FP4 kernels)."""
    byte = np.tile(np.arange(256, dtype=np.uint8), 256)
    scale = np.repeat(np.arange(256), 256)
    vals = scaled_decode(FP4, fp4_unpack(byte[:, None]), scale[:, None])
    if wide == "f32":
        return np.ascontiguousarray(to_f32(vals)).view(np.uint32)
    h = to_bf16(vals) if wide == "bf16" else to_f16(vals)
    return np.ascontiguousarray(h).view(np.uint32)


def _scaled_up(w, ins, wide: str, narrow: str, count: int):
    """v_cvt_scalef32_[pk_|pk32_]{wide}_{narrow}: `count` codes -> wide values."""
    fmt = _NARROW[narrow]
    _no_clamp(ins)
    scale = _scale(w, ins, 1)
    sel = _opsel(ins)
    if fmt is FP4:
        byte = (src_raw(w, ins, 0)[0] >> _U(8 * (sel & 3))) & _U(0xFF)
        out = np.take(_fp4_up_table(wide), (scale << _U(8)) | byte, axis=0)
        w.write(ins.dst[0], out.T, write_mask(w, ins))
        return
    if count == 32:
        byts = np.ascontiguousarray(src_raw(w, ins, 0, 6).T).view(np.uint8)
        codes = fp6_unpack(byts)
    else:
        x = src_raw(w, ins, 0)[0]
        if count == 2:
            word = x >> _U(16 * (sel & 1))
            codes = np.stack([word & _U(0xFF), (word >> _U(8)) & _U(0xFF)], -1)
        else:
            codes = ((x >> _U(8 * (sel & 3))) & _U(0xFF))[:, None]
    vals = scaled_decode(fmt, codes, scale[:, None])
    if count == 1 and wide == "f16":      # one half, placed by OPSEL[3] like other 16-bit results
        write_u16(w, ins, to_f16(vals[:, 0]))
        return
    w.write(ins.dst[0], _wide_regs(vals, wide), write_mask(w, ins))


@lru_cache(maxsize=None)
def _fp4_up_rows(wide: str) -> np.ndarray:
    """_fp4_up_table transposed: [dwords, 65536], so one take gives the result registers."""
    return np.ascontiguousarray(_fp4_up_table(wide).T)


def _fast_scaled_fp4_up(ins, wide: str):
    """v_cvt_scalef32_pk_{wide}_fp4 with plain operands: one table lookup per lane."""
    if not plain(ins, allowed=("op_sel",)) or not isinstance(ins.mods.get("op_sel") or 0, int) \
            or len(ins.src) != 2:
        return None
    r0, r1 = fast_src(ins.src[0]), fast_src(ins.src[1])
    d = ins.dst[0]
    table = _fp4_up_rows(wide)
    nd = table.shape[0]
    if None in (r0, r1) or d.kind not in ("vgpr", "agpr") or d.count != nd:
        return None
    shift, i, agpr = _U(8 * (_opsel(ins) & 3)), d.index, d.kind == "agpr"

    def run(w, ins):
        byte = (r0(w) >> shift) & _U(0xFF)
        scale = (r1(w) >> _U(23)) & _U(0xFF)               # f32_exponent of the scale operand
        b = w.agpr_base + i if agpr else i
        np.copyto(w.vgpr[b:b + nd], table.take((scale << _U(8)) | byte, axis=1), where=w.exec)
    return run


def _register():
    for wide in ("f32", "f16", "bf16"):
        for narrow in ("fp8", "bf8", "fp4"):
            handles(f"v_cvt_scalef32_pk_{narrow}_{wide}")(
                lambda w, ins, n=narrow, x=wide: _scaled_pk_down(w, ins, n, x))
            handles(f"v_cvt_scalef32_pk_{wide}_{narrow}")(
                lambda w, ins, n=narrow, x=wide: _scaled_up(w, ins, x, n, 2))
            if narrow == "fp4":
                specializes(f"v_cvt_scalef32_pk_{wide}_fp4")(
                    lambda ins, x=wide: _fast_scaled_fp4_up(ins, x))
        for narrow in ("fp6", "bf6"):
            handles(f"v_cvt_scalef32_pk32_{wide}_{narrow}")(
                lambda w, ins, n=narrow, x=wide: _scaled_up(w, ins, x, n, 32))
            if wide != "f32":
                handles(f"v_cvt_scalef32_pk32_{narrow}_{wide}")(
                    lambda w, ins, n=narrow, x=wide: _scaled_fp6_down(w, ins, n, x, False))
    for narrow in ("fp6", "bf6"):
        handles(f"v_cvt_scalef32_2xpk16_{narrow}_f32")(
            lambda w, ins, n=narrow: _scaled_fp6_down(w, ins, n, "f32", True))
    for wide in ("f32", "f16"):
        for narrow in ("fp8", "bf8"):
            handles(f"v_cvt_scalef32_{wide}_{narrow}")(
                lambda w, ins, n=narrow, x=wide: _scaled_up(w, ins, x, n, 1))


_register()
