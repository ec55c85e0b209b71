"""emu_samples family: tiny kernels for the emulator's decoder and end-to-end tests (never shipped).

One spec per kernel; `kernel` selects it (see kernel.py for what each one exercises).
"""
from ...targets import DEFAULT_TARGET
from ..registry import Family
from . import plan

FAMILY = Family(
    name="emu_samples",
    axes={"kernel": plan.KERNELS},
    specs=lambda: [{"kernel": k} for k in plan.KERNELS],
    symbol=plan.symbol,
    block=plan.block,
    targets=(DEFAULT_TARGET,),
    shipped=False,
    doc=__doc__,
)
