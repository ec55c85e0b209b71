"""Vector ALU: 32/64-bit integer and float ops, 16-bit ops, VOP3P packed math, carries.

Most ops are table entries (dst type, source types, numpy function) run by one generic handler
that reads typed sources (with DPP/SDWA/abs/neg), applies omod/clamp to float results and writes
under EXEC. Float math is IEEE (numpy) in round-to-nearest-even with denormals kept; the
transcendental ops (v_rcp/rsq/sqrt/exp/log/sin/cos) are exact-rounded here while the hardware is
documented to about 1 ulp, so results may differ from silicon in the last bit.
"""
import numpy as np

from ..wave import EmuError, LANES, N_SGPR
from . import handles, specializes
from .common import (M32, U64_32, f32_post, fast_dst32, fast_src, mbit, plain, src_f16, src_f32,
                     src_f64, src_u16, src_u32, src_u64, write_mask, write_u16, write_u32,
                     write_u64)

u32, i32, u64, i64, f32, f64 = np.uint32, np.int32, np.uint64, np.int64, np.float32, np.float64
_popcount = getattr(np, "bitwise_count", None)


def _popcnt(x):
    if _popcount is not None:
        return _popcount(x).astype(u32)
    b = np.unpackbits(np.ascontiguousarray(x, dtype=u32).view(np.uint8).reshape(-1, 4), axis=1)
    return b.sum(axis=1).astype(u32)


def _src_i16(w, ins, i):
    return src_u16(w, ins, i).view(np.int16)


def _src_i64(w, ins, i):
    return src_u64(w, ins, i).view(i64)


_READ = {"u32": src_u32, "b32": src_u32, "i32": lambda w, ins, i: src_u32(w, ins, i).view(i32),
         "f32": src_f32, "u64": src_u64, "i64": _src_i64, "f64": src_f64, "u16": src_u16,
         "i16": _src_i16, "f16": src_f16}


def _write(w, ins, t, v):
    if t in ("u32", "b32", "i32", "f32"):
        if t == "f32":
            v = f32_post(np.asarray(v, dtype=f32), ins.mods)
        elif ins.mods.get("clamp"):
            raise EmuError(f"{ins.op}: integer clamp is not implemented")
        write_u32(w, ins, np.asarray(v).astype({"f32": f32, "i32": i32}.get(t, u32), copy=False))
    elif t in ("u64", "i64", "f64"):
        if t == "f64":
            v = f32_post(np.asarray(v, dtype=f64), ins.mods)
        write_u64(w, ins, np.asarray(v).astype({"f64": f64, "i64": i64}.get(t, u64), copy=False))
    else:
        if t == "f16":
            v = f32_post(np.asarray(v, dtype=np.float16), ins.mods)
        write_u16(w, ins, np.asarray(v).astype({"f16": np.float16, "i16": np.int16}.get(t, np.uint16),
                                                 copy=False))


SPECS: dict = {}


def _generic(w, ins):
    dst_t, src_ts, fn = SPECS[ins.op]
    args = [_READ[t](w, ins, i) for i, t in enumerate(src_ts)]
    _write(w, ins, dst_t, fn(*args))


_T32 = {"u32": None, "b32": None, "i32": i32, "f32": f32}


def _fast_generic(ins):
    """A table op on plain 32-bit operands: sources read as views, no modifier handling."""
    dst_t, src_ts, fn = SPECS[ins.op]
    if dst_t not in _T32 or len(ins.dst) != 1 or len(ins.src) != len(src_ts) or not plain(ins):
        return None
    rd = [fast_src(o, _T32[t]) if t in _T32 else None for o, t in zip(ins.src, src_ts)]
    put = fast_dst32(ins.dst[0], dst_t)
    if put is None or None in rd:
        return None
    if len(rd) == 1:
        r0, = rd
        return lambda w, ins: put(w, fn(r0(w)))
    if len(rd) == 2:
        r0, r1 = rd
        return lambda w, ins: put(w, fn(r0(w), r1(w)))
    if len(rd) == 3:
        r0, r1, r2 = rd
        return lambda w, ins: put(w, fn(r0(w), r1(w), r2(w)))
    return None


def op(names, dst_t, src_ts, fn):
    for n in names.split():
        SPECS[n] = (dst_t, tuple(src_ts.split()), fn)
        handles(n)(_generic)
        specializes(n)(_fast_generic)


_LOW29, _BIT28 = u64(0x1FFFFFFF), u64(0x10000000)
_ABS64 = u64(0x7FFFFFFFFFFFFFFF)
_F32_MIN_NORMAL = np.float64(2.0 ** -126).view(u64)


