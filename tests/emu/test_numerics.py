"""Narrow-format numerics and the conversion instructions, checked against values derived here
from the format definitions (OCP MX spec / CDNA4 ISA), never against the emulator's own tables."""
import math
import re
import shutil
import subprocess
from fractions import Fraction
from functools import lru_cache

import numpy as np
import pytest

from flyaot.emu import numerics as N
from flyaot.emu.instr import Instr, Operand
from flyaot.emu.semantics import HANDLERS
from flyaot.emu.wave import Wave

# (exponent bits, mantissa bits, bias, special-code rule) straight from the format definitions
SPECS = {
    "fp8": (4, 3, 7, "e4m3fn"),
    "bf8": (5, 2, 15, "ieee"),
    "fp6": (2, 3, 1, "none"),
    "bf6": (3, 2, 3, "none"),
    "fp4": (2, 1, 1, "none"),
}
FMT = {"fp8": N.FP8, "bf8": N.BF8, "fp6": N.FP6, "bf6": N.BF6, "fp4": N.FP4}


def ref_value(name: str, code: int) -> float:
    """Value of one code by the textbook formula (sign, biased exponent, fraction)."""
    eb, mb, bias, special = SPECS[name]
    s = (code >> (eb + mb)) & 1
    e = (code >> mb) & ((1 << eb) - 1)
    m = code & ((1 << mb) - 1)
    sign = -1.0 if s else 1.0
    if special == "e4m3fn" and e == 15 and m == 7:
        return math.nan
    if special == "ieee" and e == (1 << eb) - 1:
        return math.nan if m else sign * math.inf
    if e == 0:
        return sign * m / (1 << mb) * 2.0 ** (1 - bias)
    return sign * (1 + m / (1 << mb)) * 2.0 ** (e - bias)


@lru_cache(maxsize=None)
def ref_grid(name: str):
    """(code, exact value) of every finite non-negative code."""
    eb, mb, _, _ = SPECS[name]
    return [(c, Fraction(ref_value(name, c))) for c in range(1 << (eb + mb))
            if math.isfinite(ref_value(name, c))]


def ref_round(name: str, x: float, saturate: bool) -> int:
    """Nearest code by exhaustive search over the finite grid; ties go to the even code."""
    eb, mb, _, special = SPECS[name]
    nbits = 1 + eb + mb
    grid = ref_grid(name)
    a = Fraction(abs(x))
    best = min(grid, key=lambda cv: (abs(cv[1] - a), cv[0] % 2))[0]
    top, vmax = grid[-1]
    ulp = vmax - grid[-2][1]
    overflow = a > vmax + ulp / 2 or (a == vmax + ulp / 2 and top % 2 == 1)
    if overflow and not saturate and special != "none":
        best = (0x7F if special == "e4m3fn" else 0x7C)    # E4M3 NaN / E5M2 inf
    sign = (1 << (nbits - 1)) if math.copysign(1, x) < 0 else 0
    return best | sign


# ---------------------------------------------------------------- decoding
def test_fp4_every_code():
    # E2M1 magnitudes listed in the OCP MX spec (docs/families/mxfp4.md#e2m1)
    mags = [0, 0.5, 1, 1.5, 2, 3, 4, 6]
    expect = mags + [-v for v in mags]
    got = N.FP4.decode(np.arange(16))
    assert got.tolist() == expect
    assert np.signbit(got[8])            # code 0x8 is -0


@pytest.mark.parametrize("name", SPECS)
def test_decode_matches_definition(name):
    fmt = FMT[name]
    codes = np.arange(1 << fmt.bits)
    got = fmt.decode(codes)
    for c in codes:
        r = ref_value(name, int(c))
        if math.isnan(r):
            assert np.isnan(got[c]), (name, c)
        else:
            assert got[c] == np.float32(r), (name, hex(c), got[c], r)


def test_known_format_constants():
    assert N.FP8.decode([0x7E, 0xFE, 0x08, 0x01])[:].tolist() == [448, -448, 2 ** -6, 2 ** -9]
    assert np.isnan(N.FP8.decode([0x7F, 0xFF])).all()
    assert N.BF8.decode([0x7B, 0x04, 0x01]).tolist() == [57344, 2 ** -14, 2 ** -16]
    assert N.BF8.decode([0x7C, 0xFC]).tolist() == [np.inf, -np.inf]
    assert np.isnan(N.BF8.decode([0x7D, 0x7E, 0x7F])).all()
    assert N.FP6.decode([0x1F, 0x01]).tolist() == [7.5, 0.125]
    assert N.BF6.decode([0x1F, 0x01]).tolist() == [28, 0.0625]


