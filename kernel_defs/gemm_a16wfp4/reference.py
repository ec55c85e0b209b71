"""Torch reference of the A16WFP4 GEMM (docs/families/gemm_a16wfp4.md#operation) and test-data makers.

Canonical decode: W[n, k] = bf16(e2m1(code) * 2^(e[n, k // 32] - 127)) computed in f32 (exact: E2M1
has two significant bits), 0xFF -> NaN for the whole 32-group; then Y = bf16(X @ W^T) accumulated in
fp32 from the bf16 operands.
"""
import torch

from ..mqa_common.fp4 import dequant_mxfp4, pack_nibbles


def decode_weight(w_packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """Natural-layout uint8 [N, K/2] codes + [N, K/32] E8M0 -> bf16 [N, K]."""
    return dequant_mxfp4(w_packed, scales).to(torch.bfloat16)


def gemm_reference(x: torch.Tensor, w_packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    w = decode_weight(w_packed, scales).float()
    return (x.float() @ w.t()).to(torch.bfloat16)


def random_weight(n: int, k: int, *, generator=None, scale_lo: int = 120, scale_hi: int = 134):
    """Uniformly random codes (all 16 appear) and E8M0 scales in [scale_lo, scale_hi]."""
    codes = torch.randint(0, 16, (n, k), dtype=torch.uint8, generator=generator)
    scales = torch.randint(scale_lo, scale_hi + 1, (n, k // 32), dtype=torch.uint8, generator=generator)
    return pack_nibbles(codes), scales


def mxfp4_grid_activations(m: int, k: int, *, generator=None) -> torch.Tensor:
    """bf16 [M, K] whose values lie on the MXFP4 grid (E2M1 value times a per-32-group power of two).

    With weights also on the grid every product is exact and, with exponents kept in a narrow
    range, every fp32 partial sum is too, so any summation order gives the reference bit for bit.
    """
    codes = torch.randint(0, 16, (m, k), dtype=torch.uint8, generator=generator)
    exps = torch.randint(126, 129, (m, k // 32), dtype=torch.uint8, generator=generator)
    return decode_weight(pack_nibbles(codes), exps)
