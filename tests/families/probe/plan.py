"""Launch geometry of the probe family (pure Python)."""
import functools

from ..registry import LaunchPlan  # noqa: F401  (the type plans return)


def block(params: dict) -> tuple:
    return (params["block"], 1, 1)


def symbol(params: dict) -> str:
    return f"probe_fill_b{params['block']}"


def plan(out, value: float, *, block_size: int = 64) -> LaunchPlan:
    params = {"block": block_size, "behavior": "ok"}
    n = out.numel()
    grid = ((n + block_size - 1) // block_size, 1, 1)
    return _family().launch_plan(params, grid, {"out": out, "n": n, "value": float(value)})


@functools.cache
def _family():
    """This family's declaration (specs.py imports this module, so it is looked up on first use)."""
    from .specs import FAMILY
    return FAMILY