def _fma32(a, b, c):
    """Fused f32 a*b+c with one rounding: exact product in f64, f64 sum, then to f32.

    The f64 sum s is rounded once; rounding it again to f32 can only go wrong when s is inexact
    and sits exactly halfway between two f32 values: for results in the normal f32 range its
    low 29 significand bits are then 1 followed by 28 zeros; f32-subnormal results are all
    checked. Those lanes move one f64 ulp toward the exact sum (TwoSum error term), which makes
    the f32 rounding go the way the exact value does."""
    p = np.multiply(a, b, dtype=f64)
    s = np.add(p, c, dtype=f64)
    bits = s.view(u64)
    # (|s| bits) - 1 < min-normal bits: nonzero s below 2^-126 (s == 0 is always exact)
    cand = ((bits & _LOW29) == _BIT28) | (((bits & _ABS64) - u64(1)) < _F32_MIN_NORMAL)
    if np.count_nonzero(cand):
        c = np.asarray(c, dtype=f64)
        bp = s - c
        err = (p - bp) + (c - (s - bp))
        off = cand & (err != 0) & np.isfinite(s)
        if np.count_nonzero(off):
            s = np.where(off, np.nextafter(s, np.copysign(np.inf, err)), s)
    return s.astype(f32)


def _sext(x, bits):
    return (x.astype(i32) << (32 - bits)) >> (32 - bits)


def _ffbh(x):
    x = x.astype(u32)
    out = np.full(x.shape, 0xFFFFFFFF, dtype=u32)
    nz = x != 0
    out[nz] = (31 - np.floor(np.log2(x[nz].astype(f64)))).astype(u32)
    return out


def _ffbl(x):
    x = x.astype(u32)
    low = x & (~x + u32(1))
    return np.where(x != 0, _ffbh(low) ^ u32(31), u32(0xFFFFFFFF)).astype(u32)


def _ffbh_i32(x):
    x = x.astype(u32).view(i32)
    y = np.where(x < 0, ~x, x).view(u32)
    r = _ffbh(y)
    return np.where((y == 0), u32(0xFFFFFFFF), r - u32(1)).astype(u32)


def _bfrev(x):
    b = np.unpackbits(np.ascontiguousarray(x, dtype=u32).view(np.uint8), bitorder="little")
    return np.packbits(b.reshape(-1, 32)[:, ::-1], axis=1, bitorder="little").view(u32).reshape(-1)


def _bfe_u(a, b, c):
    off, width = b & u32(31), c & u32(31)
    mask = ((u64(1) << width.astype(u64)) - u64(1)).astype(u32)
    return (a >> off) & mask


def _bfe_i(a, b, c):
    off, width = (b & u32(31)).astype(i64), (c & u32(31)).astype(i64)
    v = (a.astype(u64) >> off.astype(u64)) & ((u64(1) << width.astype(u64)) - u64(1))
    sign = (v >> np.maximum(width - 1, 0).astype(u64)) & u64(1)
    v = np.where((sign == 1) & (width > 0), v.astype(i64) - (i64(1) << width), v.astype(i64))
    return np.where(width == 0, 0, v).astype(i32)


def _perm(a, b, sel):
    """v_perm_b32: each selector byte picks a byte of {a, b} (a = bytes 4..7) or a constant."""
    data = (a.astype(u64) << U64_32) | b.astype(u64)
    out = np.zeros(a.shape, dtype=u32)
    for k in range(4):
        s = (sel >> u32(8 * k)) & u32(0xFF)
        byte = ((data >> (s.astype(u64) & u64(7)) * u64(8)) & u64(0xFF)).astype(u32)
        sign_bit = ((data >> ((s.astype(u64) & u64(3)) * u64(16) + u64(15))) & u64(1)).astype(u32)
        byte = np.where(s < 8, byte, np.where(s < 12, sign_bit * u32(0xFF),
                                              np.where(s == 12, u32(0), u32(0xFF))))
        out |= byte.astype(u32) << u32(8 * k)
    return out


def _med3(a, b, c):
    return np.maximum(np.minimum(a, b), np.minimum(np.maximum(a, b), c))


def _med3f(a, b, c):
    return np.fmax(np.fmin(a, b), np.fmin(np.fmax(a, b), c))


_SIGN32 = u32(0x80000000)


def _maximum3(a, b, c):
    """IEEE maximum of three: NaN propagates and +0 > -0. A zero result is +0 unless every
    input is -0 or negative, i.e. its sign is the AND of the inputs' signs."""
    r = np.maximum(np.maximum(a, b), c)
    z = r == 0
    if np.count_nonzero(z):
        sign = a.view(u32) & b.view(u32) & c.view(u32) & _SIGN32
        r = np.where(z, sign.view(f32), r)
    return r


def _minimum3(a, b, c):
    """IEEE minimum of three: a zero result is -0 if any input is -0 (OR of the signs)."""
    r = np.minimum(np.minimum(a, b), c)
    z = r == 0
    if np.count_nonzero(z):
        sign = (a.view(u32) | b.view(u32) | c.view(u32)) & _SIGN32
        r = np.where(z, sign.view(f32), r)
    return r


def _cvt_i32(x, lo, hi, dt):
    """Float -> int with truncation, saturation and NaN -> 0 (hardware conversion rules)."""
    x = np.asarray(x, dtype=f64)
    y = np.trunc(np.nan_to_num(x, nan=0.0, posinf=hi, neginf=lo))
    return np.clip(y, lo, hi).astype(np.int64).astype(dt)


def _ldexp(x, e):
    return np.ldexp(x, np.clip(e.view(i32) if e.dtype == u32 else e, -1000, 1000).astype(np.int32))


