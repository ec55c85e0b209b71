"""One verifier: both `verify` commands and the runtime's load path refuse the same stores with the
same messages."""
import pytest
from store_helpers import PROBE64, config, copy_store, edit_manifest

from flyaot import __version__
from flyaot.kernel_defs.probe import plan as probe
from flyaot.runtime.dispatch import Runtime
from flyaot.runtime.errors import MissingSpecError
from flyaot.store.errors import StoreError
from flyaot.store.index import Store
from tests.support import run_build


@pytest.fixture
def run_cli(monkeypatch, capsys):
    """The runtime CLI in-process."""
    from flyaot.runtime import commands as cli

    def go(*args, env):
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        rc = cli.main([str(a) for a in args])
        return rc, capsys.readouterr().out
    return go


@pytest.mark.parametrize("edit,reason", [
    (lambda m: m.update(flyaot="0.0.1"), f"refused: built for flyaot 0.0.1, this is flyaot {__version__}"),
    (lambda m: m["toolchain"].update(flydsl="0.4.0"), "refused: built with FlyDSL '0.4.0'"),
])
def test_defect12_verify_refuses_what_the_runtime_refuses(probe_store, tmp_path, run_cli, edit, reason):
    root = edit_manifest(copy_store(probe_store, tmp_path / "s"), edit)
    with pytest.raises(StoreError) as opened:
        Store.open(root, "extra", missing_ok=False)
    assert reason in str(opened.value)
    # The runtime leaves the store out and says why when a spec is then missing.
    with pytest.raises(MissingSpecError, match=reason):
        Runtime(config(tmp_path, extra=(root,))).launch(probe.plan(__import__("torch").zeros(4), 1.0))
    proc = run_build("verify", root, check=False)
    assert proc.returncode == 1 and reason in proc.stderr, proc.stderr
    rc, out = run_cli("verify", "--no-load", env={"FLYAOT_PREBUILT_PATH": str(root),
                                                  "FLYAOT_CACHE_DIR": str(tmp_path / "c")})
    assert rc == 1 and f"FAIL {opened.value}" in out, out


def test_both_verify_commands_report_a_corrupt_code_object_with_the_loaders_message(probe_store, tmp_path, run_cli):
    root = copy_store(probe_store, tmp_path / "s")
    sid, entry = next((sid, e) for sid, e in Store.open(root, "x", missing_ok=False).manifest["specs"].items()
                      if e["key"] == PROBE64)
    (root / entry["file"]).write_bytes((root / entry["file"]).read_bytes()[:-1])
    with pytest.raises(StoreError) as loaded:
        Runtime(config(tmp_path, extra=(root,))).launch(probe.plan(__import__("torch").zeros(4), 1.0))
    message = str(loaded.value)
    assert "does not match its manifest entry" in message
    rc, out = run_cli("verify", "--no-load", env={"FLYAOT_PREBUILT_PATH": str(root),
                                                  "FLYAOT_CACHE_DIR": str(tmp_path / "c")})
    assert rc == 1 and f"FAIL {PROBE64} (extra store {root}): {message}" in out, out
    proc = run_build("verify", root, check=False)
    assert proc.returncode == 1 and message.replace(f"extra store {root}", f"store {root}") in proc.stderr
