"""Launch geometry of the prefill family (pure Python + torch): input checks, spec choice, grid, arguments.

One CTA per schedule slot (grid = cta_info rows); the spec is fixed by (H, D, page size); every stride,
max_seq_len and weight_scale is a runtime argument.
"""
import functools

import torch

from .. import validate as V
from ..mqa_common.inputs import DWORD_ALIGN, HEAD_DIMS, HEADS, PAGE_SIZES, VALUE_ALIGN, check_kv_pages
from ..mqa_common.layouts import k_tiles, qs_pad
from ..registry import LaunchPlan  # noqa: F401  (the type plans return)
from .geometry import CTA_INFO_INTS, THREADS

MIN_SLOTS = 2048          # default schedule slots: about 8 CTAs per CU on a 256-CU MI355X


def symbol(params: dict) -> str:
    return f"mqa_prefill_fp4_h{params['heads']}_d{params['head_dim']}_p{params['page_size']}"


def block(params: dict) -> tuple:
    return (THREADS, 1, 1)


def default_slots(rows: int) -> int:
    """Schedule slots when the caller gives none: at least one per row (so any grouping fits)."""
    return max(rows, MIN_SLOTS)


def check_inputs(q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights, max_seq_len) -> dict:
    """Validate the tensors every prefill entry point shares; return the spec params.

    Alignment (mqa_common.inputs): Q and KV values are read 16 bytes per lane, Q and KV scales, weights
    and block-table entries in whole dwords; every row / page stride is a runtime argument, so each is
    held to the alignment of its rows' loads."""
    V.check_tensor("q_fp4", q_fp4, dtype=V.FP4X2, ndim=3)
    rows, heads, half_dim = q_fp4.shape
    head_dim = 2 * half_dim
    V.check_choice("heads (q_fp4.shape[1])", heads, HEADS)
    V.check_choice("head_dim (2 * q_fp4.shape[2])", head_dim, HEAD_DIMS)
    V.check_tensor("kv_cache", kv_cache, dtype=V.FP4X2, ndim=5, device=q_fp4)
    page_size = kv_cache.shape[3]
    V.check_choice("page size (kv_cache.shape[3])", page_size, PAGE_SIZES)
    kt, pad = k_tiles(head_dim), qs_pad(heads)
    V.check_tensor("q_fp4", q_fp4, stride=(None, half_dim, 1), align=VALUE_ALIGN, align_strides=True)
    V.check_tensor("q_scale", q_scale, dtype=V.E8M0, shape=(rows, kt, 4, 16, pad),
                   stride=(None, 64 * pad, 16 * pad, pad, 1), device=q_fp4, align=DWORD_ALIGN, align_strides=True)
    check_kv_pages(kv_cache, kv_scale, k_tiles=kt, page_size=page_size, like=q_fp4)
    V.check_tensor("block_tables", block_tables, dtype=torch.int32, ndim=2, device=q_fp4, align=DWORD_ALIGN)
    V.check_tensor("block_tables", block_tables, stride=(None, 1))
    V.check_tensor("weights", weights, dtype=torch.bfloat16, shape=(rows, heads), stride=(None, 1),
                   device=q_fp4, align=DWORD_ALIGN, align_strides=True)
    if block_tables.shape[0] >= 1 and block_tables.shape[1] < 1:
        raise ValueError(f"block_tables: needs at least one column, got {tuple(block_tables.shape)}")
    V.check_int("max_seq_len", max_seq_len, lo=0, hi=(1 << 30) - 1)
    for name, t in (("q_fp4", q_fp4), ("q_scale", q_scale), ("kv_cache", kv_cache), ("kv_scale", kv_scale),
                    ("weights", weights), ("block_tables", block_tables)):
        V.check_int(f"{name}.stride(0)", t.stride(0), lo=0)
    return {"heads": heads, "head_dim": head_dim, "page_size": page_size}


def check_windows(rows: int, device, **windows) -> None:
    for name, t in windows.items():
        V.check_tensor(name, t, dtype=torch.int32, shape=(rows,), device=device, contiguous=True, align=DWORD_ALIGN)


def check_out(out, rows: int, max_seq_len: int, device) -> None:
    V.check_tensor("out", out, dtype=torch.float32, shape=(rows, max_seq_len), device=device, align=DWORD_ALIGN)
    if max_seq_len > 1:
        V.check_tensor("out", out, stride=(None, 1))
    V.check_int("out.stride(0)", out.stride(0), lo=0)
    V.check_rows_disjoint("out", out)


def check_schedule(cta_info, rows: int, device) -> None:
    V.check_tensor("cta_info", cta_info, dtype=torch.int32, ndim=2, device=device, contiguous=True,
                   align=DWORD_ALIGN)
    V.check_tensor("cta_info", cta_info, shape=(None, CTA_INFO_INTS))
    slots = cta_info.shape[0]
    if slots < rows:
        raise ValueError(f"cta_info: {slots} slots < {rows} rows; the schedule needs one slot per row group "
                         "and there can be as many groups as rows")
    V.check_int("cta_info.shape[0]", slots, lo=0, hi=(1 << 31) - 1)


def make_plan(params: dict, *, q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights,
              local_starts, local_ends, cta_info, out, max_seq_len: int, weight_scale: float) -> LaunchPlan:
    """The launch of already validated inputs (check_inputs/check_windows/check_out/check_schedule)."""
    args = {
        "out": out, "q": q_fp4, "q_scale": q_scale, "kv_cache": kv_cache, "kv_scale": kv_scale,
        "block_tables": block_tables, "weights": weights, "local_starts": local_starts,
        "local_ends": local_ends, "cta_info": cta_info,
        "stride_out": out.stride(0), "stride_q": q_fp4.stride(0), "stride_qs": q_scale.stride(0),
        "stride_w": weights.stride(0), "stride_kv_page": kv_cache.stride(0),
        "stride_kvs_page": kv_scale.stride(0), "stride_bt": block_tables.stride(0),
        "bt_width": block_tables.shape[1], "max_seq_len": max_seq_len,
        "weight_scale": V.check_float("weight_scale", weight_scale),
        "rows": q_fp4.shape[0], "bt_rows": block_tables.shape[0], "num_pages": kv_cache.shape[0],
    }
    return _family().launch_plan(dict(params), (cta_info.shape[0], 1, 1), args)


@functools.cache
def _family():
    """This family's declaration (specs.py imports this module, so it is looked up on first use)."""
    from .specs import FAMILY
    return FAMILY
