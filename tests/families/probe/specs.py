from ...targets import DEFAULT_TARGET
from ..registry import Budget, Family, kernel_abi
from .geometry import block, symbol

FAMILY = Family(
    name="probe",
    axes={"block": (64, 128), "behavior": ("ok", "abort", "raise", "hang")},
    specs=lambda target: [{"block": b, "behavior": "ok"} for b in (64, 128)],
    symbol=symbol,
    block=block,
    targets=(DEFAULT_TARGET,),
    abi=lambda params: kernel_abi("void* out, int32_t n, float value"),
    budget=lambda params, target: Budget(max_vgpr=32),
    shipped=False,
    doc="out[i] = value + 1 for i < n; test-only",
)
