"""A target that builds and serves from a store of its own is one row in targets.py plus `targets=` on
the families that support it (docs/architecture.md#what-a-change-touches counts the rest).

The row here is test-only: the test adds it to the table in this process and no such row ships, and
no other file is edited. It describes a real LLVM target, gfx942 (CDNA3: 64 KiB LDS, wave64), so the
build is real: the build CLI's own `main()` runs in this process (the only one that has the row in
its table; compile workers receive the row as a value and check FlyDSL compiles for its arch), FlyDSL
compiles the probe family for gfx942 (its launcher gets the row), and the gates check the gfx942 code objects
against the limits the row declares. The store that comes out serves its specs to a runtime asked for
gfx942, names its nearest specs for a miss, and is refused at load by the emulator, which runs gfx950
code only. A row whose waves the shipped kernels' lane layouts do not fit is refused by their `block`.
"""
import dataclasses
import importlib
import json

import pytest
import torch

from flyaot import runtime, targets
from flyaot.build_tools import __main__ as cli
from flyaot.formats import codeobject
from flyaot.kernel_defs import registry
from flyaot.formats.manifest import Spec
from flyaot.runtime import ArchMismatchError, MissingSpecError, drivers
from flyaot.runtime.config import Config
from flyaot.runtime.dispatch import Runtime
from flyaot.store.index import cache_store

DUMMY = targets.GPUTarget(backend="hip", arch="gfx942", warp_size=64, mach=0x4C, lds_bytes=64 * 1024,
                          vgprs=256, agprs=256, sgprs=102, unified_vgprs=True, emulated=False,
                          description="test-only row")


@pytest.fixture()
def dummy_target(monkeypatch):
    """The dummy row in the table, and the probe family declaring it beside its own targets."""
    monkeypatch.setitem(targets.TARGETS, DUMMY.arch, DUMMY)
    specs = importlib.import_module(f"{registry.__package__}.probe.specs")
    monkeypatch.setattr(specs, "FAMILY", dataclasses.replace(specs.FAMILY, targets=specs.FAMILY.targets + (DUMMY.arch,)))
    return DUMMY


def _build(tmp_path, *extra) -> int:
    return cli.main(["build", "--family", "probe", "--target", DUMMY.arch, "--out", str(tmp_path / "store"),
                     "--cache", str(tmp_path / "cache"), "--jobs", "2", *extra])


def test_a_family_without_the_target_is_not_built_for_it(tmp_path, dummy_target, monkeypatch, capsys):
    specs = importlib.import_module(f"{registry.__package__}.probe.specs")
    monkeypatch.setattr(specs, "FAMILY", dataclasses.replace(specs.FAMILY, targets=(targets.DEFAULT_TARGET,)))
    assert _build(tmp_path) == 2
    assert f"does not declare target {DUMMY.arch}" in capsys.readouterr().err


def test_dummy_target_store_builds_with_its_limits_and_is_refused_on_the_emulator(tmp_path, dummy_target, monkeypatch, capsys):
    assert _build(tmp_path) == 0, capsys.readouterr().err
    store = tmp_path / "store"
    manifest = json.loads((store / "manifest.json").read_text())
    assert manifest["target"] == DUMMY.arch and len(manifest["specs"]) == 2
    for entry in manifest["specs"].values():
        assert entry["key"].endswith(f"@{DUMMY.arch}") and entry["file"] == f"{entry['id']}.co"
        co = codeobject.parse((store / entry["file"]).read_bytes())
        assert co.mach == DUMMY.arch and co.e_flags & 0xFF == DUMMY.mach

    # The gates read the row: the same (now cached) code objects are refused by a row with fewer VGPRs
    # than the kernel uses, and nothing is written.
    monkeypatch.setitem(targets.TARGETS, DUMMY.arch, dataclasses.replace(DUMMY, vgprs=1))
    assert _build(tmp_path, "--out", str(tmp_path / "refused")) == 1
    assert f"exceed {DUMMY.arch}'s 1" in capsys.readouterr().err
    assert not (tmp_path / "refused").exists()
    monkeypatch.setitem(targets.TARGETS, DUMMY.arch, DUMMY)

    # Served: a runtime looking for a gfx942 spec finds it in the store; a gfx942 spec no store holds
    # (the JIT is off) is a miss naming the nearest gfx942 specs the store has.
    monkeypatch.setenv("FLYAOT_PREBUILT_PATH", str(store))
    monkeypatch.setenv("FLYAOT_DISABLE_JIT", "1")
    monkeypatch.setenv("FLYAOT_CACHE_DIR", str(tmp_path / "user-cache"))
    rt = Runtime()
    served = Spec.make("probe", {"block": 64, "behavior": "ok"}, DUMMY.arch)
    hit_store, sid, entry = rt.find(served, -1)
    assert hit_store.root == store and entry["key"] == served.key and entry["file"] == f"{sid}.co"
    missing = Spec.make("probe", {"block": 64, "behavior": "raise"}, DUMMY.arch)
    with pytest.raises(MissingSpecError) as miss:
        rt.find(missing, -1)
    assert not isinstance(miss.value, ArchMismatchError)
    assert f"Nearest prebuilt specs: {served.key}" in str(miss.value) and "FLYAOT_DISABLE_JIT" in str(miss.value)

    # Loading on the emulator (gfx950) is refused: the emu driver reports its own row, and the store's
    # spec is for another target.
    assert drivers.get("emu").target(-1) == targets.DEFAULT_TARGET != DUMMY.arch
    plan = importlib.import_module(f"{registry.__package__}.probe.plan")
    monkeypatch.setenv("FLYAOT_DEVICE", "emu")
    runtime.reset()
    try:
        with pytest.raises(ArchMismatchError, match=f"have it for {DUMMY.arch}, but the current device is "
                                                    f"{targets.DEFAULT_TARGET}"):
            runtime.launch(plan.plan(torch.zeros(64), 1.0))
    finally:
        runtime.reset()


