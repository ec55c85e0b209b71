"""The emulator's memory-safety rules on hand-built instructions: a buffer access stays inside the
tensor holding its descriptor's base (not merely inside some registered storage), out-of-range
lanes read 0 / drop their stores, and an access through a descriptor based in no tensor faults."""
import numpy as np
import pytest
import torch

from flyaot.emu.memory import Memory
from flyaot.emu.wave import EmuError
from tests.emu.exec_helpers import c, ins, run, s, v, wave

L = np.arange(64, dtype=np.uint32)


def _vsharp(w, sgpr, base, num_records):
    w.sgpr[sgpr] = base & 0xFFFFFFFF
    w.sgpr[sgpr + 1] = (base >> 32) & 0xFFFF
    w.sgpr[sgpr + 2] = num_records
    w.sgpr[sgpr + 3] = 0x00020000


def _two_views():
    """Two tensors as adjacent views of one storage: a = words [0, 32), b = words [32, 64)."""
    pool = torch.arange(64, dtype=torch.int32)
    return pool, pool[:32], pool[32:]


def _mem(*tensors):
    m = Memory()
    for t in tensors:
        m.register_tensor(t)
    return m


@pytest.mark.parametrize("op", ["buffer_load_dword", "buffer_store_dword"])
def test_buffer_access_past_its_tensor_into_a_neighbour_faults(op):
    _, a, b = _two_views()
    w = wave(_mem(a, b))
    _vsharp(w, 4, a.data_ptr(), 0xFFFFFFFF)          # unbounded descriptor over a
    w.vgpr[0] = L * 4                                # lanes 32.. reach into b (same storage)
    srcs = [v(0), s(4, 4), c(0)] if op.startswith("buffer_load") else [v(1), v(0), s(4, 4), c(0)]
    with pytest.raises(EmuError, match="leaves its tensor"):
        run(w, ins(op, [v(1)] if op.startswith("buffer_load") else [], srcs, offen=1))
    w.exec[:] = L < 32                               # the same access confined to a is fine
    run(w, ins("buffer_load_dword", [v(1)], [v(0), s(4, 4), c(0)], offen=1))
    assert (w.vgpr[1][:32] == L[:32]).all()


def test_bounded_descriptor_keeps_out_of_range_lanes_silent():
    _, a, b = _two_views()
    w = wave(_mem(a, b))
    _vsharp(w, 4, a.data_ptr(), 32 * 4)              # num_records = a's bytes: lanes 32.. are out of range
    w.vgpr[0] = L * 4
    w.vgpr[2] = 7
    run(w, ins("buffer_load_dword", [v(1)], [v(0), s(4, 4), c(0)], offen=1),
        ins("buffer_store_dword", [], [v(2), v(0), s(4, 4), c(0)], offen=1))
    assert (w.vgpr[1] == np.where(L < 32, L, 0)).all()
    assert (a == 7).all() and (b == torch.arange(32, 64, dtype=torch.int32)).all()


def test_descriptor_based_outside_every_tensor_faults_unless_nothing_is_in_range():
    pool, a, b = _two_views()
    w = wave(_mem(a))                                # b's bytes are storage of a, but not tensor a
    _vsharp(w, 4, b.data_ptr(), 64)
    w.vgpr[0] = L * 0
    with pytest.raises(EmuError, match="the base lies in no tensor"):
        run(w, ins("buffer_load_dword", [v(1)], [v(0), s(4, 4), c(0)], offen=1))
    _vsharp(w, 4, b.data_ptr(), 0)                   # num_records 0: no lane is in range, no access
    run(w, ins("buffer_load_dword", [v(1)], [v(0), s(4, 4), c(0)], offen=1))
    assert (w.vgpr[1] == 0).all()


def test_s_buffer_load_is_confined_too():
    _, a, b = _two_views()
    w = wave(_mem(a, b))
    _vsharp(w, 12, a.data_ptr() + 30 * 4, 0xFFFFFFFF)
    with pytest.raises(EmuError, match="leaves its tensor"):
        run(w, ins("s_buffer_load_dwordx4", [s(24, 4)], [s(12, 4)], enc="SMEM", offset=0))
    _vsharp(w, 12, a.data_ptr() + 30 * 4, 8)         # bounded: dwords 2, 3 read 0
    run(w, ins("s_buffer_load_dwordx4", [s(24, 4)], [s(12, 4)], enc="SMEM", offset=0))
    assert list(w.sgpr[24:28]) == [30, 31, 0, 0]


def test_strided_views_of_a_shared_pool_each_count_as_a_tensor():
    """Values and scales interleaved page by page in one pool: an access inside either view is fine."""
    pool = torch.zeros(4, 48, dtype=torch.uint8)
    values, scales = pool[:, :32], pool[:, 32:]
    w = wave(_mem(values, scales))
    _vsharp(w, 4, scales.data_ptr() + 48, 16)        # page 1 of the scales
    w.vgpr[0] = (L % 4) * 4
    w.vgpr[2] = 0x01020304
    run(w, ins("buffer_store_dword", [], [v(2), v(0), s(4, 4), c(0)], offen=1))
    assert (pool[1, 32:] == torch.tensor([4, 3, 2, 1] * 4, dtype=torch.uint8)).all()
    assert int(pool.sum()) == 4 * 10
