"""`python -m flyaot` never shows a user a traceback: each bad argument, setting or environment of a
first hour gets one line saying what to do (subprocess runs, as a user types them)."""
import json
import os
import subprocess
import sys

import pytest
import torch

from flyaot import __version__
from flyaot.runtime import commands as runtime_cli


def flyaot(*args, env=None, timeout=300):
    e = dict(os.environ, **(env or {}))
    p = subprocess.run([sys.executable, "-m", "flyaot", *map(str, args)], capture_output=True, text=True,
                       env=e, timeout=timeout)
    assert "Traceback" not in p.stdout + p.stderr, p.stdout + p.stderr
    return p


no_gpu = pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine where torch sees no GPU")


@no_gpu
@pytest.mark.parametrize("device", ["cuda", "rocm", "hip"])
def test_a_gpu_device_without_a_gpu_says_use_cpu(device):
    p = flyaot("selftest", "--device", device)
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert "use --device cpu for the emulator" in p.stderr
    if device == "cuda":
        assert "torch sees no GPU" in p.stderr
    elif not torch.version.hip:
        assert "not a ROCm build" in p.stderr


def test_an_unknown_device_lists_the_choices():
    p = flyaot("bench", "--device", "tpu")
    assert p.returncode == 2 and "invalid choice: 'tpu'" in p.stderr and "rocm" in p.stderr


@pytest.mark.parametrize("verb", ["selftest", "bench"])
def test_an_unknown_family_lists_the_families(verb):
    p = flyaot(verb, "--family", "bogus")
    assert p.returncode == 2
    assert "unknown family 'bogus' (families: " in p.stderr and "mqa_decode" in p.stderr, p.stderr


def test_a_family_without_the_hook_names_those_with_one():
    p = flyaot("selftest", "--family", "probe")       # a test-only family (tests/families), no hooks
    assert p.returncode == 2 and "family 'probe' has no selftest (families with one: " in p.stderr, p.stderr


@pytest.mark.parametrize("args, message", [
    (["gemm", "1024", "3584"], "gemm takes 3 sizes (gemm N K M), got 2: 1024 3584"),
    (["decode", "1", "2"], "decode takes 3-4 sizes (decode B NEXT_N MAX_CTX [HEADS]), got 2"),
    (["prefill", "1", "2", "3", "4", "5"], "prefill takes 3-4 sizes"),
    (["gemm", "1024", "x", "1"], "K (reduction (input features)) must be an integer, got 'x'"),
    (["gemm", "0", "256", "1"], "N (output features) must be >= 1, got 0"),
    (["attention", "1"], "unknown op 'attention' (ops: gemm, decode, prefill, fp8, fp8-varctx, fp8-prefill)"),
    (["fp8", "1", "2"], "fp8 takes 3-4 sizes (fp8 B NEXT_N MAX_CTX [HEADS]), got 2"),
    (["fp8", "2", "5", "512"], "fp8: NEXT_N (new tokens per sequence) must be 1-4, got B=2, NEXT_N=5"),
    (["fp8-varctx", "2", "1", "512", "48"], "fp8-varctx: HEADS (query heads) must be 32 or 64"),
    (["fp8-prefill", "4096"], "fp8-prefill takes 2-3 sizes (fp8-prefill S S_KV [HEADS]), got 1"),
    (["fp8-prefill", "64", "32"], "fp8-prefill: S_KV (keys) must be >= S (query rows), got S=64, S_KV=32"),
    (["gemm", "256", "256", "1", "--samples", "0"], "--samples must be >= 1"),
])
def test_model_argument_errors_are_one_line_before_torch_loads(args, message):
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "flyaot", "model", *args], capture_output=True,
                       text=True, timeout=300)
    lines = p.stderr.splitlines()
    errors = [line for line in lines if not line.startswith("import time:")]
    assert p.returncode == 2 and len(errors) == 1 and errors[0].startswith("flyaot model: error: "), errors
    assert message in errors[0]
    assert not any(line.rstrip().endswith(" torch") for line in lines), "torch was imported to print a usage error"


