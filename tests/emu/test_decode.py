"""The gfx950 decoder against llvm-objdump, on real FlyDSL code objects.

Oracle: `llvm-objdump-22 -d --mcpu=gfx950` (Debian llvm-22). Every instruction of every kernel in
the emu_samples code objects (compiled here, once per session) and, when a prebuilt store exists,
every code object in it must decode to exactly the text llvm prints (mnemonic, operands and
modifiers). Branch targets must land where llvm's `<symbol+offset>` comments say, and the launch
facts derived from the kernel descriptor must agree with llvm's `.amdhsa_*` rendering of it.
"""
import pathlib
import re
import shutil
import struct
import subprocess

import pytest

from flyaot.formats import codeobject
from flyaot.formats import manifest as manifest_mod
from flyaot.emu import decode
from tools import gen_opcodes
from flyaot.emu.program import Program, code_object_mnemonics

OBJDUMP = shutil.which("llvm-objdump-22")
LLVM_MC = shutil.which("llvm-mc-22")
needs_objdump = pytest.mark.skipif(OBJDUMP is None, reason="llvm-objdump-22 not installed (apt-get install llvm-22)")
needs_mc = pytest.mark.skipif(LLVM_MC is None, reason="llvm-mc-22 not installed (apt-get install llvm-22)")

_LINE = re.compile(r"^\s+(\S.*?)\s*//\s*([0-9A-Fa-f]+):[0-9A-Fa-f ]+(?:<(\S+)\+0x([0-9a-f]+)>)?\s*$")
_FUNC = re.compile(r"^([0-9a-f]+) <(\S+)>:$")


def objdump(path):
    """{address: (text, branch target or None)} for every instruction llvm-objdump prints."""
    out = subprocess.run([OBJDUMP, "-d", "--mcpu=gfx950", str(path)], capture_output=True, text=True,
                         check=True, timeout=300).stdout
    funcs, res = {}, {}
    for ln in out.splitlines():
        m = _FUNC.match(ln)
        if m:
            funcs[m.group(2)] = int(m.group(1), 16)
            continue
        m = _LINE.match(ln)
        if m:
            target = funcs[m.group(3)] + int(m.group(4), 16) if m.group(3) in funcs else None
            res[int(m.group(2), 16)] = (" ".join(m.group(1).split()), target)
    return res


def amdhsa_directives(path):
    """{kernel: {directive: int}} from llvm-objdump's rendering of the kernel descriptors."""
    out = subprocess.run([OBJDUMP, "-D", "--mcpu=gfx950", str(path)], capture_output=True, text=True,
                         check=True, timeout=300).stdout
    res, cur = {}, None
    for ln in out.splitlines():
        ln = ln.strip()
        if ln.startswith(".amdhsa_kernel "):
            cur = res.setdefault(ln.split()[1], {})
        elif ln.startswith(".end_amdhsa_kernel"):
            cur = None
        elif cur is not None and ln.startswith(".amdhsa_"):
            name, value = ln.split()[:2]
            cur[name[len(".amdhsa_"):]] = int(value, 0)
    return res


def prebuilt_objects():
    import flyaot.prebuilt as pb
    from flyaot import targets
    store = pathlib.Path(pb.__file__).parent / targets.DEFAULT_TARGET     # the package's store of gfx950
    path = store / manifest_mod.MANIFEST_NAME
    if not path.exists():
        return []
    m = manifest_mod.parse(path.read_bytes(), origin=str(path))
    return sorted({store / e["file"] for e in m["specs"].values()})


def check_against_objdump(path):
    """Decode every kernel of one code object; return the number of instructions compared."""
    data = path.read_bytes()
    ref = objdump(path)
    co = codeobject.parse(data)
    n, bad = 0, []
    for k in co.kernels:
        prog = Program.from_code_object(data, k.name)
        for ins in prog.instrs:
            n += 1
            text, target = ref.get(ins.addr, (None, None))
            if " ".join(ins.text.split()) != text:
                bad.append(f"0x{ins.addr:x}: llvm {text!r}, decoded {ins.text!r}")
            labels = [o.value for o in ins.src if o.kind == "label"]
            if target is not None:
                if labels != [target]:
                    bad.append(f"0x{ins.addr:x}: branch target {labels}, llvm says 0x{target:x}")
                prog.index_of(target)            # the target is an instruction of the kernel
    assert not bad, f"{path.name}: {len(bad)} of {n} instructions differ:\n" + "\n".join(bad[:30])
    return n


@needs_objdump
def test_samples_decode_like_objdump(sample_objects):
    assert len(sample_objects) >= 7
    total = sum(check_against_objdump(p) for p in sample_objects)
    assert total > 100


@needs_objdump
def test_prebuilt_store_decodes_like_objdump():
    objs = prebuilt_objects()
    if not objs:
        pytest.skip("no prebuilt store (flyaot/prebuilt/gfx950/manifest.json) in this checkout")
    for p in objs:
        check_against_objdump(p)


