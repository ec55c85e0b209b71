"""Launch plans of the emu_samples kernels: geometry and argument values for one test case.

`plan(kernel, case)` takes a case dict as reference.make_case builds it (named CPU or device
tensors and ints) and maps it onto the kernel's arguments; lds_waves' grid comes from the case's
`groups` (one workgroup per 128 values).
"""
from ..registry import LaunchPlan
from .geometry import ARGS, BLOCKS, KERNELS
from .specs import FAMILY

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
    return FAMILY.launch_plan({"kernel": kernel}, grid(kernel, case), {a: case[a] for a in ARGS[kernel]})
