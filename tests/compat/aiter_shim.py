"""Run aiter's own FP4 MQA logits op tests (op_tests/test_flydsl_pa_mqa_logits_fp4{,_prefill}.py of an
aiter checkout, unedited) through flyaot.compat.aiter on the emulator.

`install(monkeypatch)` puts placeholder modules for every aiter module those tests import into
sys.modules (removed again when the test ends): the aiter.ops.flydsl names and its kernel modules
map onto flyaot.compat.aiter, the arch query names the emulated target, and aiter's two test
utilities are our own small stand-ins (a mismatch ratio, and a "perf test" that runs the call once:
the emulator is no timing device). `load(monkeypatch, path)` imports one op-test file under the shim
with its tensors on the CPU (the file's module-level `dev`) and torch.cuda.synchronize a no-op (the
emulator runs each launch to completion).
"""
import importlib.util
import sys
import time
import types

import torch

from flyaot.compat import aiter as compat

_DECODE = ("compute_varctx_schedule", "flydsl_pa_mqa_logits_fp4")
_PREFILL = ("CTA_INFO_WIDTH", "compute_prefill_schedule", "compute_varqlen_windows",
            "flydsl_pa_mqa_logits_fp4_prefill", "flydsl_pa_mqa_logits_fp4_varqlen")


def _module(monkeypatch, name, **attrs):
    mod = types.ModuleType(name)
    mod.__path__ = []                 # a package: its submodules are looked up in sys.modules
    for key, value in attrs.items():
        setattr(mod, key, value)
    monkeypatch.setitem(sys.modules, name, mod)
    parent, _, leaf = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], leaf, mod)
    return mod


def mismatch_ratio(a, b, rtol=1e-2, atol=1e-2, msg="", printLog=True, **_):
    """The fraction of elements of `a` and `b` not within atol + rtol * |b| (0 when all are)."""
    close = torch.isclose(a, b, rtol=rtol, atol=atol)
    ratio = 0.0 if close.all() else (~close).sum().item() / a.numel()
    if printLog:
        print(f"{msg} mismatch ratio {ratio:.4f}")
    return ratio


def run_once(func, *args, num_iters=1, num_warmup=0, **kwargs):
    """(result, wall-clock microseconds) of one call: a stand-in for a perf test on the emulator."""
    start = time.perf_counter()
    result = func(*args, **kwargs)
    return result, (time.perf_counter() - start) * 1e6


def install(monkeypatch):
    flydsl_names = {n: getattr(compat, n) for n in compat.__all__}
    # the tests ask with no device: the emulator (CPU tensors) is what runs here
    flydsl_names["is_flydsl_available"] = lambda device=None: compat.is_flydsl_available(device or "cpu")
    _module(monkeypatch, "aiter")
    _module(monkeypatch, "aiter.ops")
    _module(monkeypatch, "aiter.ops.flydsl", **flydsl_names)
    _module(monkeypatch, "aiter.ops.flydsl.kernels")
    _module(monkeypatch, "aiter.ops.flydsl.kernels.mqa_logits")
    _module(monkeypatch, "aiter.ops.flydsl.kernels.mqa_logits.pa_mqa_logits_fp4",
            **{n: getattr(compat, n) for n in _DECODE})
    _module(monkeypatch, "aiter.ops.flydsl.kernels.mqa_logits.pa_mqa_logits_fp4_prefill",
            **{n: getattr(compat, n) for n in _PREFILL})
    for name in ("aiter.ops.triton", "aiter.ops.triton.utils", "aiter.ops.triton.utils._triton"):
        _module(monkeypatch, name)
    _module(monkeypatch, "aiter.ops.triton.utils._triton.arch_info", get_arch=lambda: "gfx950")
    _module(monkeypatch, "aiter.test_common", checkAllclose=mismatch_ratio, run_perftest=run_once)


def load(monkeypatch, path):
    """The op-test module at `path`, imported under the shim, its tensors on the CPU."""
    install(monkeypatch)
    spec = importlib.util.spec_from_file_location(f"aiter_op_test_{abs(hash(str(path)))}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.dev = "cpu"
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    return mod
