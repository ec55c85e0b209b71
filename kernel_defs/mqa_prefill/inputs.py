"""The always-on input checks of the mqa_prefill op: tensor metadata and the tile knobs' rules, no
host sync; plan.py applies them before it builds the launches."""
import torch

from .. import tensor_checks as V
from ..mqa_common.inputs import DWORD_ALIGN, HEAD_DIMS, HEADS, PAGE_SIZES, VALUE_ALIGN, check_kv_pages
from ..mqa_common.layouts import k_tiles, qs_pad
from ..mqa_common.prefill_table import ROW_INFO_INTS
from .geometry import CTA_INFO_INTS, spec_params


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
    return spec_params(heads, head_dim, page_size)


def check_windows(rows: int, device, **windows) -> None:
    for name, t in windows.items():
        V.check_tensor(name, t, dtype=torch.int32, shape=(rows,), device=device, contiguous=True, align=DWORD_ALIGN)


def check_out(out, rows: int, max_seq_len: int, device) -> None:
    V.check_tensor("out", out, dtype=torch.float32, shape=(rows, max_seq_len), device=device, align=DWORD_ALIGN)
    if max_seq_len > 1:
        V.check_tensor("out", out, stride=(None, 1))
    V.check_int("out.stride(0)", out.stride(0), lo=0)
    V.check_rows_disjoint("out", out)


def check_knobs(block_k, num_warps, kv_block_size, page_size: int) -> None:
    """Upstream's rules for the tile knobs (they choose no kernel here: see the module doc)."""
    V.check_int("num_warps", num_warps, lo=1, hi=16)
    V.check_int("block_k", block_k, lo=16)
    if kv_block_size is not None and kv_block_size != page_size:
        raise ValueError(f"kv_block_size={kv_block_size!r} does not match kv_cache.shape[3]={page_size}")
    if block_k % page_size or (block_k // 16) % num_warps:
        raise ValueError(f"block_k={block_k} must be a multiple of the page size {page_size} whose 16-token "
                         f"tiles split evenly over num_warps={num_warps}")


def check_schedule(cta_info, rows: int, device, n_ctas=None) -> int:
    """An external schedule: this kernel's table (n_ctas == its rows) or a one-row-per-CTA table
    (1 <= n_ctas <= its rows). Returns its width."""
    V.check_tensor("cta_info", cta_info, dtype=torch.int32, ndim=2, device=device, contiguous=True,
                   align=DWORD_ALIGN)
    width = cta_info.shape[1]
    slots = cta_info.shape[0]
    V.check_int("cta_info.shape[0]", slots, lo=0, hi=(1 << 31) - 1)
    if width == ROW_INFO_INTS:
        if n_ctas is not None:
            V.check_int("n_ctas", n_ctas, lo=1, hi=slots)
        return width
    V.check_tensor("cta_info", cta_info, shape=(None, CTA_INFO_INTS))
    if slots < rows:
        raise ValueError(f"cta_info: {slots} slots < {rows} rows; the schedule needs one slot per row group "
                         "and there can be as many groups as rows")
    if n_ctas is not None and n_ctas != slots:
        raise ValueError(f"n_ctas={n_ctas!r} must equal cta_info.shape[0]={slots}")
    return width
