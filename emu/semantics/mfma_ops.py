"""Matrix instructions: MFMA (bf16/f16 and the f8f6f4 family, scaled or not) and AGPR moves.

Operands arrive as llvm-objdump prints them: `v_mfma_* D, A, B, C` and
`v_mfma_scale_* D, A, B, C, scaleA, scaleB op_sel:[..] op_sel_hi:[..] cbsz:x blgp:y` (the
v_mfma_ld_scale_b32 prefix folded into one line by the decoder, which also supplies
mods['scale_a_byte'] / ['scale_b_byte'] = op_sel_hi bit * 2 + op_sel bit; tests/emu/test_mfma.py
checks that against the intrinsic's opsel (byte index) through llc-22). A scale operand that
is not a VGPR supplies bits [30:23] instead of a byte (hardware behaviour as the LLVM backend
described it before allowing only VGPRs there; docs/emulator.md#assumptions-and-doubts).
MFMAs write all 64 lanes regardless of EXEC; v_accvgpr_* are ordinary VALU moves under EXEC.
"""
import numpy as np

from . import handles, specializes
from .common import fast_src, plain, write_mask
from ..mfma import acc_index, mfma_dense, mfma_dense_f8, mfma_f8f6f4, operand_dwords, scale_bytes
from ..numerics import BF8, F8F6F4, FP8
from ..wave import EmuError, LANES, N_VGPR

_ALL_LANES = np.ones(LANES, dtype=bool)

# mnemonic -> (M, K, element type)
_DENSE = {
    "v_mfma_f32_16x16x32_bf16": (16, 32, "bf16"),
    "v_mfma_f32_32x32x16_bf16": (32, 16, "bf16"),
    "v_mfma_f32_16x16x16_bf16": (16, 16, "bf16"),
    "v_mfma_f32_32x32x8_bf16": (32, 8, "bf16"),
    "v_mfma_f32_16x16x32_f16": (16, 32, "f16"),
    "v_mfma_f32_32x32x16_f16": (32, 16, "f16"),
    "v_mfma_f32_16x16x16_f16": (16, 16, "f16"),
    "v_mfma_f32_32x32x8_f16": (32, 8, "f16"),
}

# mnemonic -> (M, K, A format, B format): the 8-bit forms of the dense layout
_DENSE8 = {f"v_mfma_f32_{m}x{m}x{k}_{a}_{b}": (m, k, {"fp8": FP8, "bf8": BF8}[a], {"fp8": FP8, "bf8": BF8}[b])
           for m, k in ((16, 32), (32, 16)) for a in ("fp8", "bf8") for b in ("fp8", "bf8")}

_F8F6F4 = {
    "v_mfma_f32_16x16x128_f8f6f4": (16, False),
    "v_mfma_f32_32x32x64_f8f6f4": (32, False),
    "v_mfma_scale_f32_16x16x128_f8f6f4": (16, True),
    "v_mfma_scale_f32_32x32x64_f8f6f4": (32, True),
}


def _mod(ins, key) -> int:
    return int(ins.mods.get(key) or 0)


def _reject_neg(ins) -> None:
    # neg/abs on MFMA sources only exist for the f64 forms; refuse rather than ignore them
    for key in ("neg", "neg_hi", "abs"):
        if ins.mods.get(key):
            raise EmuError(f"{ins.op}: modifier {key}={ins.mods[key]!r} is not supported")


@handles(*_DENSE)
def mfma_dense_op(w, ins):
    m, k, elem = _DENSE[ins.op]
    _reject_neg(ins)
    kd = k * m // LANES // 2
    d = acc_index(m).shape[0]
    out = mfma_dense(w.read(ins.src[0], kd), w.read(ins.src[1], kd), w.read(ins.src[2], d),
                     m, k, elem, _mod(ins, "cbsz"), _mod(ins, "abid"), _mod(ins, "blgp"))
    w.write(ins.dst[0], out, _ALL_LANES)


@handles(*_DENSE8)
def mfma_dense8_op(w, ins):
    m, k, fa, fb = _DENSE8[ins.op]
    _reject_neg(ins)
    d = acc_index(m).shape[0]
    out = mfma_dense_f8(w.read(ins.src[0], 2), w.read(ins.src[1], 2), w.read(ins.src[2], d),
                        m, k, fa, fb, _mod(ins, "cbsz"), _mod(ins, "abid"), _mod(ins, "blgp"))
    w.write(ins.dst[0], out, _ALL_LANES)


def _scale(w, op, byte: int) -> np.ndarray:
    v = w.read(op, 1)[0]
    if op.kind in ("vgpr", "agpr"):
        return scale_bytes(v, byte)
    return (v >> np.uint32(23)) & np.uint32(0xFF)


@handles(*_F8F6F4)
def mfma_f8f6f4_op(w, ins):
    m, scaled = _F8F6F4[ins.op]
    _reject_neg(ins)
    cbsz, blgp = _mod(ins, "cbsz"), _mod(ins, "blgp")
    if cbsz not in F8F6F4 or blgp not in F8F6F4:
        raise EmuError(f"{ins.op}: operand format cbsz:{cbsz} blgp:{blgp} is not defined")
    d = acc_index(m).shape[0]
    a = w.read(ins.src[0], operand_dwords(F8F6F4[cbsz]))
    b = w.read(ins.src[1], operand_dwords(F8F6F4[blgp]))
    c = w.read(ins.src[2], d)
    sa = sb = None
    if scaled:
        sa = _scale(w, ins.src[3], _mod(ins, "scale_a_byte"))
        sb = _scale(w, ins.src[4], _mod(ins, "scale_b_byte"))
    w.write(ins.dst[0], mfma_f8f6f4(a, b, c, m, cbsz, blgp, sa, sb), _ALL_LANES)


