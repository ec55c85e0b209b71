"""Launch geometry of the probe family (pure Python)."""
from ..registry import LaunchPlan  # noqa: F401  (the type plans return)
from .specs import FAMILY


def plan(out, value: float, *, block_size: int = 64) -> LaunchPlan:
    params = {"block": block_size, "behavior": "ok"}
    n = out.numel()
    grid = ((n + block_size - 1) // block_size, 1, 1)
    return FAMILY.launch_plan(params, grid, {"out": out, "n": n, "value": float(value)})
