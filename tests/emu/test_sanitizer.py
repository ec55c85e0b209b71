"""The emulator's sanitizer: planted defects in shipped code objects are caught with the right kind,
next to the same kernels unpatched, which run clean (and still match their torch references).

The defects are planted in the machine code (sanitizer_cases.patching): an s_barrier, s_waitcnt,
s_nop or LDS write turned into s_nop 0. The three demos of the sanitizer's issue are among them.
"""
import pytest

from flyaot.emu import EmuError, SanitizerError
from flyaot.emu.sanitizer import mfma_passes

import sanitizer_cases as C

pytestmark = pytest.mark.usefixtures("sanitize")


@pytest.fixture
def sanitize(monkeypatch):
    monkeypatch.setenv("FLYAOT_EMU_SANITIZE", "1")
    monkeypatch.delenv("FLYAOT_EMU_SCHEDULE", raising=False)


def _caught(run, kind) -> str:
    with pytest.raises(SanitizerError) as e:
        run()
    assert e.value.kind == kind, str(e.value)
    assert isinstance(e.value, EmuError)
    msg = str(e.value)
    assert msg.startswith(f"{kind}: "), msg
    return msg


# ----- clean versions -----
@pytest.mark.parametrize("run", [c for _, c in C.ALL], ids=[n for n, _ in C.ALL])
def test_shipped_kernel_runs_clean(run, monkeypatch):
    ok, detail, out = run()
    assert ok, detail
    monkeypatch.setenv("FLYAOT_EMU_SANITIZE", "0")
    _, _, plain = run()
    assert C.same_bits(out, plain), "the sanitizer changed a result"


# ----- the demos -----
def test_prefill_without_barriers_is_a_race(monkeypatch):
    hit = C.patching(monkeypatch, C.PREFILL_SYMBOL, lambda i: i.op == "s_barrier")
    msg = _caught(C.prefill, "race")
    assert hit and C.PREFILL_SYMBOL in msg and "LDS byte 0x" in msg and "ds_read" in msg
    assert "workgroup (" in msg and "wave 0" in msg and "wave 1" in msg


def test_gemm_tile_without_barriers_is_a_race(monkeypatch):
    hit = C.patching(monkeypatch, C.GEMM_TILE_SYMBOL, lambda i: i.op == "s_barrier")
    msg = _caught(C.gemm_tile, "race")
    # the prologue's, the peeled first K step's and the K loop's
    assert len(hit) == 3 and "buffer_load_dwordx4" in msg and " lds`" in msg and "ds_read_b128" in msg


def test_direct_decode_without_waitcnts_is_a_wait(monkeypatch):
    hit = C.patching(monkeypatch, C.DIRECT_DECODE_SYMBOL, lambda i: i.op == "s_waitcnt")
    msg = _caught(C.direct_decode, "wait")
    assert len(hit) > 5 and "outstanding" in msg and "s_waitcnt" in msg


# ----- one defect at a time -----
def test_double_buffer_overwritten_while_read_is_a_race(monkeypatch):
    # The K steps' barriers (the peeled first step's and the K loop's) are all that keep the next
    # step's LDS-DMA copy into a stage behind the other waves' reads of that stage (a WAR on the
    # double buffer).
    hit = C.patching(monkeypatch, C.GEMM_TILE_SYMBOL, lambda i: i.op == "s_barrier" and i.addr > 0x1900)
    msg = _caught(C.gemm_tile, "race")
    assert len(hit) == 2 and "written by wave 1" in msg and "read by wave 0" in msg and " lds`" in msg


def test_lds_dma_read_before_its_wait(monkeypatch):
    # the prologue's s_waitcnt vmcnt(0): the first LDS-DMA copy of A is read without it. The same wait
    # also covers the first B tile's register loads (issued after the copy; vmcnt drains in order),
    # and the K-loop order reads those first, so the violation names whichever read comes first.
    first = []
    hit = C.patching(monkeypatch, C.GEMM_TILE_SYMBOL,
                     lambda i: i.op == "s_waitcnt" and i.mods["vmcnt"] == 0 and not first and not first.append(i))
    msg = _caught(C.gemm_tile, "wait")
    assert len(hit) == 1
    assert ("LDS-DMA load" in msg and "before an s_waitcnt vmcnt" in msg) or \
        ("buffer_load" in msg and "no s_waitcnt vmcnt covers it" in msg), msg


