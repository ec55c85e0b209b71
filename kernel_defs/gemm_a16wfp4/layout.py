"""Preshuffled MXFP4 weight layout the GEMM kernels read (bit-exact), and its inverse.

Natural input: packed codes w[n, kb] (uint8 [N, K/2], element 2*kb in the low nibble) and E8M0 scales
s[n, G] (uint8 [N, K/32], G = k // 32). Requires N % 32 == 0 and K % 256 == 0 (the fused path asks
N % 256 == 0 as well), so no padding is ever needed.

Weights (aiter shuffle_weight(layout=(16, 16)) on packed bytes):
    dst = (n // 16) * (16 * K/2) + (kb // 16) * 256 + (n % 16) * 16 + (kb % 16)
A lane with (nlane, klane) = (lane % 16, lane // 16) reading the 16 bytes at
(n // 16) * 8K + b * 1024 + lane * 16 gets K elements [128 b + 32 klane, +32) of column n:
one whole 32-group.

Scales (aiter e8m0_shuffle):
    dst = (n // 32) * K + (G // 8) * 256 + (G % 4) * 64 + (n % 16) * 4 + ((G // 4) % 2) * 2 + (n // 16) % 2
The dword at (n // 32) * K + (b // 2) * 256 + lane * 4 holds the scales of rows {n, n + 16} and
128-K blocks {b, b ^ 1} of the lane's group (klane): byte ((b % 2) * 2 + (n // 16) % 2).
"""
from dataclasses import dataclass
from typing import Optional

import torch


def _check(n: int, k: int) -> None:
    if n % 32 or k % 256:
        raise ValueError(f"preshuffle needs N % 32 == 0 and K % 256 == 0, got N={n}, K={k}")


def shuffle_weight(w: torch.Tensor) -> torch.Tensor:
    """uint8 [N, K/2] -> uint8 [N, K/2] in the preshuffled order (same bytes, permuted)."""
    n, half_k = w.shape
    _check(n, half_k * 2)
    return w.reshape(n // 16, 16, half_k // 16, 16).permute(0, 2, 1, 3).contiguous().reshape(n, half_k)


def unshuffle_weight(ws: torch.Tensor) -> torch.Tensor:
    n, half_k = ws.shape
    _check(n, half_k * 2)
    return ws.reshape(n // 16, half_k // 16, 16, 16).permute(0, 2, 1, 3).contiguous().reshape(n, half_k)


def shuffle_scales(s: torch.Tensor) -> torch.Tensor:
    """uint8 [N, K/32] -> uint8 [N, K/32] in the preshuffled order."""
    n, groups = s.shape
    _check(n, groups * 32)
    # (n32, h, nl, G8, q, r) with n = 32 n32 + 16 h + nl and G = 8 G8 + 4 q + r -> (n32, G8, r, nl, q, h)
    v = s.reshape(n // 32, 2, 16, groups // 8, 2, 4)
    return v.permute(0, 3, 5, 2, 4, 1).contiguous().reshape(n, groups)


def unshuffle_scales(ss: torch.Tensor) -> torch.Tensor:
    n, groups = ss.shape
    _check(n, groups * 32)
    v = ss.reshape(n // 32, groups // 8, 4, 16, 2, 2)          # (n32, G8, r, nl, q, h)
    return v.permute(0, 5, 3, 1, 4, 2).contiguous().reshape(n, groups)


@dataclass
class PreparedMXFP4Weight:
    """What prepare_mxfp4_weight returns and gemm_a16wfp4 accepts.

    fused: weight and scales hold the preshuffled layout above and the kernels serve this weight.
    Otherwise (N or K not divisible by 256) they hold the caller's natural tensors and the op falls
    back to a BF16 copy decoded once, on first use, into `bf16_cache`.
    """
    weight: torch.Tensor
    scales: torch.Tensor
    n: int
    k: int
    fused: bool
    bf16_cache: Optional[torch.Tensor] = None

    def storage_bytes(self) -> int:
        """Bytes held for the weight (packed codes + scales, plus the fallback's BF16 copy if built)."""
        tensors = (self.weight, self.scales, self.bf16_cache)
        return sum(t.numel() * t.element_size() for t in tensors if t is not None)

    def natural(self):
        """(w_packed [N, K/2], scales [N, K/32]) in the natural layout (inverse of the preparation)."""
        if not self.fused:
            return self.weight, self.scales
        return unshuffle_weight(self.weight), unshuffle_scales(self.scales)