@pytest.mark.parametrize("name", [n for n in registry.family_names() if registry.get_family(n).shipped])
def test_a_target_of_another_wave_size_is_refused_by_every_shipped_family(name, monkeypatch):
    """Each shipped family's lane layouts are written for 64-lane waves: block(params, target) reads the
    row's wave size and refuses a wave32 row by name, before anything is compiled or launched."""
    wave32 = dataclasses.replace(DUMMY, arch="gfx1100", warp_size=32)
    monkeypatch.setitem(targets.TARGETS, wave32.arch, wave32)
    fam = registry.get_family(name)
    params = fam.specs(DUMMY)[0]
    assert fam.block(params, DUMMY)[0] % 64 == 0
    with pytest.raises(ValueError, match=rf"{name}: .*64-lane waves; target gfx1100 runs 32-lane waves"):
        fam.block(params, wave32)


def test_dummy_target_gets_its_own_package_store_and_user_cache(tmp_path, dummy_target, monkeypatch, capsys):
    # The build's default output is the package's store of the target: <package dir>/gfx942/, beside
    # (never inside) the default target's.
    monkeypatch.setattr(cli, "PACKAGE_DIR", tmp_path / "pkg")
    (tmp_path / "pkg" / targets.DEFAULT_TARGET).mkdir(parents=True)
    assert cli.main(["build", "--family", "probe", "--target", DUMMY.arch, "--cache", str(tmp_path / "cache"),
                     "--jobs", "2"]) == 2
    assert "partial build" in capsys.readouterr().err          # --family never replaces a package store
    # a full build for gfx942: every family declaring it, here the probe family alone
    assert cli.main(["build", "--target", DUMMY.arch, "--include-unshipped", "--cache", str(tmp_path / "cache"),
                     "--jobs", "2"]) == 0, capsys.readouterr().err
    own = tmp_path / "pkg" / DUMMY.arch
    assert json.loads((own / "manifest.json").read_text())["target"] == DUMMY.arch
    assert not list((tmp_path / "pkg" / targets.DEFAULT_TARGET).iterdir())
    cfg = dataclasses.replace(Config.from_env(), package_dir=tmp_path / "pkg", extra_stores=(),
                              cache_dir=tmp_path / "user-cache", disable_jit=False, record_misses="")
    served = Spec.make("probe", {"block": 64, "behavior": "ok"}, DUMMY.arch)
    store, _, _ = Runtime(cfg).find(served, -1)
    assert (store.kind, store.root, store.target) == ("package", own, DUMMY.arch)

    # The user cache is one store per device target: a JIT product for gfx942 lands in
    # <cache>/<version>/gfx942/ (the build cache makes the compile a hit), not in the default target's.
    monkeypatch.setenv("FLYAOT_BUILD_CACHE", str(tmp_path / "cache"))
    rt = Runtime(dataclasses.replace(cfg, package_dir=tmp_path / "no-package"))
    store, sid, entry = rt.find(served, -1)
    assert (store.kind, store.root) == ("cache", cache_store(tmp_path / "user-cache", DUMMY.arch))
    assert (store.root / entry["file"]).is_file() and store.target == DUMMY.arch
    assert not cache_store(tmp_path / "user-cache", targets.DEFAULT_TARGET).exists()
