"""Store order and precedence, manifest refusals at open, integrity refusals at first read."""
import os

import pytest
from runtime_helpers import (PROBE64, PROBE128, cache_store, copy_store, entry_by_key, make_config, read_manifest,
                             write_manifest)

from flyaot.formats.manifest import sha256_hex
from flyaot.runtime.config import Config
from flyaot.runtime.errors import IntegrityError, StoreError
from flyaot.store.index import Index, Store


def test_first_store_holding_a_key_wins_package_extra_cache(probe_store, tmp_path):
    pkg = copy_store(probe_store, tmp_path / "pkg" / "gfx950", keys={PROBE64})
    extra1 = copy_store(probe_store, tmp_path / "extra1", keys={PROBE64, PROBE128})
    extra2 = copy_store(probe_store, tmp_path / "extra2")
    cache = copy_store(probe_store, cache_store(tmp_path / "cache", "gfx950"))
    index = Index.open(make_config(tmp_path, package=pkg.parent, extra=(extra1, extra2), cache=tmp_path / "cache"))
    assert [s.kind for s in index.stores] == ["package", "extra", "extra", "cache"]
    store, sid, entry = index.lookup(PROBE64)
    assert (store.root, entry["key"]) == (pkg, PROBE64)
    store, _, _ = index.lookup(PROBE128)
    assert store.root == extra1
    # Without the package and first extra store, the next in line answers.
    index = Index.open(make_config(tmp_path, extra=(extra2,), cache=tmp_path / "cache"))
    assert index.lookup(PROBE64)[0].root == extra2
    index = Index.open(make_config(tmp_path, cache=tmp_path / "cache"))
    assert index.lookup(PROBE64)[0].kind == "cache"
    assert index.lookup("probe[behavior=ok,block=256]@gfx950") is None


