"""Environment values that cannot work are errors naming the variable, never a silent default; an
empty value is the documented default (formats/env.py, the one table)."""
import pathlib
import subprocess
import sys

import pytest
import torch

from flyaot.build_tools import toolchain
from flyaot.formats import env
from flyaot.runtime.config import Config
from flyaot.runtime.dispatch import Runtime
from tests.support import run_build

GARBAGE = {"flag": ["2", "maybe", "enabled"], "seconds": ["nan", "-1", "0", "inf", "ten"],
           "count": ["0", "-3", "1.5", "many"], "choice": ["maybe", "gpu"], "level": ["loud", "5"],
           "command": ['"unclosed'], "pid": ["x", "-1"]}


@pytest.mark.parametrize("var", [v for v in env.VARIABLES if v.type in GARBAGE], ids=lambda v: v.name)
def test_every_variable_is_its_default_when_empty_and_an_error_naming_it_when_garbage(var):
    for empty in ("", "  "):
        assert var.parse(empty) == var.parse(None) == var.default
    for raw in GARBAGE[var.type]:
        with pytest.raises(env.EnvError) as e:
            var.parse(raw)
        assert str(e.value).startswith(f"{var.name}={raw!r}: expected ") and "\n" not in str(e.value)


def _one_line_error(proc, name):
    """rc 2, no traceback, one `error:` line naming the variable (importing flyaot may also warn about
    an unusable FLYAOT_LOG_LEVEL)."""
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert len(errors) == 1 and errors[0].startswith(f"error: {name}="), proc.stderr


@pytest.mark.parametrize("name, value", [("FLYAOT_BUILD_JOBS", "many"), ("FLYAOT_BUILD_JOBS", "0"),
                                         ("FLYAOT_BUILD_TIMEOUT", "ten"), ("FLYAOT_LOG_LEVEL", "loud")])
def test_garbage_build_variables_are_one_line_errors(tmp_path, name, value):
    proc = run_build("build", "--family", "probe", "--out", tmp_path / "out", "--cache", tmp_path / "cache",
                     env_extra={name: value}, check=False)
    _one_line_error(proc, name)
    assert not (tmp_path / "out").exists()


def test_empty_build_variables_are_their_defaults(probe_build, tmp_path):
    empty = {"FLYAOT_BUILD_JOBS": "", "FLYAOT_BUILD_TIMEOUT": "", "FLYAOT_LOG_LEVEL": "", "FLYAOT_LLD": ""}
    proc = run_build("build", "--family", "probe", "--out", tmp_path / "out", "--cache", probe_build["cache"],
                     env_extra=empty)
    assert "2 cached, 0 failed" in proc.stdout and (tmp_path / "out" / "manifest.json").is_file(), proc.stdout
    assert "INFO flyaot.build: 2 specs" in proc.stderr          # the build CLI's default level


@pytest.mark.parametrize("value, rc", [("loud", 2), ("", 0), ("debug", 0)])
def test_the_cli_log_level(tmp_path, value, rc):
    proc = subprocess.run([sys.executable, "-m", "flyaot", "list", "--where", "heads=0"], capture_output=True,
                          text=True, timeout=300, env={**__import__("os").environ, "FLYAOT_LOG_LEVEL": value,
                                                       "FLYAOT_CACHE_DIR": str(tmp_path)})
    if rc:
        assert proc.stderr.count("FLYAOT_LOG_LEVEL='loud'") >= 1 and proc.stdout == ""
        assert proc.returncode == 2 and "Traceback" not in proc.stderr and "error: FLYAOT_LOG_LEVEL=" in proc.stderr
    else:
        assert proc.returncode == 0 and "0 specs" in proc.stdout, proc.stderr


@pytest.mark.parametrize("value", ["", "few", "0"])
def test_emu_timing_samples(probe_build, tmp_path, monkeypatch, value):
    from flyaot.kernel_defs.probe import plan as probe
    monkeypatch.setenv("FLYAOT_EMU_TIMING", "1")
    monkeypatch.setenv("FLYAOT_EMU_TIMING_SAMPLES", value)
    cfg = Config(package_dir=tmp_path / "none", extra_stores=(pathlib.Path(probe_build["out"]),),
                 cache_dir=tmp_path / "cache", disable_jit=True, record_misses="", device="emu", jit_timeout=60.0,
                 py_launch=False)
    out = torch.zeros(4)
    if value:
        with pytest.raises(env.EnvError, match=f"^FLYAOT_EMU_TIMING_SAMPLES={value!r}: expected a whole number"):
            Runtime(cfg).launch(probe.plan(out, 1.0))
    else:
        Runtime(cfg).launch(probe.plan(out, 1.0))
        assert torch.equal(out, torch.full((4,), 2.0))


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


@pytest.mark.parametrize("value", ["/nonexistent/ld.lld", "/bin/false", "/bin/true"])
def test_unusable_explicit_linker_is_an_error(monkeypatch, value):
    monkeypatch.setenv("FLYAOT_LLD", value)
    with pytest.raises(toolchain.ToolchainError, match="FLYAOT_LLD"):
        toolchain.find_linker()


def test_an_empty_linker_variable_searches_as_unset(monkeypatch):
    monkeypatch.delenv("FLYAOT_LLD", raising=False)
    searched = toolchain.find_linker()
    monkeypatch.setenv("FLYAOT_LLD", "")
    assert toolchain.find_linker() == searched and searched.origin != "FLYAOT_LLD"


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


_BROKEN_FAMILY = {
    "package": {"__init__.py": "raise RuntimeError('the broken package')\n", "specs.py": ""},
    "specs": {"__init__.py": "", "specs.py": "import a_module_nobody_has\n"},
}
_SERVE = """
import torch
from flyaot import runtime
from flyaot.kernel_defs import registry
from flyaot.kernel_defs.probe import plan
out = torch.zeros(4)
runtime.launch(plan.plan(out, 1.0))
print("served", out.tolist())
print("families", registry.family_names())
try:
    registry.get_family("broken")
except KeyError as e:
    print("refused", e)
"""


@pytest.mark.parametrize("how", sorted(_BROKEN_FAMILY))
def test_a_broken_extra_family_is_refused_alone(probe_build, tmp_path, how):
    """A family on FLYAOT_EXTRA_FAMILIES that cannot be imported is left out with a warning naming it;
    every other family, prebuilt ones included, keeps serving."""
    folder = tmp_path / "more" / "broken"
    folder.mkdir(parents=True)
    for name, text in _BROKEN_FAMILY[how].items():
        (folder / name).write_text(text)
    families = pathlib.Path(__file__).resolve().parents[1] / "families"
    extra = f"{families}{__import__('os').pathsep}{tmp_path / 'more'}"
    proc = subprocess.run([sys.executable, "-c", _SERVE], capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "FLYAOT_EXTRA_FAMILIES": extra, "FLYAOT_DEVICE": "emu",
                               "FLYAOT_PREBUILT_PATH": str(probe_build["out"]), "FLYAOT_DISABLE_JIT": "1",
                               "FLYAOT_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.returncode == 0, proc.stderr
    assert "served [2.0, 2.0, 2.0, 2.0]" in proc.stdout
    assert "'probe'" in proc.stdout and "'gemm_a16wfp4'" in proc.stdout and "'broken'," not in proc.stdout
    assert f"kernel family 'broken' at {folder} (a FLYAOT_EXTRA_FAMILIES folder) cannot be imported" in proc.stderr
    assert proc.stdout.count("refused") == 1 and "cannot be imported and was left out" in proc.stdout
    assert ("the broken package" if how == "package" else "a_module_nobody_has") in proc.stdout
