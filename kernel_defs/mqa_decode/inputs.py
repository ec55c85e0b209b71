"""The always-on input checks of the mqa_decode op: tensor metadata only (dtype, shape, strides,
alignment, device), no host sync, so they run under graph capture. `check_inputs` returns the Shapes
the plan computes with; plan.py applies these before it chooses a kernel.
"""
import math
from typing import NamedTuple

import torch

from ..mqa_common.inputs import DWORD_ALIGN, HEAD_DIMS, HEADS, PAGE_SIZES, VALUE_ALIGN, check_kv_pages
from ..mqa_common.layouts import K_TILE, k_tiles, qs_pad
from ..tensor_checks import (E8M0, FP4X2, INT32_MAX, check_choice, check_float, check_int, check_rows_disjoint,
                        check_same_device, check_tensor)
from .geometry import STAGED_MAX_NEXT_N as MAX_NEXT_N


class Shapes(NamedTuple):
    """What check_inputs established about the inputs: the dispatch axes, and the layout integers the
    kernels take as arguments (so the plan does not read the tensors' metadata again). A tuple: one is
    built per call, in a third of a frozen dataclass's time."""
    batch: int
    next_n: int
    heads: int
    head_dim: int
    page_size: int
    num_pages: int          # kv_cache.shape[0]
    stride_kv: int          # page strides of kv_cache and kv_scale, row stride of block_tables (elements)
    stride_ks: int
    stride_bt: int
    bt_width: int           # block_tables.shape[1]


def check_inputs(q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights, context_lens, max_seq_len,
                 next_n, kv_block_size, weight_scale) -> Shapes:
    """Every check that needs no schedule: raises TypeError/ValueError naming the argument.

    Alignment (mqa_common.inputs): Q and KV values are read 16 bytes per lane, Q and KV scales, weights
    and block-table entries in whole dwords. The common case is decided by one read of each tensor's
    metadata (accepts_inputs); anything it does not accept goes through explain_inputs, which raises
    the error (or accepts what the quick pass was stricter about)."""
    s = accepts_inputs(q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights, context_lens, max_seq_len,
                       next_n, kv_block_size, weight_scale)
    if s is not None:
        return s
    return explain_inputs(q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights, context_lens, max_seq_len,
                          next_n, kv_block_size, weight_scale)


_FP4X2, _E8M0 = frozenset(FP4X2), frozenset(E8M0)
_HEADS, _HEAD_DIMS = frozenset(HEADS), frozenset(HEAD_DIMS)
_I32, _BF16, _F32 = torch.int32, torch.bfloat16, torch.float32
Tensor = torch.Tensor


def accepts_inputs(q, qs, kv, ks, bt, w, cl, max_seq_len, next_n, page, weight_scale):
    """Shapes when the inputs pass every check of explain_inputs, else None; never raises.

    The eager op's hot path: each tensor's shape, stride, dtype, device and address read once and
    compared in straight-line code, no error text built. It may refuse more than explain_inputs (exact
    int/float types, a size-1 dim's stride), never less: anything it refuses is decided there."""
    try:
        if not (isinstance(q, Tensor) and isinstance(qs, Tensor) and isinstance(kv, Tensor) and isinstance(ks, Tensor)
                and isinstance(bt, Tensor) and isinstance(w, Tensor) and isinstance(cl, Tensor)):
            return None
        if not (type(next_n) is int and 1 <= next_n <= MAX_NEXT_N and type(page) is int and page in PAGE_SIZES
                and type(max_seq_len) is int and 1 <= max_seq_len <= INT32_MAX
                and (type(weight_scale) is float or type(weight_scale) is int) and math.isfinite(weight_scale)):
            return None
        batch, n, heads, d2 = q.shape
        head_dim, dev = 2 * d2, q.device
        if n != next_n or heads not in _HEADS or head_dim not in _HEAD_DIMS:
            return None
        kt = head_dim // K_TILE
        if not (q.dtype in _FP4X2 and q.is_contiguous() and not q.data_ptr() % VALUE_ALIGN
                and qs.dtype in _E8M0 and qs.shape == (batch, next_n, kt, 4, 16, qs_pad(heads))
                and qs.is_contiguous() and not qs.data_ptr() % DWORD_ALIGN and qs.device == dev):
            return None
        # kv pages: [pages, KT, 4, P, 16] values and [pages, KT, 4, P] scales at a page stride that keeps
        # pages apart and aligned (a single page is never stepped, so its stride is free).
        pages = kv.shape[0]
        kv_stride, ks_stride = kv.stride(), ks.stride()
        if not (kv.dtype in _FP4X2 and kv.shape == (pages, kt, 4, page, 16)
                and kv_stride[1:] == (64 * page, 16 * page, 16, 1) and not kv.data_ptr() % VALUE_ALIGN
                and ks.dtype in _E8M0 and ks.shape == (pages, kt, 4, page) and ks_stride[1:] == (4 * page, page, 1)
                and not ks.data_ptr() % DWORD_ALIGN and kv.device == dev and ks.device == dev
                and (pages <= 1 or (not kv_stride[0] % VALUE_ALIGN and kv_stride[0] >= kt * 64 * page
                                    and not ks_stride[0] % DWORD_ALIGN and ks_stride[0] >= kt * 4 * page))):
            return None
        bt_shape, bt_stride = bt.shape, bt.stride()
        if not (bt.dtype is _I32 and len(bt_shape) == 2 and bt_shape[0] == batch and bt_stride[1] == 1
                and 0 <= bt_stride[0] <= INT32_MAX and not bt.data_ptr() % DWORD_ALIGN and bt.device == dev
                and w.dtype is _BF16 and w.shape == (batch * next_n, heads) and w.is_contiguous()
                and not w.data_ptr() % DWORD_ALIGN and w.device == dev
                and cl.dtype is _I32 and cl.shape == (batch,) and cl.device == dev):
            return None
        return Shapes(batch, next_n, heads, head_dim, page, pages, kv_stride[0], ks_stride[0], bt_stride[0],
                      bt_shape[1])
    except Exception:             # not a tensor, a wrong rank, ...: explain_inputs names it
        return None


