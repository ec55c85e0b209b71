"""Test cases and torch reference math for the emu_samples kernels.

`make_case(kernel, seed)` builds named CPU tensors (inputs and zeroed outputs) plus scalar
arguments; `expected(kernel, case)` returns {output name: tensor} the kernel must produce. Inputs are
chosen so the results are exact in the kernels' arithmetic (small integers in bf16, power-of-two
scales), so a correct execution matches bit for bit. Cross-lane results follow the CDNA4 ISA
definitions of the instructions (see kernel.py).
"""
import torch

from ..mqa_common.fp4 import dequant_mxfp4, e2m1_decode, unpack_nibbles


def _small_bf16(g, *shape):
    return torch.randint(-4, 5, shape, generator=g).to(torch.bfloat16)


def make_case(kernel: str, seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    if kernel == "mfma_bf16_16x16x32":
        return {"a": _small_bf16(g, 16, 64), "b": _small_bf16(g, 32, 64), "c": torch.zeros(16, 32), "k": 64}
    if kernel == "mfma_bf16_32x32x16":
        return {"a": _small_bf16(g, 32, 32), "b": _small_bf16(g, 32, 32), "c": torch.zeros(32, 32), "k": 32}
    if kernel == "lane_ops":
        return {"x": torch.randint(-1000, 1000, (64,), generator=g, dtype=torch.int32),
                "out": torch.zeros(8, 64, dtype=torch.int32)}
    if kernel == "lds_waves":
        groups = 3
        return {"x": torch.randn(groups * 128, generator=g), "out": torch.zeros(groups * 128), "groups": groups}
    if kernel == "buffer_oob":
        return {"x": torch.randn(100, generator=g), "out": torch.zeros(120), "n_in": 100, "n_out": 120}
    if kernel == "mfma_fp4_scaled":
        return {"a": torch.randint(0, 256, (16, 64), generator=g, dtype=torch.uint8),
                "b": torch.randint(0, 256, (16, 64), generator=g, dtype=torch.uint8),
                "sa": torch.randint(124, 131, (16, 4), generator=g, dtype=torch.uint8),
                "sb": torch.randint(124, 131, (16, 4), generator=g, dtype=torch.uint8),
                "c": torch.zeros(16, 16)}
    if kernel == "cvt_fp4_bf16":
        return {"packed": torch.randint(-2**31, 2**31, (64,), generator=g, dtype=torch.int64).to(torch.int32),
                "scales": torch.exp2(torch.randint(-3, 4, (64,), generator=g).to(torch.float32)),
                "x": torch.randn(64, generator=g) * 100, "y": torch.randn(64, generator=g),
                "out_fp4": torch.zeros(64, 4, dtype=torch.int32), "out_pk": torch.zeros(64, dtype=torch.int32)}
    raise ValueError(f"emu_samples: unknown kernel {kernel!r}")


def expected(kernel: str, case: dict) -> dict:
    if kernel in ("mfma_bf16_16x16x32", "mfma_bf16_32x32x16"):
        return {"c": case["a"].float() @ case["b"].float().T}
    if kernel == "lane_ops":
        return {"out": _lane_ops(case["x"])}
    if kernel == "lds_waves":
        x = case["x"].view(case["groups"], 128)
        return {"out": (x.flip(1) * 2.0).reshape(-1)}
    if kernel == "buffer_oob":
        x = torch.zeros(128)
        x[:case["n_in"]] = case["x"]
        return {"out": (x * 2.0 + 1.0)[:case["n_out"]]}
    if kernel == "mfma_fp4_scaled":
        a, b = dequant_mxfp4(case["a"], case["sa"]), dequant_mxfp4(case["b"], case["sb"])     # [16, 128] each
        return {"c": a @ b.T}
    if kernel == "cvt_fp4_bf16":
        packed = case["packed"].view(torch.uint8).view(64, 4)
        vals = e2m1_decode(unpack_nibbles(packed)) * case["scales"].unsqueeze(-1)     # [64, 8]
        pk = torch.stack([case["x"], case["y"]], dim=-1).to(torch.bfloat16)  # [64, 2]
        return {"out_fp4": vals.to(torch.bfloat16).view(torch.int32).view(64, 4),
                "out_pk": pk.view(torch.int32).view(64)}
    raise ValueError(f"emu_samples: unknown kernel {kernel!r}")


def _lane_ops(x: torch.Tensor) -> torch.Tensor:
    lane = torch.arange(64)
    w = x + 1000
    rows = lambda t: t.view(4, 16)                                        # noqa: E731
    p16_dst = torch.stack([rows(x)[0], rows(w)[0], rows(x)[2], rows(w)[2]]).reshape(64)
    p16_src = torch.stack([rows(x)[1], rows(w)[1], rows(x)[3], rows(w)[3]]).reshape(64)
    shr = torch.where(lane % 16 == 0, torch.zeros_like(x), x[(lane - 1) % 64])
    total = x.sum().to(torch.int32)                    # |x| < 1000: no int32 overflow
    return torch.stack([
        x[lane ^ 5],                                   # ds_bpermute from lane l ^ 5
        x[7].expand(64),                               # readlane 7
        torch.cat([x[:32], w[:32]]),                   # permlane32_swap: new vdst (old's high half <-> src's low)
        torch.cat([x[32:], w[32:]]),                   # permlane32_swap: new vsrc
        p16_dst, p16_src,                              # permlane16_swap: odd rows of vdst <-> even rows of vsrc
        shr,                                           # DPP row_shr:1 with bound_ctrl (row's first lane reads 0)
        total.expand(64),                              # butterfly sum through ds_bpermute
    ])