# ---- integer 32-bit ----
op("v_mov_b32", "u32", "u32", lambda a: a)
op("v_add_u32", "u32", "u32 u32", lambda a, b: a + b)
op("v_sub_u32", "u32", "u32 u32", lambda a, b: a - b)
op("v_subrev_u32", "u32", "u32 u32", lambda a, b: b - a)
op("v_add_i32", "i32", "i32 i32", lambda a, b: a + b)
op("v_sub_i32", "i32", "i32 i32", lambda a, b: a - b)
op("v_mul_lo_u32 v_mul_lo_i32", "u32", "u32 u32", lambda a, b: a * b)
op("v_mul_hi_u32", "u32", "u32 u32", lambda a, b: (a.astype(u64) * b) >> U64_32)
op("v_mul_hi_i32", "i32", "i32 i32", lambda a, b: (a.astype(i64) * b) >> 32)
op("v_mul_u32_u24", "u32", "u32 u32", lambda a, b: (a & u32(0xFFFFFF)) * (b & u32(0xFFFFFF)))
op("v_mul_hi_u32_u24", "u32", "u32 u32",
   lambda a, b: ((a & u32(0xFFFFFF)).astype(u64) * (b & u32(0xFFFFFF))) >> U64_32)
op("v_mul_i32_i24", "u32", "u32 u32", lambda a, b: _sext(a, 24) * _sext(b, 24))
op("v_mul_hi_i32_i24", "i32", "u32 u32",
   lambda a, b: (_sext(a, 24).astype(i64) * _sext(b, 24)) >> 32)
op("v_mad_u32_u24", "u32", "u32 u32 u32", lambda a, b, c: (a & u32(0xFFFFFF)) * (b & u32(0xFFFFFF)) + c)
op("v_mad_i32_i24", "u32", "u32 u32 u32", lambda a, b, c: (_sext(a, 24) * _sext(b, 24)).view(u32) + c)
op("v_lshlrev_b32", "u32", "u32 u32", lambda a, b: b << (a & u32(31)))
op("v_lshrrev_b32", "u32", "u32 u32", lambda a, b: b >> (a & u32(31)))
op("v_ashrrev_i32", "i32", "u32 i32", lambda a, b: b >> (a & u32(31)).astype(i32))
op("v_and_b32", "u32", "u32 u32", lambda a, b: a & b)
op("v_or_b32", "u32", "u32 u32", lambda a, b: a | b)
op("v_xor_b32", "u32", "u32 u32", lambda a, b: a ^ b)
op("v_xnor_b32", "u32", "u32 u32", lambda a, b: ~(a ^ b))
op("v_not_b32", "u32", "u32", lambda a: ~a)
op("v_min_u32", "u32", "u32 u32", np.minimum)
op("v_max_u32", "u32", "u32 u32", np.maximum)
op("v_min_i32", "i32", "i32 i32", np.minimum)
op("v_max_i32", "i32", "i32 i32", np.maximum)
op("v_min3_u32", "u32", "u32 u32 u32", lambda a, b, c: np.minimum(np.minimum(a, b), c))
op("v_max3_u32", "u32", "u32 u32 u32", lambda a, b, c: np.maximum(np.maximum(a, b), c))
op("v_min3_i32", "i32", "i32 i32 i32", lambda a, b, c: np.minimum(np.minimum(a, b), c))
op("v_max3_i32", "i32", "i32 i32 i32", lambda a, b, c: np.maximum(np.maximum(a, b), c))
op("v_med3_u32", "u32", "u32 u32 u32", _med3)
op("v_med3_i32", "i32", "i32 i32 i32", _med3)
op("v_bfe_u32", "u32", "u32 u32 u32", _bfe_u)
op("v_bfe_i32", "i32", "u32 u32 u32", _bfe_i)
op("v_bfi_b32", "u32", "u32 u32 u32", lambda a, b, c: (a & b) | (~a & c))
op("v_bfm_b32", "u32", "u32 u32",
   lambda a, b: (((u64(1) << (a & u32(31)).astype(u64)) - u64(1)) << (b & u32(31)).astype(u64)).astype(u32))
op("v_alignbit_b32", "u32", "u32 u32 u32",
   lambda a, b, c: (((a.astype(u64) << U64_32) | b) >> (c & u32(31)).astype(u64)).astype(u32))
op("v_alignbyte_b32", "u32", "u32 u32 u32",
   lambda a, b, c: (((a.astype(u64) << U64_32) | b) >> ((c & u32(3)) * u32(8)).astype(u64)).astype(u32))
op("v_perm_b32", "u32", "u32 u32 u32", _perm)
op("v_lshl_add_u32", "u32", "u32 u32 u32", lambda a, b, c: (a << (b & u32(31))) + c)
op("v_add_lshl_u32", "u32", "u32 u32 u32", lambda a, b, c: (a + b) << (c & u32(31)))
op("v_lshl_or_b32", "u32", "u32 u32 u32", lambda a, b, c: (a << (b & u32(31))) | c)
op("v_and_or_b32", "u32", "u32 u32 u32", lambda a, b, c: (a & b) | c)
op("v_or3_b32", "u32", "u32 u32 u32", lambda a, b, c: a | b | c)
op("v_xor3_b32", "u32", "u32 u32 u32", lambda a, b, c: a ^ b ^ c)
op("v_add3_u32", "u32", "u32 u32 u32", lambda a, b, c: a + b + c)
op("v_xad_u32", "u32", "u32 u32 u32", lambda a, b, c: (a ^ b) + c)
op("v_bcnt_u32_b32", "u32", "u32 u32", lambda a, b: _popcnt(a) + b)
op("v_ffbh_u32", "u32", "u32", _ffbh)
op("v_ffbl_b32", "u32", "u32", _ffbl)
op("v_ffbh_i32", "u32", "u32", _ffbh_i32)
op("v_bfrev_b32", "u32", "u32", _bfrev)
op("v_sad_u32", "u32", "u32 u32 u32",
   lambda a, b, c: (np.maximum(a, b) - np.minimum(a, b)) + c)

