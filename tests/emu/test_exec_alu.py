"""Scalar/vector ALU, compares, DPP and cross-lane semantics on hand-built instructions.

Expected values come from the ISA definitions evaluated independently with Python ints /
fractions / numpy here, never from the emulator itself."""
import struct
from fractions import Fraction

import numpy as np
import pytest

from exec_helpers import VCC, c, ins, lit, run, s, sp, v, wave

L = np.arange(64, dtype=np.uint32)
rng = np.random.default_rng(7)


def rand_u32(n=64):
    return rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)


def test_vadd_respects_exec_and_broadcasts_sgpr():
    w = wave()
    w.vgpr[0] = L
    w.vgpr[1] = 1000
    w.sgpr[5] = 0xFFFFFFFF
    w.exec[:] = (L % 3) != 0
    run(w, ins("v_add_u32", [v(1)], [s(5), v(0)]))
    expect = np.where(L % 3 != 0, (L.astype(np.uint64) + 0xFFFFFFFF) % 2**32, 1000)
    assert (w.vgpr[1] == expect).all()


def test_carry_chain_is_a_64bit_add():
    w = wave()
    a, b = rand_u32(), rand_u32()
    a2, b2 = rand_u32(), rand_u32()
    w.vgpr[0], w.vgpr[1], w.vgpr[2], w.vgpr[3] = a, a2, b, b2
    run(w, ins("v_add_co_u32", [v(4), VCC], [v(0), v(2)]),
        ins("v_addc_co_u32", [v(5), VCC], [v(1), v(3), VCC]))
    for k in range(64):
        x = int(a[k]) | int(a2[k]) << 32
        y = int(b[k]) | int(b2[k]) << 32
        z = (x + y)
        assert int(w.vgpr[4, k]) | int(w.vgpr[5, k]) << 32 == z % 2**64
        assert bool(w.vcc[k]) == (z >= 2**64)


def test_fma_f32_rounds_once():
    w = wave()
    a = rng.standard_normal(64).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    cc = (-(a.astype(np.float64) * b)).astype(np.float32)     # near-cancellation: exposes double rounding
    w.vgpr[0], w.vgpr[1], w.vgpr[2] = a.view(np.uint32), b.view(np.uint32), cc.view(np.uint32)
    run(w, ins("v_fma_f32", [v(3)], [v(0), v(1), v(2)]))
    got = w.vgpr[3].view(np.float32)
    for k in range(64):
        exact = Fraction(float(a[k])) * Fraction(float(b[k])) + Fraction(float(cc[k]))
        # the correctly rounded f32 of the exact value: check got is nearest among its neighbours
        g = np.float32(got[k])
        err = abs(Fraction(float(g)) - exact)
        for nb in (np.nextafter(g, np.float32(np.inf)), np.nextafter(g, np.float32(-np.inf))):
            assert err <= abs(Fraction(float(nb)) - exact)


def ref_f32_bits(x: Fraction) -> int:
    """Round an exact value to the nearest f32 (ties to even, subnormals, overflow to inf)."""
    sign = 0x80000000 if x < 0 else 0
    a = abs(x)
    if a == 0:
        return sign
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    e = max(e, -126)
    q = a / Fraction(2) ** (e - 23)
    n = int(q)
    if q - n > Fraction(1, 2) or (q - n == Fraction(1, 2) and n % 2):
        n += 1
    if n == 1 << 24:
        e, n = e + 1, 1 << 23
    if e > 127:
        return sign | 0x7F800000
    return sign | (n if n < (1 << 23) else ((e + 127) << 23) | (n - (1 << 23)))


