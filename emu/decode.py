"""Decode gfx950 (GFX9 / CDNA3+ encodings) machine code into `instr.Instr` values.

What each opcode is called and which fields llvm prints comes from isa/gfx950/opcodes.py (generated from
llvm-mc, see tools/gen_opcodes.py); the bit layouts, operand kinds and modifier spelling are here. Text is
produced the way `llvm-objdump-22 -d --mcpu=gfx950` prints it, which is the test oracle.

Operands (isa.Operand):
  - registers: kind 'sgpr'/'vgpr'/'agpr'/'ttmp' with `count` dwords; named ones are 'special'.
  - inline constants: kind 'const'. `value` is the integer constant, or the IEEE pattern of the
    float constant: 32-bit for 1-dword operands, 64-bit (double) for 2-dword operands; `name` is
    llvm's spelling. 16-bit / packed operations reinterpret from `name` (the executor's job).
  - literals: kind 'literal', `value` the raw 32-bit dword that followed the instruction.
  - branch targets: kind 'label', `value` the absolute target address (same address space as
    Instr.addr: the ELF virtual address llvm-objdump prints); the text keeps llvm's raw 16-bit
    dword offset, printed unsigned as llvm-objdump does.

Destinations vs sources: `dst` holds the operands an instruction writes as printed first by llvm;
operands that are both read and written keep their printed place only (v_permlane*_swap both,
v_fmac/v_mac's vdst also accumulator, s_*_saveexec's exec is implicit, MFMA C is src[2]).
Atomics that return (glc/sc0 set) have the returned register in `dst`.

`mods` keys (only those present in the encoding are set):
  all: 'suffix' ('e32', 'e64', 'dpp', 'sdwa' or '')
  SOPP/SOPK: 'simm16' (raw 16 bits); s_waitcnt: 'vmcnt', 'expcnt', 'lgkmcnt'
  SMEM: 'offset' (bytes, signed), 'soffset' (Operand or None), 'glc', 'nv'
  VOP3: 'abs', 'neg' (3-bit masks, bit i = src i), 'clamp', 'omod' (0..3), 'op_sel' (4-bit mask,
        bit 3 = dst); v_bitop3_*: 'bitop3' (the 8-bit truth table; abs/neg/omod are then 0)
  VOP3P: 'op_sel', 'op_sel_hi', 'neg_lo', 'neg_hi' (3-bit masks), 'clamp'
  MAI (MFMA, v_accvgpr_*): 'cbsz', 'abid', 'blgp', 'acc_cd'; v_mfma_scale_*: plus 'scale_op_sel',
        'scale_op_sel_hi' (3-bit masks as llvm prints them: bit0 = scale A, bit1 = scale B),
        'scale_a_byte' / 'scale_b_byte' (0..3: which byte of the scale register holds the E8M0 scale,
        = op_sel_hi bit * 2 + op_sel bit) and src = (A, B, C, scale A, scale B); A/B widths follow
        cbsz/blgp (8 regs FP8/BF8, 6 FP6/BF6, 4 FP4)
  DPP: mods['dpp'] = {'ctrl', 'row_mask', 'bank_mask', 'bound_ctrl', 'fi'}, plus 'abs'/'neg' masks
  SDWA: mods['sdwa'] = {'dst_sel', 'dst_unused', 'src0_sel', 'src1_sel', 'src0_sext', 'src1_sext',
        'clamp', 'omod'} plus 'abs'/'neg'; sels are 0..6 = BYTE_0..3, WORD_0, WORD_1, DWORD
  MUBUF: 'offset', 'offen', 'idxen', 'sc0', 'sc1', 'nt', 'lds'
  FLAT/GLOBAL/SCRATCH: 'offset' (signed for GLOBAL/SCRATCH), 'sc0', 'sc1', 'nt', 'lds', 'sve'
  DS: 'offset' (16-bit) or 'offset0'/'offset1' (the two-address forms), 'gds'
"""
import re
import struct

from .instr import Instr, Operand
from . import isa

# The architecture whose encodings this decoder reads, and its tables.
ISA_ARCH = isa.ARCH
_ISA = isa.load(ISA_ARCH)
OPCODES, VOP3_OP_SEL = _ISA.opcodes, _ISA.vop3_op_sel


class DecodeError(ValueError):
    pass


# --- operand fields ------------------------------------------------------------------------------

_SPECIAL_PAIRS = {102: "flat_scratch", 104: "xnack_mask", 106: "vcc", 126: "exec"}
_SPECIAL_ONE = {102: "flat_scratch_lo", 103: "flat_scratch_hi", 104: "xnack_mask_lo",
                105: "xnack_mask_hi", 106: "vcc_lo", 107: "vcc_hi", 124: "m0", 126: "exec_lo",
                127: "exec_hi", 125: "null", 235: "src_shared_base", 236: "src_shared_limit",
                237: "src_private_base", 238: "src_private_limit", 239: "src_pops_exiting_wave_id",
                251: "src_vccz", 252: "src_execz", 253: "src_scc", 254: "src_lds_direct"}
_FLOAT_CONSTS = {240: 0.5, 241: -0.5, 242: 1.0, 243: -1.0, 244: 2.0, 245: -2.0, 246: 4.0, 247: -4.0}
_INV_2PI_F32 = 0x3E22F983
_INV_2PI_F64 = 0x3FC45F306DC9C882
LITERAL = 255
SDWA_SRC = 249
DPP_SRC = 250


def _reg_range(prefix, first, count):
    return f"{prefix}{first}" if count == 1 else f"{prefix}[{first}:{first + count - 1}]"


