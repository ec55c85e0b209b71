"""MFMA arithmetic and operand lane layouts of gfx950, as pure functions of register arrays.

Registers are uint32 arrays [dwords, 64] (row = register of the tuple, column = lane), the
shape `Wave.read` returns. Results come back in the same shape.

Layouts (M = N = 16 or 32; g = lane // M is the lane group, r = lane % M):
- A (M x K): lane holds row r; B (K x N): lane holds column r. Same rule for both operands.
- bf16/f16 (v_mfma_f32_{16x16x32,32x32x16,16x16x16,32x32x8}_{bf16,f16}): the lane's
  KL = K*M/64 elements are K = KL*g + j, j = 0..KL-1; element j is half j%2 (low half first)
  of dword j//2. (Where each layout rule comes from: docs/emulator.md#sources.)
- 8-bit dense (v_mfma_f32_{16x16x32,32x32x16}_{fp8,bf8}_{fp8,bf8}): the same rule with one byte per
  element: KL = 8 elements, K = 8*g + j, element j is byte j%4 of dword j//4 (2 dwords per
  operand; the CDNA3 8-bit MFMA layout, shared with v_mfma_i32_*_i8). The first format names A,
  the second B; on gfx950 both are OCP (FP8 E4M3FN, BF8 E5M2), not gfx942's FNUZ formats.
- f8f6f4 (v_mfma[_scale]_f32_16x16x128_f8f6f4, _32x32x64_): 32 elements per lane, stored
  as 8 dwords (FP8/BF8, one byte each), 6 dwords (FP6/BF6, 6-bit fields, element i at bits
  [6i, 6i+6)) or 4 dwords (FP4, element 2i in the low nibble of byte i).
    FP4, FP6/BF6:  K = 32*g + e                                (e = element 0..31)
    FP8/BF8:       K = (e // 16) * K/2 + 16*g + e % 16
  FP4 and the 32x32x64 FP8 case follow AMD's published matrix-core layouts; the 16x16x128 FP8
  case follows the scaled-MFMA operand layout compilers and MXFP8 kernels use with per-32
  scales. One library test loads 16x16x128 FP8 as K = 32*(e//8) + 8*g + e%8 instead, but with one
  uniform scale, where any K order shared by A and B gives the same result.
  FP6/BF6 pack like FP4 (one contiguous run of 32 K per lane group), not like FP8: FlyDSL's
  mxfp4_preshuffle a6w4 GEMM (AMD-validated on MI355X) loads for lane group g the 32 packed
  FP6 values of K = 32g..32g+31 into the 6 operand dwords, and run through this emulator it
  matches its reference exactly only with this rule (5 configurations, ~108k outputs; the
  FP8-like split gives cosine 0.22). That was 16x16x128 with cbsz=2 (E2M3); BF6 (cbsz/blgp=3)
  shares the packing. For 32x32x64 the FP6/BF6 rule is inferred by analogy with FP4 (which is
  contiguous in both shapes), not checked against hardware-validated code.
- cbsz/abid/blgp of the bf16/f16 forms broadcast A / permute B lanes (broadcast_lanes); on
  the f8f6f4 forms cbsz/blgp select the operand formats instead.
- Scales: one E8M0 byte per lane and operand. The scale of A's (row r, K-block kb) is held by
  lane r + M*kb (kb = K // 32: 4 blocks for 16x16x128, 2 for 32x32x64); B likewise with the
  column.
- C/D: 16x16: element i of lane l is (row 4*(l//16) + i, col l%16);
       32x32: element i of lane l is (row 8*(i//4) + 4*(l//32) + i%4, col l%32).

Arithmetic: the products and sums are done in float64 and D = C + sum_k A*B is rounded once to
f32; scales multiply each 32-element block. With narrow-format inputs this is exact unless the
terms span more than 2^53 (hardware accumulates with its own internal precision and order, so
only exactly representable sums compare bit-for-bit). MFMA ignores EXEC (all 64 lanes take
part and are written).
"""
from functools import lru_cache

import numpy as np

from .numerics import F8F6F4, FP4, FP6, BF6, MiniFloat, bf16_to_f32, dwords_to_bytes, \
    e8m0_to_f64, fp4_unpack, fp6_unpack, f16_to_f32

LANES = 64
LANE = np.arange(LANES)


