"""Input builders: natural tensors -> the layouts the ops take (CPU or GPU tensors alike).

The kernels read FP4 values and E8M0 scales in kernel-specific layouts (docs/families/mqa_decode.md#formats,
docs/families/gemm_a16wfp4.md#formats). These functions make them from plain float tensors; each op's
input errors name the builder that makes the layout it expected.

    decode   q [B, next_n, H, D], keys [ctx_b, D] per sequence:
             q_fp4, q_scale = quantize_q(q)
             kv_cache, kv_scale, block_tables = paged_kv(keys, page_size)
             context_lens = lengths(keys)
    prefill  q [T, H, D] (the rows of every sequence, concatenated), the same paged KV;
             cu_seq_q = cu_seqlens(q_lens) for pa_mqa_logits_fp4_varqlen, or
             causal_windows(q_lens, context_lens) for pa_mqa_logits_fp4_prefill's explicit windows
    GEMM     w [N, K]: w_packed, w_scales = quantize_mxfp4(w), then ops.prepare_mxfp4_weight(w_packed, w_scales)

Weights (bf16 [rows, H]) and the GEMM's activations (bf16 [M, K]) are already in their natural layout.
Quantization is the MX rule of docs/families/mxfp4.md#quantizer (round to nearest E2M1, one E8M0 scale
per 32 elements along the last axis). Importing this module imports torch only: no op, store or driver.
"""
from typing import Sequence

import torch

from .kernel_defs.mqa_common import fp4 as _fp4
from .kernel_defs.mqa_common import layouts as _layouts
from .kernel_defs.mqa_prefill import reference as _prefill_ref

__all__ = ["causal_windows", "cu_seqlens", "dequantize_mxfp4", "lengths", "pack_kv_pages", "paged_kv",
           "quantize_mxfp4", "quantize_q", "swizzle_q_scale", "unswizzle_q_scale"]


def quantize_mxfp4(x: torch.Tensor):
    """MXFP4 along the last axis: x [..., D] (any float dtype, D % 32 == 0) -> (packed uint8 [..., D/2],
    scales uint8 [..., D/32]), element 2i in the low nibble of byte i (docs/families/mxfp4.md#nibble-packing).

    For the GEMM weight W [N, K] this gives `prepare_mxfp4_weight`'s (w_packed, scales) directly."""
    return _fp4.quant_mxfp4(x)


