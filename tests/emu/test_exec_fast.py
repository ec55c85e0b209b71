"""The specialized handlers (semantics.SPECIALIZERS, what the machine runs) against the general
ones (semantics.HANDLERS) on identical random wave states: registers, masks, LDS, global
memory and counters must come out bit-identical, for every operand kind they accept."""
import dataclasses

import numpy as np
import pytest
import torch

from exec_helpers import VCC, c, ins, lit, s, v, wave
from flyaot.emu.instr import Operand
from flyaot.emu.memory import Memory
from flyaot.emu.semantics import HANDLERS, handler_for

A = lambda i, n=1: Operand("agpr", i, n, name=f"a{i}")          # noqa: E731
V2 = lambda i: v(i, 2)                                            # noqa: E731

# f32 bit patterns that stress rounding and IEEE corner cases
_SPECIAL = np.array([0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001,
                     0x7F800001, 0x00000001, 0x807FFFFF, 0x3F800000, 0xBF800000, 0x3F808000,
                     0x3F818000, 0x4B800000, 0x7F7FFFFF, 0x00800000, 0x33800000, 0x40490FDB],
                    dtype=np.uint32)


def _values(rng, shape):
    """Random registers: a mix of raw bit patterns, small integers, short-mantissa floats
    (exact products, as in quantized kernels) and the special patterns above."""
    kind = rng.integers(0, 4, shape)
    raw = rng.integers(0, 1 << 32, shape, dtype=np.uint64).astype(np.uint32)
    small = rng.integers(-40, 40, shape).astype(np.int32).view(np.uint32)
    short = (rng.integers(-64, 64, shape) * 2.0 ** rng.integers(-8, 8, shape)).astype(np.float32)
    special = rng.choice(_SPECIAL, shape)
    return np.choose(kind, [raw, small, short.view(np.uint32), special]).astype(np.uint32)


def _state(seed, mem=None):
    rng = np.random.default_rng(seed)
    w = wave(mem or Memory(), lds_bytes=4096)
    w.vgpr[:] = _values(rng, w.vgpr.shape)
    w.sgpr[:] = _values(rng, w.sgpr.shape)
    w.exec = rng.random(64) < 0.8 if seed % 3 else np.ones(64, bool)
    w.vcc = rng.random(64) < 0.5
    w.scc = int(rng.integers(0, 2))
    w.m0 = 64
    w.lds[:] = rng.integers(0, 256, w.lds.size, dtype=np.uint8)
    return w


def _snapshot(w):
    return (w.vgpr.copy(), w.sgpr.copy(), w.exec.copy(), w.vcc.copy(), w.scc, w.lds.copy(),
            dataclasses.astuple(w.counters))


def _same(a, b):
    for x, y in zip(a, b):
        if isinstance(x, np.ndarray):
            assert np.array_equal(x, y), "state differs"
        else:
            assert x == y