# ---- integer 64-bit ----
op("v_mov_b64", "u64", "u64", lambda a: a)
op("v_lshlrev_b64", "u64", "u32 u64", lambda a, b: b << (a & u32(63)).astype(u64))
op("v_lshrrev_b64", "u64", "u32 u64", lambda a, b: b >> (a & u32(63)).astype(u64))
op("v_ashrrev_i64", "i64", "u32 i64", lambda a, b: b >> (a & u32(63)).astype(i64))
op("v_lshl_add_u64", "u64", "u64 u32 u64", lambda a, b, c: (a << (b & u32(7)).astype(u64)) + c)

# ---- f32 ----
op("v_add_f32", "f32", "f32 f32", lambda a, b: a + b)
op("v_sub_f32", "f32", "f32 f32", lambda a, b: a - b)
op("v_subrev_f32", "f32", "f32 f32", lambda a, b: b - a)
op("v_mul_f32", "f32", "f32 f32", lambda a, b: a * b)
op("v_mul_legacy_f32", "f32", "f32 f32",
   lambda a, b: np.where((a == 0) | (b == 0), f32(0), a * b))
op("v_min_f32", "f32", "f32 f32", np.fmin)
op("v_max_f32", "f32", "f32 f32", np.fmax)
op("v_min3_f32", "f32", "f32 f32 f32", lambda a, b, c: np.fmin(np.fmin(a, b), c))
op("v_max3_f32", "f32", "f32 f32 f32", lambda a, b, c: np.fmax(np.fmax(a, b), c))
op("v_med3_f32", "f32", "f32 f32 f32", _med3f)
op("v_maximum3_f32", "f32", "f32 f32 f32", _maximum3)
op("v_minimum3_f32", "f32", "f32 f32 f32", _minimum3)
op("v_fma_f32", "f32", "f32 f32 f32", _fma32)
op("v_mad_f32", "f32", "f32 f32 f32", lambda a, b, c: a * b + c)
op("v_ldexp_f32", "f32", "f32 i32", _ldexp)
op("v_rcp_f32 v_rcp_iflag_f32", "f32", "f32", lambda a: f32(1) / a)
op("v_rsq_f32", "f32", "f32", lambda a: f32(1) / np.sqrt(a))
op("v_sqrt_f32", "f32", "f32", np.sqrt)
op("v_exp_f32", "f32", "f32", np.exp2)
op("v_log_f32", "f32", "f32", np.log2)
op("v_sin_f32", "f32", "f32", lambda a: np.sin(a.astype(f64) * (2 * np.pi)))
op("v_cos_f32", "f32", "f32", lambda a: np.cos(a.astype(f64) * (2 * np.pi)))
op("v_fract_f32", "f32", "f32", lambda a: np.where(np.isinf(a), f32(np.nan), a - np.floor(a)))
op("v_trunc_f32", "f32", "f32", np.trunc)
op("v_ceil_f32", "f32", "f32", np.ceil)
op("v_floor_f32", "f32", "f32", np.floor)
op("v_rndne_f32", "f32", "f32", np.rint)
op("v_frexp_mant_f32", "f32", "f32", lambda a: np.where(np.isfinite(a), np.frexp(a)[0], a))
op("v_frexp_exp_i32_f32", "i32", "f32", lambda a: np.where(np.isfinite(a), np.frexp(a)[1], 0))
op("v_cvt_f32_i32", "f32", "i32", lambda a: a.astype(f32))
op("v_cvt_f32_u32", "f32", "u32", lambda a: a.astype(f32))
op("v_cvt_i32_f32", "i32", "f32", lambda a: _cvt_i32(a, -2**31, 2**31 - 1, i32))
op("v_cvt_u32_f32", "u32", "f32", lambda a: _cvt_i32(a, 0, 2**32 - 1, u32))
op("v_cvt_rpi_i32_f32", "i32", "f32", lambda a: _cvt_i32(np.floor(a.astype(f64) + 0.5), -2**31, 2**31 - 1, i32))
op("v_cvt_flr_i32_f32", "i32", "f32", lambda a: _cvt_i32(np.floor(a), -2**31, 2**31 - 1, i32))
for _k in range(4):
    op(f"v_cvt_f32_ubyte{_k}", "f32", "u32", lambda a, k=_k: ((a >> u32(8 * k)) & u32(0xFF)).astype(f32))
