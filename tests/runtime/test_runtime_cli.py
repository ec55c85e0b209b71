"""`python -m flyaot`: env, list, verify, selftest, bench, clear-cache."""
import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
from runtime_helpers import PROBE64, PROBE128, copy_store

from flyaot import cli
from flyaot.runtime import config
from flyaot.store import lock


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
    package = config.package_store_dir() / "manifest.json"     # built by `make prebuilt`, or absent
    shipped = len(json.loads(package.read_text())["specs"]) if package.exists() else 0
    assert p.returncode == 0 and f"verified {shipped + 2} code objects" in p.stdout, p.stdout + p.stderr
    bad = copy_store(probe_store, tmp_path / "bad")
    co = sorted((bad / "gfx950").glob("*.co"))[0]
    co.write_bytes(co.read_bytes()[:-1] + b"\x01")
    p = run("verify", env=dict(env, FLYAOT_PREBUILT_PATH=str(bad)))
    assert p.returncode == 1 and "FAIL probe[" in p.stdout and "sha256" in p.stdout


def test_selftest_of_a_family_without_hooks_fails_loudly(run):
    p = run("selftest", "--family", "probe")
    assert p.returncode == 2 and "family 'probe' has no selftest" in p.stderr


def test_clear_cache_removes_code_objects_and_manifest_but_keeps_locks(run, probe_store, tmp_path):
    cache = copy_store(probe_store, tmp_path / "cache")
    with lock.exclusive(str(cache / "locks" / "some.lock"), timeout=1, what="test"):
        pass
    (cache / "gfx950" / ".x.co.123.tmp").write_bytes(b"partial")
    p = run("clear-cache", env={"FLYAOT_CACHE_DIR": str(cache)})
    assert p.returncode == 0 and "removed 4 files" in p.stdout, p.stdout + p.stderr
    assert sorted(x.name for x in cache.rglob("*") if x.is_file()) == ["manifest.lock", "some.lock"]
