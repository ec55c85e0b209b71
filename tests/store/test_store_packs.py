"""Misses files and add-on packs are validated: a line for another target or with malformed params is
refused with a message, and a broken pack is refused alone while the other stores keep serving."""
import json
import sys

import pytest
import torch
from store_helpers import PROBE64, config, copy_store, edit_manifest, one_line_error, read_manifest

from flyaot.kernel_defs.probe import plan as probe
from flyaot.runtime.dispatch import Runtime
from flyaot.store.index import ENTRY_POINT_GROUP, Index
from tests.support import run_build


def _misses(tmp_path, *records):
    path = tmp_path / "misses.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.mark.parametrize("record,match", [
    ({"family": "probe", "params": {"block": 64, "behavior": "ok"}, "target": "gfx942"},
     "recorded for target 'gfx942'; this build makes gfx950 stores"),
    ({"family": "probe", "params": [1]}, "params must be an object of name: value, got [1]"),
    ({"family": "probe", "params": {"block": [64], "behavior": "ok"}}, "must be int, bool or str"),
    ("probe", "not a miss record"),
])
def test_defect13_misses_lines_for_another_target_or_malformed_are_refused(probe_build, tmp_path, record, match):
    good = {"family": "probe", "params": {"block": 64, "behavior": "ok"}}
    path = _misses(tmp_path, good, record)
    proc = run_build("build", "--from-misses", path, "--out", tmp_path / "out", "--cache", probe_build["cache"],
                     check=False)
    assert proc.returncode == 2 and f"{path}:2: " in one_line_error(proc) and match in proc.stderr
    assert not (tmp_path / "out").exists()


def _self_inconsistent_pack(probe_store, root):
    """What a gfx942 misses line used to build: a gfx950 manifest whose entry keys say gfx942."""
    return edit_manifest(copy_store(probe_store, root), lambda m: [
        e.update(key=e["key"].replace("@gfx950", "@gfx942")) for e in m["specs"].values()])


def test_defect13_a_broken_pack_on_the_path_is_refused_alone(probe_store, tmp_path, caplog):
    broken = _self_inconsistent_pack(probe_store, tmp_path / "broken")
    with caplog.at_level("WARNING", logger="flyaot.store"):
        rt = Runtime(config(tmp_path, extra=(broken, probe_store)))
        out = torch.zeros(6)
        rt.launch(probe.plan(out, 4.0))
    assert torch.equal(out, torch.full((6,), 5.0))
    assert f"extra store {broken} refused" in caplog.text and "does not match its family/params" in caplog.text
    assert [loc.root for loc, _ in rt.index.refused if loc.kind == "extra"] == [broken]


def _install_pack(site, name, store_src):
    """A pack installed the way pip leaves one: a package holding a store, and dist-info declaring it."""
    copy_store(store_src, site / name)
    (site / name / "__init__.py").write_text("")
    info = site / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{name} = {name}\n")


def test_defect13_installed_packs_serve_and_a_broken_one_is_refused_alone(probe_store, tmp_path, monkeypatch,
                                                                           caplog):
    site = tmp_path / "site"
    site.mkdir()
    _install_pack(site, "flyaot_pack_bad", _self_inconsistent_pack(probe_store, tmp_path / "bad-src"))
    _install_pack(site, "flyaot_pack_good", probe_store)
    monkeypatch.syspath_prepend(str(site))
    with caplog.at_level("WARNING", logger="flyaot.store"):
        index = Index.open(config(tmp_path))
    assert [s.kind for s in index.stores] == ["pack"]      # no package or cache store exists here
    assert index.lookup(PROBE64)[0].root == site / "flyaot_pack_good"
    assert [loc.root for loc, _ in index.refused if loc.kind == "pack"] == [site / "flyaot_pack_bad"]
    assert f"pack store {site / 'flyaot_pack_bad'} refused" in caplog.text
    assert "flyaot_pack_bad" not in sys.modules          # found with find_spec: no pack code ran
    out = torch.zeros(3)
    Runtime(config(tmp_path)).launch(probe.plan(out, 1.0))
    assert torch.equal(out, torch.full((3,), 2.0))
    assert read_manifest(site / "flyaot_pack_good")["target"] == "gfx950"