def test_global_load_used_before_its_vmcnt_wait(monkeypatch):
    first = []
    hit = C.patching(monkeypatch, C.DIRECT_DECODE_SYMBOL,
                     lambda i: i.op == "s_waitcnt" and i.mods["vmcnt"] < 63 and not first and not first.append(i))
    msg = _caught(C.direct_decode, "wait")
    assert len(hit) == 1 and "buffer_load" in msg and "vmcnt" in msg


def test_mfma_result_read_by_valu_too_early(monkeypatch):
    # every s_nop N of the GEMM tile becomes s_nop 0: the compiler's wait states after the MFMAs go
    hit = C.patching(monkeypatch, C.GEMM_TILE_SYMBOL, lambda i: i.op == "s_nop" and i.mods["simm16"] > 0)
    msg = _caught(C.gemm_tile, "hazard")
    assert hit and "v_mfma" in msg and "wait states between them" in msg and "required" in msg


def test_uninitialised_lds_read(monkeypatch):
    # the first LDS write of the prefill kernel's staging goes: those bytes are read but never written
    first = []
    hit = C.patching(monkeypatch, C.PREFILL_SYMBOL,
                     lambda i: i.op.startswith("ds_write") and not first and not first.append(i))
    msg = _caught(C.prefill, "uninit")
    assert len(hit) == 1 and "was never written by this workgroup" in msg


def test_mfma_passes_follow_the_gfx950_rates():
    from flyaot.emu.instr import Instr

    def mk(op, **mods):
        return Instr(0, 8, "VOP3P", op, (), (), mods)
    assert mfma_passes(mk("v_mfma_f32_16x16x32_bf16")) == 4
    assert mfma_passes(mk("v_mfma_f32_32x32x16_bf16")) == 8
    assert mfma_passes(mk("v_mfma_scale_f32_16x16x128_f8f6f4", cbsz=4, blgp=4)) == 4
    assert mfma_passes(mk("v_mfma_scale_f32_16x16x128_f8f6f4", cbsz=0, blgp=4)) == 8
    assert mfma_passes(mk("v_mfma_scale_f32_32x32x64_f8f6f4", cbsz=0, blgp=0)) == 16


# ----- hand-made programs: the rules the shipped kernels do not isolate -----
def _run(instrs, block=(64, 1, 1), lds=0, grid=(1, 1, 1), kernarg=bytes(64), mem=None):
    from exec_helpers import program
    from flyaot.emu.machine import Launch, Prepared
    from flyaot.emu.memory import Memory
    from flyaot.emu.sanitizer import Sanitizer
    launch = Launch(Prepared(program(instrs, lds=lds)), grid, block, kernarg, mem or Memory())
    launch.probe = Sanitizer(launch)
    launch.run()


def _waitcnt(vm=63, lgkm=15):
    from exec_helpers import ins
    return ins("s_waitcnt", enc="SOPP", vmcnt=vm, expcnt=7, lgkmcnt=lgkm)


def test_smem_results_need_lgkmcnt_0():
    from exec_helpers import ins, s
    end = ins("s_endpgm", enc="SOPP")
    loads = [ins("s_load_dword", [s(4)], [s(0, 2)], enc="SMEM", offset=0),
             ins("s_load_dword", [s(5)], [s(0, 2)], enc="SMEM", offset=4)]
    use = ins("s_mov_b32", [s(20)], [s(4)], enc="SOP1")
    _run(loads + [_waitcnt(lgkm=0), use, end])
    # two SMEM loads may complete in either order: lgkmcnt(1) covers neither
    with pytest.raises(SanitizerError, match=r"^wait: test_kernel: wave 0: s4 read at 0x10c .*s_load_dword.* "
                                             r"outstanding \(no s_waitcnt lgkmcnt\(0\) covers it\)"):
        _run(loads + [_waitcnt(lgkm=1), use, end])