def test_fma_f32_double_rounding_traps():
    # a*b + c whose f64 sum lands exactly on an f32 midpoint while the exact value lies just
    # off it (by 2^-64): rounding the f64 sum would tie to the even neighbour, the single
    # rounding of an FMA must not. Plus random lanes across the exponent range.
    f = np.float32
    traps = [  # (a, b, c): c odd-mantissa neighbour of the midpoint, exact value 2^-64 away
        (f(2.0 ** -24 * (1 + 2.0 ** -20)), f(1 - 2.0 ** -20), f(1 + 2.0 ** -23)),
        (f(-2.0 ** -24 * (1 + 2.0 ** -20)), f(1 - 2.0 ** -20), f(1 + 2.0 ** -23)),
        (f(2.0 ** -24 * (1 + 2.0 ** -20)), f(-(1 - 2.0 ** -20)), f(-(1 + 2.0 ** -23))),
    ]
    a = (rng.standard_normal(64) * 2.0 ** rng.integers(-70, 60, 64)).astype(np.float32)
    b = (rng.standard_normal(64) * 2.0 ** rng.integers(-70, 60, 64)).astype(np.float32)
    cc = (-(a.astype(np.float64) * b) * (1 + rng.standard_normal(64) * 2.0 ** -20)).astype(np.float32)
    for k, (x, y, z) in enumerate(traps):
        a[k], b[k], cc[k] = x, y, z
    w = wave()
    w.vgpr[0], w.vgpr[1], w.vgpr[2] = a.view(np.uint32), b.view(np.uint32), cc.view(np.uint32)
    run(w, ins("v_fma_f32", [v(3)], [v(0), v(1), v(2)]),
        ins("v_fmac_f32", [v(2)], [v(0), v(1)], enc="VOP2"))
    for k in range(64):
        exact = Fraction(float(a[k])) * Fraction(float(b[k])) + Fraction(float(cc[k]))
        assert int(w.vgpr[3, k]) == int(w.vgpr[2, k]) == ref_f32_bits(exact), k
    assert int(w.vgpr[3, 0]) == 0x3F800001 and int(w.vgpr[3, 1]) == 0x3F800001   # not the tie


def test_maximum3_minimum3_ieee_2019():
    vals = [0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, np.nan]
    triples = [(x, y, z) for x in vals for y in vals for z in vals][:64]
    a, b, cc = (np.array(t, dtype=np.float32) for t in zip(*triples))
    w = wave()
    w.vgpr[0], w.vgpr[1], w.vgpr[2] = a.view(np.uint32), b.view(np.uint32), cc.view(np.uint32)
    with np.errstate(invalid="ignore"):
        run(w, ins("v_maximum3_f32", [v(3)], [v(0), v(1), v(2)]),
            ins("v_minimum3_f32", [v(4)], [v(0), v(1), v(2)]))
    for k, t in enumerate(triples):
        hi, lo = w.vgpr[3, k:k + 1].view(np.float32)[0], w.vgpr[4, k:k + 1].view(np.float32)[0]
        if any(np.isnan(t)):
            assert np.isnan(hi) and np.isnan(lo)
            continue
        # order with -0 below +0: compare (value, sign-is-positive)
        key = lambda x: (x, not np.signbit(x))                   # noqa: E731
        want_hi, want_lo = max(t, key=key), min(t, key=key)
        assert hi == want_hi and np.signbit(hi) == np.signbit(want_hi), (t, hi)
        assert lo == want_lo and np.signbit(lo) == np.signbit(want_lo), (t, lo)


def test_vop3_neg_abs_clamp_omod():
    w = wave()
    w.vgpr[0] = np.full(64, np.float32(-0.75)).view(np.uint32)
    w.vgpr[1] = np.full(64, np.float32(0.5)).view(np.uint32)
    run(w, ins("v_add_f32", [v(2)], [v(0), v(1)], abs=0b01),             # |a| + b = 1.25
        ins("v_add_f32", [v(3)], [v(0), v(1)], neg=0b10, clamp=1),       # clamp(a - b) = 0
        ins("v_mul_f32", [v(4)], [v(0), v(1)], omod=1))                   # (a*b)*2 = -0.75
    assert (w.vgpr[2].view(np.float32) == 1.25).all()
    assert (w.vgpr[3].view(np.float32) == 0.0).all()
    assert (w.vgpr[4].view(np.float32) == -0.75).all()