def test_e8m0_edges():
    got = N.e8m0_to_f32(np.array([0x00, 0x7F, 0xFE, 0xFF, 0x80, 0x7E]))
    bits = got.view(np.uint32)
    assert bits[0] == 0x00400000           # 2^-127: an f32 denormal, not zero
    assert got[1] == 1.0 and got[4] == 2.0 and got[5] == 0.5
    assert bits[2] == 0x7F000000           # 2^127
    assert np.isnan(got[3])


# ---------------------------------------------------------------- rounding
@pytest.mark.parametrize("name", SPECS)
@pytest.mark.parametrize("saturate", [False, True])
def test_encode_rne_against_exhaustive_search(name, saturate):
    fmt = FMT[name]
    grid = sorted({abs(ref_value(name, c)) for c in range(1 << (fmt.bits - 1))
                   if math.isfinite(ref_value(name, c))})
    # every grid point, every midpoint (ties), points just off the midpoints, beyond max
    xs = list(grid) + [(a + b) / 2 for a, b in zip(grid, grid[1:])]
    xs += [(a + b) / 2 * (1 + 2 ** -20) for a, b in zip(grid, grid[1:])]
    xs += [(a + b) / 2 * (1 - 2 ** -20) for a, b in zip(grid, grid[1:])]
    ulp = grid[-1] - grid[-2]
    xs += [grid[-1] + ulp / 2, grid[-1] + ulp / 4, grid[-1] + ulp, grid[-1] * 4]
    rng = np.random.default_rng(1)
    xs += list(rng.uniform(0, grid[-1] * 1.1, 300))
    xs += [-x for x in xs]
    got = fmt.encode(np.array(xs), saturate)
    for x, g in zip(xs, got):
        assert g == ref_round(name, x, saturate), (name, x, hex(g))


def test_encode_specials():
    assert N.FP8.encode(np.array([np.nan, -np.nan]), True).tolist() == [0x7F, 0xFF]
    assert N.FP8.encode(np.array([np.inf, -np.inf]), True).tolist() == [0x7E, 0xFE]
    assert N.FP8.encode(np.array([np.inf]), False).tolist() == [0x7F]
    assert N.BF8.encode(np.array([np.inf, -np.inf]), False).tolist() == [0x7C, 0xFC]
    assert N.BF8.encode(np.array([np.inf]), True).tolist() == [0x7B]
    assert N.BF8.decode(N.BF8.encode(np.array([np.nan]), True)).tolist() != [0]
    assert np.isnan(N.BF8.decode(N.BF8.encode(np.array([np.nan]), True)))
    assert N.FP4.encode(np.array([100.0, -100.0, np.inf]), False).tolist() == [0x7, 0xF, 0x7]


@pytest.mark.parametrize("name", SPECS)
def test_encode_decode_round_trip(name):
    fmt = FMT[name]
    codes = np.array([c for c in range(1 << fmt.bits) if math.isfinite(ref_value(name, c))])
    assert (fmt.encode(fmt.decode(codes), True) == codes).all()


def test_bf16_rounding():
    cases = {
        0x3F808000: 0x3F80,   # tie, even below: stays
        0x3F818000: 0x3F82,   # tie, odd below: rounds up
        0x3F808001: 0x3F81,   # just above the tie
        0x3F807FFF: 0x3F80,   # just below the tie
        0xBF818000: 0xBF82,   # negative tie
        0x7F7FFFFF: 0x7F80,   # rounds to +inf
        0x7F800000: 0x7F80,   # inf
        0x7F800001: 0x7FC0,   # signalling NaN -> quiet NaN
        0xFFC12345: 0xFFC1,   # quiet NaN keeps sign and top payload
        0x00000001: 0x0000,   # tiny denormal rounds to zero
        0x00008000: 0x0000,   # denormal tie to even
        0x00018000: 0x0002,
    }
    src = N.bits_f32(np.array(list(cases), dtype=np.uint32))
    assert N.f32_to_bf16(src).tolist() == list(cases.values())
    assert N.bf16_to_f32(np.array([0x3F80, 0xC040])).tolist() == [1.0, -3.0]


