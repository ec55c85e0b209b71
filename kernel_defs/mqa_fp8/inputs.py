"""Checks of the FP8 MQA logits ops' arguments (pure Python + torch): TypeError/ValueError naming the
argument, before any launch. Alignment follows the kernels' accesses: Q, weights and 64-token pages are
read 16 bytes per lane (16-byte aligned bases and strides); 1-token pages, scales, tables, lengths and
the output in dwords."""
from typing import NamedTuple

import torch

from ..tensor_checks import (INT32_MAX, check_choice, check_int, check_no_overlap, check_rows_disjoint,
                             check_same_device, check_tensor)
from . import geometry as G

FP8_DTYPES = (torch.float8_e4m3fn, torch.uint8)
VALUE_ALIGN, DWORD_ALIGN = 16, 4


class Paged(NamedTuple):
    batch: int
    next_n: int
    heads: int
    page_size: int
    num_pages: int
    stride_kv: int          # bytes between pages
    stride_w: int           # weights row stride (elements)
    stride_bt: int
    bt_width: int


def check_paged(q, kv_cache, weights, context_lens, block_tables, max_model_len, page_size, preshuffle) -> Paged:
    check_int("max_model_len", max_model_len, lo=1)
    check_int("KVBlockSize", page_size)
    check_choice("KVBlockSize", page_size, G.PAGE_SIZES)
    if preshuffle and page_size % G.NTILE:
        raise ValueError(f"Preshuffle=True needs KVBlockSize a multiple of {G.NTILE}, got {page_size}")
    dims = {}
    check_tensor("q_fp8", q, dtype=FP8_DTYPES, shape=("B", None, "H", G.HEAD_DIM), dims=dims, contiguous=True,
                 align=VALUE_ALIGN)
    batch, next_n, heads = q.shape[0], q.shape[1], q.shape[2]
    check_int("next_n (q_fp8.shape[1])", next_n, lo=1, hi=G.MAX_NEXT_N)
    check_choice("heads (q_fp8.shape[2])", heads, G.HEADS)
    row = G.HEAD_DIM + G.SCALE_BYTES
    page_align = VALUE_ALIGN if page_size % G.NTILE == 0 else DWORD_ALIGN
    check_tensor("kv_cache", kv_cache, dtype=FP8_DTYPES, ndim=4, device=q, align=page_align)
    if tuple(kv_cache.shape[1:]) != (page_size, 1, row):
        raise ValueError(f"kv_cache: shape {tuple(kv_cache.shape)} must be [num_blocks, KVBlockSize={page_size}, 1, "
                         f"{row}] (D={G.HEAD_DIM} FP8 values then one f32 scale per token)")
    num_pages, s0 = kv_cache.shape[0], kv_cache.stride(0)
    if tuple(kv_cache.stride()[1:]) != (row, row, 1) and page_size > 1:
        raise ValueError(f"kv_cache: each page must be contiguous (strides [*, {row}, {row}, 1]), got "
                         f"{kv_cache.stride()}")
    if kv_cache.stride(3) != 1:
        raise ValueError("kv_cache: the last dim must be contiguous")
    if num_pages > 1 and (s0 < page_size * row or s0 % page_align):
        raise ValueError(f"kv_cache: page stride {s0} B must be >= the page size {page_size * row} B and a "
                         f"multiple of {page_align}")
    if page_size == 1 and num_pages and (num_pages - 1) * s0 + row > INT32_MAX:
        raise ValueError(f"kv_cache: with KVBlockSize=1 the cache spans {(num_pages - 1) * s0 + row} B, above the "
                         f"{INT32_MAX}-byte range of the kernel's 32-bit token offsets")
    check_tensor("weights", weights, dtype=torch.float32, shape=(batch * next_n, heads), stride=(None, 1),
                 align=VALUE_ALIGN)
    if batch * next_n > 1 and (weights.stride(0) < heads or weights.stride(0) % 4):
        raise ValueError(f"weights: row stride {weights.stride(0)} must be >= {heads} and a multiple of 4")
    check_tensor("context_lens", context_lens, dtype=torch.int32, shape=(batch,), contiguous=True,
                 align=DWORD_ALIGN)
    check_tensor("kv_indices", block_tables, dtype=torch.int32, shape=(batch, None), stride=(None, 1),
                 align=DWORD_ALIGN)
    check_int("kv_indices.stride(0)", block_tables.stride(0), lo=0)
    check_same_device(q_fp8=q, kv_cache=kv_cache, weights=weights, context_lens=context_lens,
                      kv_indices=block_tables)
    return Paged(batch, next_n, heads, page_size, num_pages, s0, weights.stride(0), block_tables.stride(0),
                 block_tables.shape[1])


def check_out(name, out, rows: int, cols: int, like, **inputs) -> None:
    check_tensor(name, out, dtype=torch.float32, shape=(rows, cols), stride=(None, 1), align=DWORD_ALIGN)
    check_rows_disjoint(name, out)
    check_same_device(**{name: out}, q=like)
    check_no_overlap(name, out, **inputs)


class Ragged(NamedTuple):
    seq_len: int
    seq_len_kv: int
    heads: int
    stride_kv: int          # KV row stride (bytes = elements)
    stride_w: int


def check_ragged(q, kv, kv_scales, weights, cu_starts, cu_ends) -> Ragged:
    dims = {}
    check_tensor("Q", q, dtype=FP8_DTYPES, shape=("S", "H", G.HEAD_DIM), contiguous=True, align=VALUE_ALIGN,
                 dims=dims)
    seq_len, heads = q.shape[0], q.shape[1]
    check_choice("heads (Q.shape[1])", heads, G.HEADS)
    check_tensor("KV", kv, dtype=FP8_DTYPES, shape=("S_kv", G.HEAD_DIM), stride=(None, 1), device=q,
                 align=VALUE_ALIGN, dims=dims)
    seq_len_kv = kv.shape[0]
    if seq_len_kv > 1 and (kv.stride(0) < G.HEAD_DIM or kv.stride(0) % VALUE_ALIGN):
        raise ValueError(f"KV: row stride {kv.stride(0)} must be >= {G.HEAD_DIM} and a multiple of {VALUE_ALIGN}")
    if seq_len_kv * max(kv.stride(0), G.HEAD_DIM) > INT32_MAX:
        raise ValueError(f"KV: {seq_len_kv} rows span more than the kernel's 2**31-byte offsets")
    check_tensor("kv_scales", kv_scales, dtype=torch.float32, shape=("S_kv",), contiguous=True, align=DWORD_ALIGN,
                 dims=dims)
    check_tensor("weights", weights, dtype=torch.float32, shape=("S", "H"), stride=(None, 1), align=VALUE_ALIGN,
                 dims=dims)
    if seq_len > 1 and (weights.stride(0) < heads or weights.stride(0) % 4):
        raise ValueError(f"weights: row stride {weights.stride(0)} must be >= {heads} and a multiple of 4")
    for name, t in (("cu_starts", cu_starts), ("cu_ends", cu_ends)):
        check_tensor(name, t, dtype=torch.int32, shape=("S",), contiguous=True, align=DWORD_ALIGN, dims=dims)
    check_same_device(Q=q, KV=kv, kv_scales=kv_scales, weights=weights, cu_starts=cu_starts, cu_ends=cu_ends)
    if seq_len_kv * 4 > INT32_MAX:
        raise ValueError(f"KV: {seq_len_kv} keys make output rows past the kernel's 2**31-byte offsets")
    return Ragged(seq_len, seq_len_kv, heads, kv.stride(0), weights.stride(0))