def test_integer_bit_ops():
    w = wave()
    a, b, cc = rand_u32(), rand_u32(), rand_u32()
    w.vgpr[0], w.vgpr[1], w.vgpr[2] = a, b, cc
    run(w, ins("v_perm_b32", [v(3)], [v(0), v(1), lit(0x0C070400)]),
        ins("v_bfe_i32", [v(4)], [v(0), c(4), c(7)]),
        ins("v_alignbit_b32", [v(5)], [v(0), v(1), c(9)]),
        ins("v_bfi_b32", [v(6)], [v(0), v(1), v(2)]),
        ins("v_add3_u32", [v(7)], [v(0), v(1), v(2)]),
        ins("v_lshl_or_b32", [v(8)], [v(0), c(3), v(2)]),
        ins("v_bcnt_u32_b32", [v(9)], [v(0), c(5)]),
        ins("v_ffbh_u32", [v(10)], [v(2)]),
        ins("v_mul_hi_u32", [v(11)], [v(0), v(1)]))
    for k in range(64):
        x, y, z = int(a[k]), int(b[k]), int(cc[k])
        data = (x << 32) | y
        perm = sum((((data >> (8 * sel)) & 0xFF) if sel < 8 else 0) << (8 * i)
                   for i, sel in enumerate((0x00, 0x04, 0x07, 0x0C)))
        assert int(w.vgpr[3, k]) == perm
        f = (x >> 4) & 0x7F
        assert int(w.vgpr[4, k]) == (f - 128 if f & 0x40 else f) % 2**32
        assert int(w.vgpr[5, k]) == (data >> 9) & 0xFFFFFFFF
        assert int(w.vgpr[6, k]) == (x & y) | (~x & z) & 0xFFFFFFFF
        assert int(w.vgpr[7, k]) == (x + y + z) % 2**32
        assert int(w.vgpr[8, k]) == ((x << 3) % 2**32) | z
        assert int(w.vgpr[9, k]) == bin(x).count("1") + 5
        assert int(w.vgpr[10, k]) == (32 - z.bit_length() if z else 0xFFFFFFFF)
        assert int(w.vgpr[11, k]) == (x * y) >> 32


def test_lshl_add_u64_and_64bit_const():
    w = wave()
    lo, hi = rand_u32(), rand_u32() >> np.uint32(4)
    w.vgpr[0], w.vgpr[1] = lo, hi
    w.sgpr[2], w.sgpr[3] = 0x89ABCDEF, 0x01234567
    run(w, ins("v_lshl_add_u64", [v(2, 2)], [v(0, 2), c(3), s(2, 2)]))
    for k in range(64):
        x = int(lo[k]) | int(hi[k]) << 32
        r = ((x << 3) + 0x0123456789ABCDEF) % 2**64
        assert int(w.vgpr[2, k]) | int(w.vgpr[3, k]) << 32 == r


def test_packed_f32_and_f16_op_sel():
    w = wave()
    w.vgpr[0] = np.float32(1.5).view(np.uint32)
    w.vgpr[1] = np.float32(-2.0).view(np.uint32)
    w.vgpr[2] = np.float32(4.0).view(np.uint32)
    w.vgpr[3] = np.float32(0.25).view(np.uint32)
    # lo = v0 + v3 (src1's op_sel picks its high dword), hi = -v1 + v3 (op_sel_hi, neg_hi on src0)
    run(w, ins("v_pk_add_f32", [v(4, 2)], [v(0, 2), v(2, 2)], op_sel=0b10, op_sel_hi=0b11, neg_hi=0b01))
    assert (w.vgpr[4].view(np.float32) == 1.75).all()
    assert (w.vgpr[5].view(np.float32) == 2.25).all()
    h = np.array([1.0, 3.0], dtype=np.float16).view(np.uint32)[0]
    g = np.array([0.5, -2.0], dtype=np.float16).view(np.uint32)[0]
    w.vgpr[6], w.vgpr[7] = h, g
    run(w, ins("v_pk_mul_f16", [v(8)], [v(6), v(7)], op_sel=0b01, op_sel_hi=0b10))
    out = w.vgpr[8:9].T.copy().view(np.float16)
    assert (out[:, 0] == 3.0 * 0.5).all() and (out[:, 1] == 1.0 * -2.0).all()


def test_compares_write_vcc_sgpr_pair_and_exec():
    w = wave()
    w.vgpr[0] = (L.astype(np.int32) - 32).view(np.uint32)
    w.exec[:] = L < 60
    run(w, ins("v_cmp_gt_i32", [VCC], [c(0), v(0)], enc="VOPC"),
        ins("v_cmp_lt_u32", [s(10, 2)], [v(0), c(10)]),
        ins("v_cmpx_le_i32", [VCC], [v(0), c(3)], enc="VOPC"))
    expect_vcc = ((L.astype(np.int32) - 32) < 0) & (L < 60)
    vcc_after_cmpx = ((L.astype(np.int32) - 32) <= 3) & (L < 60)
    assert (w.vcc == vcc_after_cmpx).all()
    lt = sum(1 << k for k in range(64) if k < 60 and (k - 32) % 2**32 < 10)
    assert int(w.sgpr[10]) | int(w.sgpr[11]) << 32 == lt
    assert (w.exec == vcc_after_cmpx).all()
    assert expect_vcc.sum() == 32