def test_fp4_and_fp6_packing_layout():
    codes = np.arange(16, dtype=np.uint8)
    packed = N.fp4_pack(codes)
    assert packed.tolist() == [c0 | (c1 << 4) for c0, c1 in zip(range(0, 16, 2), range(1, 16, 2))]
    assert (N.fp4_unpack(packed) == codes).all()
    rng = np.random.default_rng(0)
    six = rng.integers(0, 64, 32).astype(np.uint8)
    bitstring = sum(int(c) << (6 * i) for i, c in enumerate(six))      # element i at bits 6i
    expect = list(bitstring.to_bytes(24, "little"))
    assert N.fp6_pack(six).tolist() == expect
    assert (N.fp6_unpack(np.array(expect, dtype=np.uint8)) == six).all()


def test_scaled_conversions():
    # 10 / 2^(129-127) = 2.5, a tie between FP4 2 and 3 -> 2 (even code 0x4)
    assert N.scaled_encode(N.FP4, np.array([10.0]), 129).tolist() == [0x4]
    # 1000 / 2^(132-127) = 31.25, between the E4M3 neighbours 30 and 32
    assert N.scaled_encode(N.FP8, np.array([1000.0]), 132).tolist() == [ref_round("fp8", 31.25, True)]
    assert N.scaled_encode(N.FP8, np.array([1e6]), 127).tolist() == [0x7E]   # saturates
    assert np.isnan(N.scaled_decode(N.FP4, np.array([1]), 0xFF)).all()
    assert N.scaled_decode(N.FP4, np.array([0x7]), 0x00).tolist() == [6 * 2.0 ** -127]


# ---------------------------------------------------------------- conversion instructions
V = lambda i, n=1: Operand("vgpr", i, n)                                   # noqa: E731


def run(op, dst, src, wave=None, **mods):
    w = wave or Wave()
    HANDLERS[op](w, Instr(0, 8, "VOP3", op, tuple(dst), tuple(src), mods))
    return w


def f32_scale(e: int) -> int:
    """An f32 whose exponent field is e, with mantissa bits that must be ignored."""
    return (e << 23) | 0x2A5A5A


def test_cvt_scalef32_pk_f32_fp4_every_code_and_byte():
    w = Wave()
    lanes = np.arange(64)
    # lane l: bytes (l, l+64, l+128, l+192) & 0xFF -> every byte value appears
    w.vgpr[1] = (lanes | ((lanes + 64) << 8) | ((lanes + 128) << 16) | ((lanes + 192) << 24)).astype(np.uint32)
    w.vgpr[2] = f32_scale(0x80)                                             # scale 2.0
    mags = [0, 0.5, 1, 1.5, 2, 3, 4, 6]
    table = mags + [-m for m in mags]
    for byte in range(4):
        run("v_cvt_scalef32_pk_f32_fp4", [V(10, 2)], [V(1), V(2)], w, op_sel=byte)
        b = (lanes + 64 * byte) & 0xFF
        assert (w.vgpr[10].view(np.float32) == [2 * table[x & 0xF] for x in b]).all()
        assert (w.vgpr[11].view(np.float32) == [2 * table[x >> 4] for x in b]).all()


def test_cvt_scalef32_pk_bf16_fp4_and_e8m0_scale_edges():
    w = Wave()
    w.vgpr[1] = 0x7F                                                        # codes 0xF (lo), 0x7 (hi)
    # -6 / +6 times 2^(e-127), as bf16: 6 * 2^-127 = 1.5 * 2^-125 (exponent field 2),
    # 1.5 * 2^127 (field 254), 6 * 2^127 overflows to infinity
    for e, lo, hi in [(0x7F, 0xC0C0, 0x40C0), (0x00, 0x8140, 0x0140), (0xFC, 0xFF40, 0x7F40),
                      (0xFE, 0xFF80, 0x7F80)]:
        w.vgpr[2] = f32_scale(e)
        run("v_cvt_scalef32_pk_bf16_fp4", [V(3)], [V(1), V(2)], w)
        assert (w.vgpr[3] == (hi << 16) | lo).all(), hex(int(w.vgpr[3, 0]))
    w.vgpr[2] = f32_scale(0xFF)
    run("v_cvt_scalef32_pk_bf16_fp4", [V(3)], [V(1), V(2)], w)
    assert (int(w.vgpr[3, 0]) & 0x7F80) == 0x7F80 and (int(w.vgpr[3, 0]) & 0x7F) != 0   # NaN


