"""Reads are bounded: every hostile manifest or code object is the store's own error naming the path,
in bounded time and memory (the schema's fields: test_store_schema.py); a missing package manifest is
never a silent empty store."""
import os
import resource
import subprocess
import sys

import pytest
from store_helpers import PROBE64, config, copy_store, read_manifest

from flyaot.formats.manifest import Spec
from flyaot.runtime.dispatch import Runtime
from flyaot.runtime.errors import MissingSpecError
from flyaot.store.errors import StoreError
from flyaot.store.index import Index, Store

# A child run in bounded memory (2 GiB of address space) and time: a regression fails, never hangs.
BOUND_S = 300


def _bounded(*args, env=None):
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=BOUND_S,
                          preexec_fn=limit, env=dict(os.environ, **(env or {})))


@pytest.mark.parametrize("text,match", [
    ("[" * 100_000 + "]" * 100_000, "nested deeper than"),
    ('{"schema": 1, "n": ' + "7" * 5001 + "}", "integer of 5001 digits"),
    ('{"schema": 1, "n": NaN}', "NaN is not JSON"),
    (b"\xff\xfe{}", "codec can't decode"),
])
def test_defect10_hostile_json_is_a_store_error_naming_the_path(tmp_path, text, match):
    (tmp_path / "manifest.json").write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(StoreError, match=match) as e:
        Store.open(tmp_path, "extra", missing_ok=False)
    assert f"{tmp_path / 'manifest.json'}: cannot read manifest: " in str(e.value)


def test_defect10_both_verify_commands_report_a_malformed_manifest_without_a_traceback(probe_store, tmp_path):
    root = copy_store(probe_store, tmp_path / "s")
    (root / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    p = _bounded("-m", "flyaot.build_tools", "verify", str(root))
    assert p.returncode == 1 and "nested deeper than" in p.stderr and "Traceback" not in p.stderr, p.stderr
    p = _bounded("-m", "flyaot", "verify", "--no-load", env={"FLYAOT_PREBUILT_PATH": str(root),
                                                             "FLYAOT_CACHE_DIR": str(tmp_path / "c")})
    assert p.returncode == 1 and f"FAIL extra store {root} refused" in p.stdout and "Traceback" not in p.stderr


def test_defect11_a_fifo_code_object_is_refused_at_once(probe_store, tmp_path):
    root = copy_store(probe_store, tmp_path / "s")
    _, entry = next((sid, e) for sid, e in read_manifest(root)["specs"].items() if e["key"] == PROBE64)
    (root / entry["file"]).unlink()
    os.mkfifo(root / entry["file"])
    # Both verifiers and an op launch finish (a blocking open of the FIFO would hang them).
    p = _bounded("-m", "flyaot.build_tools", "verify", str(root))
    assert p.returncode == 1 and "is not a regular file" in p.stderr, p.stderr
    env = {"FLYAOT_PREBUILT_PATH": str(root), "FLYAOT_CACHE_DIR": str(tmp_path / "c")}
    p = _bounded("-m", "flyaot", "verify", "--no-load", env=env)
    assert p.returncode == 1 and f"FAIL {PROBE64}" in p.stdout and "is not a regular file" in p.stdout
    script = ("import torch; from flyaot.kernel_defs.probe import plan; from flyaot import runtime\n"
              "try:\n    runtime.launch(plan.plan(torch.zeros(4), 1.0))\n"
              "except runtime.StoreError as e:\n    print('REFUSED', e)\n")
    p = _bounded("-c", script, env=dict(env, FLYAOT_DEVICE="emu", FLYAOT_DISABLE_JIT="1"))
    assert "REFUSED" in p.stdout and "is not a regular file" in p.stdout, p.stdout + p.stderr


def test_defect11_a_manifest_linked_to_dev_zero_is_refused_in_bounded_memory(tmp_path):
    (tmp_path / "manifest.json").symlink_to("/dev/zero")
    with pytest.raises(StoreError, match="is not a regular file"):
        Store.open(tmp_path, "extra", missing_ok=False)
    p = _bounded("-m", "flyaot", "verify", "--no-load", env={"FLYAOT_PREBUILT_PATH": str(tmp_path),
                                                             "FLYAOT_CACHE_DIR": str(tmp_path / "c")})
    assert p.returncode == 1 and "is not a regular file" in p.stdout, p.stdout + p.stderr


def test_defect11_an_oversized_manifest_is_refused_before_reading(tmp_path):
    with open(tmp_path / "manifest.json", "wb") as f:
        f.truncate((64 << 20) + 1)         # sparse: costs no disk
    with pytest.raises(StoreError, match="over the 67108864-byte limit"):
        Store.open(tmp_path, "extra", missing_ok=False)


def test_missing_package_manifest_is_a_clear_error_never_a_silent_empty_store(probe_store, tmp_path, caplog):
    pkg = copy_store(probe_store, tmp_path / "pkg" / "gfx950")     # the package's store of gfx950
    (pkg / "manifest.json").unlink()
    with caplog.at_level("WARNING", logger="flyaot.store"):
        rt = Runtime(config(tmp_path, package=pkg.parent))
        with pytest.raises(MissingSpecError) as e:
            rt.find(Spec.make("probe", {"block": 64, "behavior": "ok"}, "gfx950"), -1)
    assert f"Refused: package store {pkg}: no manifest.json" in str(e.value)
    assert f"package store {pkg}: no manifest.json" in caplog.text and "ignoring the store" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="flyaot.store"):    # JIT allowed: a loud warning at open
        index = Index.open(config(tmp_path, package=pkg.parent, disable_jit=False))
    assert "without it every spec needs the JIT" in caplog.text
    assert index.refused[0][0].kind == "package"
