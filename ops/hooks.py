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
import contextlib
import importlib
import importlib.util
import sys
import time
import traceback

from ..kernel_defs import registry
from ..runtime.commands import UsageError
from ..runtime.drivers import emu as emu_driver



def _error(e: BaseException) -> str:
    return "".join(traceback.format_exception_only(e)).strip()


def _op_module(family: str):
    """The family's op module, or None when the family has none (test-only families)."""
    name = f"{__package__}._{family}"
    if importlib.util.find_spec(name) is None:
        return None
    return importlib.import_module(name)      # an import error inside it is the family's failure, not "none"


def families_with(hook: str) -> list:
    """The families whose op module defines `hook` (an op module that fails to import counts: running
    the hook reports its error)."""
    out = []
    for family in registry.family_names():
        try:
            if callable(getattr(_op_module(family), hook, None)):
                out.append(family)
        except Exception:
            out.append(family)
    return out


def run(hook: str, device: str, only=None):
    """(family, case, ok_or_value, detail) of every family whose op module defines `hook`, yielded as
    each case finishes."""
    for family in registry.family_names():
        if only and family not in only:
            continue
        try:
            fn = getattr(_op_module(family), hook, None)
            if not callable(fn):
                continue
            for case, value, detail in fn(device):
                yield family, case, value, detail
        except Exception as e:   # one broken family must not hide the others' results
            yield family, "<hook raised>", False, _error(e)


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


def _device(a, config, hook: str) -> tuple:
    """(torch device, families) for a selftest/bench command, or a UsageError saying what to pass."""
    import torch

    have = families_with(hook)
    for f in a.family or []:
        if f not in registry.family_names():
            raise UsageError(f"unknown family {f!r} (families: {', '.join(registry.family_names())})")
        if f not in have:
            raise UsageError(f"family {f!r} has no {hook} (families with one: {', '.join(have) or 'none'})")
    if not have:
        raise UsageError(f"no family has a {hook}")
    wanted = (a.device or "").lower()
    if not wanted:       # cpu (the emulator) when FLYAOT_DEVICE=emu or torch sees no GPU, else the GPU
        return ("cuda" if config.device != "emu" and torch.cuda.is_available() else "cpu"), a.family or have
    if wanted in ("cpu", "emu"):
        return "cpu", a.family or have
    build = (f"a ROCm/HIP build ({torch.version.hip})" if torch.version.hip else
             f"a CUDA build ({torch.version.cuda})" if torch.version.cuda else "a CPU-only build")
    if wanted in ("rocm", "hip") and not torch.version.hip:
        raise UsageError(f"--device {wanted}: torch {torch.__version__} is {build}, not a ROCm build "
                         "(README, Installing); use --device cpu for the emulator")
    if not torch.cuda.is_available():
        raise UsageError(f"torch sees no GPU (torch {torch.__version__}, {build}); use --device cpu for the emulator")
    return "cuda", a.family or have


def _run_streaming(hook: str, device: str, families: list, show) -> list:
    """Run the hook over `families`, calling show(row) as each case finishes, with a progress bar over
    the families on a terminal (plain progress lines otherwise)."""
    from ..runtime import progress
    progress.plain_lines(True)
    bar = progress.Progress(f"{hook} on {device}", len(families), "families", delay=0.0, every=60.0)
    rows = []
    try:
        for i, family in enumerate(families):
            for row in run(hook, device, [family]):
                bar.clear()
                rows.append(row)
                show(row)
                bar.update(i)
            bar.update(i + 1)
    finally:
        bar.close()
    return rows


def _print_json(rows, device, value_key) -> None:
    import json
    print(json.dumps({"device": device, "cases": [
        {"family": f, "case": c, value_key: v, "detail": d} for f, c, v, d in rows]}, indent=1))


def cmd_selftest(a, config) -> int:
    if a.sanitize and a.device not in (None, "cpu", "emu"):
        raise UsageError(f"--sanitize runs on the emulator (--device cpu), not on --device {a.device}")
    device, families = _device(a, config, "selftest")
    if a.sanitize and device != "cpu":
        raise UsageError(f"--sanitize runs on the emulator (--device cpu), not on --device {device}")

    def show(row):
        family, case, ok, detail = row
        if not a.json:
            print(f"{'PASS' if ok else 'FAIL'} {family} {case}" + (f": {detail}" if detail else ""), flush=True)
    with (emu_driver.sanitizing() if a.sanitize else contextlib.nullcontext()):
        rows = _run_streaming("selftest", device, families, show)
    failed = sum(1 for r in rows if not r[2])
    if a.json:
        _print_json([(f, c, bool(ok), d) for f, c, ok, d in rows], device, "ok")
    else:
        print(f"{len(rows) - failed} passed, {failed} failed on {device}")
    return 1 if failed or not rows else 0


def _shown(us) -> bool:
    return isinstance(us, (int, float)) and not isinstance(us, bool)


def cmd_bench(a, config) -> int:
    device, families = _device(a, config, "bench")

    def show(row):
        family, case, us, detail = row
        if not a.json:
            print(f"{family:16} {case:40} {f'{us:10.2f} us' if _shown(us) else '    FAILED'}  {detail}", flush=True)
    rows = _run_streaming("bench", device, families, show)
    if a.json:
        _print_json([(f, c, us if _shown(us) else None, d) for f, c, us, d in rows], device, "us_per_call")
    return 0 if rows and all(_shown(r[2]) for r in rows) else 1