def dequantize_mxfp4(packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """Exact float32 values of `quantize_mxfp4`'s output: [..., D/2] codes, [..., D/32] E8M0 -> [..., D]."""
    return _fp4.dequant_mxfp4(packed, scales)


def swizzle_q_scale(scales: torch.Tensor) -> torch.Tensor:
    """Natural Q scales [..., H, D/32] -> the kernels' [..., KT, 4, 16, QS_PAD] layout (KT = D/128,
    QS_PAD = H/16 rounded up to a multiple of 4; docs/families/mqa_decode.md#q-scales)."""
    return _layouts.swizzle_q_scale(scales)


def unswizzle_q_scale(q_scale: torch.Tensor, heads: int) -> torch.Tensor:
    """Inverse of `swizzle_q_scale`: [..., KT, 4, 16, QS_PAD] -> [..., H, D/32]."""
    return _layouts.unswizzle_q_scale(q_scale, heads)


def quantize_q(q: torch.Tensor):
    """Q [..., H, D] float -> (q_fp4 [..., H, D/2] uint8, q_scale [..., KT, 4, 16, QS_PAD] uint8).

    Decode takes lead dims [B, next_n], prefill [T] (docs/families/mqa_decode.md#formats). H is a multiple
    of 16 and D of 128 (the ops accept H in 16..128, D 128 or 256)."""
    if not isinstance(q, torch.Tensor) or q.dim() < 3:
        raise ValueError(f"quantize_q: q must be a tensor [..., H, D], got "
                         f"{tuple(q.shape) if isinstance(q, torch.Tensor) else type(q).__name__}")
    values, scales = _fp4.quant_mxfp4(q)
    return values, _layouts.swizzle_q_scale(scales)


def pack_kv_pages(values: torch.Tensor, scales: torch.Tensor):
    """Natural quantized pages -> the kernels' page layout: values [N, P, D/2] and scales [N, P, D/32]
    (uint8, from `quantize_mxfp4` of keys [N, P, D]) -> (kv_cache [N, KT, 4, P, 16], kv_scale [N, KT, 4, P])
    (docs/families/mqa_decode.md#kv-pages, docs/families/mqa_decode.md#kv-scales)."""
    return _layouts.pack_kv_pages(values, scales)


def paged_kv(keys: Sequence[torch.Tensor], page_size: int = 64):
    """Keys of each sequence ([ctx_b, D] float, a list or a [B, ctx, D] tensor) -> (kv_cache, kv_scale,
    block_tables): quantized, packed into pages of `page_size` tokens (64 or 128), sequence b owning
    pages block_tables[b, :ceil(ctx_b / P)] in order; table entries past a sequence's last page are 0 and
    the unused slots of a last page hold zeros (the kernels read neither;
    docs/families/mqa_decode.md#block-tables). On the device of the first key."""
    keys = list(keys)
    if not keys:
        raise ValueError("paged_kv: keys must hold at least one sequence")
    d = keys[0].shape[-1]
    for b, k in enumerate(keys):
        if not isinstance(k, torch.Tensor) or k.dim() != 2 or k.shape[1] != d:
            raise ValueError(f"paged_kv: keys[{b}] must be a [ctx, {d}] tensor, got "
                             f"{tuple(k.shape) if isinstance(k, torch.Tensor) else type(k).__name__}")
    if page_size not in (64, 128):
        raise ValueError(f"paged_kv: page_size must be 64 or 128, got {page_size}")
    counts = [-(-k.shape[0] // page_size) for k in keys]
    pages = torch.zeros(max(1, sum(counts)), page_size, d, dtype=torch.float32, device=keys[0].device)
    tables = torch.zeros(len(keys), max(1, max(counts)), dtype=torch.int32, device=keys[0].device)
    first = 0
    for b, (k, n) in enumerate(zip(keys, counts)):
        pages[first:first + n].view(-1, d)[:k.shape[0]] = k.float()
        tables[b, :n] = torch.arange(first, first + n, dtype=torch.int32)
        first += n
    kv_cache, kv_scale = _layouts.pack_kv_pages(*_fp4.quant_mxfp4(pages))
    return kv_cache, kv_scale, tables


def lengths(seqs) -> torch.Tensor:
    """int32 [B] lengths (the ops' context_lens) of a list of per-sequence tensors or of plain ints."""
    return torch.tensor([s.shape[0] if isinstance(s, torch.Tensor) else int(s) for s in seqs], dtype=torch.int32)


def cu_seqlens(q_lens) -> torch.Tensor:
    """int32 [B+1] prefix sums of the per-sequence query row counts: `cu_seq_q` of
    pa_mqa_logits_fp4_varqlen and compute_varqlen_windows (docs/families/mqa_prefill.md#operation)."""
    q_lens = [int(n) for n in q_lens]
    if any(n < 0 for n in q_lens):
        raise ValueError(f"cu_seqlens: q_lens must be >= 0, got {q_lens}")
    return torch.tensor([0, *torch.tensor(q_lens, dtype=torch.int64).cumsum(0).tolist()], dtype=torch.int32)


def causal_windows(q_lens, context_lens):
    """(row_to_batch, local_starts, local_ends) int32 [sum(q_lens)] on the host: row n of sequence b scores
    tokens [0, ctx_b - qlen_b + n + 1), the variable-qlen rule (docs/families/mqa_prefill.md#operation).
    The same windows `ops.compute_varqlen_windows` builds on the device; this one loops in Python, so it is
    meant for small or one-off problems."""
    cu = cu_seqlens(q_lens)
    return _prefill_ref.varqlen_windows(cu, [int(c) for c in context_lens], int(cu[-1]))
