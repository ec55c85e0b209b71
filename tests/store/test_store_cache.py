"""The user cache: an unusable directory is an error naming the variables that fix it, and a corrupt
entry is compiled again once (logged), never served."""
import pytest
import torch
from store_helpers import PROBE64, cache_store, config, copy_store, read_manifest

from flyaot.formats.manifest import Spec, sha256_hex
from flyaot.kernel_defs.probe import plan as probe
from flyaot.runtime.dispatch import Runtime
from flyaot.runtime.errors import IntegrityError
from flyaot.store.errors import StoreError

MISSING = Spec.make("probe", {"block": 128, "behavior": "raise"}, "gfx950")


@pytest.mark.parametrize("make", [
    lambda p: p.write_text("a file, not a directory") and p,
    lambda p: (p.write_text("x"), p / "below-a-file")[1],
])
def test_defect14_an_unusable_cache_dir_names_the_variables_that_fix_it(tmp_path, make):
    cache = make(tmp_path / "cache")
    rt = Runtime(config(tmp_path, cache=cache, disable_jit=False))
    with pytest.raises(StoreError, match=f"the user cache {cache_store(cache, 'gfx950')} is not usable") as e:
        rt.find(MISSING, -1)
    assert "FLYAOT_CACHE_DIR" in str(e.value) and "FLYAOT_DISABLE_JIT" in str(e.value)


def _corrupt_cache(probe_store, home):
    cache = copy_store(probe_store, cache_store(home, "gfx950"))
    entry = next(e for e in read_manifest(cache)["specs"].values() if e["key"] == PROBE64)
    data = bytearray((cache / entry["file"]).read_bytes())
    data[len(data) // 2] ^= 0xFF
    (cache / entry["file"]).write_bytes(bytes(data))
    return cache, entry


def test_defect14_a_corrupt_cache_entry_is_never_served(probe_store, tmp_path):
    _corrupt_cache(probe_store, tmp_path / "cache")
    with pytest.raises(IntegrityError, match="does not match its manifest entry"):
        Runtime(config(tmp_path, cache=tmp_path / "cache")).launch(probe.plan(torch.zeros(4), 1.0))


@pytest.mark.slow
def test_defect14_a_corrupt_cache_entry_is_compiled_again_once(probe_build, tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("FLYAOT_BUILD_CACHE", str(probe_build["cache"]))     # the compile is a cache hit
    cache, entry = _corrupt_cache(probe_build["out"], tmp_path / "cache")
    out = torch.zeros(7)
    with caplog.at_level("INFO", logger="flyaot"):
        Runtime(config(tmp_path, cache=tmp_path / "cache", disable_jit=False)).launch(probe.plan(out, 3.0))
    assert torch.equal(out, torch.full((7,), 4.0))
    assert caplog.text.count(f"the user cache entry of {PROBE64} is unusable") == 1
    assert caplog.text.count("compiling it with FlyDSL now") == 1
    healed = next(e for e in read_manifest(cache)["specs"].values() if e["key"] == PROBE64)
    assert sha256_hex((cache / healed["file"]).read_bytes()) == healed["sha256"] == entry["sha256"]
    caplog.clear()
    with caplog.at_level("INFO", logger="flyaot"):       # a later process serves the healed entry as is
        Runtime(config(tmp_path, cache=tmp_path / "cache")).launch(probe.plan(out, 5.0))
    assert torch.equal(out, torch.full((7,), 6.0)) and "compiling" not in caplog.text