def reg_operand(code, count=1):
    """Operand for a 9-bit source / 7-bit scalar register code, without literal handling."""
    if code >= 256:
        n = code - 256
        return Operand("vgpr", n, count, name=_reg_range("v", n, count))
    if count > 1 and (code <= 101 or 108 <= code <= 123):
        code &= ~(1 if count == 2 else 3)       # tuples are aligned; llvm reads the bits that way
    if code <= 101:
        return Operand("sgpr", code, count, name=_reg_range("s", code, count))
    if 108 <= code <= 123:
        n = code - 108
        return Operand("ttmp", n, count, name=_reg_range("ttmp", n, count))
    if count == 2 and code in _SPECIAL_PAIRS:
        return Operand("special", code, 2, name=_SPECIAL_PAIRS[code])
    if code in _SPECIAL_ONE:
        return Operand("special", code, count, name=_SPECIAL_ONE[code])
    if 128 <= code <= 208:
        v = code - 128 if code <= 192 else 192 - code
        mask = (1 << (32 * count)) - 1
        return Operand("const", code, count, value=v & mask, name=str(v))
    if code in _FLOAT_CONSTS:
        f = _FLOAT_CONSTS[code]
        bits = struct.unpack("<Q", struct.pack("<d", f))[0] if count == 2 else \
            struct.unpack("<I", struct.pack("<f", f))[0]
        return Operand("const", code, count, value=bits, name=repr(f))
    if code == 248:
        if count == 2:
            return Operand("const", code, 2, value=_INV_2PI_F64, name="0.15915494309189532")
        return Operand("const", code, count, value=_INV_2PI_F32, name="0.15915494")
    raise DecodeError(f"unknown operand code {code}")


def vgpr(n, count=1, acc=False):
    if acc:
        return Operand("agpr", n, count, name=_reg_range("a", n, count))
    return Operand("vgpr", n, count, name=_reg_range("v", n, count))


def sgpr(n, count=1):
    return reg_operand(n, count)


def _literal(value, count=1):
    return Operand("literal", 0, count, value=value, name=f"0x{value:x}")


def _fmt_src(op, neg=False, ab=False, sext=False):
    s = op.name
    if ab:
        s = f"|{s}|"
    if neg:
        s = f"-{s}"
    if sext:
        s = f"sext({s})"
    return s


def _mask(bits, n):
    return "[" + ",".join(str((bits >> i) & 1) for i in range(n)) + "]"


# --- the decoder ----------------------------------------------------------------------------------

