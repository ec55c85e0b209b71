"""Launch geometry of the probe family (pure Python)."""
from ..registry import LaunchPlan


def block(params: dict) -> tuple:
    return (params["block"], 1, 1)


def symbol(params: dict) -> str:
    return f"probe_fill_b{params['block']}"


def plan(out, value: float, *, block_size: int = 64) -> LaunchPlan:
    params = {"block": block_size, "behavior": "ok"}
    n = out.numel()
    grid = ((n + block_size - 1) // block_size, 1, 1)
    return LaunchPlan("probe", params, grid, block(params), {"out": out, "n": n, "value": float(value)})