def test_lds_results_retire_in_order():
    from exec_helpers import c, ins, v
    end = ins("s_endpgm", enc="SOPP")
    body = [ins("v_lshlrev_b32", [v(1)], [c(2), v(0)]), ins("ds_write_b32", [], [v(1), v(0)], enc="DS"),
            ins("ds_read_b32", [v(2)], [v(1)], enc="DS"), ins("ds_read_b32", [v(3)], [v(1)], enc="DS"),
            _waitcnt(lgkm=1), ins("v_mov_b32", [v(4)], [v(2)], enc="VOP1")]     # the older read is in
    _run(body + [end], lds=256)
    with pytest.raises(SanitizerError, match=r"^wait: .*v3 read at 0x118 .*the load at 0x10c `ds_read_b32`"):
        _run(body + [ins("v_mov_b32", [v(5)], [v(3)], enc="VOP1"), end], lds=256)
    with pytest.raises(SanitizerError, match=r"^wait: .*v3 overwritten at 0x118"):
        _run(body + [ins("v_mov_b32", [v(3)], [c(0)], enc="VOP1"), end], lds=256)


def test_lds_race_needs_a_barrier_between_waves():
    from exec_helpers import c, ins, v
    end = ins("s_endpgm", enc="SOPP")
    # each work-item writes the dword of its id, then reads the one 64 work-items away (the other wave's)
    addr = [ins("v_lshlrev_b32", [v(1)], [c(2), v(0)]), ins("v_xor_b32", [v(3)], [c(256), v(1)])]
    write = ins("ds_write_b32", [], [v(1), v(0)], enc="DS")
    read = ins("ds_read_b32", [v(2)], [v(3)], enc="DS")
    tail = [_waitcnt(lgkm=0), end]
    _run(addr + [write, _waitcnt(lgkm=0), ins("s_barrier", enc="SOPP"), read] + tail, block=(128, 1, 1), lds=512)
    # waves run in turn: wave 0 reads 0x100 before wave 1 writes it, and the write finds the read
    with pytest.raises(SanitizerError, match=r"^race: .*LDS byte 0x100 written by wave 1 at 0x108 .* and read by "
                                             r"wave 0 at 0x110 .* with no s_barrier between them \(workgroup "
                                             r"\(0, 0, 0\)\)"):
        _run(addr + [write, _waitcnt(lgkm=0), read] + tail, block=(128, 1, 1), lds=512)


def test_valu_sgpr_write_then_vmem_read_needs_5_wait_states():
    from exec_helpers import c, ins, s, v
    end = ins("s_endpgm", enc="SOPP")
    rl = ins("v_readfirstlane_b32", [s(12)], [v(0)], enc="VOP1")
    rsrc = [ins("s_mov_b32", [s(8 + i)], [c(0)], enc="SOP1") for i in range(4)]
    store = ins("buffer_store_dword", [], [v(0), v(0), s(8, 4), s(12)], enc="MUBUF", offen=1)
    _run(rsrc + [rl, ins("s_nop", enc="SOPP", simm16=4), store, end])
    with pytest.raises(SanitizerError, match=r"^hazard: .*VALU write of s12 read by a VMEM instruction: .* with 4 "
                                             r"wait states between them, 5 required"):
        _run(rsrc + [rl, ins("s_nop", enc="SOPP", simm16=3), store, end])


