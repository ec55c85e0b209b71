"""Buffer / global / scalar / LDS memory semantics on hand-built instructions over real tensors."""
import numpy as np
import pytest
import torch

from exec_helpers import c, ins, run, s, v, wave
from flyaot.emu.memory import Memory
from flyaot.emu.wave import EmuError

L = np.arange(64, dtype=np.uint32)


def _vsharp(w, sgpr, base, num_records, stride=0):
    w.sgpr[sgpr] = base & 0xFFFFFFFF
    w.sgpr[sgpr + 1] = ((base >> 32) & 0xFFFF) | (stride << 16)
    w.sgpr[sgpr + 2] = num_records
    w.sgpr[sgpr + 3] = 0x00020000


def _mem(*tensors):
    m = Memory()
    for t in tensors:
        m.register_tensor(t)
    return m


def test_buffer_load_out_of_range_reads_zero_and_store_drops():
    src = torch.arange(100, dtype=torch.int32)
    dst = torch.full((100,), -1, dtype=torch.int32)
    w = wave(_mem(src, dst))
    _vsharp(w, 4, src.data_ptr(), 40 * 4)          # only the first 40 ints are in range
    _vsharp(w, 8, dst.data_ptr(), 50 * 4)
    w.vgpr[0] = L * 4
    w.sgpr[12] = 8                                 # soffset shifts the address but not the check
    run(w, ins("buffer_load_dword", [v(1)], [v(0), s(4, 4), s(12)], offen=1, offset=4),
        ins("buffer_store_dword", [], [v(1), v(0), s(8, 4), c(0)], offen=1))
    got = w.vgpr[1].astype(np.int64)
    want = np.array([k + 3 if k * 4 + 4 + 4 <= 160 else 0 for k in range(64)])
    assert (got == want).all()
    out = dst.numpy()
    assert (out[:50] == want[:50]).all() and (out[50:] == -1).all()


def test_buffer_dwordx4_range_checked_per_component_and_ubyte():
    src = torch.arange(64, dtype=torch.int32)
    w = wave(_mem(src))
    _vsharp(w, 0, src.data_ptr(), 4 * 10)          # dwords 0..9 valid
    w.vgpr[0] = L * 16
    run(w, ins("buffer_load_dwordx4", [v(4, 4)], [v(0), s(0, 4), c(0)], offen=1),
        ins("buffer_load_ubyte", [v(8)], [v(0), s(0, 4), c(0)], offen=1, offset=1))
    for k in range(3):
        for j in range(4):
            d = 4 * k + j
            assert int(w.vgpr[4 + j, k]) == (d if d < 10 else 0)
    assert int(w.vgpr[8, 0]) == 0 and int(w.vgpr[8, 2]) == 0     # byte 1 of small ints is 0
    assert (w.vgpr[4:8, 3:] == 0).all()


@pytest.mark.parametrize("op,nbytes,stride", [("buffer_load_dword", 4, 4),
                                               ("buffer_load_dwordx3", 12, 16),
                                               ("buffer_load_dwordx4", 16, 16)])
