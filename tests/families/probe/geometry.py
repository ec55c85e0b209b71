"""Sizes of the probe family: its workgroup is the `block` axis."""


def block(params: dict, target) -> tuple:
    return (params["block"], 1, 1)


def symbol(params: dict) -> str:
    return f"probe_fill_b{params['block']}"