@needs_objdump
def test_samples_use_the_instruction_kinds_they_exist_for(sample_objects):
    """The sample family must keep exercising what the emulator's end-to-end tests rely on."""
    ops = set()
    for p in sample_objects:
        ops |= code_object_mnemonics(p.read_bytes())
    for op in ("v_mfma_f32_16x16x32_bf16", "v_mfma_f32_32x32x16_bf16", "v_mfma_scale_f32_16x16x128_f8f6f4",
               "ds_bpermute_b32", "v_readlane_b32", "v_permlane16_swap_b32", "v_permlane32_swap_b32",
               "v_mov_b32", "s_barrier", "ds_write_b32", "ds_read_b32", "buffer_load_dword",
               "buffer_store_dword", "v_cvt_scalef32_pk_bf16_fp4", "v_cvt_pk_bf16_f32"):
        assert op in ops, op
    dpp = [i for p in sample_objects for k in codeobject.parse(p.read_bytes()).kernels
           for i in Program.from_code_object(p.read_bytes(), k.name).instrs if "dpp" in i.mods]
    assert dpp and dpp[0].mods["dpp"]["ctrl"] == 0x111          # row_shr:1 in lane_ops


@needs_objdump
def test_mnemonic_set_matches_objdump(sample_objects):
    for p in sample_objects:
        co = codeobject.parse(p.read_bytes())
        lo = min(Program.from_code_object(p.read_bytes(), k.name).entry for k in co.kernels)
        hi = max(Program.from_code_object(p.read_bytes(), k.name).end for k in co.kernels)
        want = {re.sub(r"_(e32|e64|dpp|sdwa)$", "", t.split()[0])
                for a, (t, _) in objdump(p).items() if lo <= a < hi}
        assert code_object_mnemonics(p.read_bytes()) == want


@needs_objdump
def test_launch_facts_match_the_descriptor_as_llvm_reads_it(sample_objects):
    for p in sample_objects:
        data = p.read_bytes()
        directives = amdhsa_directives(p)
        for k in codeobject.parse(data).kernels:
            d = directives[k.name]
            f = Program.from_code_object(data, k.name).facts
            assert f.lds_size == d["group_segment_fixed_size"]
            assert f.scratch_size == d["private_segment_fixed_size"]
            assert f.kernarg_size == d["kernarg_size"]
            assert f.accum_offset == d["accum_offset"]
            assert f.workitem_id_dims == d["system_vgpr_workitem_id"] + 1
            assert (f.sgpr_kernarg_segment_ptr >= 0) == bool(d["user_sgpr_kernarg_segment_ptr"])
            assert (f.sgpr_dispatch_ptr >= 0) == bool(d["user_sgpr_dispatch_ptr"])
            for axis, sg in zip("xyz", f.sgpr_workgroup_id):
                assert (sg >= 0) == bool(d[f"system_sgpr_workgroup_id_{axis}"])
            # the user SGPRs llvm enables come first, in AMDGPUUsage order, then the workgroup ids
            expect_user = 2 * (d["user_sgpr_dispatch_ptr"] + d["user_sgpr_queue_ptr"]
                               + d["user_sgpr_kernarg_segment_ptr"] + d["user_sgpr_dispatch_id"]) \
                + d["user_sgpr_private_segment_size"] + d.get("user_sgpr_kernarg_preload_length", 0)
            assert f.user_sgpr_count == expect_user
            if d["system_sgpr_workgroup_id_x"]:
                assert f.sgpr_workgroup_id[0] == f.user_sgpr_count
            assert f.packed_workitem_ids and f.wavefront_size == 64


def test_program_is_decoded_once_per_code_object(sample_objects):
    data = sample_objects[0].read_bytes()
    name = codeobject.parse(data).kernels[0].name
    p1 = Program.from_code_object(data, name)
    assert Program.from_code_object(bytes(data), name) is p1
    assert p1.instr_at(p1.entry) is p1.instrs[0]
    with pytest.raises(decode.DecodeError):
        p1.index_of(p1.entry + 2)
    assert p1.instrs[-1].op == "s_endpgm"


def test_unknown_opcode_is_an_error_naming_it():
    # VOP3P opcode 0x7f... is taken; 0x1d is not assigned on gfx950 (llvm rejects it too)
    word = 0xD3800000 | (0x1D << 16)
    with pytest.raises(decode.DecodeError, match="VOP3P opcode 0x1d"):
        decode.decode_one(struct.pack("<II", word, 0), 0)


def test_literal_and_inline_constants():
    # s_or_b32 s30, s2, 0x100 (literal) and v_lshl_or_b32 v0, s2, 6, v0 (inline 6)
    lit = decode.decode_one(bytes.fromhex("02ff1e87" "00010000"), 0)
    assert (lit.size, lit.text, lit.src[1].kind, lit.src[1].value) == (8, "s_or_b32 s30, s2, 0x100", "literal", 0x100)
    inl = decode.decode_one(struct.pack("<II", 0xD2000000, 0x04010C02), 0)
    assert inl.text == "v_lshl_or_b32 v0, s2, 6, v0"
    assert (inl.src[1].kind, inl.src[1].value) == ("const", 6)
    f = decode.decode_one(struct.pack("<II", 0xD1010002, 0x0001E405), 0)     # v_add_f32_e64 v2, s5, 1.0
    assert (f.op, f.mods["suffix"], f.src[1].value) == ("v_add_f32", "e64", 0x3F800000)