def test_cvt_scalef32_pk_fp4_f32_byte_insert_and_exec():
    w = Wave()
    w.vgpr[5] = 0xA5A5A5A5
    w.vgpr[1] = N.f32_bits(np.full(64, 5.0, np.float32))       # 5/2 = 2.5 -> tie -> 2.0 = 0x4
    w.vgpr[2] = N.f32_bits(np.full(64, -12.0, np.float32))     # -12/2 = -6 = 0xF
    w.vgpr[3] = f32_scale(0x80)
    w.exec[32:] = False
    run("v_cvt_scalef32_pk_fp4_f32", [V(5)], [V(1), V(2), V(3)], w, op_sel=0b1000)   # byte 2
    assert (w.vgpr[5, :32] == 0xA5F4A5A5).all()
    assert (w.vgpr[5, 32:] == 0xA5A5A5A5).all()


def test_cvt_scalef32_fp8_round_trip_and_word_select():
    rng = np.random.default_rng(3)
    w = Wave()
    codes = rng.integers(0, 0x7F, (2, 64))                       # finite positive E4M3 codes
    vals = np.array([[ref_value("fp8", int(c)) for c in row] for row in codes], np.float32)
    w.vgpr[1] = N.f32_bits(vals[0] * 4)
    w.vgpr[2] = N.f32_bits(vals[1] * 4)
    w.vgpr[3] = f32_scale(0x81)                                  # 4.0
    w.vgpr[4] = 0x12345678
    run("v_cvt_scalef32_pk_fp8_f32", [V(4)], [V(1), V(2), V(3)], w, op_sel=0b1000)   # high word
    expect_word = codes[0] | (codes[1] << 8)
    assert (w.vgpr[4] == ((expect_word << 16) | 0x5678)).all()
    run("v_cvt_scalef32_pk_f32_fp8", [V(8, 2)], [V(4), V(3)], w, op_sel=0b1)          # read it back
    assert (w.vgpr[8].view(np.float32) == vals[0] * 4).all()
    assert (w.vgpr[9].view(np.float32) == vals[1] * 4).all()
    run("v_cvt_scalef32_f32_fp8", [V(8)], [V(4), V(3)], w, op_sel=0b11)               # byte 3
    assert (w.vgpr[8].view(np.float32) == vals[1] * 4).all()


def test_cvt_scalef32_fp6_pack32_round_trip():
    rng = np.random.default_rng(4)
    for name, op_up, op_down in [("fp6", "v_cvt_scalef32_pk32_f32_fp6", "v_cvt_scalef32_2xpk16_fp6_f32"),
                                 ("bf6", "v_cvt_scalef32_pk32_f32_bf6", "v_cvt_scalef32_2xpk16_bf6_f32")]:
        w = Wave()
        codes = rng.integers(0, 64, (64, 32))
        for lane in range(64):
            bitstring = sum(int(c) << (6 * i) for i, c in enumerate(codes[lane]))
            w.vgpr[10:16, lane] = np.frombuffer(bitstring.to_bytes(24, "little"), np.uint32)
        w.vgpr[1] = f32_scale(0x7E)                              # 0.5
        run(op_up, [V(20, 32)], [V(10, 6), V(1)], w)
        expect = np.array([[ref_value(name, int(c)) * 0.5 for c in row] for row in codes], np.float32)
        assert (w.vgpr[20:52].view(np.float32) == expect.T).all()
        # back: 2xpk16 takes even elements from S0 and odd ones from S1
        w.vgpr[60:76] = w.vgpr[20:52:2]
        w.vgpr[80:96] = w.vgpr[21:52:2]
        run(op_down, [V(100, 6)], [V(60, 16), V(80, 16), V(1)], w)
        assert (w.vgpr[100:106] == w.vgpr[10:16]).all()


