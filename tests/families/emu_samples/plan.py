"""Launch plans of the emu_samples kernels: geometry and argument values for one test case.

`plan(kernel, case)` takes a case dict as reference.make_case builds it (named CPU or device
tensors and ints) and maps it onto the kernel's arguments; lds_waves' grid comes from the case's
`groups` (one workgroup per 128 values).
"""
import functools

from ..registry import LaunchPlan


BLOCKS = {
    "mfma_bf16_16x16x32": (128, 1, 1),
    "mfma_bf16_32x32x16": (64, 1, 1),
    "lane_ops": (64, 1, 1),
    "lds_waves": (128, 1, 1),
    "buffer_oob": (128, 1, 1),
    "mfma_fp4_scaled": (64, 1, 1),
    "cvt_fp4_bf16": (64, 1, 1),
}
KERNELS = tuple(BLOCKS)

# kernel argument names in ABI order; the case dict supplies each of them
ARGS = {
    "mfma_bf16_16x16x32": ("a", "b", "c", "k"),
    "mfma_bf16_32x32x16": ("a", "b", "c", "k"),
    "lane_ops": ("x", "out"),
    "lds_waves": ("x", "out"),
    "buffer_oob": ("x", "out", "n_in", "n_out"),
    "mfma_fp4_scaled": ("a", "b", "sa", "sb", "c"),
    "cvt_fp4_bf16": ("packed", "scales", "x", "y", "out_fp4", "out_pk"),
}


def symbol(params: dict) -> str:
    return f"emu_{params['kernel']}"


def block(params: dict) -> tuple:
    return BLOCKS[params["kernel"]]


def grid(kernel: str, case: dict) -> tuple:
    if kernel == "lds_waves":
        return (case["groups"], 1, 1)
    return (1, 1, 1)


def plan(kernel: str, case: dict) -> LaunchPlan:
    if kernel not in BLOCKS:
        raise ValueError(f"emu_samples: unknown kernel {kernel!r}; known: {', '.join(KERNELS)}")
    missing = [a for a in ARGS[kernel] if a not in case]
    if missing:
        raise ValueError(f"emu_samples/{kernel}: case lacks {missing}")
    return _family().launch_plan({"kernel": kernel}, grid(kernel, case), {a: case[a] for a in ARGS[kernel]})


@functools.cache
def _family():
    """This family's declaration (specs.py imports this module, so it is looked up on first use)."""
    from .specs import FAMILY
    return FAMILY
