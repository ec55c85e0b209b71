"""Per-family hooks the CLI's `selftest` and `bench` call; each family opts in from its plan.py.

Protocol (both optional, both take a torch device string such as "cuda" or "cpu"; "cpu" runs on the
gfx950 emulator):
    selftest(device) -> iterable of (case: str, ok: bool, detail: str)
        run the family's ops on small inputs against its torch reference
    bench(device) -> iterable of (case: str, us_per_call: float, detail: str)
A hook that raises counts as one failed case carrying the exception.
"""
import importlib
import traceback

from ..kernel_defs import registry


def families_with(hook: str, only=None) -> list:
    """(family, function) for every family whose plan module defines `hook`."""
    out = []
    for name in registry.family_names():
        if only and name not in only:
            continue
        try:
            plan = importlib.import_module(f"{registry.__package__}.{name}.plan")
        except ImportError:
            continue
        fn = getattr(plan, hook, None)
        if callable(fn):
            out.append((name, fn))
    return out


def run(hook: str, device: str, only=None) -> list:
    """[(family, case, ok_or_value, detail)] from every family's hook."""
    rows = []
    for family, fn in families_with(hook, only):
        try:
            for case, value, detail in fn(device):
                rows.append((family, case, value, detail))
        except Exception as e:   # one broken family must not hide the others' results
            rows.append((family, "<hook raised>", False, "".join(traceback.format_exception_only(e)).strip()))
    return rows