def test_unwritten_high_half_of_discarded_64bit_result_is_not_a_read():
    from exec_helpers import c, ins, s, v
    end = ins("s_endpgm", enc="SOPP")
    mad = ins("v_mad_u64_u32", [v(4, 2), s(10, 2)], [s(2), c(48), v(0, 2)])
    _run([mad, ins("v_mov_b32", [v(8)], [v(4)], enc="VOP1"), end])      # only the low half is used
    with pytest.raises(SanitizerError, match=r"uninit: .*v9 lane 0 read at 0x108 .* holds a value computed at "
                                             r"0x104 .* from a register never written"):
        _run([mad, ins("v_mov_b32", [v(9)], [v(5)], enc="VOP1"),          # a VALU copy carries it on,
              ins("v_readfirstlane_b32", [s(20)], [v(9)], enc="VOP1"), end])   # a read into an SGPR is one


def test_exec_masked_lanes_are_not_read():
    from exec_helpers import EXEC, VCC, c, ins, v
    end = ins("s_endpgm", enc="SOPP")
    half = ins("s_mov_b64", [EXEC], [c(0xFFFFFFFF)], enc="SOP1")
    write = ins("v_mov_b32", [v(3)], [c(1)], enc="VOP1")
    _run([half, write, ins("v_add_u32", [v(4)], [v(3), v(3)], enc="VOP2"), end])
    full = ins("s_mov_b64", [EXEC], [c(-1)], enc="SOP1")
    with pytest.raises(SanitizerError, match=r"uninit: .*v3 lane 32 read"):
        _run([half, write, full, ins("v_cmp_eq_u32", [VCC], [v(3), c(1)], enc="VOPC"), end])


def test_global_bytes_written_by_two_workgroups_race():
    import struct
    import numpy as np
    from exec_helpers import c, ins, lit, s, v
    from flyaot.emu.memory import Memory
    end = ins("s_endpgm", enc="SOPP")

    def memory():
        mem = Memory()
        return mem, struct.pack("<Q", mem.register_array(np.zeros(512, dtype=np.uint32))).ljust(64, b"\0")
    rsrc = [ins("s_load_dwordx2", [s(8, 2)], [s(0, 2)], enc="SMEM", offset=0),
            ins("s_mov_b32", [s(10)], [lit(2048)], enc="SOP1"), ins("s_mov_b32", [s(11)], [c(0)], enc="SOP1"),
            _waitcnt(lgkm=0), ins("v_lshlrev_b32", [v(1)], [c(2), v(0)])]
    store = ins("buffer_store_dword", [], [v(0), v(1), s(8, 4), c(0)], enc="MUBUF", offen=1)
    per_wg = [ins("s_lshl_b32", [s(12)], [s(2), c(8)]), ins("v_add_u32", [v(1)], [s(12), v(1)], enc="VOP2")]
    mem, kernarg = memory()
    _run(rsrc + per_wg + [store, end], grid=(2, 1, 1), kernarg=kernarg, mem=mem)      # one 256-byte row each
    mem, kernarg = memory()
    with pytest.raises(SanitizerError, match=r"^race: .*global byte 0x[0-9a-f]+ written by wave 0 at 0x11c .* and "
                                             r"workgroup \(0, 0, 0\) writes it .* \(workgroup \(1, 0, 0\)\)"):
        _run(rsrc + [ins("s_nop", enc="SOPP", simm16=0)] * 2 + [store, end], grid=(2, 1, 1), kernarg=kernarg,
             mem=mem)


def test_setreg_then_getreg_needs_2_wait_states():
    from exec_helpers import ins, s
    end = ins("s_endpgm", enc="SOPP")
    mov = ins("s_mov_b32", [s(4)], [s(2)], enc="SOP1")
    setreg = ins("s_setreg_b32", [], [s(4)], enc="SOPK", simm16=0x0801)     # hwreg(HW_REG_MODE, 0, 2)
    getreg = ins("s_getreg_b32", [s(5)], [], enc="SOPK", simm16=0x0801)
    _run([mov, setreg, ins("s_nop", enc="SOPP", simm16=1), getreg, end])
    with pytest.raises(SanitizerError, match=r"^hazard: .*s_setreg then s_getreg_b32 .* with 1 wait states "
                                             r"between them, 2 required"):
        _run([mov, setreg, ins("s_nop", enc="SOPP", simm16=0), getreg, end])
