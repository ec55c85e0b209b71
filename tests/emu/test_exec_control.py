"""Control flow, EXEC masking across branches, LDS + barrier between waves, and the initial
register state of a launch, run through the machine on hand-built programs."""
import struct

import numpy as np
import pytest
import torch

from exec_helpers import EXEC, VCC, addr_of, c, ins, label, launch, lit, program, s, v
from flyaot.emu.memory import Memory
from flyaot.emu.wave import EmuError


def _store_v(value_reg, out_sgpr=4):
    """global_store_dword out[tid] = v<value_reg> (out pointer in s[out_sgpr:+1])."""
    return [ins("v_lshlrev_b32", [v(20)], [c(2), v(0)]),
            ins("global_store_dword", [], [v(20), v(value_reg), s(out_sgpr, 2)])]


def _load_out_ptr():
    return ins("s_load_dwordx2", [s(4, 2)], [s(0, 2)], enc="SMEM", offset=0)


def test_counted_loop_and_branch_over_masked_region():
    out = torch.zeros(64, dtype=torch.int32)
    body = [
        _load_out_ptr(),
        ins("s_mov_b32", [s(6)], [c(0)], enc="SOP1"),
        ins("v_mov_b32", [v(1)], [c(0)], enc="VOP1"),
        # loop: v1 += tid, 5 times
        ins("v_add_u32", [v(1)], [v(1), v(0)], enc="VOP2"),
        ins("s_add_u32", [s(6)], [s(6), c(1)]),
        ins("s_cmp_lt_u32", [], [s(6), c(5)], enc="SOPC"),
        ins("s_cbranch_scc1", [], [label(0x10C)], enc="SOPP"),
        # if (tid < 10) v1 = 1000 + tid
        ins("v_cmp_gt_u32", [VCC], [c(10), v(0)], enc="VOPC"),
        ins("s_and_saveexec_b64", [s(8, 2)], [VCC], enc="SOP1"),
        ins("s_cbranch_execz", [], [label(0x134)], enc="SOPP"),
        ins("v_add_u32", [v(1)], [lit(1000), v(0)], enc="VOP2"),
        ins("s_or_b64", [EXEC], [EXEC, s(8, 2)]),               # 0x130: restore exec
        *_store_v(1),
        ins("s_endpgm", enc="SOPP"),
    ]
    prog = program(body)
    assert addr_of(prog, 3) == 0x10C and addr_of(prog, 11) == 0x12C
    # branch target of execz: the exec restore at 0x12C
    body[9] = ins("s_cbranch_execz", [], [label(0x12C)], enc="SOPP")
    prog = program(body)
    mem = Memory()
    mem.register_tensor(out)
    cnt = launch(prog, (1, 1, 1), (64, 1, 1), struct.pack("<Q", out.data_ptr()), mem)
    tid = np.arange(64)
    assert (out.numpy() == np.where(tid < 10, 1000 + tid, 5 * tid)).all()
    assert cnt.branch == 5 + 1 and cnt.workgroups == 1


def test_lds_exchange_across_waves_with_barrier_and_workgroup_ids():
    """Each wave writes tid+100*wg to LDS, barrier, then reads the slot of the mirrored thread."""
    out = torch.zeros(2 * 128, dtype=torch.int32)
    body = [
        _load_out_ptr(),
        ins("s_mul_i32", [s(7)], [s(2), lit(100)]),              # s2 = workgroup id x
        ins("v_add_u32", [v(1)], [s(7), v(0)], enc="VOP2"),
        ins("v_lshlrev_b32", [v(2)], [c(2), v(0)]),
        ins("ds_write_b32", [], [v(2), v(1)]),
        ins("s_waitcnt", enc="SOPP"),
        ins("s_barrier", enc="SOPP"),
        ins("v_sub_u32", [v(3)], [c(127), v(0)], enc="VOP2"),
        ins("v_lshlrev_b32", [v(3)], [c(2), v(3)]),
        ins("ds_read_b32", [v(4)], [v(3)]),
        ins("s_mul_i32", [s(8)], [s(2), lit(512)]),              # out + wg * 128 ints
        ins("s_add_u32", [s(4)], [s(4), s(8)]),
        ins("s_addc_u32", [s(5)], [s(5), c(0)]),
        *_store_v(4),
        ins("s_endpgm", enc="SOPP"),
    ]
    prog = program(body, lds=512)
    mem = Memory()
    mem.register_tensor(out)
    cnt = launch(prog, (2, 1, 1), (128, 1, 1), struct.pack("<Q", out.data_ptr()), mem)
    o = out.numpy().reshape(2, 128)
    for g in range(2):
        assert (o[g] == 100 * g + (127 - np.arange(128))).all()
    assert cnt.barriers == 4 and cnt.waves == 4 and cnt.lds_bytes_written == 2 * 128 * 4


