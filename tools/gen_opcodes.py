"""Regenerate emu/isa/gfx950/opcodes.py: gfx950 opcode tables probed from llvm-mc.

Developer tool, never imported at run time. For every opcode number of every encoding it builds one
instruction whose register fields hold distinct, recognisable registers, disassembles all of them
with `llvm-mc-22 --disassemble -mcpu=gfx950`, and records the mnemonic plus which fields llvm prints,
in which order and how many dwords wide. The decoder (decode.py) reads fields by name from the
bit layout it knows and formats modifiers itself; the table only says *what* each opcode prints.

Layout strings: space-separated items in printed order; `field:width` for a register/constant
field (`field:sN` means the field holds an SGPR number even in a VGPR-sized field), a bare word
(`vcc`, `off`, ...) for an implicit operand llvm spells out. A leading `>` marks a destination.

    python -m tools.gen_opcodes [--llvm-mc llvm-mc-22]
"""
import argparse
import pathlib
import re
import subprocess
import sys
import tempfile

# Registers planted in the probe fields; each value is unique across one probe so a printed
# register tells which field it came from.
VDST, SRC0, SRC1, SRC2 = 10, 20, 30, 40
SEP = 0xBF8F0003              # s_setprio 3 separates probes in one llvm-mc run
SEP_SOPP = 0x7E000000         # v_nop, separator while probing SOPP itself
LIT = 0x0BADF00D              # literal dword after each probe, for opcodes that take one
SIMM = 0x1D                   # 16-bit immediate / SMEM offset planted in probes

_REG = re.compile(r"^(v|s|a|ttmp)(?:\[(\d+):(\d+)\]|(\d+))$")


def _vsrc(n):
    return 256 + n


