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


def _regs(vgpr, agpr):
    return codeobject.Resources(vgpr=vgpr, agpr=agpr, sgpr=0, lds=0, scratch=0, vgpr_spill=0, sgpr_spill=0,
                                wavefront_size=64, max_workgroup_size=256, uses_dynamic_stack=False)


def test_unified_vgpr_count_splits_into_arch_and_agprs():
    # v0-v8 (rounded up to the 4-register AGPR offset: 12) + a0-a31 give `.vgpr_count` 44.
    assert _regs(44, 32).registers(unified=True) == (12, 32, 44)
    assert _regs(44, 0).registers(unified=True) == (44, 0, 44)
    assert _regs(44, 32).registers(unified=False) == (44, 32, 76)
    with pytest.raises(codeobject.CodeObjectError, match="agpr_count"):
        _regs(8, 32).registers(unified=True)


@pytest.fixture(scope="module")
def agpr_code_object(tmp_path_factory):
    """A real gfx950 GEMM code object whose accumulators overflow into AGPRs (more than 256 VGPRs
    in all), compiled in this process."""
    from flyaot.build_tools import toolchain
    from flyaot.build_tools.worker import compile_spec_in_process
    target = targets.get("gfx950")
    env = toolchain.flydsl_env(toolchain.prepare_toolkit(toolchain.find_linker(), tmp_path_factory.mktemp("tk")),
                               target.arch)
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        kb = compile_spec_in_process("gemm_a16wfp4", {"order": "prefill", "bm": 128, "bn": 128, "sk": 2, "kb": 1,
                                                      "mfma": 16},
                                     target)
    return kb


def test_unified_total_over_256_passes_within_the_arch_and_acc_limits(agpr_code_object):
    kb = agpr_code_object
    co = codeobject.parse(kb.code_object)
    target = targets.get("gfx950")
    arch_vgprs, agprs, total = co.kernel(kb.kernel_name).resources.registers(target.unified_vgprs)
    assert agprs > 0 and total > target.vgprs
    desc = co.descriptor(kb.kernel_name)
    # The descriptor states the same split independently: AGPRs start at ACCUM_OFFSET, and the
    # granulated VGPR count covers the whole file in use (granule 8).
    assert desc.accum_offset == arch_vgprs
    assert total <= ((desc.pgm_rsrc1 & 0x3F) + 1) * 8 < total + 8
    kw = dict(symbol=kb.kernel_name, block=kb.block, traced_block=kb.block, arg_ctypes=kb.arg_ctypes)
    assert gates.check(co, target=target, budget=Budget(max_vgpr_plus_agpr=total), **kw) == []
    tight = dataclasses.replace(target, vgprs=arch_vgprs - 4)
    assert any(f"{arch_vgprs} VGPRs exceed" in p for p in gates.check(co, target=tight, budget=Budget(), **kw))
    over = gates.check(co, target=target, budget=Budget(max_vgpr=arch_vgprs - 1, max_vgpr_plus_agpr=total - 1), **kw)
    assert any("budget: " + str(arch_vgprs) in p for p in over) and any(f"budget: {total} VGPRs+AGPRs" in p for p in over)