def test_cvt_pk_bf16_f32_and_back():
    w = Wave()
    w.vgpr[1] = 0x3F818000          # tie, rounds up to 0x3F82
    w.vgpr[2] = 0xBF808000          # tie, stays 0xBF80
    run("v_cvt_pk_bf16_f32", [V(3)], [V(1), V(2)], w)
    assert (w.vgpr[3] == 0xBF803F82).all()
    run("v_cvt_f32_bf16", [V(4)], [V(3)], w)
    assert (w.vgpr[4] == 0x3F820000).all()
    run("v_cvt_f32_bf16", [V(4)], [V(3)], w, sdwa={"src0_sel": "WORD_1"})
    assert (w.vgpr[4] == 0xBF800000).all()


def ref_f16(x: float) -> int:
    """IEEE binary16 bits of x, round to nearest even, by exact rational arithmetic."""
    sign = 0x8000 if math.copysign(1, x) < 0 else 0
    if math.isnan(x):
        return 0x7E00
    if math.isinf(x):
        return sign | 0x7C00
    a = Fraction(abs(x))
    if a == 0:
        return sign
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    e = max(e, -14)                                  # subnormals share the exponent of 2^-14
    q = a / Fraction(2) ** (e - 10)
    n = math.floor(q)
    if q - n > Fraction(1, 2) or (q - n == Fraction(1, 2) and n % 2):
        n += 1
    if n == 2048:
        e, n = e + 1, 1024
    if e > 15:
        return sign | 0x7C00
    return sign | (n if n < 1024 else ((e + 15) << 10) | (n - 1024))


def test_cvt_pk_f16_f32_rounding_and_modifiers():
    rng = np.random.default_rng(5)
    s0 = rng.integers(0, 1 << 32, 64, dtype=np.uint64).astype(np.uint32)
    s1 = rng.integers(0, 1 << 32, 64, dtype=np.uint64).astype(np.uint32)
    # exponents spread over the f16 range, its subnormals, overflow and underflow
    for v in (s0, s1):
        v &= np.uint32(0x807FFFFF)
        v |= (rng.integers(98, 146, 64).astype(np.uint32) << np.uint32(23))
    ties = [1 + 2 ** -11, 1 + 3 * 2 ** -11, 2 ** -25, 3 * 2 ** -25, 65520.0, 65519.0, -0.0, 2049.0]
    s0[:len(ties)] = N.f32_bits(np.array(ties, np.float32))
    s1[:3] = [0x7F800001, 0x7F800000, 0xFF800000]   # sNaN, +inf, -inf
    w = Wave()
    w.vgpr[1], w.vgpr[2] = s0, s1
    w.vgpr[3] = 0xDEADBEEF
    w.exec[9] = False
    run("v_cvt_pk_f16_f32", [V(3)], [V(1), V(2)], w)
    with np.errstate(invalid="ignore"):            # widening the signalling NaN
        f0, f1 = N.bits_f32(s0).astype(float), N.bits_f32(s1).astype(float)
    for lane in range(64):
        got = int(w.vgpr[3, lane])
        if lane == 9:
            assert got == 0xDEADBEEF
            continue
        lo, hi = got & 0xFFFF, got >> 16
        assert lo == ref_f16(f0[lane]), (lane, f0[lane], hex(lo))
        if math.isnan(f1[lane]):
            assert hi & 0x7E00 == 0x7E00            # a quiet NaN
        else:
            assert hi == ref_f16(f1[lane]), (lane, f1[lane], hex(hi))
    # abs on S0, neg on S1, clamp to [0, 1]
    w.vgpr[1] = N.f32_bits(np.full(64, -0.3, np.float32))
    w.vgpr[2] = N.f32_bits(np.full(64, -7.0, np.float32))
    run("v_cvt_pk_f16_f32", [V(3)], [V(1), V(2)], w, abs=0b01, neg=0b10)
    assert (w.vgpr[3][w.exec] == (ref_f16(7.0) << 16 | ref_f16(float(np.float32(0.3))))).all()
    run("v_cvt_pk_f16_f32", [V(3)], [V(1), V(2)], w, neg=0b01, clamp=1)
    assert (w.vgpr[3][w.exec] == (ref_f16(0.0) << 16 | ref_f16(float(np.float32(0.3))))).all()


