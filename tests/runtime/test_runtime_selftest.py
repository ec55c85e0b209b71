"""`python -m flyaot selftest` / `bench` over the families' hooks in flyaot.ops, on the emulator.

The store is made the way a user makes an add-on pack: run the selftest with JIT off and misses
recorded (every case fails on its missing code object), build the recorded specs with the real build
CLI, then run the CLI in its own process against that store.
"""
import os
import subprocess
import sys

import pytest
from runtime_helpers import make_config

from flyaot import runtime
from flyaot import cli
from flyaot.ops import hooks
from flyaot.runtime.dispatch import Runtime
from tests.support import miss_records, run_build

FAMILIES = {"mqa_decode", "mqa_prefill", "gemm_a16wfp4", "mqa_fp8"}


@pytest.fixture(scope="module")
def missed(tmp_path_factory):
    """hooks.run("selftest") on the emulator with no store and JIT off, recording misses:
    (rows, miss records, misses file)."""
    root = tmp_path_factory.mktemp("selftest-misses")
    record = root / "misses.jsonl"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(runtime, "_runtime", Runtime(make_config(root, record_misses=str(record))))
        rows = list(hooks.run("selftest", "cpu"))
    return rows, miss_records(record), record


@pytest.fixture(scope="module")
def store_env(missed, tmp_path_factory):
    """Environment of a CLI process served by a store built from the recorded misses (JIT off)."""
    root = tmp_path_factory.mktemp("selftest-store")
    run_build("build", "--from-misses", missed[2], "--out", root / "store", "--cache", root / "build")
    return dict(os.environ, FLYAOT_DEVICE="emu", FLYAOT_PREBUILT_PATH=str(root / "store"), FLYAOT_DISABLE_JIT="1",
                FLYAOT_CACHE_DIR=str(root / "user-cache"))


def _cli(*args, env):
    return subprocess.run([sys.executable, "-m", "flyaot", *args], capture_output=True, text=True, env=env,
                          timeout=600)


def test_every_case_fails_on_a_missing_code_object(missed):
    rows, records, _ = missed
    assert {r[0] for r in rows} == FAMILIES
    assert rows and all(ok is False and "no code object for" in detail for _, _, ok, detail in rows), rows
    # the staged decode cases also need their schedule kernel, the prefill cases their metadata kernel
    assert {r["family"] for r in records} == FAMILIES | {"mqa_runs_schedule", "mqa_prefill_meta"}


def test_cases_cover_every_path(missed):
    """Decode staged + direct, one prefill spec serving both entry points, GEMM decode + prefill configs."""
    params = {(r["family"], r["params"].get("path") or r["params"].get("order")) for r in missed[1]}
    assert {("mqa_decode", "staged"), ("mqa_decode", "direct"), ("gemm_a16wfp4", "decode"),
            ("gemm_a16wfp4", "prefill")} <= params
    prefill_cases = [case for family, case, _, _ in missed[0] if family == "mqa_prefill"]
    assert any("explicit" in c for c in prefill_cases) and any("varqlen" in c for c in prefill_cases)


def test_failing_cases_exit_nonzero(tmp_path, monkeypatch, capsys):
    """The same missing code objects through the CLI's selftest command (in-process, storeless runtime)."""
    monkeypatch.setattr(runtime, "_runtime", Runtime(make_config(tmp_path)))
    rc = cli.main(["selftest", "--device", "cpu", "--family", "gemm_a16wfp4"])
    out = capsys.readouterr().out
    assert rc == 1 and "FAIL gemm_a16wfp4" in out and "PASS" not in out, out


def test_a_hook_that_raises_is_one_failed_case_per_family():
    rows = list(hooks.run("selftest", "no-such-device"))
    assert {r[0] for r in rows} == FAMILIES
    assert all(case == "<hook raised>" and ok is False and "no-such-device" in detail
               for _, case, ok, detail in rows), rows


def test_selftest_cli_passes_every_case_on_the_emulator(missed, store_env):
    p = _cli("selftest", env=store_env)
    lines = p.stdout.splitlines()
    results = lines[:-1]
    assert p.returncode == 0, p.stdout + p.stderr
    assert len(results) == len(missed[0]) and all(line.startswith("PASS ") for line in results), p.stdout
    assert lines[-1] == f"{len(results)} passed, 0 failed on cpu"
    assert {line.split()[1] for line in results} == FAMILIES


def test_bench_cli_reports_emulated_time_per_family(store_env):
    p = _cli("bench", env=store_env)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = [line.split(None, 1) for line in p.stdout.splitlines()]
    assert {family for family, _ in rows} == FAMILIES
    assert all(" us " in rest and "not a GPU timing" in rest and "FAILED" not in rest for _, rest in rows), p.stdout
