"""emu_samples family: tiny kernels for the emulator's decoder and end-to-end tests (never shipped).

One spec per kernel; `kernel` selects it (see kernel.py for what each one exercises).
"""
from ...targets import DEFAULT_TARGET
from ..registry import Family, kernel_abi
from .geometry import KERNELS, block, symbol

ABIS = {
    "mfma_bf16_16x16x32": kernel_abi("void* a, void* b, void* c, int32_t k"),
    "mfma_bf16_32x32x16": kernel_abi("void* a, void* b, void* c, int32_t k"),
    "lane_ops": kernel_abi("void* x, void* out"),
    "lds_waves": kernel_abi("void* x, void* out"),
    "buffer_oob": kernel_abi("void* x, void* out, int32_t n_in, int32_t n_out"),
    "mfma_fp4_scaled": kernel_abi("void* a, void* b, void* sa, void* sb, void* c"),
    "cvt_fp4_bf16": kernel_abi("void* packed, void* scales, void* x, void* y, void* out_fp4, void* out_pk"),
}

FAMILY = Family(
    name="emu_samples",
    axes={"kernel": KERNELS},
    specs=lambda target: [{"kernel": k} for k in KERNELS],
    symbol=symbol,
    block=block,
    targets=(DEFAULT_TARGET,),
    abi=lambda params: ABIS[params["kernel"]],
    shipped=False,
    doc=__doc__,
)
