"""`python -m flyaot`: env, list, verify, selftest, bench, clear-cache."""
import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
from runtime_helpers import PROBE64, PROBE128, cache_store, copy_store, read_manifest

from flyaot import cli
from flyaot.runtime import config
from flyaot.store import lock, write
from flyaot.store.errors import StoreError


@pytest.fixture
def run(monkeypatch, capsys):
    """Run the CLI in-process (each case would otherwise pay a torch import) with extra env vars."""
    def go(*args, env=None):
        for k, v in (env or {}).items():
            monkeypatch.setenv(k, v)
        rc = cli.main([str(a) for a in args])
        out, err = capsys.readouterr()
        return SimpleNamespace(returncode=rc, stdout=out, stderr=err)
    return go


def test_python_dash_m_flyaot_runs_the_cli(tmp_path):
    p = subprocess.run([sys.executable, "-m", "flyaot", "env"], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, FLYAOT_CACHE_DIR=str(tmp_path)))
    assert p.returncode == 0 and "c_launcher:" in p.stdout and str(tmp_path) in p.stdout, p.stderr


def test_env_reports_versions_device_stores_and_variables(run, probe_store, tmp_path):
    p = run("env", "--json", env={"FLYAOT_PREBUILT_PATH": str(probe_store), "FLYAOT_CACHE_DIR": str(tmp_path)})
    assert p.returncode == 0, p.stderr
    env = json.loads(p.stdout)
    assert env["versions"]["flyaot"] and env["versions"]["torch"]
    assert env["device"]["target"] == "gfx950"
    extra = [s for s in env["stores"] if s["kind"] == "extra"]
    assert extra == [{"kind": "extra", "path": str(probe_store), "target": "gfx950", "specs": 2, "error": None}]
    assert env["env"]["FLYAOT_PREBUILT_PATH"] == str(probe_store)


def test_env_shows_a_refused_store_instead_of_failing(run, tmp_path):
    p = run("env", env={"FLYAOT_PREBUILT_PATH": str(tmp_path / "missing"), "FLYAOT_CACHE_DIR": str(tmp_path)})
    assert p.returncode == 0 and "REFUSED" in p.stdout


def test_list_filters(run, probe_store, tmp_path):
    env = {"FLYAOT_PREBUILT_PATH": str(probe_store), "FLYAOT_CACHE_DIR": str(tmp_path)}
    rows = json.loads(run("list", "--json", "--store", "extra", env=env).stdout)
    assert sorted(r["key"] for r in rows) == [PROBE128, PROBE64]
    rows = json.loads(run("list", "--json", "--family", "probe", "--where", "block=64", env=env).stdout)
    assert [r["key"] for r in rows] == [PROBE64]
    p = run("list", "--json", "--family", "other", env=env)
    assert p.returncode == 2 and "unknown family 'other' (families in the stores: " in p.stderr and "probe" in p.stderr


def test_verify_passes_a_good_store_and_names_a_corrupt_code_object(run, probe_store, tmp_path):
    env = {"FLYAOT_PREBUILT_PATH": str(probe_store), "FLYAOT_CACHE_DIR": str(tmp_path / "c")}
    p = run("verify", env=env)
    packages = config.package_dir().glob("*/manifest.json")    # built by `make prebuilt`, or absent
    shipped = sum(len(json.loads(m.read_text())["specs"]) for m in packages)
    assert p.returncode == 0 and f"verified {shipped + 2} code objects" in p.stdout, p.stdout + p.stderr
    bad = copy_store(probe_store, tmp_path / "bad")
    co = sorted(bad.glob("*.co"))[0]
    co.write_bytes(co.read_bytes()[:-1] + b"\x01")
    p = run("verify", env=dict(env, FLYAOT_PREBUILT_PATH=str(bad)))
    assert p.returncode == 1 and "FAIL probe[" in p.stdout and "sha256" in p.stdout


def test_selftest_of_a_family_without_hooks_fails_loudly(run):
    p = run("selftest", "--family", "probe")
    assert p.returncode == 2 and "family 'probe' has no selftest" in p.stderr


def test_clear_cache_removes_code_objects_and_manifest_but_keeps_locks(run, probe_store, tmp_path):
    cache = copy_store(probe_store, cache_store(tmp_path / "cache", "gfx950"))
    write.claim_cache(cache)       # what the JIT does when it first publishes into a cache
    with lock.exclusive(str(cache / "locks" / "some.lock"), timeout=1, what="test"):
        pass
    (cache / ".x.co.123.tmp").write_bytes(b"partial")
    p = run("clear-cache", env={"FLYAOT_CACHE_DIR": str(tmp_path / "cache")})
    assert p.returncode == 0 and f"{cache}: removed 4 files" in p.stdout, p.stdout + p.stderr
    assert sorted(x.name for x in cache.rglob("*") if x.is_file()) == [write.CACHE_MARKER, "manifest.lock", "some.lock"]