def test_partial_wave_exec_and_2d_packed_ids():
    out = torch.full((128,), -1, dtype=torch.int32)
    body = [_load_out_ptr(),
            ins("v_bfe_u32", [v(1)], [v(0), c(10), c(10)]),      # y
            ins("v_and_b32", [v(2)], [lit(0x3FF), v(0)], enc="VOP2"),   # x
            ins("v_mad_u32_u24", [v(3)], [v(1), c(8), v(2)]),    # y * 8 + x
            ins("v_lshlrev_b32", [v(20)], [c(2), v(3)]),
            ins("v_mul_u32_u24", [v(5)], [v(1), lit(1000)]),
            ins("v_add_u32", [v(5)], [v(5), v(2)], enc="VOP2"),
            ins("global_store_dword", [], [v(20), v(5), s(4, 2)]),
            ins("s_endpgm", enc="SOPP")]
    mem = Memory()
    mem.register_tensor(out)
    launch(program(body), (1, 1, 1), (8, 9, 1), struct.pack("<Q", out.data_ptr()), mem)
    o = out.numpy()
    for y in range(9):
        for x in range(8):
            assert o[y * 8 + x] == 1000 * y + x
    assert (o[72:] == -1).all()                                  # lanes past 72 threads are off


def test_bad_branch_and_running_off_the_end_raise():
    prog = program([ins("s_branch", [], [label(0x102)], enc="SOPP")])
    with pytest.raises(EmuError, match="not an instruction start"):
        launch(prog, (1, 1, 1), (64, 1, 1))
    prog = program([ins("s_nop", enc="SOPP")])
    with pytest.raises(EmuError, match="past the end"):
        launch(prog, (1, 1, 1), (64, 1, 1))
    prog = program([ins("v_nonexistent_b32", [v(1)], [v(0)]), ins("s_endpgm", enc="SOPP")])
    with pytest.raises(EmuError, match="v_nonexistent_b32"):
        launch(prog, (1, 1, 1), (64, 1, 1))


def test_getpc_swappc_roundtrip():
    out = torch.zeros(64, dtype=torch.int32)
    body = [_load_out_ptr(),
            ins("s_getpc_b64", [s(10, 2)], [], enc="SOP1"),          # 0x104 -> s[10:11] = 0x108
            ins("s_add_u32", [s(10)], [s(10), c(16)]),               # 0x108 -> target 0x118
            ins("s_swappc_b64", [s(12, 2)], [s(10, 2)], enc="SOP1"),  # 0x10C, returns to 0x110
            ins("v_mov_b32", [v(1)], [s(14)], enc="VOP1"),           # 0x110
            ins("s_branch", [], [label(0x124)], enc="SOPP"),         # 0x114
            ins("s_mov_b32", [s(14)], [lit(4242)], enc="SOP1"),      # 0x118: "function"
            ins("s_setpc_b64", [], [s(12, 2)], enc="SOP1"),          # 0x11C
            ins("s_nop", enc="SOPP"),                                # 0x120
            *_store_v(1),                                            # 0x124
            ins("s_endpgm", enc="SOPP")]
    mem = Memory()
    mem.register_tensor(out)
    launch(program(body), (1, 1, 1), (64, 1, 1), struct.pack("<Q", out.data_ptr()), mem)
    assert (out.numpy() == 4242).all()
