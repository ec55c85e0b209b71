"""Environment values that cannot work are errors naming the variable, never a silent default."""
import pytest

from flyaot.build_tools import toolchain
from flyaot.runtime.config import Config
from tests.support import run_build


@pytest.mark.parametrize("value", ["nan", "NaN", "-1", "0", "inf", "-inf", "1e400", "ten"])
def test_unusable_jit_timeout_is_an_error(monkeypatch, value):
    monkeypatch.setenv("FLYAOT_JIT_TIMEOUT", value)
    with pytest.raises(ValueError, match="FLYAOT_JIT_TIMEOUT"):
        Config.from_env()


def test_jit_timeout_accepts_positive_seconds(monkeypatch):
    monkeypatch.setenv("FLYAOT_JIT_TIMEOUT", "2.5")
    assert Config.from_env().jit_timeout == 2.5
    monkeypatch.delenv("FLYAOT_JIT_TIMEOUT")
    assert Config.from_env().jit_timeout == 900.0


@pytest.mark.parametrize("value", ["", "/nonexistent/ld.lld", "/bin/false", "/bin/true"])
def test_unusable_explicit_linker_is_an_error(monkeypatch, value):
    monkeypatch.setenv("FLYAOT_LLD", value)
    with pytest.raises(toolchain.ToolchainError, match="FLYAOT_LLD"):
        toolchain.find_linker()


def test_unusable_explicit_linker_fails_the_build_cli(tmp_path):
    proc = run_build("build", "--family", "probe", "--out", tmp_path / "out", "--cache", tmp_path / "cache",
                     env_extra={"FLYAOT_LLD": "/nonexistent/ld.lld"}, check=False)
    assert proc.returncode == 2
    assert "error: FLYAOT_LLD='/nonexistent/ld.lld'" in proc.stderr and "ziglang" not in proc.stdout
    assert not (tmp_path / "out").exists()


def test_explicit_linker_that_is_a_toolkit_wrapper_is_refused(monkeypatch, tmp_path):
    root = toolchain.prepare_toolkit(toolchain.find_linker(), tmp_path / "tk")
    monkeypatch.setenv("FLYAOT_LLD", str(root / "llvm" / "bin" / "ld.lld"))
    with pytest.raises(toolchain.ToolchainError, match="toolkit wrapper"):
        toolchain.find_linker()


@pytest.mark.parametrize("value", ["nan", "-5", "inf"])
def test_unusable_build_timeout_is_an_error(tmp_path, value):
    proc = run_build("build", "--family", "probe", "--out", tmp_path / "out", "--cache", tmp_path / "cache",
                     env_extra={"FLYAOT_BUILD_TIMEOUT": value}, check=False)
    assert proc.returncode == 2 and "FLYAOT_BUILD_TIMEOUT" in proc.stderr and "Traceback" not in proc.stderr


def test_build_out_that_is_a_file_is_an_error_not_a_traceback(tmp_path):
    target = tmp_path / "a-file"
    target.write_text("not a store")
    proc = run_build("build", "--family", "probe", "--out", target, "--cache", tmp_path / "cache", check=False)
    assert proc.returncode == 2 and "is not a directory" in proc.stderr and "Traceback" not in proc.stderr
    assert target.read_text() == "not a store"
    proc = run_build("build", "--family", "probe", "--out", target / "sub", "--cache", tmp_path / "cache",
                     check=False)
    assert proc.returncode == 2 and "error:" in proc.stderr and "Traceback" not in proc.stderr