def probes():
    """(enc, opcode, variants, fields) per opcode: `variants` are candidate encodings, fullest first
    (llvm rejects memory instructions whose unused register fields are not zero, so fields are
    dropped until one is accepted); `fields` maps a printed register (kind, number) to its field."""
    v = {("v", VDST): "vdst", ("s", VDST): "vdst:s", ("v", SRC0): "src0", ("v", SRC1): "src1",
         ("v", SRC2): "src2", ("s", 0): "sdst", ("a", VDST): "vdst", ("a", SRC0): "src0",
         ("a", SRC1): "src1", ("a", SRC2): "src2"}
    for op in range(128):
        yield "SOP2", op, [[(0b10 << 30) | (op << 23) | (VDST << 16) | (SRC1 << 8) | SRC0]], \
            {("s", VDST): "sdst", ("s", SRC0): "ssrc0", ("s", SRC1): "ssrc1"}
    for op in range(256):
        yield "SOP1", op, [[0xBE800000 | (VDST << 16) | (op << 8) | SRC0]], \
            {("s", VDST): "sdst", ("s", SRC0): "ssrc0"}
    for op in range(0x1D):       # higher SOPK opcodes are the SOP1/SOPC/SOPP prefixes
        yield "SOPK", op, [[0xB0000000 | (op << 23) | (VDST << 16) | SIMM]], {("s", VDST): "sdst"}
    for op in range(128):
        yield "SOPC", op, [[0xBF000000 | (op << 16) | (SRC1 << 8) | SRC0]], \
            {("s", SRC0): "ssrc0", ("s", SRC1): "ssrc1"}
    for op in range(128):
        yield "SOPP", op, [[0xBF800000 | (op << 16) | SIMM], [0xBF800000 | (op << 16)]], {}
    for op in range(256):
        yield "SMEM", op, [[0xC0000000 | (op << 18) | (1 << 17) | (sd << 6) | (sb >> 1), SIMM]
                           for sd, sb in ((16, 32), (0, 32), (16, 0), (0, 0))], \
            {("s", 16): "sdata", ("s", 32): "sbase"}
    for op in range(256):
        yield "VOP1", op, [[0x7E000000 | (VDST << 17) | (op << 9) | _vsrc(SRC0)],
                           [0x7E000000 | (op << 9)]], v
    for op in range(0x3E):       # 0x3E / 0x3F are the VOPC / VOP1 prefixes
        yield "VOP2", op, [[(op << 25) | (VDST << 17) | (SRC1 << 9) | _vsrc(SRC0)]], v
    for op in range(256):
        yield "VOPC", op, [[0x7C000000 | (op << 17) | (SRC1 << 9) | _vsrc(SRC0)]], v
    for op in range(0x380):      # 0x380 and up is the VOP3P prefix
        yield "VOP3", op, [[0xD0000000 | (op << 16) | VDST,
                            (_vsrc(SRC2) << 18) | (_vsrc(SRC1) << 9) | _vsrc(SRC0)]], v
    for op in range(0x380):      # the same with op_sel[0] set: which opcodes print op_sel at all
        yield "VOP3_opsel", op, [[0xD0000000 | (op << 16) | (1 << 11) | VDST,
                                  (_vsrc(SRC2) << 18) | (_vsrc(SRC1) << 9) | _vsrc(SRC0)]], v
    for op in range(128):
        yield "VOP3P", op, [[0xD3800000 | (op << 16) | (1 << 14) | VDST,
                             (3 << 27) | (_vsrc(SRC2) << 18) | (_vsrc(SRC1) << 9) | _vsrc(SRC0)]], v
    mubuf = {("v", VDST): "vdata", ("v", SRC0): "vaddr", ("s", SRC1 - 2): "srsrc", ("s", 50): "soffset"}
    for op in range(128):
        yield "MUBUF", op, [[0xE0000000 | (op << 18) | (1 << 12) | 0x10,
                             (50 << 24) | (((SRC1 - 2) // 4) << 16) | (vd << 8) | SRC0] for vd in (VDST, 0)], mubuf
    flat = {("v", SRC2): "vdst", ("v", VDST): "data", ("v", SRC0): "vaddr"}
    for seg, enc in ((0, "FLAT"), (1, "SCRATCH"), (2, "GLOBAL")):
        for op in range(128):
            # scratch prints vaddr only with SVE (bit 13) set
            yield enc, op, [[0xDC000000 | (op << 18) | (seg << 14) | (0x2000 if seg == 1 else 0) | 0x10,
                             (dst << 24) | ((0x7F if seg else 0) << 16) | (dat << 8) | SRC0]
                            for dst, dat in ((SRC2, VDST), (SRC2, 0), (0, VDST), (0, 0))], flat
    ds = {("v", SRC2): "vdst", ("v", VDST): "data0", ("v", 50): "data1", ("v", SRC0): "addr"}
    for op in range(256):
        yield "DS", op, [[0xD8000000 | (op << 17) | 0x10, (dst << 24) | (d1 << 16) | (d0 << 8) | a]
                         for dst in (SRC2, 0) for d0 in (VDST, 0) for d1 in (50, 0) for a in (SRC0, 0)], ds


def _line(dwords):
    return ",".join(f"0x{b:02x}" for d in dwords for b in d.to_bytes(4, "little"))


def run_llvm_mc(llvm_mc, items):
    """Disassemble all probes; return {(probe index, variant index): text} for those llvm accepts."""
    lines, owner = [], []
    for i, (enc, _, variants, _) in enumerate(items):
        sep = SEP_SOPP if enc == "SOPP" else SEP
        for j, dwords in enumerate(variants):
            lines.append(_line([sep]))
            owner.append(None)
            lines.append(_line(dwords + [LIT]))
            owner.append((i, j))
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(lines) + "\n")
        path = f.name
    r = subprocess.run([llvm_mc, "--disassemble", "-triple=amdgcn-amd-amdhsa", "-mcpu=gfx950", path],
                       capture_output=True, text=True, timeout=600)
    pathlib.Path(path).unlink()
    bad = {int(m.group(1)) - 1 for m in re.finditer(r":(\d+):\d+: warning: invalid instruction", r.stderr)}
    out = [ln.strip() for ln in r.stdout.splitlines() if ln.strip()]
    # Walk the output with the input: a wholly invalid line yields nothing, a valid one its probe
    # first (then whatever its unused trailing bytes decode to); separators mark the boundaries.
    seps = {"s_setprio 3", "v_nop"}
    texts, k = {}, 0
    for lineno, who in enumerate(owner):
        if who is None:
            assert out[k] in seps, out[k]
            k += 1
            continue
        if lineno not in bad:
            texts[who] = out[k]
            k += 1
        while k < len(out) and out[k] not in seps:
            k += 1
    return texts


def _split_operands(rest):
    """Comma-separated operands (parentheses kept together), then trailing space-separated modifiers."""
    parts, depth, cur = [], 0, ""
    for ch in rest:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    if parts:    # modifiers follow the last operand after a space outside parentheses
        depth = 0
        for i, ch in enumerate(parts[-1]):
            depth += ch in "([" and 1 or ch in ")]" and -1 or 0
            if ch == " " and depth == 0:
                parts[-1] = parts[-1][:i]
                break
    return parts


def layout(enc, mnemonic, operands, fields):
    items = []
    for tok in operands:
        m = _REG.match(tok)
        name = None
        if m:
            kind = m.group(1)
            lo = int(m.group(2) if m.group(2) is not None else m.group(4))
            hi = int(m.group(3)) if m.group(3) is not None else lo
            name = fields.get((kind, lo))
            if name is not None:
                width = hi - lo + 1
                if name.endswith(":s"):
                    items.append(f"{name[:-2]}:s{width}")
                else:
                    items.append(f"{name}:{width}")
                continue
        items.append(_placeholder(tok))
    ndst = _dst_count(enc, mnemonic, items)
    return " ".join((">" if i < ndst else "") + it for i, it in enumerate(items))


def _placeholder(tok):
    """Name a non-register operand: the planted immediate or literal, or a formatted field."""
    if re.fullmatch(r"-?(0x[0-9a-f]+|\d+)", tok):
        val = int(tok, 0)
        return {SIMM: "imm", LIT: "lit"}.get(val, tok)
    if "(" in tok:
        return tok.split("(")[0]
    return tok


def _dst_count(enc, mnemonic, items):
    names = [it.split(":")[0] for it in items]
    if not names:
        return 0
    if enc in ("SOP1", "SOP2", "SOPK"):
        if mnemonic.startswith(("s_cmpk_", "s_setreg")) or names[0] != "sdst":
            return 0
        return 1
    if enc in ("SOPC", "SOPP"):
        return 0
    if enc == "SMEM":
        return 1 if names[0] == "sdata" and not re.search(r"store|_wb|inv", mnemonic) else 0
    if enc in ("VOP1", "VOP2", "VOP3", "VOP3P", "VOPC"):
        if enc == "VOPC" or mnemonic.startswith("v_cmp"):
            return 1
        n = 0
        for nm in names:
            if nm in ("vdst", "sdst") or (nm == "vcc" and n == 1):
                n += 1
            else:
                break
        return n
    if enc == "MUBUF":
        return 1 if names[0] == "vdata" and re.search(r"load", mnemonic) else 0
    if enc in ("FLAT", "GLOBAL", "SCRATCH", "DS"):
        return 1 if names[0] == "vdst" else 0
    raise ValueError(enc)


def build(llvm_mc):
    items = list(probes())
    texts = run_llvm_mc(llvm_mc, items)
    tables, opsel = {}, set()
    for i, (enc, op, variants, fields) in enumerate(items):
        text = next((texts[(i, j)] for j in range(len(variants)) if (i, j) in texts), None)
        if text is None:
            continue
        text = re.sub(r"/\*.*?\*/", "", text)
        if enc == "VOP3_opsel":
            if "op_sel:" in text:
                opsel.add(op)
            continue
        mnem, _, rest = text.partition(" ")
        operands = _split_operands(rest) if rest else []
        base = re.sub(r"_e(32|64)$", "", mnem)
        tables.setdefault(enc, {})[op] = (mnem, layout(enc, base, operands, fields))
    return tables, opsel


# The generated table lives with the emulator's per-target ISA data.
OUTPUT = pathlib.Path(__file__).resolve().parents[1] / "emu" / "isa" / "gfx950" / "opcodes.py"

HEADER = '''"""gfx950 opcode tables: opcode -> (llvm mnemonic as printed, operand layout), per encoding.

Generated by tools/gen_opcodes.py from llvm-mc-22 probes; do not edit by hand (regenerate instead).
The layout grammar is described in tools/gen_opcodes.py.
"""
'''


def render(tables, opsel):
    out = [HEADER]
    out.append("OPCODES = {")
    for enc in sorted(tables):
        out.append(f"    {enc!r}: {{")
        for op in sorted(tables[enc]):
            name, lay = tables[enc][op]
            out.append(f"        0x{op:03x}: ({name!r}, {lay!r}),")
        out.append("    },")
    out.append("}")
    out.append("")
    out.append("# VOP3 opcodes that have op_sel operands (llvm prints op_sel for no others)")
    out.append("VOP3_OP_SEL = frozenset({")
    ops = sorted(opsel)
    for i in range(0, len(ops), 10):
        out.append("    " + " ".join(f"0x{o:03x}," for o in ops[i:i + 10]))
    out.append("})")
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llvm-mc", default="llvm-mc-22")
    ap.add_argument("--out", default=str(OUTPUT))
    args = ap.parse_args(argv)
    tables, opsel = build(args.llvm_mc)
    pathlib.Path(args.out).write_text(render(tables, opsel))
    print(f"wrote {args.out}: " + ", ".join(f"{e} {len(t)}" for e, t in sorted(tables.items())), file=sys.stderr)


if __name__ == "__main__":
    main()
