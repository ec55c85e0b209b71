"""The 8-bit dense MFMAs (v_mfma_f32_{16x16x32,32x32x16}_{fp8,bf8}_{fp8,bf8}) and v_fmac_f64, against
results computed here from decoded values, with operands placed by loops written from the layout rule
(docs/emulator.md#mfma): lane l holds row l % M (A) / column l % M (B), elements K = 8*(l // M) + j,
element j in byte j % 4 of dword j // 4. Data keep every sum exact in float64.
"""
from fractions import Fraction

import numpy as np
import pytest

from flyaot.emu.instr import Instr, Operand
from flyaot.emu.semantics import HANDLERS
from flyaot.emu.wave import Wave
from tests.emu.test_mfma import A_, V, expected, moderate_codes, place_acc, read_acc, run, value

FMT = {"fp8": 0, "bf8": 1}


def place_dense8(codes: np.ndarray) -> np.ndarray:
    m, k = codes.shape
    regs = np.zeros((2, 64), np.uint32)
    for lane in range(64):
        for j in range(8):
            regs[j // 4, lane] |= np.uint32(int(codes[lane % m, 8 * (lane // m) + j]) << (8 * (j % 4)))
    return regs


@pytest.mark.parametrize("m,k", [(16, 32), (32, 16)])
@pytest.mark.parametrize("fa,fb", [("fp8", "fp8"), ("fp8", "bf8"), ("bf8", "fp8"), ("bf8", "bf8")])
def test_dense8_mfma(m, k, fa, fb):
    op = f"v_mfma_f32_{m}x{m}x{k}_{fa}_{fb}"
    rng = np.random.default_rng(m + 7 * FMT[fa] + 3 * FMT[fb])
    ca = rng.choice(moderate_codes(FMT[fa]), (m, k))
    cb = rng.choice(moderate_codes(FMT[fb]), (k, m))
    A = np.vectorize(lambda c: value(FMT[fa], int(c)))(ca)
    B = np.vectorize(lambda c: value(FMT[fb], int(c)))(cb)
    C = rng.integers(-1000, 1000, (m, m)) * 2.0 ** -6
    w = Wave(agpr_base=256)
    w.vgpr[0:2] = place_dense8(ca)
    w.vgpr[8:10] = place_dense8(cb.T)
    d = m * m // 64
    w.vgpr[256 + 32:256 + 32 + d] = place_acc(C)
    w.exec[::5] = False                                    # MFMA ignores EXEC
    run(op, A_(0, d), [V(0, 2), V(8, 2), A_(32, d)], w)
    assert (read_acc(w.vgpr[256:256 + d], m) == expected(A, B, C)).all()


def test_dense8_one_hot_k_mapping():
    """A single 1.0 at (row 0, K = kk) of A and (K = kk, col 0) of B lands in D[0, 0] only when both
    operands agree on where K = kk lives: checks the mapping itself, not only a K-order-free sum."""
    one = 0x38                                              # E4M3 1.0
    for kk in (0, 7, 8, 31):
        ca = np.zeros((16, 32), np.int64)
        cb = np.zeros((32, 16), np.int64)
        ca[0, kk] = one
        cb[kk, 0] = one
        w = Wave()
        w.vgpr[0:2] = place_dense8(ca)
        w.vgpr[8:10] = place_dense8(cb.T)
        lane, byte = 16 * (kk // 8), kk % 8
        assert (int(w.vgpr[byte // 4, lane]) >> (8 * (byte % 4))) & 0xFF == one
        run("v_mfma_f32_16x16x32_fp8_fp8", V(16, 4), [V(0, 2), V(8, 2), V(20, 4)], w)
        D = read_acc(w.vgpr[16:20], 16)
        assert D[0, 0] == 1.0 and np.count_nonzero(D) == 1


def _f64_regs(x):
    bits = np.asarray(x, np.float64).view(np.uint64)
    return np.stack([(bits & np.uint64(0xFFFFFFFF)).astype(np.uint32), (bits >> np.uint64(32)).astype(np.uint32)])


def _f64_of(regs):
    return (regs[0].astype(np.uint64) | (regs[1].astype(np.uint64) << np.uint64(32))).view(np.float64)


def test_fmac_f64_is_fused_and_follows_exec():
    """vdst = src0 * src1 + vdst rounded once: with 30-bit significands the product needs 60 bits, so
    adding minus its f64 rounding leaves the exact residual (an unfused multiply-add gives 0)."""
    rng = np.random.default_rng(3)
    a = (rng.integers(1 << 29, 1 << 30, 64) | 1).astype(np.float64) * 2.0 ** -29
    b = (rng.integers(1 << 29, 1 << 30, 64) | 1).astype(np.float64) * 2.0 ** -29
    c = -(a * b)                                            # f64-rounded product, negated
    w = Wave()
    w.vgpr[0:2], w.vgpr[2:4], w.vgpr[4:6] = _f64_regs(a), _f64_regs(b), _f64_regs(c)
    w.exec[1::4] = False
    HANDLERS["v_fmac_f64"](w, Instr(0, 4, "VOP2", "v_fmac_f64", (V(4, 2),), (V(0, 2), V(2, 2)), {}))
    got = _f64_of(w.vgpr[4:6])
    for lane in range(64):
        want = float(Fraction(a[lane]) * Fraction(b[lane]) + Fraction(c[lane])) if w.exec[lane] else c[lane]
        assert got[lane] == want, lane
    assert (got[w.exec] != 0).any()                        # the residuals are not all zero