VALU = [
    ins("v_add_f32", [v(10)], [v(1), v(2)], enc="VOP2"),
    ins("v_add_f32", [v(10)], [s(3), v(2)], enc="VOP2"),
    ins("v_mul_f32", [v(10)], [lit(0x3E000000), v(2)], enc="VOP2"),
    ins("v_fma_f32", [v(10)], [v(1), v(2), v(3)]),
    ins("v_fma_f32", [v(10)], [v(1), s(2), c(0x3F800000, "1.0")]),
    ins("v_fmac_f32", [v(10)], [v(1), v(2)], enc="VOP2"),
    ins("v_fmac_f32", [v(10)], [s(5), v(2)], enc="VOP2"),
    ins("v_maximum3_f32", [v(10)], [v(1), v(2), v(3)]),
    ins("v_maximum3_f32", [v(10)], [v(1), c(0, "0"), c(0x80000000)]),
    ins("v_minimum3_f32", [v(10)], [v(1), v(2), c(0, "0")]),
    ins("v_max_f32", [v(10)], [v(1), v(2)], enc="VOP2"),
    ins("v_and_b32", [v(10)], [s(4), v(2)], enc="VOP2"),
    ins("v_lshlrev_b32", [v(10)], [c(2), v(2)], enc="VOP2"),
    ins("v_ashrrev_i32", [v(10)], [v(1), v(2)], enc="VOP2"),
    ins("v_add_lshl_u32", [v(10)], [v(1), v(2), c(2)]),
    ins("v_add3_u32", [v(10)], [v(1), s(2), lit(12345)]),
    ins("v_mul_lo_u32", [v(10)], [v(1), v(2)]),
    ins("v_mul_hi_u32", [v(10)], [v(1), v(2)]),
    ins("v_bfe_u32", [v(10)], [v(1), c(3), c(5)]),
    ins("v_cvt_f32_i32", [v(10)], [v(1)], enc="VOP1"),
    ins("v_cvt_i32_f32", [v(10)], [v(1)], enc="VOP1"),
    ins("v_mov_b32", [v(10)], [s(7)], enc="VOP1"),
    ins("v_mov_b32", [A(3)], [v(1)], enc="VOP1"),
    ins("v_rcp_f32", [v(10)], [v(1)], enc="VOP1"),
    ins("v_cndmask_b32", [v(10)], [v(1), v(2), VCC], enc="VOP2"),
    ins("v_cndmask_b32", [v(10)], [v(1), c(7), s(20, 2)]),
    ins("v_pk_mul_f32", [V2(10)], [V2(2), V2(4)], enc="VOP3P", op_sel=0, op_sel_hi=7),
    ins("v_pk_mul_f32", [V2(10)], [s(24, 2), V2(4)], enc="VOP3P", op_sel=1, op_sel_hi=7),
    ins("v_pk_add_f32", [V2(10)], [V2(2), lit(0x40000000)], enc="VOP3P", op_sel=2, op_sel_hi=5),
    ins("v_pk_fma_f32", [V2(10)], [V2(2), V2(4), V2(6)], enc="VOP3P", op_sel=0, op_sel_hi=7),
    ins("v_cvt_pk_bf16_f32", [v(10)], [v(1), v(2)]),
    ins("v_cvt_scalef32_pk_bf16_fp4", [v(10)], [v(1), v(2)], op_sel=0b0011),
    ins("v_cvt_scalef32_pk_f16_fp4", [v(10)], [v(1), s(2)], op_sel=0b0001),
    ins("v_cvt_scalef32_pk_f32_fp4", [V2(10)], [v(1), v(2)], op_sel=0b0010),
    *(ins("v_bitop3_b32", [v(10)], [v(1), s(2), v(3)], bitop3=t) for t in (0, 0xFF, 0x6C, 0x96, 0xE8, 0x01, 0xF0)),
    ins("v_cmp_lt_i32", [VCC], [v(1), v(2)], enc="VOPC"),
    ins("v_cmp_gt_u32", [s(30, 2)], [s(4), v(2)]),
    ins("v_cmp_neq_f32", [VCC], [v(1), v(2)], enc="VOPC"),
    ins("v_cmpx_ge_i32", [s(30, 2)], [v(1), c(5)]),
    ins("v_cmp_u_f32", [VCC], [v(1), v(1)], enc="VOPC"),
]


@pytest.mark.parametrize("instr", VALU, ids=lambda i: i.text + " " + " ".join(o.name for o in i.src))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_valu_fast_matches_general(instr, seed):
    fast = handler_for(instr)
    assert fast is not HANDLERS[instr.op], "no specialization for this form"
    a, b = _state(seed), _state(seed)
    with np.errstate(all="ignore"):
        fast(a, instr)
        HANDLERS[instr.op](b, instr)
    _same(_snapshot(a), _snapshot(b))


def test_modifiers_keep_the_general_handler():
    for i in (ins("v_add_f32", [v(1)], [v(2), v(3)], neg=1),
              ins("v_fmac_f32", [v(1)], [v(2), v(3)], enc="VOP2", dpp={"ctrl": 0x111}),
              ins("v_max_f32", [v(1)], [v(2), v(3)], clamp=1),
              ins("ds_read_b64", [v(4, 2)], [v(0)], offset=8, gds=1)):
        assert handler_for(i) is HANDLERS[i.op]


def _vsharp(w, sgpr, base, num_records):
    w.sgpr[sgpr:sgpr + 4] = [base & 0xFFFFFFFF, (base >> 32) & 0xFFFF, num_records, 0x00020000]