@needs_mc
def test_every_table_opcode_decodes_like_llvm_mc():
    """One instruction per opcode of every encoding (the generator's probes: distinct registers in
    every field), disassembled by llvm-mc and by the decoder."""
    items = [it for it in gen_opcodes.probes() if it[0] != "VOP3_opsel"]
    texts = gen_opcodes.run_llvm_mc(LLVM_MC, items)
    n, bad = 0, []
    for i, (enc, _, variants, _) in enumerate(items):
        j = next((j for j in range(len(variants)) if (i, j) in texts), None)
        if j is None:
            continue
        want = " ".join(re.sub(r"/\*.*?\*/", "", texts[(i, j)]).split())
        code = struct.pack(f"<{len(variants[j]) + 1}I", *variants[j], gen_opcodes.LIT)
        got = " ".join(decode.decode_one(code, 0).text.split())
        n += 1
        if got != want:
            bad.append(f"{enc}: llvm {want!r}, decoded {got!r}")
    assert n > 1400 and not bad, "\n".join(bad[:30])


@needs_mc
def test_encoding_tables_are_what_the_generator_produces():
    tables, opsel = gen_opcodes.build(LLVM_MC)
    generated = gen_opcodes.render(tables, opsel)
    committed = gen_opcodes.OUTPUT.read_text()
    assert generated == committed, "emu/isa/gfx950/opcodes.py is stale: run python -m tools.gen_opcodes"


@needs_mc
def test_ds_swizzle_patterns_print_like_llvm(tmp_path):
    offsets = list(range(0, 0x10000, 29))
    words = [struct.pack("<II", 0xD8000000 | (0x3D << 17) | off, (40 << 24) | 20) for off in offsets]
    src = tmp_path / "swizzle.txt"
    src.write_text("\n".join(",".join(f"0x{b:02x}" for b in w) for w in words) + "\n")
    out = subprocess.run([LLVM_MC, "--disassemble", "-triple=amdgcn-amd-amdhsa", "-mcpu=gfx950", str(src)],
                         capture_output=True, text=True, check=True, timeout=120).stdout
    want = [" ".join(ln.split()) for ln in out.splitlines() if ln.strip()]
    assert len(want) == len(words)
    got = [" ".join(decode.decode_one(w, 0).text.split()) for w in words]
    bad = [(hex(o), a, b) for o, a, b in zip(offsets, want, got) if a != b]
    assert not bad, bad[:10]


def test_isa_tables_come_from_load_by_arch():
    """emu.isa.load(arch) hands out an ISA package's tables; the decoder reads the emulated one's."""
    from flyaot.emu import isa
    from flyaot.emu.isa.gfx950 import opcodes
    assert isa.ARCH in isa.arches()
    tables = isa.load(isa.ARCH)
    assert tables.arch == decode.ISA_ARCH and tables.opcodes is opcodes.OPCODES is decode.OPCODES
    assert tables.timing.CACHE_LINE_BYTES > 0
    with pytest.raises(ValueError, match=r"no ISA data for 'gfx1201'; it has gfx950"):
        isa.load("gfx1201")


_COUNTER = re.compile(r"(vmcnt|expcnt|lgkmcnt)\((\d+)\)")


@needs_objdump
def test_waitcnt_counters_are_what_objdump_prints():
    """The counters the sanitizer waits on (decoded from s_waitcnt's simm16) are the ones llvm prints,
    for every s_waitcnt encoding of the prebuilt store (one code object per distinct encoding)."""
    objs = prebuilt_objects()
    if not objs:
        pytest.skip("no prebuilt store (flyaot/prebuilt/gfx950/manifest.json) in this checkout")
    where = {}                           # simm16 -> (code object, address, decoded counters)
    for p in objs:
        data = p.read_bytes()
        for k in codeobject.parse(data).kernels:
            for ins in Program.from_code_object(data, k.name).instrs:
                if ins.op == "s_waitcnt" and ins.mods["simm16"] not in where:
                    where[ins.mods["simm16"]] = (p, ins.addr, {c: ins.mods[c] for c in ("vmcnt", "expcnt", "lgkmcnt")})
    assert len(where) > 10
    listings = {}
    for simm, (p, addr, got) in sorted(where.items()):
        listing = listings.get(p) or listings.setdefault(p, objdump(p))
        text = listing[addr][0]
        assert text.startswith("s_waitcnt"), text
        want = {"vmcnt": 63, "expcnt": 7, "lgkmcnt": 15}
        want.update((c, int(v)) for c, v in _COUNTER.findall(text))
        assert got == want, f"simm16 0x{simm:04x}: llvm prints {text!r}, decoded {got}"
