"""Linker discovery order and the private toolkit folder."""
import dataclasses
import shutil
import subprocess
import sys

import pytest

from flyaot.build_tools import toolchain


def _real_lld():
    found = toolchain.find_linker()
    return found


def test_explicit_linker_wins(monkeypatch, tmp_path):
    real = _real_lld()
    wrapper = tmp_path / "my-ld.lld"
    wrapper.write_text("#!/bin/sh\nexec " + " ".join(real.command) + ' "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("FLYAOT_LLD", str(wrapper))
    found = toolchain.find_linker()
    assert found.origin == "FLYAOT_LLD" and found.command == (str(wrapper),)
    assert found.version == real.version


def test_no_linker_is_one_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("ROCM_PATH", str(tmp_path))
    monkeypatch.delenv("FLYAOT_LLD", raising=False)
    monkeypatch.setitem(sys.modules, "ziglang", None)   # as if the package were not installed
    if shutil.os.path.exists("/opt/rocm/llvm/bin/ld.lld"):
        pytest.skip("a system ROCm linker exists on this machine")
    with pytest.raises(toolchain.ToolchainError) as e:
        toolchain.find_linker()
    assert "pip install ziglang" in str(e.value) and "lld-22" in str(e.value)


def test_toolkit_folder_runs_the_found_linker(tmp_path):
    root = toolchain.prepare_toolkit(toolchain.find_linker(), tmp_path / "tk")
    out = subprocess.run([str(root / "llvm" / "bin" / "ld.lld"), "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and "LLD" in out.stdout
    env = toolchain.flydsl_env(root)
    assert env["ROCM_PATH"] == str(root) and env["COMPILE_ONLY"] == "1" and env["ARCH"] == "gfx950"


def test_inherited_rocm_path_to_our_own_toolkit_is_not_chosen(monkeypatch, tmp_path):
    # A process that ran setup_process_env exports ROCM_PATH=<toolkit>; its children must look past
    # the wrapper there, or the wrapper would be rewritten to exec itself and every link would hang.
    real = toolchain.find_linker()
    root = toolchain.prepare_toolkit(real, tmp_path / "tk")
    monkeypatch.setenv("ROCM_PATH", str(root))
    found = toolchain.find_linker()
    assert found.command == real.command
    assert toolchain.prepare_toolkit(found, tmp_path / "tk") == root
    out = subprocess.run([str(root / "llvm" / "bin" / "ld.lld"), "--version"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and "LLD" in out.stdout


def test_each_linker_gets_a_toolkit_folder_of_its_own(tmp_path):
    # An explicit FLYAOT_LLD (a test's hanging linker, say) must never rewrite the wrapper that a build
    # beside it, linking with the default linker, is using.
    real = toolchain.find_linker()
    other = dataclasses.replace(real, command=("/bin/false",))
    ours, theirs = (toolchain.prepare_toolkit(lk, tmp_path / "tk") for lk in (real, other))
    assert ours != theirs and ours.parent == theirs.parent == tmp_path / "tk"
    out = subprocess.run([str(ours / "llvm" / "bin" / "ld.lld"), "--version"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and "LLD" in out.stdout