op("v_cvt_f32_f16", "f32", "f16", lambda a: a.astype(f32))
op("v_cvt_f16_f32", "f16", "f32", lambda a: a.astype(np.float16))
op("v_cvt_f64_f32", "f64", "f32", lambda a: a.astype(f64))
op("v_cvt_f32_f64", "f32", "f64", lambda a: a.astype(f32))
op("v_cvt_f64_i32", "f64", "i32", lambda a: a.astype(f64))
op("v_cvt_f64_u32", "f64", "u32", lambda a: a.astype(f64))
op("v_cvt_i32_f64", "i32", "f64", lambda a: _cvt_i32(a, -2**31, 2**31 - 1, i32))
op("v_cvt_u32_f64", "u32", "f64", lambda a: _cvt_i32(a, 0, 2**32 - 1, u32))

# ---- f64 ----
op("v_add_f64", "f64", "f64 f64", lambda a, b: a + b)
op("v_mul_f64", "f64", "f64 f64", lambda a, b: a * b)
op("v_min_f64", "f64", "f64 f64", np.fmin)
op("v_max_f64", "f64", "f64 f64", np.fmax)
def _fma64(a, b, c):
    # long double: exact product only for short mantissas (docs/emulator.md#assumptions-and-doubts)
    return (a.astype(np.longdouble) * b + c).astype(f64)


op("v_fma_f64", "f64", "f64 f64 f64", _fma64)
op("v_ldexp_f64", "f64", "f64 i32", _ldexp)
op("v_rcp_f64", "f64", "f64", lambda a: 1.0 / a)
op("v_rsq_f64", "f64", "f64", lambda a: 1.0 / np.sqrt(a))
op("v_sqrt_f64", "f64", "f64", np.sqrt)
op("v_trunc_f64", "f64", "f64", np.trunc)
op("v_floor_f64", "f64", "f64", np.floor)
op("v_ceil_f64", "f64", "f64", np.ceil)
op("v_rndne_f64", "f64", "f64", np.rint)
op("v_fract_f64", "f64", "f64", lambda a: a - np.floor(a))

# ---- 16-bit ----
op("v_add_f16", "f16", "f16 f16", lambda a, b: a + b)
op("v_sub_f16", "f16", "f16 f16", lambda a, b: a - b)
op("v_subrev_f16", "f16", "f16 f16", lambda a, b: b - a)
op("v_mul_f16", "f16", "f16 f16", lambda a, b: a * b)
op("v_max_f16", "f16", "f16 f16", np.fmax)
op("v_min_f16", "f16", "f16 f16", np.fmin)
op("v_fma_f16", "f16", "f16 f16 f16",
   lambda a, b, c: (a.astype(f64) * b.astype(f64) + c.astype(f64)).astype(np.float16))
op("v_add_u16", "u16", "u16 u16", lambda a, b: a + b)
op("v_sub_u16", "u16", "u16 u16", lambda a, b: a - b)
op("v_mul_lo_u16", "u16", "u16 u16", lambda a, b: a * b)
op("v_lshlrev_b16", "u16", "u16 u16", lambda a, b: b << (a & np.uint16(15)))
op("v_lshrrev_b16", "u16", "u16 u16", lambda a, b: b >> (a & np.uint16(15)))
op("v_ashrrev_i16", "i16", "u16 i16", lambda a, b: b >> (a & np.uint16(15)).astype(np.int16))
op("v_max_u16", "u16", "u16 u16", np.maximum)
op("v_min_u16", "u16", "u16 u16", np.minimum)
op("v_max_i16", "i16", "i16 i16", np.maximum)
op("v_min_i16", "i16", "i16 i16", np.minimum)


# ---- special forms ----
@handles("v_nop")
def _nop(w, ins):
    pass


@handles("v_fmac_f32", "v_mac_f32")
def _fmac(w, ins):
    a, b = src_f32(w, ins, 0), src_f32(w, ins, 1)
    c = w.read(ins.dst[0], 1)[0].view(f32)
    r = _fma32(a, b, c) if ins.op == "v_fmac_f32" else a * b + c
    write_u32(w, ins, f32_post(r.astype(f32), ins.mods))


@handles("v_fmac_f64")
def _fmac64(w, ins):
    """vdst = src0 * src1 + vdst in f64 (VOP2 / VOP3 v_fmac_f64, the accumulator form of v_fma_f64)."""
    a, b = src_f64(w, ins, 0), src_f64(w, ins, 1)
    v = w.read(ins.dst[0], 2)
    c = (v[0].astype(u64) | (v[1].astype(u64) << u64(32))).view(f64)
    _write(w, ins, "f64", _fma64(a, b, c))


@specializes("v_fmac_f32")
def _fast_fmac(ins):
    if not plain(ins) or len(ins.src) != 2:
        return None
    r0, r1, acc = fast_src(ins.src[0], f32), fast_src(ins.src[1], f32), fast_src(ins.dst[0], f32)
    put = fast_dst32(ins.dst[0], "f32")
    if None in (r0, r1, acc, put):
        return None
    return lambda w, ins: put(w, _fma32(r0(w), r1(w), acc(w)))


@handles("v_fmamk_f32", "v_madmk_f32")
def _fmamk(w, ins):     # vdst = src0 * K + src1, llvm order: src0, K, src1
    a, k, c = (src_f32(w, ins, i) for i in range(3))
    write_u32(w, ins, _fma32(a, k, c) if ins.op == "v_fmamk_f32" else a * k + c)


