"""`python -m flyaot selftest` and `bench`: per-family hooks found in the public op modules.

A family opts in by defining the hooks in its op module `flyaot.ops._<family>`. They live with the ops,
not in kernel_defs or the runtime, because they call the public ops, and neither may depend on those.

Protocol (both optional, both take a torch device string such as "cuda" or "cpu"; "cpu" runs on the
emulator):
    selftest(device) -> iterable of (case: str, ok: bool, detail: str)
        run the family's ops on small inputs against its torch reference
    bench(device) -> iterable of (case: str, us_per_call: float, detail: str)
        us_per_call is False for a case that could not run (detail says why)
A hook that raises, or an op module that fails to import, counts as one failed case carrying the
exception; the helpers below let a hook turn one case's exception into one failed row and go on.
"""
import importlib
import importlib.util
import os
import sys
import time
import traceback

from ..kernel_defs import registry



def _error(e: BaseException) -> str:
    return "".join(traceback.format_exception_only(e)).strip()


def _op_module(family: str):
    """The family's op module, or None when the family has none (test-only families)."""
    name = f"{__package__}._{family}"
    if importlib.util.find_spec(name) is None:
        return None
    return importlib.import_module(name)      # an import error inside it is the family's failure, not "none"


def run(hook: str, device: str, only=None) -> list:
    """[(family, case, ok_or_value, detail)] from every family whose op module defines `hook`."""
    rows = []
    for family in registry.family_names():
        if only and family not in only:
            continue
        try:
            fn = getattr(_op_module(family), hook, None)
            if not callable(fn):
                continue
            for case, value, detail in fn(device):
                rows.append((family, case, value, detail))
        except Exception as e:   # one broken family must not hide the others' results
            rows.append((family, "<hook raised>", False, _error(e)))
    return rows


def check(case: str, fn) -> tuple:
    """(case, ok, detail) from fn() -> (ok, detail); an exception is a failed case carrying it."""
    try:
        ok, detail = fn()
        return case, bool(ok), detail
    except Exception as e:
        return case, False, _error(e)


def describe(metrics: dict) -> str:
    """A detail string from a dict of acceptance metrics ("cosine 1, max_rel_err 6.5e-08, ...")."""
    return ", ".join(f"{k} {v:.7g}" if isinstance(v, float) else f"{k} {v}" for k, v in metrics.items())


def timed(case: str, fn, device: str, detail: str = "", *, emu_calls: int = 3) -> tuple:
    """(case, us_per_call, detail) of fn() on `device`; a failure is (case, False, error).

    GPU: timing.graph_median_us (median of 9 replays of a graph of 20 calls, CUDA/HIP events), so host
    launch cost is excluded. CPU: wall time of the emulator, which says nothing about a GPU.
    """
    import torch

    from .timing import graph_median_us
    try:
        if torch.device(device).type != "cpu":
            us = graph_median_us(fn, rounds=9)
            return case, us, "; ".join(filter(None, [detail, "median of 9 graph replays x 20 calls"]))
        fn()                                   # loads the code object; not timed
        t0 = time.perf_counter()
        for _ in range(emu_calls):
            fn()
        us = (time.perf_counter() - t0) * 1e6 / emu_calls
        return case, us, "; ".join(filter(None, [detail, f"emulator wall time per call ({emu_calls} calls), "
                                                        "not a GPU timing"]))
    except Exception as e:
        return case, False, _error(e)


def _default_device(config) -> str:
    """cpu (the emulator) when FLYAOT_DEVICE=emu or torch sees no GPU, else cuda (torch's name for HIP too)."""
    import torch
    return "cuda" if config.device != "emu" and torch.cuda.is_available() else "cpu"


def cmd_selftest(a, config) -> int:
    device = a.device or _default_device(config)
    if a.sanitize:
        if device != "cpu":
            print(f"error: --sanitize runs on the emulator (--device cpu), not on --device {device}", file=sys.stderr)
            return 2
        os.environ["FLYAOT_EMU_SANITIZE"] = "1"
    rows = run("selftest", device, a.family)
    for family, case, ok, detail in rows:
        print(f"{'PASS' if ok else 'FAIL'} {family} {case}" + (f": {detail}" if detail else ""))
    failed = sum(1 for r in rows if not r[2])
    print(f"{len(rows) - failed} passed, {failed} failed on {device}" + ("" if rows else " (no family has a selftest)"))
    return 1 if failed or not rows else 0


def cmd_bench(a, config) -> int:
    device = a.device or _default_device(config)
    rows = run("bench", device, a.family)
    for family, case, us, detail in rows:
        shown = f"{us:10.2f} us" if isinstance(us, (int, float)) and not isinstance(us, bool) else "    FAILED"
        print(f"{family:16} {case:40} {shown}  {detail}")
    return 0 if rows and all(not isinstance(r[2], bool) for r in rows) else 1