def test_clear_cache_empties_a_cache_of_the_old_layout(run, probe_store, tmp_path):
    # schema 1: one store at FLYAOT_CACHE_DIR's root, code objects in gfx950/ below its manifest
    old = tmp_path / "old"
    write.claim_cache(old)
    (old / "gfx950").mkdir()
    for co in probe_store.glob("*.co"):
        (old / "gfx950" / co.name).write_bytes(co.read_bytes())
    (old / "manifest.json").write_text(json.dumps(dict(read_manifest(probe_store), schema=1)))
    p = run("clear-cache", env={"FLYAOT_CACHE_DIR": str(old)})
    assert p.returncode == 0 and f"{old}: removed 3 files" in p.stdout, p.stdout + p.stderr
    assert sorted(x.name for x in old.rglob("*") if x.is_file()) == [write.CACHE_MARKER, "manifest.lock"]


def _project(root):
    """A folder of someone else's files that happen to look like a store's."""
    (root / "assets").mkdir(parents=True)
    (root / "manifest.json").write_text('{"name": "my project"}')
    (root / "assets" / "logo.co").write_bytes(b"logo")
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_clear_cache_refuses_a_folder_that_is_not_a_flyaot_cache(run, tmp_path):
    from flyaot import __version__
    _project(tmp_path / "project")
    p = run("clear-cache", env={"FLYAOT_CACHE_DIR": str(tmp_path / "project")})    # no target store: untouched
    assert p.returncode == 0 and "nothing to clear" in p.stdout and "Traceback" not in p.stderr
    (tmp_path / "project" / __version__ / "gfx950").mkdir(parents=True)   # a target's folder, no marker
    before = _project(tmp_path / "project" / __version__ / "gfx950")
    p = run("clear-cache", env={"FLYAOT_CACHE_DIR": str(tmp_path / "project")})
    assert p.returncode == 2 and "Traceback" not in p.stderr
    where = tmp_path / "project" / __version__ / "gfx950"
    assert p.stderr.startswith(f"flyaot clear-cache: error: {where} (FLYAOT_CACHE_DIR) has no flyaot cache marker")
    assert {q.relative_to(where).as_posix(): q.read_bytes() for q in where.rglob("*") if q.is_file()} == before


def test_clear_cache_of_a_file_is_a_clean_error(run, tmp_path):
    (tmp_path / "a-file").write_text("mine")
    p = run("clear-cache", env={"FLYAOT_CACHE_DIR": str(tmp_path / "a-file")})
    assert p.returncode == 2 and p.stderr.startswith("flyaot clear-cache: error: the user cache") and "is not a directory" in p.stderr
    assert (tmp_path / "a-file").read_text() == "mine"


def _publish(root, probe_store):
    """Publish one real entry (the probe's code object) into the user cache through the JIT's writer."""
    from flyaot.formats.manifest import Spec
    from flyaot.runtime.config import EXPECTED_FLYDSL
    sid, entry = next((sid, e) for sid, e in json.loads((probe_store / "manifest.json").read_text())["specs"].items()
                      if e["key"] == PROBE64)
    spec = Spec.make(entry["family"], entry["params"], "gfx950")
    data = (probe_store / entry["file"]).read_bytes()
    return write.add_entry(root, spec, lambda: (data, dict(entry)), timeout=10,
                           toolchain=lambda: {"flydsl": EXPECTED_FLYDSL, "lld": "test"})


def test_the_cache_the_jit_creates_is_marked_and_cleared(run, probe_store, tmp_path):
    cache = cache_store(tmp_path / "new" / "cache", "gfx950")
    assert _publish(cache, probe_store)
    assert (cache / write.CACHE_MARKER).is_file()
    p = run("clear-cache", env={"FLYAOT_CACHE_DIR": str(tmp_path / "new" / "cache")})
    assert p.returncode == 0 and "removed 2 files" in p.stdout, p.stdout + p.stderr


def test_a_cache_emptied_before_markers_existed_is_claimed(probe_store, tmp_path):
    """Lock files alone (what clear-cache always left behind) do not make a folder foreign."""
    cache = tmp_path / "old"
    with lock.exclusive(str(cache / "locks" / "manifest.lock"), timeout=1, what="test"):
        pass
    assert _publish(cache, probe_store) and (cache / write.CACHE_MARKER).is_file()


def test_the_jit_never_writes_into_a_folder_of_other_files(probe_store, tmp_path):
    before = _project(tmp_path / "project")
    with pytest.raises(StoreError, match="not a flyaot user cache and flyaot writes nothing there"):
        _publish(tmp_path / "project", probe_store)
    assert {q.relative_to(tmp_path / "project").as_posix(): q.read_bytes()
            for q in (tmp_path / "project").rglob("*") if q.is_file()} == before