@handles("v_fmaak_f32", "v_madak_f32")
def _fmaak(w, ins):     # vdst = src0 * src1 + K
    a, b, k = (src_f32(w, ins, i) for i in range(3))
    write_u32(w, ins, _fma32(a, b, k) if ins.op == "v_fmaak_f32" else a * b + k)


@handles("v_cndmask_b32")
def _cndmask(w, ins):
    # VOP3 abs/neg act on the sign bit of the selected 32-bit values.
    sign = u32(0x80000000)
    vals = []
    for i in (0, 1):
        x = src_u32(w, ins, i)
        if mbit(ins.mods, "abs", i):
            x = x & ~sign
        if mbit(ins.mods, "neg", i):
            x = x ^ sign
        vals.append(x)
    sel = w.read_mask(ins.src[2]) if len(ins.src) > 2 else w.vcc
    write_u32(w, ins, np.where(sel, vals[1], vals[0]))


@specializes("v_cndmask_b32")
def _fast_cndmask(ins):
    if not plain(ins):
        return None
    r0, r1 = fast_src(ins.src[0]), fast_src(ins.src[1])
    put = fast_dst32(ins.dst[0], "u32")
    if None in (r0, r1, put):
        return None
    if len(ins.src) == 2 or (ins.src[2].kind == "special" and ins.src[2].name == "vcc"):
        return lambda w, ins: put(w, np.where(w.vcc, r1(w), r0(w)))
    sel = ins.src[2]
    return lambda w, ins: put(w, np.where(w.read_mask(sel), r1(w), r0(w)))


def _carry_dst(ins):
    """The carry/borrow destination: the lane-mask operand among dst (vcc or an SGPR pair)."""
    return ins.dst[1] if len(ins.dst) > 1 else None


def _carry_src(w, ins):
    return w.read_mask(ins.src[2]) if len(ins.src) > 2 else w.vcc


def _write_carry(w, ins, carry):
    d = _carry_dst(ins)
    m = carry & w.exec
    if d is None:
        w.vcc = m
    else:
        w.write_mask(d, m)


@handles("v_add_co_u32", "v_addc_co_u32")
def _add_co(w, ins):
    a, b = src_u32(w, ins, 0).astype(u64), src_u32(w, ins, 1).astype(u64)
    s = a + b
    if ins.op == "v_addc_co_u32":
        s = s + _carry_src(w, ins).astype(u64)
    write_u32(w, ins, (s & M32).astype(u32))
    _write_carry(w, ins, (s >> U64_32) != 0)


@handles("v_sub_co_u32", "v_subrev_co_u32", "v_subb_co_u32", "v_subbrev_co_u32")
def _sub_co(w, ins):
    a, b = src_u32(w, ins, 0).astype(i64), src_u32(w, ins, 1).astype(i64)
    if "rev" in ins.op:
        a, b = b, a
    if ins.op.startswith("v_subb"):
        b = b + _carry_src(w, ins).astype(i64)
    d = a - b
    write_u32(w, ins, d.astype(u32))
    _write_carry(w, ins, d < 0)


@handles("v_mad_u64_u32", "v_mad_i64_i32")
def _mad64(w, ins):
    signed = ins.op == "v_mad_i64_i32"
    a, b = src_u32(w, ins, 0), src_u32(w, ins, 1)
    c = src_u64(w, ins, 2)
    if signed:
        p = a.view(i32).astype(object) * b.view(i32).astype(object) + c.view(i64).astype(object)
        lo = np.array([int(x) & 0xFFFFFFFFFFFFFFFF for x in p], dtype=u64)
        carry = np.array([not (-2**63 <= int(x) < 2**63) for x in p])
    else:
        p = a.astype(u64) * b
        lo = p + c
        carry = lo < c
    write_u64(w, ins, lo)
    _write_carry(w, ins, carry)


@handles("v_div_scale_f32", "v_div_scale_f64")
def _div_scale(w, ins):
    """Returns its first source unscaled and VCC = 0: exact for operands whose quotient needs no
    pre-scaling (neither tiny nor huge); v_div_fmas/v_div_fixup then compute the plain quotient."""
    if ins.op.endswith("f32"):
        write_u32(w, ins, src_f32(w, ins, 0))
    else:
        write_u64(w, ins, src_f64(w, ins, 0))
    _write_carry(w, ins, np.zeros(LANES, dtype=bool))


@handles("v_div_fmas_f32", "v_div_fmas_f64")
def _div_fmas(w, ins):
    if (w.vcc & w.exec).any():
        raise EmuError(f"{ins.op} with VCC set (scaled division) is not implemented")
    if ins.op.endswith("f32"):
        a, b, c = (src_f32(w, ins, i) for i in range(3))
        write_u32(w, ins, f32_post(_fma32(a, b, c), ins.mods))
    else:
        a, b, c = (src_f64(w, ins, i) for i in range(3))
        write_u64(w, ins, f32_post((a.astype(np.longdouble) * b + c).astype(f64), ins.mods))


