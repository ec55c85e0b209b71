"""`flyaot model`: the modeled MI355X time of an op, through the real prebuilt
store, the emulator and its timing model."""
import os
import re
import subprocess
import sys
import threading

import pytest

from flyaot.emu import isa
from flyaot.ops import modeled

T = isa.load(isa.ARCH).timing


def test_modeled_time_of_a_gemm_says_it_is_a_model(tmp_path):
    pytest.importorskip("flydsl")
    p = subprocess.run([sys.executable, "-m", "flyaot", "model", "gemm", "1024", "3584", "1",
                        "--samples", "4"], capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, FLYAOT_CACHE_DIR=str(tmp_path), FLYAOT_DISABLE_JIT="1"))
    assert p.returncode == 0, p.stderr
    assert "MODEL estimate, not a measurement" in p.stdout
    assert "N=1024, K=3584, M=1" in p.stdout
    total = float(re.search(r"modeled MI355X time ([\d.]+) us", p.stdout).group(1))
    kernels = [float(x) for x in re.findall(r"\+ kernel \S+: ([\d.]+) us", p.stdout)]
    terms = [float(x) for x in re.findall(r"^  \+ .*: ([\d.]+) us", p.stdout, re.M)]
    launch = float(re.search(r"\+ launch overhead: ([\d.]+) us", p.stdout).group(1))
    assert kernels and all(k > 0 for k in kernels)
    assert launch == pytest.approx(T.LAUNCH_US, abs=0.005)
    assert total == pytest.approx(sum(terms), abs=0.02)       # every term of the total is printed
    floor, dev, ratio = (float(x) for x in re.search(
        r"floor ([\d.]+) us \(\w+-bound; HBM [\d.]+, MFMA [\d.]+, VALU [\d.]+ us\): device time ([\d.]+) us = "
        r"([\d.]+)x the floor", p.stdout).groups())
    exact = modeled.floor("gemm", 1024, 3584, 1).us
    assert floor == pytest.approx(exact, abs=0.01)
    assert dev == pytest.approx(total - launch, abs=0.02) and ratio == pytest.approx(dev / exact, rel=0.01)


def test_model_json_and_the_sampling_error_warning(tmp_path):
    """Too few samples for a prefill row: the total still adds up, and the error above the threshold is
    warned about with what to do."""
    import json
    pytest.importorskip("flydsl")
    p = subprocess.run([sys.executable, "-m", "flyaot", "model", "prefill", "1", "64", "2048", "--samples", "4",
                        "--json"], capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, FLYAOT_CACHE_DIR=str(tmp_path), FLYAOT_DISABLE_JIT="1"))
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert r["shape"] == {"B": 1, "Q": 64, "KV": 2048, "HEADS": 64} and r["samples"] == 4
    assert r["us"] == pytest.approx(sum(t["us"] for t in r["terms"]), rel=1e-9)
    assert [t["term"] for t in r["terms"]][-1] == "launch overhead"
    worst = max(t["sampling_error"] or 0 for t in r["terms"])
    assert worst > 0.10 and "pass a larger --samples" in r["warning"]


def _model(*args, tmp_path):
    return subprocess.run([sys.executable, "-m", "flyaot", "model", *args], capture_output=True, text=True,
                          timeout=600, env=dict(os.environ, FLYAOT_CACHE_DIR=str(tmp_path), FLYAOT_DISABLE_JIT="1"))


