"""Every gate refuses a crafted violation; a sound code object passes."""
import dataclasses

import pytest

from flyaot import targets
from flyaot.build_tools import gates
from flyaot.formats import codeobject
from flyaot.kernel_defs.registry import Budget


@pytest.fixture()
def probe64(probe_store):
    entry = next(e for e in probe_store["manifest"]["specs"].values() if e["params"]["block"] == 64)
    return entry, (probe_store["out"] / entry["file"]).read_bytes()


def _check(data, entry, **overrides):
    kw = dict(target=targets.get(targets.DEFAULT_TARGET), symbol=entry["symbol"], block=(64, 1, 1), traced_block=(64, 1, 1),
              arg_ctypes=("void*", "int32_t", "float"), budget=Budget())
    kw.update(overrides)
    co = data if isinstance(data, codeobject.CodeObject) else codeobject.parse(data)
    return gates.check(co, **kw)


def _patch_meta_fixint(data: bytes, key: str, value: int) -> bytes:
    """Rewrite a zero-valued msgpack fixint field of the metadata note in place."""
    needle = bytes([0xA0 | len(key)]) + key.encode() + b"\x00"
    assert data.count(needle) == 1, key
    return data.replace(needle, needle[:-1] + bytes([value]))


def test_sound_object_passes(probe64):
    entry, data = probe64
    assert _check(data, entry) == []


def test_wrong_target(probe64):
    entry, data = probe64
    bad = bytearray(data)
    bad[48] = 0x4C            # e_flags low byte: EF_AMDGPU_MACH gfx942
    assert any("not gfx950" in p for p in _check(bytes(bad), entry))


def test_scratch(probe64):
    entry, data = probe64
    bad = _patch_meta_fixint(data, ".private_segment_fixed_size", 16)
    assert any("scratch" in p for p in _check(bad, entry))


@pytest.mark.parametrize("key", [".vgpr_spill_count", ".sgpr_spill_count"])
def test_spills(probe64, key):
    entry, data = probe64
    assert any("spills" in p for p in _check(_patch_meta_fixint(data, key, 3), entry))


def test_lds_over_limit(probe64):
    entry, data = probe64
    co = codeobject.parse(data)
    k = co.kernel(entry["symbol"])
    big = dataclasses.replace(k, resources=dataclasses.replace(k.resources, lds=160 * 1024 + 4))
    crafted = dataclasses.replace(co, kernels=(big,))
    assert any("exceeds" in p for p in _check(crafted, entry))


def test_workgroup_size_differs_from_plan(probe64):
    entry, data = probe64
    problems = _check(data, entry, block=(128, 1, 1))
    assert any("launch plan" in p for p in problems)


def test_missing_symbol(probe64):
    entry, data = probe64
    assert any("not found" in p for p in _check(data, entry, symbol="no_such_kernel"))


def test_family_budget(probe64):
    entry, data = probe64
    vgpr = codeobject.parse(data).kernel(entry["symbol"]).resources.vgpr
    assert vgpr >= 1
    assert any("budget" in p for p in _check(data, entry, budget=Budget(max_vgpr=vgpr - 1)))
    assert any("exactly" in p for p in _check(data, entry, budget=Budget(exact_lds=1024)))


def test_argument_table_mismatch(probe64):
    entry, data = probe64
    assert any("arguments" in p for p in _check(data, entry, arg_ctypes=("void*", "int32_t")))
    assert any("int64_t" in p for p in _check(data, entry, arg_ctypes=("void*", "int64_t", "float")))