def test_cvt_fp8_plain_conversions():
    w = Wave()
    w.vgpr[1] = N.f32_bits(np.full(64, 464.0, np.float32))   # tie 448 / (480 = NaN slot) -> 448
    w.vgpr[2] = N.f32_bits(np.full(64, 1000.0, np.float32))  # overflow
    w.vgpr[3] = 0
    run("v_cvt_pk_fp8_f32", [V(3)], [V(1), V(2)], w)
    assert (w.vgpr[3] == 0x7F7E).all()                          # overflow -> NaN without clamp
    run("v_cvt_pk_fp8_f32", [V(3)], [V(1), V(2)], w, clamp=1, op_sel=0b1000)
    assert (w.vgpr[3] == 0x7E7E7F7E).all()                      # clamp saturates; low word kept
    run("v_cvt_pk_bf8_f32", [V(3)], [V(2), V(1)], w)
    assert (w.vgpr[3] & 0xFFFF == (ref_round("bf8", 464.0, False) << 8) | ref_round("bf8", 1000.0, False)).all()
    w.vgpr[5] = 0x01087E38                                      # bytes 0x38, 0x7E, 0x08, 0x01
    run("v_cvt_f32_fp8", [V(6)], [V(5)], w, sdwa={"src0_sel": "BYTE_2"})
    assert (w.vgpr[6].view(np.float32) == 2 ** -6).all()
    run("v_cvt_pk_f32_fp8", [V(6, 2)], [V(5)], w)
    assert (w.vgpr[6].view(np.float32) == 1.0).all() and (w.vgpr[7].view(np.float32) == 448).all()
    run("v_cvt_pk_f32_bf8", [V(6, 2)], [V(5)], w, sdwa={"src0_sel": "WORD_1"})
    assert (w.vgpr[6].view(np.float32) == ref_value("bf8", 0x08)).all()
    assert (w.vgpr[7].view(np.float32) == ref_value("bf8", 0x01)).all()


@pytest.mark.skipif(shutil.which("llvm-mc-22") is None, reason="needs llvm-mc-22")
def test_op_sel_byte_selects_through_llvm_mc_and_decoder():
    """LLVM's syntax (llvm-project 1a86d44, 5001f16): v_cvt_scalef32_pk_{f32,bf16}_fp4
    op_sel:[x,y,z] reads source byte x + 2y; v_cvt_scalef32_pk_fp4_f32 op_sel:[a,b,c,d] writes
    destination byte c + 2d. Encode with llvm-mc, decode with our decoder, execute."""
    from flyaot.emu.decode import decode_one

    text = ["v_cvt_scalef32_pk_f32_fp4 v[10:11], v1, v2 op_sel:[1,1,0]",
            "v_cvt_scalef32_pk_bf16_fp4 v12, v1, v2 op_sel:[0,1,0]",
            "v_cvt_scalef32_pk_fp4_f32 v13, v3, v4, v2 op_sel:[0,0,1,1]",
            "v_cvt_scalef32_pk_fp4_f32 v14, v3, v4, v2 op_sel:[0,0,0,1]"]
    enc = subprocess.run(["llvm-mc-22", "-triple=amdgcn", "-mcpu=gfx950", "-show-encoding"],
                         input="\n".join(text) + "\n", check=True, capture_output=True, text=True).stdout
    codes = [bytes(int(x, 16) for x in re.search(r"encoding: \[(.*)\]", ln).group(1).split(","))
             for ln in enc.splitlines() if "encoding" in ln]
    w = Wave()
    w.vgpr[1] = 0x7A53_2100             # bytes: 0x00, 0x21, 0x53, 0x7A
    w.vgpr[2] = f32_scale(0x7F)         # 1.0
    w.vgpr[3] = N.f32_bits(np.full(64, 3.0, np.float32))     # FP4 0x5
    w.vgpr[4] = N.f32_bits(np.full(64, -1.5, np.float32))    # FP4 0xB
    w.vgpr[13] = w.vgpr[14] = 0x11223344
    for code in codes:
        ins = decode_one(code, 0)
        HANDLERS[ins.op](w, ins)
    table = [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6]
    assert (w.vgpr[10].view(np.float32) == table[0xA]).all() and (w.vgpr[11].view(np.float32) == table[0x7]).all()
    assert (w.vgpr[12] == 0x40403FC0).all()            # byte 0x53: lo 3 -> 1.5, hi 5 -> 3.0
    assert (w.vgpr[13] == 0xB5223344).all()            # byte 3 written
    assert (w.vgpr[14] == 0x11B53344).all()            # op_sel:[0,0,0,1] = OPSEL[3] -> byte 2