@handles("v_div_fixup_f32", "v_div_fixup_f64")
def _div_fixup(w, ins):
    """Quotient estimate s0 for s2 / s1; IEEE special cases (0, inf, NaN operands) from s2 / s1."""
    rd = src_f32 if ins.op.endswith("f32") else src_f64
    q, den, num = (rd(w, ins, i) for i in range(3))
    special = ~np.isfinite(den) | ~np.isfinite(num) | (den == 0) | (num == 0)
    r = np.where(special, num / den, q)
    if ins.op.endswith("f32"):
        write_u32(w, ins, f32_post(r.astype(f32), ins.mods))
    else:
        write_u64(w, ins, f32_post(r.astype(f64), ins.mods))


# ---- VOP3P packed math ----
def _pk_halves(w, ins, i, kind):
    """(lo-lane input, hi-lane input) of packed source i per op_sel / op_sel_hi / neg / neg_hi."""
    mods = ins.mods
    sel_lo = mbit(mods, "op_sel", i)
    osh = mods.get("op_sel_hi", 0b111)
    sel_hi = mbit({"x": osh}, "x", i)
    op = ins.src[i]
    if kind == "f32":
        v = w.read(op, 2) if op.kind in ("vgpr", "agpr") else None
        if v is None:   # scalar pair or a 32-bit constant used for both halves
            v = w.read(op, 2) if op.kind == "sgpr" else np.repeat(w.read(op, 1), 2, axis=0)
        lo = np.ascontiguousarray(v[int(sel_lo)]).view(f32)
        hi = np.ascontiguousarray(v[int(sel_hi)]).view(f32)
    else:
        if op.kind == "const" and kind == "f16":
            from .common import f16_const
            x = np.full(LANES, f16_const(op), dtype=u32)
        else:
            x = w.read(op, 1)[0]
        half = [(x & u32(0xFFFF)).astype(np.uint16), (x >> u32(16)).astype(np.uint16)]
        lo, hi = half[int(sel_lo)], half[int(sel_hi)]
        dt = {"f16": np.float16, "i16": np.int16}.get(kind)
        if dt is not None:
            lo, hi = lo.view(dt), hi.view(dt)
    if kind in ("f32", "f16"):
        if mbit(mods, "neg_lo", i) or mbit(mods, "neg", i):
            lo = -lo
        if mbit(mods, "neg_hi", i):
            hi = -hi
    return lo, hi


PK = {
    "v_pk_add_f32": ("f32", 2, lambda a, b: a + b),
    "v_pk_mul_f32": ("f32", 2, lambda a, b: a * b),
    "v_pk_fma_f32": ("f32", 3, _fma32),
    "v_pk_mov_b32": ("f32", 2, lambda a, b: None),      # handled specially below
    "v_pk_add_f16": ("f16", 2, lambda a, b: a + b),
    "v_pk_mul_f16": ("f16", 2, lambda a, b: a * b),
    "v_pk_fma_f16": ("f16", 3, lambda a, b, c: (a.astype(f64) * b.astype(f64) + c.astype(f64))
                     .astype(np.float16)),
    "v_pk_max_f16": ("f16", 2, np.fmax),
    "v_pk_min_f16": ("f16", 2, np.fmin),
    "v_pk_add_u16": ("u16", 2, lambda a, b: a + b),
    "v_pk_sub_u16": ("u16", 2, lambda a, b: a - b),
    "v_pk_mul_lo_u16": ("u16", 2, lambda a, b: a * b),
    "v_pk_lshlrev_b16": ("u16", 2, lambda a, b: b << (a & np.uint16(15))),
    "v_pk_lshrrev_b16": ("u16", 2, lambda a, b: b >> (a & np.uint16(15))),
    "v_pk_ashrrev_i16": ("i16", 2, lambda a, b: b >> (a & np.int16(15))),
    "v_pk_max_u16": ("u16", 2, np.maximum),
    "v_pk_min_u16": ("u16", 2, np.minimum),
    "v_pk_max_i16": ("i16", 2, np.maximum),
    "v_pk_min_i16": ("i16", 2, np.minimum),
    "v_pk_add_i16": ("i16", 2, lambda a, b: a + b),
    "v_pk_sub_i16": ("i16", 2, lambda a, b: a - b),
    "v_pk_mad_u16": ("u16", 3, lambda a, b, c: a * b + c),
}


@handles(*PK)
def _packed(w, ins):
    kind, nsrc, fn = PK[ins.op]
    if ins.op == "v_pk_mov_b32":
        # dst.lo = src0[op_sel[0]], dst.hi = src1[op_sel[1]] (dword halves of 64-bit pairs)
        a = w.read(ins.src[0], 2)
        b = w.read(ins.src[1], 2)
        out = np.stack([a[int(mbit(ins.mods, "op_sel", 0))], b[int(mbit(ins.mods, "op_sel", 1))]])
        w.write(ins.dst[0], out, write_mask(w, ins))
        return
    halves = [_pk_halves(w, ins, i, kind) for i in range(nsrc)]
    lo = fn(*(h[0] for h in halves))
    hi = fn(*(h[1] for h in halves))
    if kind == "f32":
        lo, hi = (f32_post(np.asarray(x, dtype=f32), ins.mods) for x in (lo, hi))
        w.write(ins.dst[0], np.stack([lo.view(u32), hi.view(u32)]), write_mask(w, ins))
        return
    if kind == "f16":
        lo, hi = (f32_post(np.asarray(x, dtype=np.float16), ins.mods) for x in (lo, hi))
    elif ins.mods.get("clamp"):
        raise EmuError(f"{ins.op}: integer clamp is not implemented")
    lo16 = np.asarray(lo).view(np.uint16).astype(u32)
    hi16 = np.asarray(hi).view(np.uint16).astype(u32)
    write_u32(w, ins, lo16 | (hi16 << u32(16)))