def test_buffer_load_to_lds(op, nbytes, stride):
    # ISA rule: lane l's data goes to LDS byte M0 + inst_offset + l * stride (stride 4 for
    # dword, 16 for the gfx950 dwordx3/x4 forms); per-dword range check as for VGPR loads, an
    # out-of-range dword is stored as 0; EXEC-off lanes store nothing; no VGPR is written.
    src = torch.arange(1000, dtype=torch.int32) + 7
    w = wave(_mem(src), lds_bytes=2048)
    w.lds[:] = 0xAB
    nrec = 4 * 150
    _vsharp(w, 4, src.data_ptr(), nrec)
    voff = (L * 12).astype(np.uint32)
    w.vgpr[0] = voff
    w.sgpr[9] = 8                                   # soffset: shifts the address, not the check
    w.m0 = 96
    w.exec[5] = w.exec[40] = False
    before = w.vgpr.copy()
    run(w, ins(op, [], [v(0), s(4, 4), s(9)], offen=1, offset=20, lds=1))
    assert (w.vgpr == before).all()
    want = np.full(2048, 0xAB, dtype=np.uint8)
    for lane in range(64):
        if lane in (5, 40):
            continue
        for d in range(nbytes // 4):
            rel = int(voff[lane]) + 20 + 4 * d
            val = (rel + 8) // 4 + 7 if rel + 4 <= nrec else 0
            at = 96 + 20 + lane * stride + 4 * d
            want[at:at + 4] = np.frombuffer(np.uint32(val).tobytes(), np.uint8)
    assert (w.lds == want).all()


def test_buffer_load_to_lds_sub_dword_is_refused():
    w = wave(_mem(torch.zeros(16, dtype=torch.int32)), lds_bytes=1024)
    with pytest.raises(EmuError, match="lds"):
        run(w, ins("buffer_load_ubyte", [], [v(0), s(4, 4), c(0)], offen=1, lds=1))


def test_global_load_store_saddr_and_widths():
    x = torch.arange(256, dtype=torch.int16)
    y = torch.zeros(64, dtype=torch.int64)
    w = wave(_mem(x, y))
    w.sgpr[2], w.sgpr[3] = x.data_ptr() & 0xFFFFFFFF, x.data_ptr() >> 32
    w.vgpr[0] = L * 2
    w.exec[:] = L < 50
    run(w, ins("global_load_sshort", [v(1)], [v(0), s(2, 2)], offset=-0 + 2),
        ins("global_load_dwordx2", [v(2, 2)], [v(0), s(2, 2)]))
    assert [int(t) for t in w.vgpr[1, :50]] == [k + 1 for k in range(50)]
    addr = np.uint64(y.data_ptr()) + L.astype(np.uint64) * np.uint64(8)
    w.vgpr[10], w.vgpr[11] = (addr & np.uint64(0xFFFFFFFF)).astype(np.uint32), (addr >> np.uint64(32)).astype(np.uint32)
    run(w, ins("global_store_dwordx2", [], [v(10, 2), v(2, 2)]))                # saddr = off
    ref = x.numpy().view(np.uint16).astype(np.int64)
    got = y.numpy()
    for k in range(64):
        want = (ref[k] | ref[k + 1] << 16 | ref[k + 2] << 32 | ref[k + 3] << 48) if k < 50 else 0
        assert got[k] == want


def test_global_access_outside_allocations_raises():
    x = torch.zeros(16, dtype=torch.float32)
    w = wave(_mem(x))
    base = x.data_ptr()
    addr = np.uint64(base) + L.astype(np.uint64) * np.uint64(4)   # lanes 16.. run past the tensor
    w.vgpr[0], w.vgpr[1] = (addr & np.uint64(0xFFFFFFFF)).astype(np.uint32), (addr >> np.uint64(32)).astype(np.uint32)
    with pytest.raises(EmuError, match="outside every registered allocation"):
        run(w, ins("global_load_dword", [v(2)], [v(0, 2)]))
    w.exec[:] = L < 16                                               # masked lanes never access
    run(w, ins("global_store_dword", [], [v(0, 2), v(0)]))
    assert (x.numpy().view(np.uint32) == (addr[:16] & np.uint64(0xFFFFFFFF)).astype(np.uint32)).all()


def test_s_load_and_s_buffer_load():
    t = torch.arange(32, dtype=torch.int32)
    w = wave(_mem(t))
    w.sgpr[0], w.sgpr[1] = t.data_ptr() & 0xFFFFFFFF, t.data_ptr() >> 32
    w.sgpr[20] = 12
    run(w, ins("s_load_dwordx4", [s(4, 4)], [s(0, 2)], enc="SMEM", offset=8),
        ins("s_load_dword", [s(8)], [s(0, 2), s(20)], enc="SMEM", offset=4, soffset=s(20)))
    assert list(w.sgpr[4:8]) == [2, 3, 4, 5] and int(w.sgpr[8]) == 4
    _vsharp(w, 12, t.data_ptr(), 4 * 6)
    run(w, ins("s_buffer_load_dwordx8", [s(24, 8)], [s(12, 4)], enc="SMEM", offset=8))
    assert list(w.sgpr[24:32]) == [2, 3, 4, 5, 0, 0, 0, 0]


def test_lds_read_write_widths_and_pairs():
    w = wave(lds_bytes=4096)
    w.vgpr[0] = L * 16
    w.vgpr[1:5] = np.stack([L * 4 + j for j in range(4)])
    w.vgpr[15] = L * 4
    run(w, ins("ds_write_b128", [], [v(0), v(1, 4)], offset=32),
        ins("ds_read_b64", [v(8, 2)], [v(0)], offset=40),
        ins("ds_read2_b32", [v(10, 2)], [v(0)], offset0=8, offset1=11),
        ins("ds_read_u16", [v(12)], [v(0)], offset=34),
        ins("ds_write2st64_b32", [], [v(15), v(1), v(2)], offset0=4, offset1=5),
        ins("ds_read_b32", [v(13)], [v(15)], offset=1024),
        ins("ds_read_b32", [v(14)], [v(15)], offset=1280))
    assert (w.vgpr[8] == L * 4 + 2).all() and (w.vgpr[9] == L * 4 + 3).all()
    assert (w.vgpr[10] == L * 4).all() and (w.vgpr[11] == L * 4 + 3).all()
    assert (w.vgpr[12] == 0).all()                  # high half of a small dword
    # st64: the offset unit is 64 dwords, so offsets 4/5 land at bytes 1024/1280
    assert (w.vgpr[13] == L * 4).all() and (w.vgpr[14] == L * 4 + 1).all()
    with pytest.raises(EmuError, match="LDS address"):
        run(w, ins("ds_read_b32", [v(14)], [v(0)], offset=4000))


def test_lds_address_wraps_at_32_bits():
    # LLVM folds a positive offset onto a base it computed as "negative"; vaddr + offset wraps mod 2^32.
    w = wave(lds_bytes=256)
    w.vgpr[0] = L * 4
    w.vgpr[1] = np.uint32(0xFFFFFFF0) + L * 4          # equals lane*4 - 16 mod 2^32
    run(w, ins("ds_write_b32", [], [v(1), v(0)], offset=16),
        ins("ds_read_b32", [v(2)], [v(0)], offset=0))
    assert (w.vgpr[2] == L * 4).all()


def _scratch_wave(nbytes):
    w = wave()
    w.scratch = np.zeros((64, nbytes), dtype=np.uint8)
    return w


def test_scratch_store_load_is_private_per_lane():
    # ISA rule: scratch_* address each lane's own private segment; lane offset = inst_offset +
    # saddr (SGPR) + vaddr (with SVE); the same offset in two lanes is two different locations.
    w = _scratch_wave(64)
    w.vgpr[4:8] = np.stack([L * 10 + j for j in range(4)])
    w.sgpr[3] = 16
    run(w, ins("scratch_store_dwordx4", [], [v(4, 4), s(3)], enc="SCRATCH", offset=8, sve=0))
    for lane in (0, 37):
        got = w.scratch[lane, 24:40].view(np.uint32)
        assert got.tolist() == [lane * 10 + j for j in range(4)]
    assert not w.scratch[:, :24].any() and not w.scratch[:, 40:].any()
    w.vgpr[0] = L % 2 * 4                                   # SVE: a per-lane offset on top
    run(w, ins("scratch_load_dword", [v(9)], [v(0)], enc="SCRATCH", offset=24, sve=1))
    want = np.where(L % 2 == 0, L * 10, L * 10 + 1)
    assert (w.vgpr[9] == want).all()


def test_scratch_exec_mask_widths_and_sign_extension():
    w = _scratch_wave(16)
    w.vgpr[2] = np.uint32(0xFFFF8081)
    w.vgpr[3] = 0x11223344
    w.exec[5] = False
    run(w, ins("scratch_store_dwordx2", [], [v(2, 2)], enc="SCRATCH", offset=0, sve=0))
    assert not w.scratch[5].any()
    assert w.scratch[0, :8].view(np.uint32).tolist() == [0xFFFF8081, 0x11223344]
    w.vgpr[7] = 0xDEADBEEF
    run(w, ins("scratch_load_sbyte", [v(6)], [], enc="SCRATCH", offset=0, sve=0),
        ins("scratch_load_ushort", [v(8)], [], enc="SCRATCH", offset=0, sve=0),
        ins("scratch_load_short_d16_hi", [v(7)], [], enc="SCRATCH", offset=4, sve=0))
    assert int(w.vgpr[6, 0]) == 0xFFFFFF81 and int(w.vgpr[8, 0]) == 0x8081
    assert int(w.vgpr[7, 0]) == 0x3344BEEF
    assert int(w.vgpr[7, 5]) == 0xDEADBEEF                 # an inactive lane's register is untouched


def test_scratch_outside_the_private_segment_faults():
    w = _scratch_wave(16)
    w.exec[:] = False
    w.exec[9] = True
    with pytest.raises(EmuError, match="lane 9 .*outside the 16-byte scratch segment"):
        run(w, ins("scratch_load_dwordx2", [v(0, 2)], [], enc="SCRATCH", offset=12, sve=0))
    w.sgpr[0] = np.uint32(0xFFFFFFFC)                       # a wrapped negative offset
    with pytest.raises(EmuError, match="outside"):
        run(w, ins("scratch_store_dword", [], [v(1), s(0)], enc="SCRATCH", offset=0, sve=0))