def test_environment_sets_extra_stores_in_order_and_cache_default(monkeypatch, tmp_path):
    monkeypatch.setenv("FLYAOT_PREBUILT_PATH", os.pathsep.join([str(tmp_path / "a"), str(tmp_path / "b")]))
    monkeypatch.delenv("FLYAOT_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    c = Config.from_env()
    assert c.extra_stores == (tmp_path / "a", tmp_path / "b")
    from flyaot import __version__
    from flyaot.targets import DEFAULT_TARGET as TARGET
    assert c.cache_dir == tmp_path / "xdg" / "flyaot"
    assert cache_store(c.cache_dir, TARGET) == tmp_path / "xdg" / "flyaot" / __version__ / TARGET
    monkeypatch.setenv("FLYAOT_CACHE_DIR", str(tmp_path / "mine"))
    assert Config.from_env().cache_dir == tmp_path / "mine"
    monkeypatch.setenv("FLYAOT_DEVICE", "tpu")
    with pytest.raises(ValueError, match="FLYAOT_DEVICE"):
        Config.from_env()


def test_missing_package_and_cache_stores_are_empty_but_a_missing_extra_store_is_refused(tmp_path, caplog):
    index = Index.open(make_config(tmp_path))
    assert index.stores == [] and index.refused == []
    assert index.cache("gfx950").root == cache_store(tmp_path / "user-cache", "gfx950") and not index.cache("gfx950").by_key
    with caplog.at_level("WARNING", logger="flyaot.store"):
        index = Index.open(make_config(tmp_path, extra=(tmp_path / "nowhere",)))
    assert index.stores == []
    (loc, why), = [r for r in index.refused if r[0].kind == "extra"]
    assert loc.root == tmp_path / "nowhere" and "no manifest.json" in why and "no manifest.json" in caplog.text


def _refused(probe_store, tmp_path, edit, match):
    root = copy_store(probe_store, tmp_path / "s")
    m = read_manifest(root)
    edit(m, next(iter(m["specs"].values())))
    write_manifest(root, m)
    with pytest.raises(StoreError, match=match):
        Store.open(root, "extra", missing_ok=False)


@pytest.mark.parametrize("edit,match", [
    (lambda m, e: m.update(schema=3), "schema: 3; this flyaot reads schema 2"),
    (lambda m, e: m.update(schema=1), "schema: 1, the layout of <target>/<id>.co under one manifest"),
    (lambda m, e: m.update(flyaot="0.0.1"), "built for flyaot 0.0.1"),
    (lambda m, e: m["toolchain"].update(flydsl="0.4.0"), "FlyDSL '0.4.0'"),
    (lambda m, e: m.pop("toolchain"), "toolchain: missing"),
    (lambda m, e: e.pop("sha256"), "sha256: missing"),
    (lambda m, e: e.update(key="probe[block=1]@gfx950"), "does not match its family/params/target"),
    (lambda m, e: e["params"].update(block=256), "does not match its family/params/target"),
    (lambda m, e: e.update(file="../../etc/passwd"), "must be "),
    (lambda m, e: e["args"][1].update(ctype="int16_t"), "ctype: 'int16_t' is not one of"),
    (lambda m, e: e["args"][1].update(offset=4), "overlaps"),
    (lambda m, e: e["args"][2].update(size=8), "size 4"),
    (lambda m, e: e.update(kernarg_size=8), "kernarg_size: 8 is smaller"),
    (lambda m, e: e.update(block=[64, 1]), "block"),
])
def test_store_is_refused_at_open(probe_store, tmp_path, edit, match):
    _refused(probe_store, tmp_path, edit, match)


def test_corrupt_manifest_json_is_refused(tmp_path):
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(StoreError, match="cannot read manifest"):
        Store.open(tmp_path, "extra", missing_ok=False)


def test_code_object_hash_and_size_are_checked_at_read(probe_store, tmp_path):
    root = copy_store(probe_store, tmp_path / "s")
    store = Store.open(root, "extra", missing_ok=False)
    sid, entry = entry_by_key(root, PROBE64)
    good = store.read(sid, entry)
    assert sha256_hex(good) == entry["sha256"]
    flipped = bytearray(good)
    flipped[len(flipped) // 2] ^= 1
    (root / entry["file"]).write_bytes(bytes(flipped))
    with pytest.raises(IntegrityError, match="sha256"):
        store.read(sid, entry)
    (root / entry["file"]).write_bytes(good + b"\0")
    with pytest.raises(IntegrityError, match=f"size {len(good) + 1} vs {len(good)}"):
        store.read(sid, entry)
    (root / entry["file"]).unlink()
    with pytest.raises(StoreError, match="cannot read"):
        store.read(sid, entry)


def test_nearest_specs_rank_by_differing_params_then_distance(probe_store, tmp_path):
    index = Index.open(make_config(tmp_path, extra=(probe_store,)))
    assert index.nearest("probe", {"block": 100, "behavior": "ok"}, "gfx950") == [PROBE128, PROBE64]
    assert index.nearest("probe", {"block": 90, "behavior": "ok"}, "gfx950") == [PROBE64, PROBE128]
    assert index.nearest("probe", {"block": 64, "behavior": "hang"}, "gfx950")[0] == PROBE64
    assert index.nearest("probe", {"block": 64, "behavior": "ok"}, "gfx942") == []
    assert index.same_spec_other_target("probe", {"block": 64, "behavior": "ok"}, "gfx942") == ["gfx950"]


def test_a_refused_user_cache_is_ignored_not_fatal(probe_store, tmp_path, caplog):
    # A cache written by another flyaot version must not stop prebuilt kernels from being found.
    cache = copy_store(probe_store, cache_store(tmp_path / "cache", "gfx950"))
    manifest = read_manifest(cache)
    manifest["flyaot"] = "0.0.0-other"
    write_manifest(cache, manifest)
    pkg = copy_store(probe_store, tmp_path / "pkg" / "gfx950", keys={PROBE64})
    with caplog.at_level("WARNING", logger="flyaot.store"):
        index = Index.open(make_config(tmp_path, package=pkg.parent, cache=tmp_path / "cache"))
    assert "ignoring the user cache" in caplog.text
    assert index.lookup(PROBE64)[0].kind == "package"
    assert index.lookup(PROBE128) is None
    with caplog.at_level("WARNING", logger="flyaot.store"):   # an extra store the user named: refused loudly
        index = Index.open(make_config(tmp_path, extra=(cache,)))
    assert [r[0].root for r in index.refused if r[0].kind == "extra"] == [cache]
    assert f"extra store {cache} refused" in caplog.text


def test_a_user_cache_of_the_old_layout_is_refused_naming_clear_cache(probe_store, tmp_path, caplog):
    # schema 1 kept one store at the cache folder's root (code objects in gfx950/ below it)
    old = copy_store(probe_store, tmp_path / "cache")
    manifest = read_manifest(old)
    manifest["schema"] = 1
    write_manifest(old, manifest)
    with caplog.at_level("WARNING", logger="flyaot.store"):
        index = Index.open(make_config(tmp_path, extra=(probe_store,), cache=old))
    (loc, why), = index.refused
    assert loc.kind == "cache" and loc.root == old and "clear-cache" in why and "clear-cache" in caplog.text
    assert index.lookup(PROBE64)[0].root == probe_store
    assert index.cache("gfx950").root == cache_store(old, "gfx950")