MEM = [
    ins("buffer_load_dword", [v(20)], [v(0), s(8, 4), s(12)], offen=1, offset=4),
    ins("buffer_load_dwordx2", [v(20, 2)], [v(0), s(8, 4), c(0)], offen=1),
    ins("buffer_load_dwordx4", [v(20, 4)], [v(0), s(8, 4), c(0)], offen=1, offset=16),
    ins("buffer_load_dwordx4", [A(20, 4)], [v(0), s(8, 4), c(0)], offen=1),
    ins("buffer_load_dword", [v(20)], [s(8, 4), lit(8)], offset=12),
    ins("buffer_load_dwordx4", [], [v(0), s(8, 4), c(0)], offen=1, lds=1, offset=32),
    ins("buffer_load_dword", [], [v(0), s(8, 4), s(12)], offen=1, lds=1),
    ins("buffer_load_ushort", [v(20)], [v(0), s(8, 4), c(0)], offen=1, offset=2),
    ins("buffer_load_sbyte", [v(20)], [v(0), s(8, 4), s(12)], offen=1, offset=3),
    ins("buffer_load_sshort", [v(20)], [v(0), s(8, 4), c(0)], offen=1),
    ins("buffer_store_dword", [], [v(1), v(0), s(8, 4), s(12)], offen=1),
    ins("buffer_store_dwordx4", [], [v(4, 4), v(0), s(8, 4), c(0)], offen=1, offset=4),
    ins("buffer_store_short", [], [v(1), v(0), s(8, 4), c(0)], offen=1, offset=2),
    ins("buffer_store_byte", [], [v(1), v(0), s(8, 4), c(0)], offen=1, offset=1),
    ins("ds_read_b32", [v(20)], [v(30)], offset=4),
    ins("ds_read_b64", [v(20, 2)], [v(30)]),
    ins("ds_read_b128", [A(20, 4)], [v(30)], offset=16),
    ins("ds_write_b32", [], [v(30), v(1)], offset=8),
    ins("ds_write_b128", [], [v(30), v(4, 4)]),
    ins("ds_write_b64", [], [v(31), v(4, 2)]),                   # colliding addresses
    ins("ds_read_b32", [v(20)], [v(32)]),                        # unaligned: general inside
]


@pytest.mark.parametrize("instr", MEM, ids=lambda i: f"{i.op}{'-lds' if i.mods.get('lds') else ''}"
                         f"-{i.src[0].kind}")
@pytest.mark.parametrize("seed", [3, 4, 5])
@pytest.mark.parametrize("records", [4096, 1000, 1002])      # all in range / partial lanes
def test_memory_fast_matches_general(instr, seed, records):
    fast = handler_for(instr)
    assert fast is not HANDLERS[instr.op]
    states = []
    for _ in range(2):
        t = torch.arange(1024, dtype=torch.int32) * 7 + 3
        mem = Memory()
        mem.register_tensor(t)
        w = _state(seed, mem)
        _vsharp(w, 8, t.data_ptr(), records)
        w.sgpr[12] = 4
        rng = np.random.default_rng(seed)
        w.vgpr[0] = rng.integers(0, 250, 64).astype(np.uint32) * 4
        w.vgpr[30] = (rng.permutation(64) * 16).astype(np.uint32)
        w.vgpr[31] = (np.arange(64) // 4 * 8).astype(np.uint32)
        w.vgpr[32] = (np.arange(64) * 4 + 2).astype(np.uint32)
        states.append((w, t))
    (a, ta), (b, tb) = states
    fast(a, instr)
    HANDLERS[instr.op](b, instr)
    a.sgpr[8:10] = b.sgpr[8:10]                  # the two tensors' base addresses
    _same(_snapshot(a), _snapshot(b))
    assert torch.equal(ta, tb)
    assert all(type(x) is int for x in dataclasses.astuple(a.counters))


MFMA = [
    ins("v_mfma_f32_16x16x32_bf16", [A(0, 4)], [v(40, 4), v(50, 4), A(0, 4)], enc="VOP3P"),
    ins("v_mfma_f32_32x32x16_bf16", [v(100, 16)], [v(40, 4), v(50, 4), c(0, "0")], enc="VOP3P"),
    ins("v_mfma_scale_f32_16x16x128_f8f6f4", [A(0, 4)], [v(40, 8), v(50, 8), A(0, 4), v(1), v(2)],
        enc="VOP3P", cbsz=0, blgp=1, scale_a_byte=2, scale_b_byte=1),
    ins("v_mfma_scale_f32_16x16x128_f8f6f4", [A(0, 4)], [v(40, 4), v(50, 6), c(0, "0"), v(1), v(2)],
        enc="VOP3P", cbsz=4, blgp=2, scale_a_byte=0, scale_b_byte=3),
    ins("v_mfma_scale_f32_32x32x64_f8f6f4", [A(0, 16)], [v(40, 6), v(50, 4), A(0, 16), v(1), v(2)],
        enc="VOP3P", cbsz=3, blgp=4),
    ins("v_mfma_f32_16x16x128_f8f6f4", [A(0, 4)], [v(40, 8), v(50, 8), A(0, 4)], enc="VOP3P"),
]


@pytest.mark.parametrize("instr", MFMA, ids=lambda i: f"{i.op}-{i.mods.get('cbsz', '')}")
def test_mfma_fast_matches_general(instr):
    fast = handler_for(instr)
    assert fast is not HANDLERS[instr.op]
    a, b = _state(6), _state(6)
    for w in (a, b):            # finite operands with small exponents: E8M0 scales near 1
        w.vgpr[1:3] = (w.vgpr[1:3] & 0x07070707) | 0x78787878
    with np.errstate(all="ignore"):
        fast(a, instr)
        HANDLERS[instr.op](b, instr)
    _same(_snapshot(a), _snapshot(b))