def test_cndmask_with_sgpr_mask():
    w = wave()
    w.vgpr[0], w.vgpr[1] = 111, 222
    mask = 0xF0F0_0000_FFFF_0001
    w.sgpr[8], w.sgpr[9] = mask & 0xFFFFFFFF, mask >> 32
    run(w, ins("v_cndmask_b32", [v(2)], [v(0), v(1), s(8, 2)]))
    assert [int(x) for x in w.vgpr[2]] == [222 if (mask >> k) & 1 else 111 for k in range(64)]


def test_salu_64bit_add_saveexec_bfe_cselect():
    w = wave()
    w.sgpr[0], w.sgpr[1], w.sgpr[2], w.sgpr[3] = 0xFFFFFFF0, 7, 0x20, 1
    w.exec[:] = L < 40
    w.vcc[:] = (L % 2) == 0
    run(w, ins("s_add_u32", [s(4)], [s(0), s(2)]), ins("s_addc_u32", [s(5)], [s(1), s(3)]),
        ins("s_and_saveexec_b64", [s(6, 2)], [VCC], enc="SOP1"),
        ins("s_bfe_u32", [s(8)], [lit(0xABCD1234), lit((8 << 16) | 12)]),
        ins("s_cmp_eq_u32", [], [s(8), lit(0xD1)], enc="SOPC"),
        ins("s_cselect_b32", [s(9)], [c(5), c(9)]))
    assert int(w.sgpr[4]) | int(w.sgpr[5]) << 32 == 0x7FFFFFFF0 + 0x100000020
    assert int(w.sgpr[6]) | int(w.sgpr[7]) << 32 == (1 << 40) - 1
    assert (w.exec == ((L < 40) & (L % 2 == 0))).all() and w.scc == 1
    assert int(w.sgpr[8]) == 0xD1 and int(w.sgpr[9]) == 5


@pytest.mark.parametrize("ctrl,bound,row_mask", [(0x111, 0, 0xF), (0x111, 1, 0xF), (0x1B, 0, 0xF),
                                                 (0x142, 0, 0xA), (0x13C, 0, 0xF), (0x140, 0, 0x5)])
def test_dpp_lane_movement(ctrl, bound, row_mask):
    w = wave()
    w.vgpr[0] = L + 100
    w.vgpr[1] = 7
    w.exec[:] = L != 5
    run(w, ins("v_mov_b32", [v(1)], [v(0)], enc="VOP1",
               dpp={"ctrl": ctrl, "row_mask": row_mask, "bank_mask": 0xF, "bound_ctrl": bound}))
    for k in range(64):
        r, p = k // 16, k % 16
        if ctrl == 0x111:
            src, ok = k - 1, p >= 1
        elif ctrl == 0x1B:                     # quad_perm:[3,2,1,0]
            src, ok = k // 4 * 4 + 3 - k % 4, True
        elif ctrl == 0x142:
            src, ok = r * 16 - 1, r >= 1
        elif ctrl == 0x13C:
            src, ok = (k - 1) % 64, True
        else:
            src, ok = r * 16 + 15 - p, True
        ok = ok and src != 5                   # an inactive source lane is invalid too
        writes = k != 5 and (row_mask >> r) & 1 and (ok or bound)
        want = (src + 100 if ok else 0) if writes else 7
        assert int(w.vgpr[1, k]) == want, (k, ctrl)


def test_sdwa_selects_and_dst_sel():
    w = wave()
    w.vgpr[0] = 0x80FF_1234
    w.vgpr[1] = 0x0000_0003
    w.vgpr[2] = 0xAAAA_AAAA
    run(w, ins("v_add_u32", [v(2)], [v(0), v(1)], enc="VOP2",
               sdwa={"src0_sel": 5, "src0_sext": 1, "src1_sel": 0, "dst_sel": 4, "dst_unused": 2}))
    # src0 = sext(0x80FF) = 0xFFFF80FF, + 3 = 0xFFFF8102, low word into WORD_0, upper preserved
    assert (w.vgpr[2] == 0xAAAA_8102).all()


