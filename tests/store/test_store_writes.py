"""Store writes are confined and never shrink a store by accident (merge, write_store, build --out),
against real stores built by the real build CLI."""
import pytest
from store_helpers import PROBE64, copy_store, edit_manifest, one_line_error, read_manifest

from flyaot.store.errors import StoreError
from flyaot.store.write import write_store
from tests.support import run_build, store_files


def _first(m):
    return next(iter(m["specs"].values()))


def test_defect1_merge_never_writes_outside_out_for_a_shard_file_name(probe_shards, tmp_path):
    shard = copy_store(probe_shards[0], tmp_path / "a" / "b" / "shard")
    entry = _first(read_manifest(shard))
    # The hostile name points two levels up; the bytes are there, so a merge trusting it would copy them.
    (tmp_path / "a" / "x.co").write_bytes((shard / entry["file"]).read_bytes())
    edit_manifest(shard, lambda m: _first(m).update(file="../../x.co"))
    out = tmp_path / "o1" / "o2" / "out"
    proc = run_build("merge", shard, probe_shards[1], "--out", out, check=False)
    assert proc.returncode == 2 and "must be " in one_line_error(proc)
    assert not (tmp_path / "o1" / "x.co").exists() and not out.exists()


def test_defect1_merge_never_deletes_through_a_shard_target(probe_shards, tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.co").write_bytes(b"precious")
    shards = [copy_store(d, tmp_path / f"s{i}") for i, d in enumerate(probe_shards)]
    for s in shards:
        edit_manifest(s, lambda m: m.update(target=str(victim)))
    proc = run_build("merge", *shards, "--out", tmp_path / "out", check=False)
    assert proc.returncode == 2 and "is not an architecture name" in one_line_error(proc)
    assert (victim / "keep.co").read_bytes() == b"precious"


def _retarget(m, target):
    """A manifest consistent with the schema for another target name."""
    m["target"] = target
    for e in m["specs"].values():
        e.update(key=e["key"].replace("@gfx950", f"@{target}"))


@pytest.mark.parametrize("edit,match", [
    (lambda m: _first(m).update(file="../x.co"), "must be "),
    (lambda m: _retarget(m, "gfx942"), "unknown GPU target 'gfx942'"),
    (lambda m: m.update(target="../gfx950"), "not an architecture name"),
    (lambda m: m["specs"].update({"../evil": m["specs"].pop(next(iter(m["specs"])))}), "not a plain name"),
])
def test_defect1_write_store_takes_names_only_from_entry_ids_and_the_target_table(probe_store, tmp_path, edit, match):
    m = read_manifest(probe_store)
    blobs = {sid: (probe_store / e["file"]).read_bytes() for sid, e in m["specs"].items()}
    edit(m)
    blobs.update({sid: next(iter(blobs.values())) for sid in m["specs"] if sid not in blobs})
    with pytest.raises(StoreError, match=match):
        write_store(tmp_path / "out", m, blobs)
    assert not (tmp_path / "x.co").exists() and not (tmp_path / "out" / "manifest.json").exists()


def test_defect2_merge_refuses_to_shrink_a_fuller_store_unless_forced(probe_store, tmp_path):
    full = copy_store(probe_store, tmp_path / "full")
    before = store_files(full)
    (tmp_path / "one.jsonl").write_text('{"family": "probe", "params": {"block": 64, "behavior": "ok"}}\n')
    run_build("build", "--from-misses", tmp_path / "one.jsonl", "--out", tmp_path / "one",
              "--cache", tmp_path / "cache")
    proc = run_build("merge", tmp_path / "one", "--out", full, check=False)
    assert proc.returncode == 2 and "holds 2 specs and the merge 1: it would drop 1" in one_line_error(proc)
    assert store_files(full) == before
    proc = run_build("merge", tmp_path / "one", "--out", full, "--force")
    assert [e["key"] for e in read_manifest(full)["specs"].values()] == [PROBE64]


def test_defect2_merge_reports_missing_shards(probe_shards, probe_store, tmp_path):
    proc = run_build("merge", probe_shards[0], "--out", tmp_path / "partial", check=False)
    assert proc.returncode == 2 and "shards 1/2 are missing" in one_line_error(proc)
    assert not (tmp_path / "partial").exists()
    # All shards: the full build, byte for byte (the shard marks do not survive the merge).
    run_build("merge", *probe_shards, "--out", tmp_path / "merged")
    assert store_files(tmp_path / "merged") == store_files(probe_store)
    assert read_manifest(probe_shards[0])["shard"] == "0/2"


def test_merge_with_a_bad_shard_is_one_line_error(probe_shards, tmp_path):
    proc = run_build("merge", tmp_path / "nowhere", "--out", tmp_path / "out", check=False)
    assert proc.returncode == 2 and "no manifest.json" in one_line_error(proc)
    bad = copy_store(probe_shards[0], tmp_path / "bad")
    (bad / "manifest.json").write_text("{not json")
    proc = run_build("merge", bad, probe_shards[1], "--out", tmp_path / "out", check=False)
    assert proc.returncode == 2 and "cannot read manifest" in one_line_error(proc)
    co = next(probe_shards[1].glob("*.co"))
    corrupt = copy_store(probe_shards[1], tmp_path / "corrupt")
    (corrupt / co.name).write_bytes(co.read_bytes()[:-1])
    proc = run_build("merge", probe_shards[0], corrupt, "--out", tmp_path / "out", check=False)
    assert proc.returncode == 2 and "does not match its manifest entry" in one_line_error(proc)
    assert not (tmp_path / "out").exists()


def test_build_out_a_file_is_one_line_error(probe_build, tmp_path):
    (tmp_path / "afile").write_text("not a store")
    proc = run_build("build", "--family", "probe", "--out", tmp_path / "afile", "--cache", probe_build["cache"],
                     check=False)
    assert proc.returncode == 2 and "is not a directory" in one_line_error(proc)
    assert (tmp_path / "afile").read_text() == "not a store"
