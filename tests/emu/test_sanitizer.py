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
    assert len(hit) == 2 and "buffer_load_dwordx4" in msg and " lds`" in msg and "ds_read_b128" in msg


def test_direct_decode_without_waitcnts_is_a_wait(monkeypatch):
    hit = C.patching(monkeypatch, C.DIRECT_DECODE_SYMBOL, lambda i: i.op == "s_waitcnt")
    msg = _caught(C.direct_decode, "wait")
    assert len(hit) > 5 and "outstanding" in msg and "s_waitcnt" in msg


# ----- one defect at a time -----
def test_double_buffer_overwritten_while_read_is_a_race(monkeypatch):
    # The K loop's barrier is all that keeps the next step's LDS-DMA copy into a stage behind the
    # other waves' reads of that stage (a WAR on the double buffer).
    hit = C.patching(monkeypatch, C.GEMM_TILE_SYMBOL, lambda i: i.op == "s_barrier" and i.addr > 0x1900)
    msg = _caught(C.gemm_tile, "race")
    assert len(hit) == 1 and "written by wave 1" in msg and "read by wave 0" in msg and " lds`" in msg


def test_lds_dma_read_before_its_wait(monkeypatch):
    # the prologue's s_waitcnt vmcnt(0): the first LDS-DMA copy of A is read without it
    first = []
    hit = C.patching(monkeypatch, C.GEMM_TILE_SYMBOL,
                     lambda i: i.op == "s_waitcnt" and i.mods["vmcnt"] == 0 and not first and not first.append(i))
    msg = _caught(C.gemm_tile, "wait")
    assert len(hit) == 1 and "LDS-DMA load" in msg and "before an s_waitcnt vmcnt" in msg


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


# ----- uninit on hand-made programs (the rules the shipped kernels do not isolate) -----
def _run(instrs, block=(64, 1, 1), lds=0):
    import numpy as np
    from exec_helpers import program
    from flyaot.emu.machine import Launch, Prepared
    from flyaot.emu.memory import Memory
    from flyaot.emu.sanitizer import Sanitizer
    launch = Launch(Prepared(program(instrs, lds=lds)), (1, 1, 1), block, b"", Memory())
    launch.probe = Sanitizer(launch)
    launch.run()
    return np


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