def explain_inputs(q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights, context_lens, max_seq_len,
                 next_n, kv_block_size, weight_scale) -> Shapes:
    """The checks of check_inputs one by one: raises the TypeError/ValueError naming the first argument
    that fails. The rules of record; `accepts_inputs` only ever accepts a subset of what this accepts."""
    dims = {}
    check_int("next_n", next_n, lo=1, hi=MAX_NEXT_N)
    check_int("kv_block_size", kv_block_size)
    check_choice("kv_block_size", kv_block_size, PAGE_SIZES)
    check_int("max_seq_len", max_seq_len, lo=1)
    check_float("weight_scale", weight_scale)
    check_tensor("q_fp4", q_fp4, dtype=FP4X2, shape=("B", None, "H", "D2"), dims=dims, contiguous=True,
                 align=VALUE_ALIGN)
    if q_fp4.shape[1] != next_n:
        raise ValueError(f"q_fp4: dim 1 is {q_fp4.shape[1]} but next_n={next_n}")
    batch, heads, head_dim = dims["B"], dims["H"], 2 * dims["D2"]
    check_choice("heads (q_fp4.shape[2])", heads, HEADS)
    check_choice("head_dim (2 * q_fp4.shape[3])", head_dim, HEAD_DIMS)
    kt, p = k_tiles(head_dim), kv_block_size
    check_tensor("q_scale", q_scale, dtype=E8M0, shape=(batch, next_n, kt, 4, 16, qs_pad(heads)), contiguous=True,
                 align=DWORD_ALIGN)
    check_tensor("kv_cache", kv_cache, dtype=FP4X2, ndim=5)
    if kv_cache.shape[3] != p:
        raise ValueError(f"kv_cache: page size (dim 3) is {kv_cache.shape[3]} but kv_block_size={p}")
    check_kv_pages(kv_cache, kv_scale, k_tiles=kt, page_size=p, like=q_fp4)
    check_tensor("block_tables", block_tables, dtype=torch.int32, shape=(batch, None), stride=(None, 1),
                 align=DWORD_ALIGN)
    check_int("block_tables.stride(0)", block_tables.stride(0), lo=0)
    check_tensor("weights", weights, dtype=torch.bfloat16, shape=(batch * next_n, heads), contiguous=True,
                 align=DWORD_ALIGN)
    # int32 only: the kernels read 32-bit lengths, and converting int64 would wrap 2**32 + 70 to 70.
    check_tensor("context_lens", context_lens, dtype=torch.int32, shape=(batch,))
    check_same_device(q_fp4=q_fp4, q_scale=q_scale, kv_cache=kv_cache, kv_scale=kv_scale,
                      block_tables=block_tables, weights=weights, context_lens=context_lens)
    return Shapes(batch, next_n, heads, head_dim, p, kv_cache.shape[0], kv_cache.stride(0), kv_scale.stride(0),
                  block_tables.stride(0), block_tables.shape[1])


def check_out(out, rows: int, max_seq_len: int, like: torch.Tensor) -> None:
    """f32 [rows, max_seq_len], unit column stride, dword aligned, rows apart, on the inputs' device."""
    if isinstance(out, Tensor) and out.dtype is _F32 and out.shape == (rows, max_seq_len):
        stride = out.stride()
        if (stride[1] == 1 and (rows <= 1 or max_seq_len <= 0 or stride[0] >= max_seq_len)
                and not out.data_ptr() % DWORD_ALIGN and out.device == like.device):
            return
    check_tensor("out", out, dtype=torch.float32, shape=(rows, max_seq_len), stride=(None, 1), align=DWORD_ALIGN)
    check_rows_disjoint("out", out)
    check_same_device(out=out, q_fp4=like)


def check_schedule(cta_info, total_ctas, like: torch.Tensor) -> int:
    """int32 [>= total_ctas, 4] contiguous, dword aligned, on the inputs' device; returns total_ctas."""
    if (isinstance(cta_info, Tensor) and cta_info.dtype is _I32 and type(total_ctas) is int
            and cta_info.dim() == 2 and cta_info.shape[1] == 4 and 1 <= total_ctas <= min(cta_info.shape[0], INT32_MAX)
            and cta_info.is_contiguous() and not cta_info.data_ptr() % DWORD_ALIGN and cta_info.device == like.device):
        return total_ctas
    check_tensor("cta_info", cta_info, dtype=torch.int32, shape=(None, 4), contiguous=True, align=DWORD_ALIGN)
    check_int("total_ctas", total_ctas, lo=1, hi=cta_info.shape[0])
    check_same_device(cta_info=cta_info, q_fp4=like)
    return total_ctas
