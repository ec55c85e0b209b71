"""Load and launch prebuilt code objects: `launch(plan)` for a family's LaunchPlan.

Importing this package reads no store and imports neither torch, flydsl nor build_tools; the first
launch opens the stores, the first launch of each spec on each device loads its code object.
"""
import threading

from .errors import (ArchMismatchError, DriverError, FlyaotError, IntegrityError, JitError,  # noqa: F401
                     MissingSpecError, StoreError)

_runtime = None
_lock = threading.Lock()


def runtime():
    """The process's Runtime (created from the environment on first use)."""
    global _runtime
    if _runtime is None:
        with _lock:
            if _runtime is None:
                from .dispatch import Runtime
                _runtime = Runtime()
    return _runtime


def launch(plan, *, stream=None) -> None:
    """Launch a kernel_defs LaunchPlan on torch's current stream (or `stream`) of its tensors' device;
    CPU tensors run on the emulator. Asynchronous on GPUs; no host sync, no allocation."""
    (_runtime or runtime()).launch(plan, stream)


def launch_all(plans, *, stream=None) -> None:
    """Launch LaunchPlans in order on one stream, once every one of them has its code object: a missing
    one fails before the first launch, and every miss is recorded (FLYAOT_RECORD_MISSES), not only the
    first."""
    if len(plans) > 1:              # one plan: its own lookup already fails before anything runs
        (_runtime or runtime()).resolve(plans)
    for plan in plans:
        launch(plan, stream=stream)


def kernel(family: str, params: dict):
    """The reusable launcher of one spec: `kernel(grid, block, args, stream=None)`; skips the plan lookup."""
    return runtime().kernel(family, params)


def reset() -> None:
    """Forget stores and loaded kernels and re-read the environment (tests, `clear-cache`)."""
    global _runtime
    with _lock:
        old, _runtime = _runtime, None
    if old is not None:
        old.unload_all()
