"""Progress of long work: a bar with rate and ETA on a terminal, plain lines elsewhere; emulator launches
and selftest report as they go; INFO logs name the store and code object that served a spec."""
import io
import logging
import os
import subprocess
import sys

import pytest
import torch

from flyaot.runtime import progress
from flyaot.runtime.drivers.emu import EmuLauncher


def test_a_terminal_gets_a_bar_with_rate_and_eta():
    out = io.StringIO()
    bar = progress.Progress("work", 4, "cases", delay=0, stream=out, tty=True)
    for i in range(1, 5):
        bar.update(i)
    bar.close()
    text = out.getvalue()
    assert "\r\x1b[K[" in text and "#" * 24 in text                  # redrawn in place, full at the end
    assert "4/4 cases" in text and "ETA 0:00" in text and "cases/s" in text
    assert text.endswith("\n")


def test_elsewhere_plain_lines_when_asked(monkeypatch):
    monkeypatch.setattr(progress, "_plain", True)
    out = io.StringIO()
    bar = progress.Progress("work", 3, "cases", delay=0, every=3600, stream=out, tty=False)
    for i in range(1, 4):
        bar.update(i)
    bar.close()
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("work: 1/3 cases") and lines[-1].startswith("work: 3/3 cases")
    assert "\r" not in out.getvalue() and len(lines) == 2          # first, then last: `every` holds the rest


def test_elsewhere_a_library_only_logs(caplog):
    out = io.StringIO()
    with caplog.at_level(logging.INFO, logger="flyaot.runtime.progress"):
        bar = progress.Progress("work", 2, "cases", delay=0, stream=out, tty=False)
        bar.update(1)
        bar.update(2)
    assert out.getvalue() == "" and "work: 1/2 cases" in caplog.text


def test_short_work_shows_nothing():
    out = io.StringIO()
    bar = progress.Progress("work", 2, "cases", delay=60, stream=out, tty=True)
    bar.update(1)
    bar.update(2)
    bar.close()
    assert out.getvalue() == ""


def test_an_emulator_launch_reports_its_workgroups(monkeypatch, capsys):
    import flyaot.ops as ops
    from flyaot import inputs
    monkeypatch.setattr(EmuLauncher, "progress_delay", 0.0)
    monkeypatch.setattr(progress, "_plain", True)
    w = ops.prepare_mxfp4_weight(*inputs.quantize_mxfp4(torch.randn(256, 256)))
    ops.gemm_a16wfp4(torch.randn(2, 256).to(torch.bfloat16), w)
    err = capsys.readouterr().err
    assert "emulating " in err and " workgroups" in err
    done = [line for line in err.splitlines() if line.startswith("emulating ")][-1]
    n = done.split(": ", 1)[1].split()[0]
    assert n.split("/")[0] == n.split("/")[1], done                  # the last line: every workgroup ran


def test_info_logs_name_the_store_and_code_object(tmp_path):
    code = ("import torch, flyaot.ops as ops\nfrom flyaot import inputs\n"
            "w = ops.prepare_mxfp4_weight(*inputs.quantize_mxfp4(torch.randn(256, 256)))\n"
            "ops.gemm_a16wfp4(torch.randn(2, 256).to(torch.bfloat16), w)\n")
    env = dict(os.environ, FLYAOT_LOG_LEVEL="INFO", FLYAOT_CACHE_DIR=str(tmp_path), FLYAOT_DISABLE_JIT="1")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    line = next(x for x in p.stderr.splitlines() if "served by the package store" in x)
    assert line.startswith("INFO flyaot.runtime: gemm_a16wfp4[") and "loaded code object " in line
    assert ".co (" in line and "sha256 " in line and "on emu device -1" in line


@pytest.mark.slow
def test_selftest_streams_each_case_as_it_finishes():
    env = dict(os.environ, FLYAOT_DEVICE="emu")
    p = subprocess.Popen([sys.executable, "-m", "flyaot", "selftest", "--family", "gemm_a16wfp4"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = p.stdout.readline()
        still_running = p.poll() is None
        rest, err = p.communicate(timeout=600)
    finally:
        p.kill()
    assert first.startswith("PASS gemm_a16wfp4 "), first + err
    assert still_running, "the first case's line came only at the end"
    assert rest.splitlines()[-1].endswith("0 failed on cpu") and "Traceback" not in err
