"""The family contract (kernel_defs/registry.py): each family declares its kernel ABI once; the build
refuses a launcher whose signature differs, and a LaunchPlan naming a wrong argument fails in pure
Python, before any store is opened or any kernel is launched."""
import importlib.util
import json
import pathlib

import pytest

from flyaot import targets
from flyaot.build_tools.build import finish_entry
from flyaot.build_tools.flydsl_compile import KernelBuild
from flyaot.formats.manifest import SLOT_CTYPES, Spec
from flyaot.kernel_defs import registry

PACKAGE_MANIFEST = pathlib.Path(__file__).resolve().parents[2] / "prebuilt" / targets.DEFAULT_TARGET / "manifest.json"


@pytest.mark.parametrize("name", registry.family_names())
def test_every_family_declares_a_complete_contract(name):
    fam = registry.get_family(name)
    assert fam.name == name and all(targets.get(t).arch == t for t in fam.targets)
    assert importlib.util.find_spec(fam.kernel_module) is not None
    for params in fam.specs(targets.get(fam.targets[0])):
        abi = fam.abi(params)
        assert abi and all(ctype in SLOT_CTYPES and n.isidentifier() for n, ctype in abi)
        assert len({n for n, _ in abi}) == len(abi)


def test_kernel_abi_rejects_a_type_the_slots_do_not_know():
    assert registry.kernel_abi("void* out, int64_t n") == (("out", "void*"), ("n", "int64_t"))
    with pytest.raises(ValueError, match="double x"):
        registry.kernel_abi("void* out, double x")


def test_a_wrong_argument_name_fails_when_the_plan_is_made():
    from flyaot.kernel_defs.mqa_prefill.specs import FAMILY
    params = {"heads": 64, "head_dim": 128, "page_size": 64}
    args = {n: 0 for n, _ in FAMILY.abi(params)}
    assert FAMILY.launch_plan(params, (1, 1, 1), args).block == FAMILY.block(params, FAMILY.target_rows[0])
    args["stride_kvpage"] = args.pop("stride_kv_page")
    with pytest.raises(ValueError, match=r"missing \['stride_kv_page'\], unknown \['stride_kvpage'\]"):
        FAMILY.launch_plan(params, (1, 1, 1), args)


def test_the_build_refuses_a_launcher_signature_that_differs_from_the_abi(probe_store):
    """A real probe code object with one argument renamed, as if the launcher had drifted."""
    sid, entry = next(iter(probe_store["manifest"]["specs"].items()))
    data = (probe_store["out"] / entry["file"]).read_bytes()
    spec = Spec.make("probe", entry["params"], probe_store["manifest"]["target"])
    good = KernelBuild.from_entry(entry, data)
    assert finish_entry(spec, sid, good)[1] is None
    drifted = KernelBuild(data, good.kernel_name, ("out", "count", "value"), good.arg_ctypes, good.block)
    entry_out, reason = finish_entry(spec, sid, drifted)
    assert entry_out is None and "differs from the kernel ABI the family declares" in reason


@pytest.mark.skipif(not PACKAGE_MANIFEST.exists(), reason="no prebuilt store: run `make prebuilt`")
def test_every_shipped_code_object_has_its_family_abi():
    manifest = json.loads(PACKAGE_MANIFEST.read_text())
    for entry in manifest["specs"].values():
        declared = registry.get_family(entry["family"]).abi(entry["params"])
        assert tuple((a["name"], a["ctype"]) for a in entry["args"]) == declared, entry["key"]