def test_fp8_decode_terms_floor_and_ratio(tmp_path):
    """SGLang's FP8 call (one kernel, no fill): labelled sizes, every term, the FP8 floor of the row."""
    pytest.importorskip("flydsl")
    p = _model("fp8", "2", "2", "512", "32", "--samples", "4", tmp_path=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "fp8 B=2, NEXT_N=2, MAX_CTX=512, HEADS=32: modeled MI355X time" in p.stdout
    assert "MODEL estimate, not a measurement" in p.stdout and "no held-out MI355X measurements" in p.stdout
    kernels = re.findall(r"\+ kernel (\S+): ([\d.]+) us", p.stdout)
    assert [k for k, _ in kernels] == ["mqa_fp8_paged_h32_d128_p64_plain"] and float(kernels[0][1]) > 0
    assert "-inf fill" not in p.stdout
    total = float(re.search(r"modeled MI355X time ([\d.]+) us", p.stdout).group(1))
    terms = [float(x) for x in re.findall(r"^  \+ .*: ([\d.]+) us", p.stdout, re.M)]
    assert total == pytest.approx(sum(terms), abs=0.02)
    floor, dev, ratio = (float(x) for x in re.search(
        r"floor ([\d.]+) us \(\w+-bound; .*\): device time ([\d.]+) us = ([\d.]+)x the floor", p.stdout).groups())
    exact = modeled.floor("fp8", 2, 2, 512, 32).us
    assert floor == pytest.approx(exact, abs=0.01) and ratio == pytest.approx(dev / exact, rel=0.01)


def test_fp8_varctx_and_prefill_json(tmp_path):
    """vLLM's step has three terms before the launch (schedule kernel, -inf fill, varctx kernel); the
    ragged prefill one kernel; the totals add up and the floors are the FP8 ones."""
    import json
    pytest.importorskip("flydsl")
    p = _model("fp8-varctx", "2", "1", "512", "--samples", "4", "--json", tmp_path=tmp_path)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert r["shape"] == {"B": 2, "NEXT_N": 1, "MAX_CTX": 512, "HEADS": 64} and r["validation_error"] is None
    assert [t["term"] for t in r["terms"]] == ["kernel mqa_runs_schedule_varctx",
                                               "kernel mqa_fp8_paged_h64_d128_p64_preshuffle_varctx",
                                               "-inf fill of the logits", "launch overhead"]
    assert r["us"] == pytest.approx(sum(t["us"] for t in r["terms"]), rel=1e-9)
    assert r["floor"]["us"] == pytest.approx(modeled.floor("fp8-varctx", 2, 1, 512, 64).us)
    p = _model("fp8-prefill", "64", "256", "--samples", "4", "--json", tmp_path=tmp_path)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert r["shape"] == {"S": 64, "S_KV": 256, "HEADS": 64}
    assert [t["term"] for t in r["terms"]] == ["kernel mqa_fp8_ragged_h64_d128", "launch overhead"]
    assert r["floor"]["us"] == pytest.approx(modeled.floor("fp8-prefill", 64, 256, 64).us)
    assert r["floor"]["ratio"] == pytest.approx(r["floor"]["device_us"] / r["floor"]["us"])


def _gemm_call():
    pytest.importorskip("numpy")
    call, _ = modeled.OPS["gemm"](512, 1024, 1)       # served by the prebuilt set
    return call


def test_modeled_leaves_the_environment_and_the_callers_kernels(monkeypatch):
    monkeypatch.setenv("FLYAOT_DISABLE_JIT", "1")
    monkeypatch.delenv("FLYAOT_DEVICE", raising=False)
    from flyaot import runtime
    runtime.reset()
    _gemm_call()()                                     # the caller's own launch loads a kernel
    rt = runtime.runtime()
    loaded = dict(rt._loaded)
    env = dict(os.environ)
    r = modeled.modeled_us("gemm", 512, 1024, 1, samples=1)
    assert r["kernels"] and r["us"] > r["device_us"] > 0
    assert dict(os.environ) == env
    assert runtime.runtime() is rt and all(rt._loaded.get(k) is v for k, v in loaded.items())


def test_recording_times_only_the_launches_of_its_own_context(monkeypatch):
    monkeypatch.setenv("FLYAOT_DISABLE_JIT", "1")
    monkeypatch.delenv("FLYAOT_EMU_TIMING", raising=False)
    from flyaot.runtime.drivers import emu
    call = _gemm_call()
    with emu.recording(samples=1) as rec:
        worker = threading.Thread(target=call)
        worker.start()
        worker.join()
        assert rec.launches == []                      # another thread's launch is not this block's
        call()
        assert [name for name, _, _ in rec.launches] and rec.launches[0][1].kernel_us > 0
    call()
    assert len(rec.launches) == 1


def test_decode_prices_a_fill_only_when_the_op_fills():
    """The direct decode kernel writes its -inf cells itself, so a decode row has no fill term; a fill
    given as a count or as a function of the finished call is priced at the HBM rate."""
    r = modeled.modeled_us("decode", 2, 1, 512, samples=2)
    assert [k[0] for k in r["kernels"]] == ["mqa_decode_direct_h64_d128_p64_bk32_w1"]
    assert r["fill_us"] == 0 and r["device_us"] == pytest.approx(sum(k[1] for k in r["kernels"]))
    calls = []
    fixed = modeled.modeled_call(_gemm_call(), 8_000_000, samples=1)
    late = modeled.modeled_call(_gemm_call(), lambda: calls.append(1) or 8_000_000, samples=1)
    from flyaot.emu.timing import Params
    hbm = T.HBM_BYTES_PER_S * min(1.0, Params().bandwidth_efficiency)
    assert calls == [1] and fixed["fill_us"] == late["fill_us"] == pytest.approx(8e6 / hbm * 1e6)