def _fast_pk_src(op, lo: int, hi: int):
    """w -> [2, 64] (or [2, 1]) f32 (lo-lane, hi-lane) inputs of a VOP3P f32 source whose
    halves are dword `lo` / `hi` of the pair (op_sel / op_sel_hi bits), as _pk_halves."""
    k, i = op.kind, op.index
    if k in ("vgpr", "agpr") and op.count == 2:
        if (lo, hi) == (0, 1):
            if k == "vgpr":
                return lambda w: w.vgpr[i:i + 2].view(f32)
            return lambda w: w.vgpr[w.agpr_base + i:w.agpr_base + i + 2].view(f32)
        rows = np.array([lo, hi])
        if k == "vgpr":
            return lambda w: w.vgpr[i + rows].view(f32)
        return lambda w: w.vgpr[w.agpr_base + i + rows].view(f32)
    if k == "sgpr" and i + 2 <= N_SGPR:
        rows = np.array([i + lo, i + hi])
        return lambda w: w.sgpr[rows, None].view(f32)
    if k in ("const", "literal"):         # one 32-bit value feeds both halves
        c = np.full((2, 1), op.value & 0xFFFFFFFF, dtype=u32).view(f32)
        c.flags.writeable = False
        return lambda w: c
    return None


@specializes("v_pk_add_f32", "v_pk_mul_f32", "v_pk_fma_f32")
def _fast_packed_f32(ins):
    kind, nsrc, fn = PK[ins.op]
    osel, osh = ins.mods.get("op_sel") or 0, ins.mods.get("op_sel_hi", 0b111)
    if not plain(ins, allowed=("op_sel", "op_sel_hi")) or len(ins.src) != nsrc or \
            not isinstance(osel, int) or not isinstance(osh, int):
        return None
    rd = [_fast_pk_src(o, (osel >> k) & 1, (osh >> k) & 1) for k, o in enumerate(ins.src)]
    d = ins.dst[0]
    if None in rd or d.kind not in ("vgpr", "agpr") or d.count != 2:
        return None
    i, agpr = d.index, d.kind == "agpr"

    def run(w, ins):
        r = np.asarray(fn(*(g(w) for g in rd)), dtype=f32)
        b = w.agpr_base + i if agpr else i
        np.copyto(w.vgpr[b:b + 2], r.view(u32), where=w.exec)
    return run


@handles("v_bitop3_b32", "v_bitop3_b16")
def _bitop3(w, ins):
    """Arbitrary 3-input boolean function: bit (a<<2 | b<<1 | c) of the 8-bit table `bitop3`."""
    table = int(ins.mods.get("bitop3", ins.src[3].value if len(ins.src) > 3 else 0))
    a, b, c = (src_u32(w, ins, i) for i in range(3))
    if ins.op == "v_bitop3_b16":
        a, b, c = (src_u16(w, ins, i).astype(u32) for i in range(3))
    out = np.zeros(LANES, dtype=u32)
    for idx in range(8):
        if (table >> idx) & 1:
            ta = a if idx & 4 else ~a
            tb = b if idx & 2 else ~b
            tc = c if idx & 1 else ~c
            out |= ta & tb & tc
    if ins.op == "v_bitop3_b16":
        write_u16(w, ins, (out & u32(0xFFFF)).astype(np.uint16))
    else:
        write_u32(w, ins, out)


_ONES = 0xFFFFFFFF


def _mux(s, x, y):
    """Bitwise s ? x : y where x / y may be the constants 0 or _ONES (folded away)."""
    if isinstance(x, int) and isinstance(y, int):
        return x if x == y else (s if x else ~s)
    if isinstance(x, int):
        return (s | y) if x else (~s & y)
    if isinstance(y, int):
        return (~s | x) if y else (s & x)
    return (s & x) | (~s & y)


def _bitop3_eval(t: int, a, b, c):
    """table bit (a << 2 | b << 1 | c) of `t`, per bit position: Shannon expansion on a, b, c."""
    def on_c(u):
        return _mux(c, _ONES if u & 2 else 0, _ONES if u & 1 else 0)

    def on_bc(v):
        return _mux(b, on_c(v >> 2), on_c(v & 3))
    return _mux(a, on_bc(t >> 4), on_bc(t & 15))


@specializes("v_bitop3_b32")
def _fast_bitop3(ins):
    table = int(ins.mods.get("bitop3", ins.src[3].value if len(ins.src) > 3 else 0))
    rd = [fast_src(o) for o in ins.src[:3]]
    put = fast_dst32(ins.dst[0], "u32")
    if not plain(ins, allowed=("bitop3",)) or len(ins.src) < 3 or None in rd or put is None:
        return None
    r0, r1, r2 = rd

    def run(w, ins):
        r = _bitop3_eval(table, r0(w), r1(w), r2(w))
        put(w, np.full(LANES, r, dtype=u32) if isinstance(r, int) else r)
    return run