def _rows(op, n: int):
    """w -> the n register rows of a VGPR/AGPR operand (a view, as Wave.read gives it)."""
    i = op.index
    if op.kind == "vgpr" and i + n <= N_VGPR:
        return lambda w: w.vgpr[i:i + n]
    if op.kind == "agpr":
        return lambda w: w.vgpr[w.agpr_base + i:w.agpr_base + i + n]
    return None


def _dst_rows(op, n: int):
    """(w, values [n, 64]) -> None: all lanes of a VGPR/AGPR destination (MFMAs ignore EXEC)."""
    if op.kind == "vgpr" and op.index + n <= N_VGPR:
        i = op.index

        def put(w, v):
            w.vgpr[i:i + n] = v
        return put
    if op.kind == "agpr":
        i = op.index

        def put(w, v):
            w.vgpr[w.agpr_base + i:w.agpr_base + i + n] = v
        return put
    return None


def _acc_rows(op, d: int):
    """C operand rows: registers, or the inline constant 0 (other constants: general path)."""
    if op.kind in ("const", "literal"):
        if op.value & 0xFFFFFFFF:
            return None
        c = np.zeros((d, LANES), dtype=np.uint32)
        c.flags.writeable = False
        return lambda w: c
    return _rows(op, d)


_MFMA_MODS = ("cbsz", "abid", "blgp", "acc_cd", "op_sel", "op_sel_hi", "scale_op_sel",
              "scale_op_sel_hi", "scale_a_byte", "scale_b_byte")


@specializes(*_DENSE)
def _fast_dense(ins):
    m, k, elem = _DENSE[ins.op]
    if not plain(ins, allowed=_MFMA_MODS):
        return None
    kd, d = k * m // LANES // 2, acc_index(m).shape[0]
    ra, rb, rc = _rows(ins.src[0], kd), _rows(ins.src[1], kd), _acc_rows(ins.src[2], d)
    put = _dst_rows(ins.dst[0], d)
    if None in (ra, rb, rc, put):
        return None
    cbsz, abid, blgp = _mod(ins, "cbsz"), _mod(ins, "abid"), _mod(ins, "blgp")
    return lambda w, ins: put(w, mfma_dense(ra(w), rb(w), rc(w), m, k, elem, cbsz, abid, blgp))


@specializes(*_DENSE8)
def _fast_dense8(ins):
    m, k, fa, fb = _DENSE8[ins.op]
    if not plain(ins, allowed=_MFMA_MODS):
        return None
    d = acc_index(m).shape[0]
    ra, rb, rc = _rows(ins.src[0], 2), _rows(ins.src[1], 2), _acc_rows(ins.src[2], d)
    put = _dst_rows(ins.dst[0], d)
    if None in (ra, rb, rc, put):
        return None
    cbsz, abid, blgp = _mod(ins, "cbsz"), _mod(ins, "abid"), _mod(ins, "blgp")
    return lambda w, ins: put(w, mfma_dense_f8(ra(w), rb(w), rc(w), m, k, fa, fb, cbsz, abid, blgp))


@specializes(*_F8F6F4)
def _fast_f8f6f4(ins):
    m, scaled = _F8F6F4[ins.op]
    cbsz, blgp = _mod(ins, "cbsz"), _mod(ins, "blgp")
    if not plain(ins, allowed=_MFMA_MODS) or cbsz not in F8F6F4 or blgp not in F8F6F4:
        return None
    d = acc_index(m).shape[0]
    ra = _rows(ins.src[0], operand_dwords(F8F6F4[cbsz]))
    rb = _rows(ins.src[1], operand_dwords(F8F6F4[blgp]))
    rc, put = _acc_rows(ins.src[2], d), _dst_rows(ins.dst[0], d)
    if None in (ra, rb, rc, put):
        return None
    if not scaled:
        return lambda w, ins: put(w, mfma_f8f6f4(ra(w), rb(w), rc(w), m, cbsz, blgp))
    sa, sb = fast_src(ins.src[3]), fast_src(ins.src[4])
    if ins.src[3].kind not in ("vgpr", "agpr") or ins.src[4].kind not in ("vgpr", "agpr"):
        return None
    ba, bb = _mod(ins, "scale_a_byte"), _mod(ins, "scale_b_byte")
    return lambda w, ins: put(w, mfma_f8f6f4(ra(w), rb(w), rc(w), m, cbsz, blgp,
                                             scale_bytes(sa(w), ba), scale_bytes(sb(w), bb)))


@handles("v_accvgpr_read_b32", "v_accvgpr_write_b32", "v_accvgpr_mov_b32")
def accvgpr_move(w, ins):
    # read: VGPR <- AGPR; write: AGPR <- VGPR or inline constant; mov: AGPR <- AGPR
    w.write(ins.dst[0], w.read(ins.src[0], 1), write_mask(w, ins))
