"""The build CLI end to end with real FlyDSL compiles: determinism, incrementality, isolation, shards."""
import json

from tests.support import run_build, store_files


def test_summary_and_manifest(probe_store):
    assert "2 built, 0 cached, 0 failed" in probe_store["stdout"]
    m = probe_store["manifest"]
    assert m["target"] == "gfx950" and m["toolchain"]["flydsl"] and m["toolchain"]["lld"].startswith("LLD ")
    assert sorted(e["key"] for e in m["specs"].values()) == [
        "probe[behavior=ok,block=128]@gfx950", "probe[behavior=ok,block=64]@gfx950"]
    text = (probe_store["out"] / "manifest.json").read_text()
    for leak in (str(probe_store["out"]), "/tmp", "/root", "home"):
        assert leak not in text


def test_deterministic_across_processes(probe_store, tmp_path):
    # A second process with an empty cache compiles everything again and must produce the same bytes.
    run_build("build", "--family", "probe", "--out", tmp_path / "again", "--cache", tmp_path / "cache", "--jobs", 1)
    assert store_files(tmp_path / "again") == store_files(probe_store["out"])


def test_incremental_rebuild_compiles_nothing(probe_store, tmp_path):
    proc = run_build("build", "--family", "probe", "--out", tmp_path / "out", "--cache", probe_store["cache"])
    assert "0 built, 2 cached, 0 failed" in proc.stdout
    assert store_files(tmp_path / "out") == store_files(probe_store["out"])


def test_shards_merge_to_the_full_build(probe_store, tmp_path):
    for i in range(2):
        run_build("build", "--family", "probe", "--shard", f"{i}/2", "--out", tmp_path / f"s{i}",
                  "--cache", probe_store["cache"])
    n0 = len(json.loads((tmp_path / "s0" / "manifest.json").read_text())["specs"])
    n1 = len(json.loads((tmp_path / "s1" / "manifest.json").read_text())["specs"])
    assert n0 + n1 == 2
    run_build("merge", tmp_path / "s1", tmp_path / "s0", "--out", tmp_path / "merged")
    assert store_files(tmp_path / "merged") == store_files(probe_store["out"])


def _misses(tmp_path, *behaviors):
    path = tmp_path / "misses.jsonl"
    lines = [json.dumps({"family": "probe", "params": {"block": b, "behavior": beh}}) for b, beh in behaviors]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_crashing_compile_fails_only_that_spec(probe_store, tmp_path):
    misses = _misses(tmp_path, (64, "abort"), (128, "raise"), (128, "ok"), (64, "ok"))
    proc = run_build("build", "--from-misses", misses, "--out", tmp_path / "out", "--cache", tmp_path / "cache",
                     "--jobs", 1, check=False)
    assert proc.returncode == 1
    assert "2 built, 0 cached, 2 failed" in proc.stdout
    assert "simulated MLIR assertion failure" in proc.stderr and "exit code -6" in proc.stderr
    assert "simulated FlyDSL compile error" in proc.stderr
    assert not (tmp_path / "out" / "manifest.json").exists()
    # The good specs were kept in the cache: the retry compiles only the failures again.
    proc = run_build("build", "--from-misses", _misses(tmp_path, (128, "ok"), (64, "ok")),
                     "--out", tmp_path / "out", "--cache", tmp_path / "cache")
    assert "0 built, 2 cached, 0 failed" in proc.stdout


def test_hanging_compile_times_out(tmp_path):
    misses = _misses(tmp_path, (64, "hang"))
    proc = run_build("build", "--from-misses", misses, "--out", tmp_path / "out", "--cache", tmp_path / "cache",
                     "--timeout", 20, check=False)
    assert proc.returncode == 1 and "timed out after 20s" in proc.stderr


def test_verify_detects_tampering(probe_store, tmp_path):
    import shutil
    copy = tmp_path / "store"
    shutil.copytree(probe_store["out"], copy)
    assert run_build("verify", copy).returncode == 0
    victim = next(copy.glob("*.co"))
    data = bytearray(victim.read_bytes())
    data[-1] ^= 0xFF
    victim.write_bytes(bytes(data))
    proc = run_build("verify", copy, check=False)
    assert proc.returncode == 1 and "sha256" in proc.stderr


def test_partial_build_never_replaces_the_package_store():
    proc = run_build("build", "--family", "probe", check=False)
    assert proc.returncode == 2 and "give --out DIR" in proc.stderr
