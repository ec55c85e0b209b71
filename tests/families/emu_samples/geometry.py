"""Sizes of the emu_samples kernels: each kernel's workgroup, its argument names, `symbol` and `block`."""

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


def block(params: dict, target) -> tuple:
    target.wave(64, "emu_samples")       # every sample is written for 64-lane waves
    return BLOCKS[params["kernel"]]