class _Reader:
    """Holds the code bytes and the literal dword an instruction may consume."""

    def __init__(self, code, pos, size):
        self.code, self.pos, self.size = code, pos, size
        self.literal = None

    def dword(self, i):
        off = self.pos + 4 * i
        if off + 4 > len(self.code):
            raise DecodeError(f"instruction at +0x{self.pos:x} runs past the end of the code")
        return struct.unpack_from("<I", self.code, off)[0]

    def src(self, code, count=1):
        if code == LITERAL:
            if self.literal is None:
                self.literal = self.dword(self.size // 4)
            return _literal(self.literal, count)
        return reg_operand(code, count)

    def total(self):
        return self.size + (4 if self.literal is not None else 0)


def _layout(enc, op):
    table = OPCODES.get(enc)
    entry = table.get(op) if table else None
    if entry is None:
        raise DecodeError(f"unknown {enc} opcode 0x{op:x}")
    mnem, lay = entry
    items = []
    for tok in lay.split():
        is_dst = tok.startswith(">")
        tok = tok.lstrip(">")
        name, _, width = tok.partition(":")
        scalar = width.startswith("s")
        items.append((is_dst, name, int(width.lstrip("s")) if width else 0, scalar))
    return mnem, items


def _build(addr, enc, mnem, r, dst, src, mods, text_ops, tail=""):
    suffix = ""
    m = re.search(r"_(e32|e64|dpp|sdwa)$", mnem)
    op = mnem
    if m:
        suffix = m.group(1)
        op = mnem[:m.start()]
    mods["suffix"] = suffix
    text = mnem + (" " + ", ".join(text_ops) if text_ops else "") + tail
    return Instr(addr=addr, size=r.total(), enc=enc, op=op, dst=tuple(dst), src=tuple(src),
                 mods=mods, text=text)


def decode_one(code, pos, addr=None):
    """Decode the instruction at byte offset `pos` of `code`; `addr` is its .text address."""
    if addr is None:
        addr = pos
    w = struct.unpack_from("<I", code, pos)[0]
    top = w >> 25
    if top == 0b0111111:
        return _vop1(code, pos, addr, w)
    if top == 0b0111110:
        return _vopc(code, pos, addr, w)
    if w >> 31 == 0:
        return _vop2(code, pos, addr, w)
    if w >> 30 == 0b10:
        sub = w >> 23
        if sub == 0b101111101:
            return _sop1(code, pos, addr, w)
        if sub == 0b101111110:
            return _sopc(code, pos, addr, w)
        if sub == 0b101111111:
            return _sopp(code, pos, addr, w)
        if w >> 28 == 0b1011:
            return _sopk(code, pos, addr, w)
        return _sop2(code, pos, addr, w)
    six = w >> 26
    if six == 0b110000:
        return _smem(code, pos, addr, w)
    if six == 0b110100:
        if (w >> 23) & 0x7 == 0b111:
            return _vop3p(code, pos, addr, w)
        return _vop3(code, pos, addr, w)
    if six == 0b111000:
        return _mubuf(code, pos, addr, w)
    if six == 0b110111:
        return _flat(code, pos, addr, w)
    if six == 0b110110:
        return _ds(code, pos, addr, w)
    raise DecodeError(f"unsupported encoding 0x{w:08x} at 0x{addr:x}")


# --- scalar ---------------------------------------------------------------------------------------

def _scalar_generic(enc, code, pos, addr, w, op, fields):
    r = _Reader(code, pos, 4)
    mnem, items = _layout(enc, op)
    dst, src, text = [], [], []
    for is_dst, name, width, _ in items:
        if name in fields:
            o = r.src(fields[name], width) if name.startswith("ssrc") else sgpr(fields[name], width)
        elif mnem == "s_set_gpr_idx_on":          # ssrc1 is the raw 8-bit mode mask
            o = Operand("const", value=fields["ssrc1"], name=f"0x{fields['ssrc1']:x}")
        else:
            raise DecodeError(f"{mnem}: unexpected operand {name}")
        (dst if is_dst else src).append(o)
        text.append(o.name)
    return _build(addr, enc, mnem, r, dst, src, {}, text)


def _sop2(code, pos, addr, w):
    return _scalar_generic("SOP2", code, pos, addr, w, (w >> 23) & 0x7F,
                           {"sdst": (w >> 16) & 0x7F, "ssrc0": w & 0xFF, "ssrc1": (w >> 8) & 0xFF})


def _sop1(code, pos, addr, w):
    return _scalar_generic("SOP1", code, pos, addr, w, (w >> 8) & 0xFF,
                           {"sdst": (w >> 16) & 0x7F, "ssrc0": w & 0xFF})


def _sopc(code, pos, addr, w):
    return _scalar_generic("SOPC", code, pos, addr, w, (w >> 16) & 0x7F,
                           {"ssrc0": w & 0xFF, "ssrc1": (w >> 8) & 0xFF})


_HWREG = {1: "HW_REG_MODE", 2: "HW_REG_STATUS", 3: "HW_REG_TRAPSTS", 4: "HW_REG_HW_ID",
          5: "HW_REG_GPR_ALLOC", 6: "HW_REG_LDS_ALLOC", 7: "HW_REG_IB_STS", 15: "HW_REG_SH_MEM_BASES",
          16: "HW_REG_TBA_LO", 17: "HW_REG_TBA_HI", 18: "HW_REG_TMA_LO", 19: "HW_REG_TMA_HI",
          20: "HW_REG_XCC_ID", 21: "HW_REG_SQ_PERF_SNAPSHOT_DATA", 22: "HW_REG_SQ_PERF_SNAPSHOT_DATA1",
          23: "HW_REG_SQ_PERF_SNAPSHOT_PC_LO", 24: "HW_REG_SQ_PERF_SNAPSHOT_PC_HI"}


def _hwreg(simm):
    reg, off, size = simm & 0x3F, (simm >> 6) & 0x1F, ((simm >> 11) & 0x1F) + 1
    name = _HWREG.get(reg, str(reg))
    return f"hwreg({name})" if off == 0 and size == 32 else f"hwreg({name}, {off}, {size})"


def _sopk(code, pos, addr, w):
    op = (w >> 23) & 0x1F
    simm = w & 0xFFFF
    r = _Reader(code, pos, 4)
    mnem, items = _layout("SOPK", op)
    mods = {"simm16": simm}
    dst, src, text = [], [], []
    for is_dst, name, width, _ in items:
        if name == "sdst":
            o = sgpr((w >> 16) & 0x7F, width)
            (dst if is_dst else src).append(o)
            text.append(o.name)
        elif name == "imm":
            if mnem in ("s_call_b64", "s_cbranch_i_fork"):
                rel = simm - 0x10000 if simm & 0x8000 else simm
                src.append(Operand("label", value=addr + 4 + 4 * rel))
                text.append(str(simm))
            else:
                src.append(Operand("const", value=simm, name=f"0x{simm:x}"))
                text.append(f"0x{simm:x}")
        elif name == "hwreg":
            text.append(_hwreg(simm))
        elif name == "lit":
            lit = r.src(LITERAL)
            src.append(lit)
            text.append(lit.name)
    return _build(addr, "SOPK", mnem, r, dst, src, mods, text)


_GPR_IDX = ("SRC0", "SRC1", "SRC2", "DST")
_MSG = {1: "MSG_INTERRUPT", 2: "MSG_GS", 3: "MSG_GS_DONE", 4: "MSG_SAVEWAVE", 5: "MSG_STALL_WAVE_GEN",
        6: "MSG_HALT_WAVES", 7: "MSG_ORDERED_PS_DONE", 8: "MSG_EARLY_PRIM_DEALLOC", 9: "MSG_GS_ALLOC_REQ",
        10: "MSG_GET_DOORBELL", 15: "MSG_SYSMSG"}


def _sopp(code, pos, addr, w):
    op = (w >> 16) & 0x7F
    simm = w & 0xFFFF
    r = _Reader(code, pos, 4)
    mnem, items = _layout("SOPP", op)
    mods = {"simm16": simm}
    src, text = [], []
    if mnem == "s_waitcnt":
        vm = (simm & 0xF) | ((simm >> 14) & 0x3) << 4
        exp = (simm >> 4) & 0x7
        lgkm = (simm >> 8) & 0xF
        mods.update(vmcnt=vm, expcnt=exp, lgkmcnt=lgkm)
        parts = [f"{n}({v})" for n, v, mx in (("vmcnt", vm, 63), ("expcnt", exp, 7), ("lgkmcnt", lgkm, 15))
                 if v != mx]
        text.append(" ".join(parts) if parts else "0")
    elif mnem.startswith(("s_branch", "s_cbranch")):
        rel = simm - 0x10000 if simm & 0x8000 else simm
        src.append(Operand("label", value=addr + 4 + 4 * rel))
        text.append(str(simm))          # llvm-objdump prints the raw 16 bits, unsigned
    elif mnem.startswith("s_sendmsg"):
        msg, opn, stream = simm & 0xF, (simm >> 4) & 0x7, (simm >> 8) & 0x3
        if simm >> 10:
            text.append(str(simm))
        elif msg in _MSG and not opn and not stream:
            text.append(f"sendmsg({_MSG[msg]})")
        else:
            text.append(f"sendmsg({msg}, {opn}, {stream})")
    elif mnem == "s_set_gpr_idx_mode":
        if simm >> 4:
            text.append(f"0x{simm:x}")
        else:
            text.append("gpr_idx(" + ",".join(n for i, n in enumerate(_GPR_IDX) if simm >> i & 1) + ")")
    elif items and not (mnem == "s_endpgm" and simm == 0):
        text.append(str(simm) if simm <= 64 else f"0x{simm:x}")
    return _build(addr, "SOPP", mnem, r, [], src, mods, text)


def _smem(code, pos, addr, w):
    op = (w >> 18) & 0xFF
    r = _Reader(code, pos, 8)
    w1 = r.dword(1)
    mnem, items = _layout("SMEM", op)
    imm, soe = (w >> 17) & 1, (w >> 14) & 1
    mods = {"glc": (w >> 16) & 1, "nv": (w >> 15) & 1}
    off = w1 & 0x1FFFFF
    if off & 0x100000:
        off -= 0x200000
    dst, src, text = [], [], []
    for is_dst, name, width, _ in items:
        if name == "sdata":
            o = sgpr((w >> 6) & 0x7F, width)
        elif name == "sbase":
            o = sgpr((w & 0x3F) << 1, width)
        elif name == "imm":
            continue
        elif name.isdigit():          # s_atc_probe*: the sdata field is a 7-bit immediate
            text.append(str((w >> 6) & 0x7F))
            continue
        else:
            o = None
        if o is not None:
            (dst if is_dst else src).append(o)
            text.append(o.name)
    soff = None
    tail = ""
    if imm:
        mods["offset"] = off
        if soe:
            soff = sgpr(w1 >> 25)
            text.append(soff.name)
            tail = f" offset:0x{off & 0x1FFFFF:x}"
        else:
            text.append(f"0x{off & 0x1FFFFF:x}" if off >= 0 else f"-0x{-off:x}")
    else:
        mods["offset"] = 0
        soff = sgpr(w1 & 0x7F)
        text.append(soff.name)
    if soff is not None:
        src.append(soff)
    mods["soffset"] = soff
    if mods["glc"]:
        tail += " glc"
    return _build(addr, "SMEM", mnem, r, dst, src, mods, text, tail)


# --- vector ALU -----------------------------------------------------------------------------------

_SEL = ("BYTE_0", "BYTE_1", "BYTE_2", "BYTE_3", "WORD_0", "WORD_1", "DWORD")
_UNUSED = ("UNUSED_PAD", "UNUSED_SEXT", "UNUSED_PRESERVE")


def _dpp_ctrl(c):
    if c <= 0xFF:
        return "quad_perm:" + _mask_q(c)
    for lo, name in ((0x100, "row_shl"), (0x110, "row_shr"), (0x120, "row_ror")):
        if lo < c <= lo + 0xF:
            return f"{name}:{c - lo}"
    fixed = {0x130: "wave_shl:1", 0x134: "wave_rol:1", 0x138: "wave_shr:1", 0x13C: "wave_ror:1",
             0x140: "row_mirror", 0x141: "row_half_mirror", 0x142: "row_bcast:15", 0x143: "row_bcast:31"}
    if c in fixed:
        return fixed[c]
    if 0x150 <= c <= 0x15F:
        return f"row_newbcast:{c - 0x150}"
    raise DecodeError(f"reserved dpp_ctrl 0x{c:x}")


def _mask_q(c):
    return "[" + ",".join(str((c >> (2 * i)) & 3) for i in range(4)) + "]"


def _vop_e32(enc, code, pos, addr, w, op, fields):
    """VOP1 / VOP2 / VOPC in their 32-bit form, including the DPP and SDWA extensions."""
    src0 = w & 0x1FF
    mnem, items = _layout(enc, op)
    if src0 in (DPP_SRC, SDWA_SRC):
        return _vop_ext(enc, code, pos, addr, w, mnem, items, fields, src0 == DPP_SRC)
    r = _Reader(code, pos, 4)
    dst, src, text = [], [], []
    acc = mnem == "v_accvgpr_mov_b32"             # AGPR to AGPR
    for is_dst, name, width, scalar in items:
        if name == "vdst":
            o = sgpr(fields["vdst"], width) if scalar else vgpr(fields["vdst"], width, acc=acc)
        elif name == "src0":
            o = vgpr(src0 - 256, width, acc=True) if acc and src0 >= 256 else r.src(src0, width)
        elif name == "src1":
            o = vgpr(fields["vsrc1"], width)
        elif name == "vcc":
            o = Operand("special", 106, 2, name="vcc")
        elif name == "lit":
            o = r.src(LITERAL)
        else:
            raise DecodeError(f"{mnem}: unexpected operand {name}")
        (dst if is_dst else src).append(o)
        text.append(o.name)
    return _build(addr, enc, mnem, r, dst, src, {}, text)


def _vop_ext(enc, code, pos, addr, w, mnem, items, fields, is_dpp):
    r = _Reader(code, pos, 8)
    x = r.dword(1)
    base = re.sub(r"_e32$", "", mnem)
    mnem = base + ("_dpp" if is_dpp else "_sdwa")
    mods = {}
    dst, src, text = [], [], []
    if is_dpp:
        neg = ((x >> 20) & 1) | (((x >> 22) & 1) << 1)
        ab = ((x >> 21) & 1) | (((x >> 23) & 1) << 1)
        mods["dpp"] = {"ctrl": (x >> 8) & 0x1FF, "row_mask": (x >> 28) & 0xF,
                       "bank_mask": (x >> 24) & 0xF, "bound_ctrl": (x >> 19) & 1, "fi": (x >> 18) & 1}
        src0 = vgpr(x & 0xFF, next((wd for _, n, wd, _ in items if n == "src0"), 1))
        sext = (0, 0)
        sdst_code = None
    else:
        neg = ((x >> 20) & 1) | (((x >> 28) & 1) << 1)
        ab = ((x >> 21) & 1) | (((x >> 29) & 1) << 1)
        sdwa = {"src0_sel": (x >> 16) & 7, "src0_sext": (x >> 19) & 1,
                "src1_sel": (x >> 24) & 7, "src1_sext": (x >> 27) & 1}
        if enc == "VOPC":
            sdst_code = (x >> 8) & 0x7F if (x >> 15) & 1 else None
        else:
            sdst_code = None
            sdwa.update(dst_sel=(x >> 8) & 7, dst_unused=(x >> 11) & 3, clamp=(x >> 13) & 1,
                        omod=(x >> 14) & 3)
        mods["sdwa"] = sdwa
        src0 = reg_operand((x & 0xFF) + (0 if (x >> 23) & 1 else 256))
        sext = (sdwa["src0_sext"], sdwa["src1_sext"])
    mods["neg"], mods["abs"] = neg, ab
    s1_sgpr = (not is_dpp) and (x >> 31) & 1
    for is_dst, name, width, scalar in items:
        if name == "vdst":
            o = sgpr(fields["vdst"], width) if scalar else vgpr(fields["vdst"], width)
            t = o.name
        elif name == "src0":
            o = src0
            t = _fmt_src(o, neg & 1, ab & 1, sext[0])
        elif name == "src1":
            o = reg_operand(fields["vsrc1"] + (0 if s1_sgpr else 256), width)
            t = _fmt_src(o, neg & 2, ab & 2, sext[1])
        elif name == "vcc":
            o = Operand("special", 106, 2, name="vcc")
            if is_dst and sdst_code is not None:
                o = sgpr(sdst_code, 2)
            t = o.name
        else:
            raise DecodeError(f"{mnem}: unexpected operand {name}")
        (dst if is_dst else src).append(o)
        text.append(t)
    if is_dpp:
        d = mods["dpp"]
        tail = f" {_dpp_ctrl(d['ctrl'])} row_mask:0x{d['row_mask']:x} bank_mask:0x{d['bank_mask']:x}"
        if d["bound_ctrl"]:
            tail += " bound_ctrl:1"
        if d["fi"]:
            tail += " fi:1"
    else:
        s = mods["sdwa"]
        tail = ""
        if enc != "VOPC":
            if s["clamp"]:
                tail += " clamp"
            if s["omod"]:
                tail += " " + ("mul:2", "mul:4", "div:2")[s["omod"] - 1]
            tail += f" dst_sel:{_SEL[s['dst_sel']]} dst_unused:{_UNUSED[s['dst_unused']]}"
        tail += f" src0_sel:{_SEL[s['src0_sel']]}"
        if any(n == "src1" for _, n, _, _ in items):
            tail += f" src1_sel:{_SEL[s['src1_sel']]}"
    return _build(addr, enc, mnem, r, dst, src, mods, text, tail)


def _vop1(code, pos, addr, w):
    return _vop_e32("VOP1", code, pos, addr, w, (w >> 9) & 0xFF, {"vdst": (w >> 17) & 0xFF})


def _vop2(code, pos, addr, w):
    return _vop_e32("VOP2", code, pos, addr, w, (w >> 25) & 0x3F,
                    {"vdst": (w >> 17) & 0xFF, "vsrc1": (w >> 9) & 0xFF})


def _vopc(code, pos, addr, w):
    return _vop_e32("VOPC", code, pos, addr, w, (w >> 17) & 0xFF, {"vsrc1": (w >> 9) & 0xFF})


def _vop3(code, pos, addr, w):
    op = (w >> 16) & 0x3FF
    r = _Reader(code, pos, 8)
    w1 = r.dword(1)
    mnem, items = _layout("VOP3", op)
    codes = {"src0": w1 & 0x1FF, "src1": (w1 >> 9) & 0x1FF, "src2": (w1 >> 18) & 0x1FF}
    has_sdst = any(n == "sdst" for _, n, _, _ in items)
    neg = (w1 >> 29) & 7
    mods = {"neg": neg, "omod": (w1 >> 27) & 3, "clamp": (w >> 15) & 1}
    if has_sdst:
        mods["abs"], mods["op_sel"] = 0, 0
    else:
        mods["abs"], mods["op_sel"] = (w >> 8) & 7, (w >> 11) & 0xF
    if mnem.startswith("v_bitop3_"):
        # the 8-bit truth table reuses the neg (bits 2:0), abs (5:3) and omod (7:6) fields
        mods["bitop3"] = neg | mods["abs"] << 3 | mods["omod"] << 6
        neg = mods["neg"] = mods["abs"] = mods["omod"] = 0
    dst, src, text = [], [], []
    nsrc = 0
    for is_dst, name, width, scalar in items:
        if name == "vdst":
            o = sgpr(w & 0xFF, width) if scalar else vgpr(w & 0xFF, width)
            t = o.name
        elif name == "sdst":
            o = sgpr((w >> 8) & 0x7F, width)
            t = o.name
        elif name in codes:
            i = int(name[3])
            o = r.src(codes[name], width)
            t = _fmt_src(o, (neg >> i) & 1, (mods["abs"] >> i) & 1)
            nsrc += 1
        elif name == "vcc":
            o = Operand("special", 106, 2, name="vcc")
            t = o.name
        else:
            raise DecodeError(f"{mnem}: unexpected operand {name}")
        (dst if is_dst else src).append(o)
        text.append(t)
    tail = ""
    if op not in VOP3_OP_SEL:
        mods["op_sel"] = 0
    if mods["op_sel"]:
        tail += " op_sel:" + _mask(mods["op_sel"] & ((1 << nsrc) - 1) | ((mods["op_sel"] >> 3) & 1) << nsrc,
                                   nsrc + 1)
    if mods["clamp"]:
        tail += " clamp"
    if mods["omod"]:
        tail += " " + ("mul:2", "mul:4", "div:2")[mods["omod"] - 1]
    if mods.get("bitop3"):
        b = mods["bitop3"]
        tail += f" bitop3:{b}" if b <= 10 else f" bitop3:0x{b:x}"
    return _build(addr, "VOP3", mnem, r, dst, src, mods, text, tail)


_F8F6F4 = {0x2D: ("v_mfma_f32_16x16x128_f8f6f4", 4), 0x2E: ("v_mfma_f32_32x32x64_f8f6f4", 16)}
_F8F6F4_REGS = (8, 8, 6, 6, 4)          # A/B registers for cbsz/blgp = fp8, bf8, fp6, bf6, fp4
LD_SCALE_OP = 0x2C


def _vop3p(code, pos, addr, w):
    op = (w >> 16) & 0x7F
    if op == LD_SCALE_OP or op in _F8F6F4:
        return _mfma_f8f6f4(code, pos, addr, w)
    if op >= 0x40 or op in (0x35, 0x36, 0x37, 0x38, 0x39, 0x3A, 0x3B, 0x3C, 0x3D):
        return _mai(code, pos, addr, w, op)
    r = _Reader(code, pos, 8)
    w1 = r.dword(1)
    mnem, items = _layout("VOP3P", op)
    codes = {"src0": w1 & 0x1FF, "src1": (w1 >> 9) & 0x1FF, "src2": (w1 >> 18) & 0x1FF}
    mods = {"op_sel": (w >> 11) & 7, "op_sel_hi": ((w1 >> 27) & 3) | ((w >> 14) & 1) << 2,
            "neg_lo": (w1 >> 29) & 7, "neg_hi": (w >> 8) & 7, "clamp": (w >> 15) & 1}
    dst, src, text = [], [], []
    nsrc = 0
    # v_fma_mix*: neg_lo / neg_hi are the sources' neg / abs modifiers and print as such
    mix = mnem.startswith("v_fma_mix")
    for is_dst, name, width, scalar in items:
        if name == "vdst":
            o = vgpr(w & 0xFF, width)
            t = o.name
        elif name in codes:
            o = r.src(codes[name], width)
            t = _fmt_src(o, mix and mods["neg_lo"] >> nsrc & 1, mix and mods["neg_hi"] >> nsrc & 1)
            nsrc += 1
        else:
            raise DecodeError(f"{mnem}: unexpected operand {name}")
        (dst if is_dst else src).append(o)
        text.append(t)
    full = (1 << nsrc) - 1
    tail = ""
    if mnem.startswith(("v_dot4_", "v_dot8_")):      # no op_sel operands on these
        full = 0
    if mods["op_sel"] & full:
        tail += " op_sel:" + _mask(mods["op_sel"], nsrc)
    if (mods["op_sel_hi"] & full) != (0 if mix else full):
        tail += " op_sel_hi:" + _mask(mods["op_sel_hi"], nsrc)
    if mods["neg_lo"] & full and not mix:
        tail += " neg_lo:" + _mask(mods["neg_lo"], nsrc)
    if mods["neg_hi"] & full and not mix:
        tail += " neg_hi:" + _mask(mods["neg_hi"], nsrc)
    if mods["clamp"]:
        tail += " clamp"
    return _build(addr, "VOP3P", mnem, r, dst, src, mods, text, tail)


def _mai_fields(w, w1):
    return {"acc_cd": (w >> 15) & 1, "abid": (w >> 11) & 0xF, "cbsz": (w >> 8) & 7,
            "blgp": (w1 >> 29) & 7, "acc": (w1 >> 27) & 3}


def _mai(code, pos, addr, w, op):
    r = _Reader(code, pos, 8)
    w1 = r.dword(1)
    mnem, items = _layout("VOP3P", op)
    f = _mai_fields(w, w1)
    mods = {k: f[k] for k in ("acc_cd", "abid", "cbsz", "blgp")}
    dst, src, text = [], [], []
    if mnem.startswith("v_accvgpr_"):
        # read: AGPR -> VGPR; write: VGPR/SGPR/const -> AGPR; mov: AGPR -> AGPR
        vd = vgpr(w & 0xFF, 1, acc=mnem != "v_accvgpr_read_b32")
        s0 = vgpr((w1 & 0x1FF) - 256, 1, acc=True) if mnem != "v_accvgpr_write_b32" else r.src(w1 & 0x1FF)
        return _build(addr, "VOP3P", mnem, r, [vd], [s0], mods, [vd.name, s0.name])
    for is_dst, name, width, scalar in items:
        if name == "vdst":
            o = vgpr(w & 0xFF, width, acc=f["acc_cd"])
        elif name == "src2":
            c = (w1 >> 18) & 0x1FF
            acc = f["acc_cd"] and not mnem.startswith("v_smfmac")   # smfmac's src2 is a VGPR index
            o = vgpr(c - 256, width, acc=acc) if c >= 256 else r.src(c, width)
        else:
            i = int(name[3])
            c = (w1 >> (9 * i)) & 0x1FF
            o = vgpr(c - 256, width, acc=(f["acc"] >> i) & 1) if c >= 256 else r.src(c, width)
        (dst if is_dst else src).append(o)
        text.append(o.name)
    return _build(addr, "VOP3P", mnem, r, dst, src, mods, text, _mai_tail(mods))


def _mai_tail(mods):
    tail = ""
    for k in ("cbsz", "abid", "blgp"):
        if mods[k]:
            tail += f" {k}:{mods[k]}"
    return tail


def _mfma_f8f6f4(code, pos, addr, w):
    """v_mfma_{,scale_}f32_{16x16x128,32x32x64}_f8f6f4; the scaled form is a v_mfma_ld_scale_b32
    prefix (scale A / scale B sources and their op_sel) fused with the MFMA that follows it."""
    scale = None
    start = pos
    op = (w >> 16) & 0x7F
    if op == LD_SCALE_OP:
        p0 = w
        p1 = struct.unpack_from("<I", code, pos + 4)[0]
        w = struct.unpack_from("<I", code, pos + 8)[0]
        op = (w >> 16) & 0x7F
        if w >> 23 != 0b110100111 or op not in _F8F6F4:
            raise DecodeError(f"v_mfma_ld_scale_b32 at 0x{addr:x} not followed by an f8f6f4 MFMA")
        scale = (p0, p1)
        pos += 8
    r = _Reader(code, pos, 8)
    w1 = r.dword(1)
    name, cregs = _F8F6F4[op]
    f = _mai_fields(w, w1)
    mods = {k: f[k] for k in ("acc_cd", "abid", "cbsz", "blgp")}
    a_n, b_n = _F8F6F4_REGS[f["cbsz"]], _F8F6F4_REGS[f["blgp"]]
    vd = vgpr(w & 0xFF, cregs, acc=f["acc_cd"])
    ops = []
    for i, n in ((0, a_n), (1, b_n)):
        c = (w1 >> (9 * i)) & 0x1FF
        ops.append(vgpr(c - 256, n, acc=(f["acc"] >> i) & 1) if c >= 256 else r.src(c, n))
    c2 = (w1 >> 18) & 0x1FF
    ops.append(vgpr(c2 - 256, cregs, acc=f["acc_cd"]) if c2 >= 256 else r.src(c2, cregs))
    tail = ""
    if scale is not None:
        name = name.replace("v_mfma_", "v_mfma_scale_")
        p0, p1 = scale
        ops.append(reg_operand(p1 & 0x1FF))
        ops.append(reg_operand((p1 >> 9) & 0x1FF))
        mods["scale_op_sel"] = (p0 >> 11) & 7
        mods["scale_op_sel_hi"] = ((p1 >> 27) & 3) | ((p0 >> 14) & 1) << 2
        # E8M0 byte of each scale register: op_sel_hi is the high bit of the byte index
        mods["scale_a_byte"] = (mods["scale_op_sel"] & 1) | (mods["scale_op_sel_hi"] & 1) << 1
        mods["scale_b_byte"] = (mods["scale_op_sel"] >> 1 & 1) | (mods["scale_op_sel_hi"] >> 1 & 1) << 1
        if mods["scale_op_sel"]:
            tail += " op_sel:" + _mask(mods["scale_op_sel"], 3)
        if mods["scale_op_sel_hi"] != 7:
            tail += " op_sel_hi:" + _mask(mods["scale_op_sel_hi"], 3)
        # the scaled form always sets bit 11 (abid's low bit); llvm prints no abid for it
        tail += _mai_tail(dict(mods, abid=0))
    else:
        tail += _mai_tail(mods)
    instr = _build(addr, "VOP3P", name, r, [vd], ops, mods, [vd.name] + [o.name for o in ops], tail)
    if scale is None:
        return instr
    return Instr(addr=instr.addr, size=instr.size + (pos - start), enc=instr.enc, op=instr.op,
                 dst=instr.dst, src=instr.src, mods=instr.mods, text=instr.text)


# --- memory ---------------------------------------------------------------------------------------

def _cpol(sc0, sc1, nt):
    return (" sc0" if sc0 else "") + (" nt" if nt else "") + (" sc1" if sc1 else "")


def _mubuf(code, pos, addr, w):
    op = (w >> 18) & 0x7F
    r = _Reader(code, pos, 8)
    w1 = r.dword(1)
    mnem, items = _layout("MUBUF", op)
    mods = {"offset": w & 0xFFF, "offen": (w >> 12) & 1, "idxen": (w >> 13) & 1, "sc0": (w >> 14) & 1,
            "sc1": (w >> 15) & 1, "lds": (w >> 16) & 1, "nt": (w >> 17) & 1}
    acc = (w1 >> 23) & 1
    dst, src, text = [], [], []
    atomic_rtn = "_atomic_" in mnem and mods["sc0"]
    for is_dst, name, width, _ in items:
        if name == "vdata":
            if mods["lds"]:
                continue
            o = vgpr((w1 >> 8) & 0xFF, width, acc=acc)
            if atomic_rtn:
                ret = vgpr((w1 >> 8) & 0xFF, width // 2 if "cmpswap" in mnem else width, acc=acc)
                dst.append(ret)
            t = o.name
        elif name == "vaddr":
            n = mods["offen"] + mods["idxen"]
            if n == 0:
                text.append("off")
                continue
            o = vgpr(w1 & 0xFF, n)
            t = o.name
        elif name == "srsrc":
            o = sgpr(((w1 >> 16) & 0x1F) * 4, 4)
            t = o.name
        elif name == "soffset":
            o = r.src(w1 >> 24)
            t = o.name
        else:
            raise DecodeError(f"{mnem}: unexpected operand {name}")
        (dst if is_dst else src).append(o)
        text.append(t)
    tail = (" idxen" if mods["idxen"] else "") + (" offen" if mods["offen"] else "")
    if mods["offset"]:
        tail += f" offset:{mods['offset']}"
    tail += _cpol(mods["sc0"], mods["sc1"], mods["nt"]) + (" lds" if mods["lds"] else "")
    return _build(addr, "MUBUF", mnem, r, dst, src, mods, text, tail)


def _flat(code, pos, addr, w):
    seg = (w >> 14) & 3
    enc = ("FLAT", "SCRATCH", "GLOBAL", None)[seg]
    if enc is None:
        raise DecodeError(f"reserved FLAT segment at 0x{addr:x}")
    op = (w >> 18) & 0x7F
    r = _Reader(code, pos, 8)
    w1 = r.dword(1)
    mnem, items = _layout(enc, op)
    off = w & 0x1FFF
    if seg and off & 0x1000:
        off -= 0x2000
    mods = {"offset": off, "lds": (w >> 13) & 1 if seg != 1 else 0, "sve": (w >> 13) & 1 if seg == 1 else 0,
            "sc0": (w >> 16) & 1, "nt": (w >> 17) & 1, "sc1": (w >> 25) & 1}
    acc = (w1 >> 23) & 1
    saddr = (w1 >> 16) & 0x7F
    dst, src, text = [], [], []
    data_width = next((wd for _, n, wd, _ in items if n == "data"), 0)
    if "_atomic_" in mnem and mods["sc0"]:
        vd = vgpr(w1 >> 24, data_width // 2 if "cmpswap" in mnem else data_width, acc=acc)
        dst.append(vd)
        text.append(vd.name)
    for is_dst, name, width, _ in items:
        if name == "vdst":
            o = vgpr(w1 >> 24, width, acc=acc)
        elif name == "data":
            o = vgpr((w1 >> 8) & 0xFF, width, acc=acc)
        elif name == "vaddr":
            if seg == 1 and not mods["sve"]:      # scratch uses vaddr only with SVE set
                text.append("off")
                continue
            n = 2 if (seg == 0 or (seg == 2 and saddr == 0x7F)) else 1
            o = vgpr(w1 & 0xFF, n)
        elif name == "off":       # the probe's saddr = off
            if saddr == 0x7F:
                text.append("off")
                continue
            o = sgpr(saddr, 2 if seg == 2 else 1)
        else:
            raise DecodeError(f"{mnem}: unexpected operand {name}")
        (dst if is_dst else src).append(o)
        text.append(o.name)
    tail = f" offset:{off}" if off else ""
    tail += _cpol(mods["sc0"], mods["sc1"], mods["nt"]) + (" lds" if mods["lds"] else "")
    return _build(addr, enc, mnem, r, dst, src, mods, text, tail)


def _swizzle(off):
    """ds_swizzle_b32's offset as llvm spells the pattern it selects."""
    if off & 0xE000 == 0xE000:
        return f"swizzle(FFT,{off & 0x1F})"
    if off & 0xC000 == 0xC000:
        return f"swizzle(ROTATE,{(off >> 10) & 1},{(off >> 5) & 0x1F})"
    if off & 0x8000:
        if off & 0x7F00:
            return str(off)
        return "swizzle(QUAD_PERM," + ",".join(str((off >> (2 * i)) & 3) for i in range(4)) + ")"
    and_m, or_m, xor_m = off & 0x1F, (off >> 5) & 0x1F, (off >> 10) & 0x1F
    if and_m == 0x1F and or_m == 0 and xor_m and not xor_m & (xor_m - 1):
        return f"swizzle(SWAP,{xor_m})"
    if and_m == 0x1F and or_m == 0 and xor_m and not (xor_m + 1) & xor_m:
        return f"swizzle(REVERSE,{xor_m + 1})"
    group = 0x1F - and_m + 1
    if group > 1 and not group & (group - 1) and or_m < group and xor_m == 0:
        return f"swizzle(BROADCAST,{group},{or_m})"
    bits = ""
    for i in range(4, -1, -1):
        a, o, x = and_m >> i & 1, or_m >> i & 1, xor_m >> i & 1
        # each lane-id bit becomes ((id & and) | or) ^ xor: a constant, kept, or inverted
        bits += str(o ^ x) if o or not a else "i" if x else "p"
    return f'swizzle(BITMASK_PERM,"{bits}")'


_DS_TWO_OFFSETS = re.compile(r"^ds_(read|write|wrxchg)2")


def _ds(code, pos, addr, w):
    op = (w >> 17) & 0xFF
    r = _Reader(code, pos, 8)
    w1 = r.dword(1)
    mnem, items = _layout("DS", op)
    acc = (w >> 25) & 1
    mods = {"gds": (w >> 16) & 1}
    dst, src, text = [], [], []
    for is_dst, name, width, _ in items:
        if name == "vdst":
            o = vgpr(w1 >> 24, width, acc=acc)
        elif name == "addr":
            o = vgpr(w1 & 0xFF)
        elif name == "data0":
            o = vgpr((w1 >> 8) & 0xFF, width, acc=acc)
        elif name == "data1":
            o = vgpr((w1 >> 16) & 0xFF, width, acc=acc)
        else:
            raise DecodeError(f"{mnem}: unexpected operand {name}")
        (dst if is_dst else src).append(o)
        text.append(o.name)
    tail = ""
    if _DS_TWO_OFFSETS.match(mnem):
        mods["offset0"], mods["offset1"] = w & 0xFF, (w >> 8) & 0xFF
        if mods["offset0"]:
            tail += f" offset0:{mods['offset0']}"
        if mods["offset1"]:
            tail += f" offset1:{mods['offset1']}"
    else:
        mods["offset"] = w & 0xFFFF
        if mods["offset"]:
            off = _swizzle(mods["offset"]) if mnem == "ds_swizzle_b32" else str(mods["offset"])
            tail += f" offset:{off}"
    if mods["gds"]:
        tail += " gds"
    return _build(addr, "DS", mnem, r, dst, src, mods, text, tail)


# --- whole functions ------------------------------------------------------------------------------

def decode_range(code, start, end, base_addr=0):
    """Decode instructions in code[start:end]; addresses are base_addr + byte offset."""
    out, pos = [], start
    while pos < end:
        ins = decode_one(code, pos, base_addr + pos)
        out.append(ins)
        pos += ins.size
    if pos != end:
        raise DecodeError(f"last instruction at 0x{base_addr + pos - ins.size:x} runs past the end")
    return out