def test_readlane_writelane_readfirstlane():
    w = wave()
    w.vgpr[0] = L * 3
    w.sgpr[1] = 37
    w.exec[:] = L >= 9
    run(w, ins("v_readlane_b32", [s(0)], [v(0), s(1)]),
        ins("v_readfirstlane_b32", [s(2)], [v(0)], enc="VOP1"),
        ins("v_writelane_b32", [v(0)], [lit(0xDEAD), c(3)]))
    assert int(w.sgpr[0]) == 111 and int(w.sgpr[2]) == 27
    assert int(w.vgpr[0, 3]) == 0xDEAD and int(w.vgpr[0, 4]) == 12


def test_permlane_swaps():
    w = wave()
    w.vgpr[0], w.vgpr[1] = L, L + 1000
    run(w, ins("v_permlane16_swap_b32", [v(0), v(1)], [], enc="VOP1"))
    a, b = L.copy(), L + 1000
    for k in range(64):
        if (k // 16) % 2 == 1:
            a[k], b[k - 16] = L[k - 16] + 1000, L[k]
    assert (w.vgpr[0] == a).all() and (w.vgpr[1] == b).all()
    w.vgpr[0], w.vgpr[1] = L, L + 1000
    run(w, ins("v_permlane32_swap_b32", [v(0), v(1)], [], enc="VOP1"))
    assert (w.vgpr[0] == np.concatenate([L[:32], L[:32] + 1000])).all()
    assert (w.vgpr[1] == np.concatenate([L[32:], L[32:] + 1000])).all()


def test_bpermute_and_swizzle():
    w = wave()
    w.vgpr[0] = ((63 - L) * 4).astype(np.uint32)
    w.vgpr[1] = L + 500
    w.exec[:] = L != 63
    run(w, ins("ds_bpermute_b32", [v(2)], [v(0), v(1)]))
    # lane 0 reads lane 63, which is inactive -> 0; others read lane 63-k
    assert int(w.vgpr[2, 0]) == 0 and all(int(w.vgpr[2, k]) == 563 - k for k in range(1, 63))
    w.exec[:] = True
    xor1 = (1 << 10) | 0x1F                     # bitmask mode: and 0x1f, xor 1 -> swap neighbours
    run(w, ins("ds_swizzle_b32", [v(3)], [v(1)], offset=xor1))
    assert (w.vgpr[3] == (L ^ 1) + 500).all()


def test_transcendentals_within_documented_tolerance():
    w = wave()
    x = np.linspace(0.1, 8.0, 64, dtype=np.float32)
    w.vgpr[0] = x.view(np.uint32)
    run(w, ins("v_exp_f32", [v(1)], [v(0)], enc="VOP1"), ins("v_log_f32", [v(2)], [v(0)], enc="VOP1"),
        ins("v_rcp_f32", [v(3)], [v(0)], enc="VOP1"), ins("v_rsq_f32", [v(4)], [v(0)], enc="VOP1"))
    x64 = x.astype(np.float64)
    for r, ref in ((1, 2 ** x64), (2, np.log2(x64)), (3, 1 / x64), (4, 1 / np.sqrt(x64))):
        got = w.vgpr[r].view(np.float32).astype(np.float64)
        assert np.all(np.abs(got - ref) <= 1e-6 * np.abs(ref) + 1e-7)


def test_unimplemented_opcode_raises_naming_it():
    from flyaot.emu.machine import _unimplemented
    from flyaot.emu.wave import EmuError
    with pytest.raises(EmuError, match="v_made_up_op"):
        _unimplemented(wave(), ins("v_made_up_op"))


def test_special_register_reads():
    w = wave()
    w.exec[:] = L < 33
    w.m0 = 77
    out = w.read_scalar(sp("exec"), 2)
    assert int(out[0]) == 0xFFFFFFFF and int(out[1]) == 1
    assert int(w.read_scalar(sp("m0", 1), 1)[0]) == 77
    assert struct.unpack("<d", struct.pack("<II", *[int(x) for x in w.read_scalar(
        c(0x3F800000, "1.0"), 2, fp64=True)]))[0] == 1.0