def test_env_reports_an_invalid_setting_instead_of_dying(tmp_path):
    env = {"FLYAOT_DEVICE": "bogus", "FLYAOT_JIT_TIMEOUT": "soon", "FLYAOT_CACHE_DIR": str(tmp_path)}
    p = flyaot("env", env=env)
    assert p.returncode == 0 and "stores:" in p.stdout and "torch:" in p.stdout, p.stderr
    assert "INVALID: FLYAOT_DEVICE='bogus'" in p.stdout and "INVALID: FLYAOT_JIT_TIMEOUT='soon'" in p.stdout
    report = json.loads(flyaot("env", "--json", env=env).stdout)
    assert set(report["env_invalid"]) == {"FLYAOT_DEVICE", "FLYAOT_JIT_TIMEOUT"}
    assert report["env"]["FLYAOT_DEVICE"] == "bogus"      # the setting is still shown as it is


def test_other_verbs_refuse_an_invalid_setting_in_one_line():
    p = flyaot("list", env={"FLYAOT_DEVICE": "bogus"})
    assert p.returncode == 2 and p.stderr.startswith("flyaot list: error: FLYAOT_DEVICE='bogus': expected one of emu, hip, cuda") \
        and p.stderr.count("\n") == 1


def test_env_shows_torch_build_and_platform():
    report = json.loads(flyaot("env", "--json").stdout)
    t = report["torch"]
    assert t["version"] == torch.__version__ and t["hip"] == torch.version.hip and t["cuda"] == torch.version.cuda
    assert t["build"].startswith("ROCm/HIP" if torch.version.hip else "CUDA" if torch.version.cuda else "CPU only")
    assert report["platform"]["os"] and report["platform"]["libc"].startswith("glibc")


def test_a_cuda_torch_on_a_gfx950_machine_is_warned_about():
    cuda = {"version": "2.14.1+cu130", "cuda": "13.0", "hip": None}
    assert "install torch's ROCm build first" in runtime_cli.torch_build_warnings(cuda, ["gfx950"], ["gfx950"])[0]
    assert "CPU-only" in runtime_cli.torch_build_warnings(dict(cuda, cuda=None), ["gfx950"], ["gfx950"])[0]
    assert runtime_cli.torch_build_warnings(dict(cuda, hip="7.0"), ["gfx950"], ["gfx950"]) == []
    assert runtime_cli.torch_build_warnings(cuda, [], ["gfx950"]) == []           # an NVIDIA machine


def test_a_closed_pipe_ends_quietly():
    p = subprocess.run(f"{sys.executable} -m flyaot list --json | head -1", shell=True, capture_output=True,
                       text=True, timeout=300)
    assert p.stdout == "[\n" and p.stderr == "", p.stderr


def test_clear_cache_on_a_file_is_a_clean_error(tmp_path):
    f = tmp_path / "cache"
    f.write_text("not a directory")
    p = flyaot("clear-cache", env={"FLYAOT_CACHE_DIR": str(f)})
    assert p.returncode == 2 and "is not a directory" in p.stderr and f.read_text() == "not a directory"


def test_version():
    p = flyaot("--version")
    assert p.returncode == 0 and p.stdout.startswith(f"flyaot {__version__} ")


@pytest.mark.parametrize("args, message", [
    (["list", "--where", "heads"], "--where 'heads': expected PARAM=VALUE"),
    (["list", "--family", "bogus"], "unknown family 'bogus' (families in the stores: "),
])
def test_list_argument_errors(args, message):
    p = flyaot(*args)
    assert p.returncode == 2 and message in p.stderr, p.stderr


def test_a_bad_log_level_is_one_line_not_a_crash():
    p = flyaot("--version", env={"FLYAOT_LOG_LEVEL": "LOUD"})
    assert p.returncode == 0
    p = flyaot("list", "--family", "mqa_decode", env={"FLYAOT_LOG_LEVEL": "LOUD"})
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.strip().splitlines()[-1].startswith("flyaot list: error: FLYAOT_LOG_LEVEL='LOUD': expected a logging level")


@pytest.mark.parametrize("verb", ["env", "list", "verify", "clear-cache"])
def test_every_runtime_verb_has_json(verb, tmp_path):
    p = flyaot(verb, "--json", env={"FLYAOT_CACHE_DIR": str(tmp_path / "c")}, timeout=600)
    assert p.returncode == 0, p.stderr
    json.loads(p.stdout)
