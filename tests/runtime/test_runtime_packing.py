"""Argument packing against real code objects' AMDGPU metadata, and exact value conversion."""
import struct

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from runtime_helpers import PROBE64, PROBE128, entry_by_key

from flyaot.formats import codeobject
from flyaot.runtime.errors import IntegrityError, StoreError
from flyaot.store.slots import ArgLayout, Slot, convert


def _real(probe_store, key):
    sid, entry = entry_by_key(probe_store, key)
    co = codeobject.parse((probe_store / entry["file"]).read_bytes())
    return entry, co.kernel(entry["symbol"])


@pytest.mark.parametrize("key", [PROBE64, PROBE128])
def test_manifest_slots_match_the_code_object_metadata(probe_store, key):
    entry, kernel = _real(probe_store, key)
    layout = ArgLayout.from_entry(entry, key)
    layout.cross_check(kernel, entry, key)
    assert layout.kernarg_size == kernel.kernarg_size
    assert [(s.offset, s.size) for s in layout.slots] == [(a.offset, a.size) for a in kernel.args]


@pytest.mark.parametrize("edit,match", [
    (lambda e: (e["args"][2].update(offset=16), e.update(kernarg_size=24)), "differ from the code object's metadata"),
    (lambda e: e["args"].pop(), "differ from the code object's metadata"),
    (lambda e: e.update(kernarg_size=e["kernarg_size"] + 8), "kernarg_size"),
    (lambda e: e.update(block=[32, 2, 1]), "requires"),
    (lambda e: e["resources"].update(vgpr=e["resources"]["vgpr"] + 1), "resources differ"),
])
def test_disagreeing_manifest_is_refused_at_load(probe_store, edit, match):
    entry, kernel = _real(probe_store, PROBE64)
    edit(entry)
    with pytest.raises(IntegrityError, match=match):
        ArgLayout.from_entry(entry, PROBE64).cross_check(kernel, entry, PROBE64)


def test_kernarg_bytes_are_laid_out_where_the_metadata_says(probe_store):
    entry, kernel = _real(probe_store, PROBE64)
    layout = ArgLayout.from_entry(entry, PROBE64)
    out = torch.zeros(7)
    raw = layout.pack({"out": out, "n": -123456, "value": 0.1})
    # Oracle: the code object's own offsets, values encoded independently with numpy.
    a_out, a_n, a_value = kernel.args
    assert len(raw) == kernel.kernarg_size
    assert raw[a_out.offset:a_out.offset + 8] == np.uint64(out.data_ptr()).tobytes()
    assert raw[a_n.offset:a_n.offset + 4] == np.int32(-123456).tobytes()
    assert raw[a_value.offset:a_value.offset + 4] == np.float32(0.1).tobytes()
    with pytest.raises(ValueError, match="missing \\['value'\\], unexpected \\['v'\\]"):
        layout.pack({"out": out, "n": 1, "v": 0.1})


I32, I64, F32 = (Slot("n", "int32_t", "by_value", 0, 4), Slot("big", "int64_t", "by_value", 8, 8),
                 Slot("x", "float", "by_value", 16, 4))


@given(st.integers(-(1 << 70), 1 << 70))
def test_ints_are_range_checked_for_their_own_width(v):
    for slot, bits in ((I32, 32), (I64, 64)):
        if -(1 << (bits - 1)) <= v < 1 << (bits - 1):
            assert convert(slot, v) == v
        else:
            with pytest.raises(ValueError, match=f"'{slot.name}'.*out of range"):
                convert(slot, v)


@given(st.floats(allow_nan=False, width=64))
def test_floats_round_once_to_f32_or_are_refused(v):
    with np.errstate(over="ignore"):
        expected = np.float32(v)
    if np.isinf(expected) and not np.isinf(v):
        with pytest.raises(ValueError, match="does not fit in f32"):
            convert(F32, v)
    else:
        assert struct.pack("<f", convert(F32, v)) == expected.tobytes()


@pytest.mark.parametrize("slot,value,exc", [
    (I32, True, TypeError), (I32, 1.0, TypeError), (I64, "3", TypeError), (F32, False, TypeError),
    (F32, torch.tensor(1.0), TypeError), (Slot("p", "void*", "global_buffer", 0, 8), 1234, TypeError),
    (F32, 10 ** 400, ValueError),
])
def test_wrong_python_types_are_refused(slot, value, exc):
    with pytest.raises(exc, match=f"'{slot.name}'"):
        convert(slot, value)


def test_slot_table_must_be_self_consistent():
    base = {"symbol": "k", "block": [64, 1, 1], "kernarg_size": 16, "resources": {}}
    ok = dict(base, args=[{"name": "a", "ctype": "void*", "kind": "global_buffer", "offset": 0, "size": 8},
                          {"name": "b", "ctype": "int64_t", "kind": "by_value", "offset": 8, "size": 8}])
    assert ArgLayout.from_entry(ok, "t").codes == "pl"
    misaligned = dict(ok, args=[ok["args"][0], dict(ok["args"][1], offset=12)], kernarg_size=24)
    with pytest.raises(StoreError, match="not 8-aligned"):
        ArgLayout.from_entry(misaligned, "t")
    dup = dict(ok, args=[ok["args"][0], dict(ok["args"][1], name="a")])
    with pytest.raises(StoreError, match="duplicate"):
        ArgLayout.from_entry(dup, "t")
    wrong_kind = dict(ok, args=[dict(ok["args"][0], kind="by_value")])
    with pytest.raises(StoreError, match="kind 'global_buffer'"):
        ArgLayout.from_entry(wrong_kind, "t")