@lru_cache(maxsize=None)
def acc_index(m: int) -> np.ndarray:
    """Flat index row*m + col of every accumulator element, [m*m/64, 64]."""
    d = m * m // LANES
    i = np.arange(d)[:, None]
    if m == 16:
        row = 4 * (LANE // 16)[None, :] + i
    elif m == 32:
        row = 8 * (i // 4) + 4 * (LANE // 32)[None, :] + i % 4
    else:
        raise ValueError(f"no accumulator layout for M={m}")
    return row * m + (LANE % m)[None, :]


@lru_cache(maxsize=None)
def dense_gather(m: int, k: int) -> np.ndarray:
    """For an A (m x k, row-major) of a bf16/f16 MFMA: index into the lane-element array
    [64, KL] (lane-major, flattened) of every matrix element. B uses the same index for
    its transpose (n x k)."""
    kl = k * m // LANES
    lane = LANE[:, None]
    j = np.arange(kl)[None, :]
    flat = (lane % m) * k + kl * (lane // m) + j        # matrix position of (lane, j)
    inv = np.empty(m * k, dtype=np.intp)
    inv[flat.ravel()] = np.arange(LANES * kl)
    return inv


@lru_cache(maxsize=None)
def f8f6f4_gather(m: int, fmt_name: str) -> np.ndarray:
    """Like dense_gather for the f8f6f4 operands: [m*k] indices into the [64, 32] elements."""
    k = 128 if m == 16 else 64
    lane = LANE[:, None]
    e = np.arange(32)[None, :]
    g = lane // m
    if fmt_name in (FP4.name, FP6.name, BF6.name):
        kk = 32 * g + e
    else:
        kk = (e // 16) * (k // 2) + 16 * g + e % 16
    flat = (lane % m) * k + kk
    inv = np.empty(m * k, dtype=np.intp)
    inv[flat.ravel()] = np.arange(LANES * 32)
    return inv


def _reg_index(inv: np.ndarray, per_lane: int, unit: int) -> np.ndarray:
    """Turn a gather over lane-major elements (lane * per_lane + element) into an index over
    the operand registers themselves: regs [d, 64] viewed as `unit`-byte items and raveled, so
    element e of lane l (item e of the lane's little-endian string) is at
    (e // n) * 64 * n + l * n + e % n with n = 4 // unit items per dword."""
    lane, e = inv // per_lane, inv % per_lane
    n = 4 // unit
    return (e // n) * (LANES * n) + lane * n + e % n


@lru_cache(maxsize=None)
def _f8_index(m: int, fmt_name: str) -> np.ndarray:
    """FP8/BF8: byte index (see _reg_index) of every (row, K) entry, [m, K]."""
    inv = f8f6f4_gather(m, fmt_name)
    return _reg_index(inv, 32, 1).reshape(m, -1)


@lru_cache(maxsize=None)
def _fp4_index(m: int) -> np.ndarray:
    """FP4: byte index of every (row, K pair) entry, [m, K/2]; entry (r, 2i) is the low nibble
    and (r, 2i + 1) the high nibble of byte (r, i) (K runs contiguously through a lane)."""
    inv = f8f6f4_gather(m, FP4.name).reshape(m, -1)[:, 0::2]
    byte_inv = (inv // 32) * 16 + (inv % 32) // 2
    return _reg_index(byte_inv.ravel(), 16, 1).reshape(m, -1)


@lru_cache(maxsize=None)
def _dense_index(m: int, k: int) -> np.ndarray:
    """bf16/f16: 16-bit item index (see _reg_index) of every (row, K) entry, [m, K]."""
    return _reg_index(dense_gather(m, k), k * m // LANES, 2).reshape(m, k)


@lru_cache(maxsize=None)
def _acc_gather(m: int) -> np.ndarray:
    """Position in the raveled accumulator registers [d, 64] of every (row, col), [m*m]."""
    inv = np.empty(m * m, dtype=np.intp)
    inv[acc_index(m).ravel()] = np.arange(m * m)
    return inv


def operand_dwords(fmt: MiniFloat) -> int:
    """Registers one f8f6f4 operand occupies for its format."""
    return 4 if fmt is FP4 else 6 if fmt in (FP6, BF6) else 8


def _items(regs: np.ndarray, dtype) -> np.ndarray:
    """Register rows [d, 64] as one flat array of `dtype` items (dword-major, then lane)."""
    return np.ascontiguousarray(regs, dtype=np.uint32).view(dtype).ravel()


def _acc_in(c_regs: np.ndarray, m: int) -> np.ndarray:
    """Accumulator registers -> the (m x m) f32 matrix C."""
    return _items(c_regs, np.float32).take(_acc_gather(m)).reshape(m, m)


def _acc_out(d: np.ndarray, m: int) -> np.ndarray:
    return np.take(d.astype(np.float32), acc_index(m)).view(np.uint32)


@lru_cache(maxsize=None)
def broadcast_lanes(cbsz: int, abid: int, blgp: int):
    """Source lane of every lane for A (cbsz/abid) and B (blgp) of the non-f8f6f4 MFMAs.

    cbsz/abid: lane block `abid` of size 64 >> cbsz is broadcast to all blocks of A.
    blgp (B lane group pattern): 0 identity, 1/2 broadcast lanes 0-31 / 32-63 to both halves,
    3 rotate by 16 (lane l reads l+16), 4..7 broadcast lane group 0..3 (16 lanes) to all.
    (The ISA's MFMA broadcast fields; docs/emulator.md#sources.)
    """
    if cbsz > 6 or abid >= (1 << cbsz) or blgp > 7:
        raise NotImplementedError(f"MFMA broadcast cbsz:{cbsz} abid:{abid} blgp:{blgp} is not defined")
    size = LANES >> cbsz
    a = LANE % size + size * abid
    if blgp == 0:
        b = LANE
    elif blgp in (1, 2):
        b = LANE % 32 + 32 * (blgp - 1)
    elif blgp == 3:
        b = (LANE + 16) % LANES
    else:
        b = LANE % 16 + 16 * (blgp - 4)
    return a, b


def mfma_dense(a_regs, b_regs, c_regs, m: int, k: int, elem: str,
               cbsz: int = 0, abid: int = 0, blgp: int = 0) -> np.ndarray:
    """D = C + A @ B for v_mfma_f32_{m}x{m}x{k}_{elem}, elem 'bf16' or 'f16'."""
    table = _half_table(elem)
    kl = k * m // LANES
    if cbsz or blgp:
        lane_a, lane_b = broadcast_lanes(cbsz, abid, blgp)
        a_regs, b_regs = a_regs[:, lane_a], b_regs[:, lane_b]
    idx = _dense_index(m, k)
    a = table.take(_items(a_regs[:kl // 2], np.uint16).take(idx))
    bt = table.take(_items(b_regs[:kl // 2], np.uint16).take(idx))
    d = a @ bt.T
    d += _acc_in(c_regs, m)
    return _acc_out(d, m)


@lru_cache(maxsize=None)
def _dense8_index(m: int, k: int) -> np.ndarray:
    """8-bit dense MFMAs: byte index (see _reg_index) of every (row, K) entry, [m, K]."""
    return _reg_index(dense_gather(m, k), k * m // LANES, 1).reshape(m, k)


def mfma_dense_f8(a_regs, b_regs, c_regs, m: int, k: int, fmt_a: MiniFloat, fmt_b: MiniFloat,
                  cbsz: int = 0, abid: int = 0, blgp: int = 0) -> np.ndarray:
    """D = C + A @ B for v_mfma_f32_{m}x{m}x{k}_{fp8,bf8}_{fp8,bf8} (A in fmt_a, B in fmt_b)."""
    if cbsz or blgp:
        lane_a, lane_b = broadcast_lanes(cbsz, abid, blgp)
        a_regs, b_regs = a_regs[:, lane_a], b_regs[:, lane_b]
    idx = _dense8_index(m, k)
    a = fmt_a.table.take(_items(a_regs[:2], np.uint8).take(idx))
    bt = fmt_b.table.take(_items(b_regs[:2], np.uint8).take(idx))
    d = a @ bt.T
    d += _acc_in(c_regs, m)
    return _acc_out(d, m)


@lru_cache(maxsize=None)
def _half_table(elem: str) -> np.ndarray:
    """Every 16-bit bf16 / f16 pattern's value as float64 (exact)."""
    codes = np.arange(1 << 16, dtype=np.uint32)
    with np.errstate(invalid="ignore"):          # signalling-NaN patterns
        return (bf16_to_f32 if elem == "bf16" else f16_to_f32)(codes).astype(np.float64)


# value of the low and the high FP4 nibble of every byte
_FP4_PAIRS = FP4.decode64(fp4_unpack(np.arange(256, dtype=np.uint8)[:, None]))


@lru_cache(maxsize=None)
def _scaled_table(fmt_name: str) -> np.ndarray:
    """Value of every (E8M0 scale, byte) pair, indexed by scale << 8 | byte: FP8/BF8 [65536],
    FP4 [65536, 2] (low, high nibble). Exact: a power of two times a narrow value."""
    fmt = next(f for f in F8F6F4.values() if f.name == fmt_name)
    vals = _FP4_PAIRS if fmt is FP4 else fmt.table
    scales = e8m0_to_f64(np.arange(256))
    with np.errstate(invalid="ignore"):           # the NaN scale (0xFF) times 0
        return (scales.reshape((256,) + (1,) * vals.ndim) * vals).reshape((1 << 16,) + vals.shape[1:])


def _f8f6f4_values(regs, m: int, fmt: MiniFloat, scale=None) -> np.ndarray:
    """Operand registers -> the (m x K) matrix of values (row = A row / B column), times the
    per-lane E8M0 `scale` bytes [64] when given (row r, K-block kb uses lane r + m*kb)."""
    regs = regs[:operand_dwords(fmt)]
    k = 128 if m == 16 else 64
    nb = k // 32
    if fmt in (FP6, BF6):
        vals = np.take(fmt.decode64(fp6_unpack(dwords_to_bytes(regs))),
                       f8f6f4_gather(m, fmt.name)).reshape(m, k)
        if scale is not None:
            vals.reshape(m, nb, 32)[...] *= e8m0_to_f64(scale).reshape(nb, m).T[:, :, None]
        return vals
    byts = _items(regs, np.uint8).take(_fp4_index(m) if fmt is FP4 else _f8_index(m, fmt.name))
    if scale is None:
        key = byts.astype(np.intp) | (127 << 8)               # E8M0 127 = 1.0
    else:
        sc = (np.asarray(scale).astype(np.intp) & 0xFF) << 8
        key = sc.take(_scale_lane(m, fmt is FP4)) | byts
    return _scaled_table(fmt.name).take(key, axis=0).reshape(m, k)


@lru_cache(maxsize=None)
def _scale_lane(m: int, pairs: bool) -> np.ndarray:
    """Lane holding the E8M0 scale of each entry of the operand byte matrix ([m, K] one byte per
    element, or [m, K/2] FP4 byte pairs): row r, K-block kb -> lane r + m*kb."""
    per = (128 if m == 16 else 64) // (2 if pairs else 1)
    r, col = np.divmod(np.arange(m * per), per)
    return (r + m * (col // (16 if pairs else 32))).reshape(m, per)


def scale_bytes(scale_reg: np.ndarray, byte: int) -> np.ndarray:
    """Per-lane E8M0 scale: byte `byte` (0..3, from op_sel/op_sel_hi) of a uint32 [64] register."""
    return (np.asarray(scale_reg, dtype=np.uint32) >> np.uint32(8 * byte)) & np.uint32(0xFF)


def mfma_f8f6f4(a_regs, b_regs, c_regs, m: int, cbsz: int, blgp: int,
                scale_a=None, scale_b=None) -> np.ndarray:
    """D = C + (A * scaleA) @ (B * scaleB) for v_mfma[_scale]_f32_{16x16x128,32x32x64}_f8f6f4.

    cbsz / blgp select A / B's format (0 FP8 E4M3, 1 BF8 E5M2, 2 FP6 E2M3, 3 BF6 E3M2, 4 FP4).
    scale_a / scale_b: the per-lane E8M0 bytes [64] already selected by op_sel, or None for
    the unscaled instruction (scale 1.0).
    """
    try:
        fa, fb = F8F6F4[cbsz], F8F6F4[blgp]
    except KeyError:
        raise NotImplementedError(f"f8f6f4 MFMA format cbsz:{cbsz} blgp:{blgp} is not defined")
    a = _f8f6f4_values(a_regs, m, fa, scale_a)
    bt = _f8f6f4_values(b_regs, m, fb, scale_b)
    d = a @ bt.T
    d += _acc_in(c_regs, m)
    return _acc_out(d, m)
