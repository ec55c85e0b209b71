"""Launch geometry of the prefill family (pure Python + torch): input checks, spec choice, grid, arguments.

One CTA per schedule slot (grid = cta_info rows); the spec is fixed by (H, D, page size); every stride,
max_seq_len and weight_scale is a runtime argument.

Knobs (`plan_call`): block_k and num_warps are checked by upstream's rules (block_k a multiple of the
page size, its 16-token tiles a multiple of num_warps) and are hints: the one prefill kernel stages
CHUNK_TOKENS tokens over WAVES waves whatever they say. parallel_unit_num is a hint too: the internal
schedule uses max(parallel_unit_num, default_slots(rows)) slots, never fewer than the op would pick.
Binding: an external schedule. Its width says its format: CTA_INFO_INTS columns is this kernel's table
(compute_prefill_schedule), ROW_INFO_INTS columns the one-row-per-CTA table of serving engines, whose
chunks are block_k tokens; that one is converted on the device. The internal schedule and the
conversion are one launch each of the mqa_prefill_meta family, ahead of the prefill kernel's launch.
"""
import functools

import torch

from .. import validate as V
from ..mqa_common.inputs import DWORD_ALIGN, HEAD_DIMS, HEADS, PAGE_SIZES, VALUE_ALIGN, check_kv_pages
from ..mqa_common.layouts import k_tiles, qs_pad
from ..mqa_common.prefill_table import ROW_INFO_INTS
from ..mqa_prefill_meta import plan as meta
from ..mqa_prefill_meta import reference as meta_reference
from ..registry import LaunchPlan
from .geometry import CTA_INFO_INTS, THREADS, Geometry, spec_params

MIN_SLOTS = 2048          # default schedule slots: about 8 CTAs per CU on a 256-CU MI355X


def symbol(params: dict) -> str:
    g = Geometry.of(params)
    return f"mqa_prefill_fp4_h{g.heads}_d{g.head_dim}_p{g.page_size}"


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


def plan_call(q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights, row_to_batch, local_starts, local_ends,
              max_seq_len, *, weight_scale, block_k, kv_block_size, num_warps, parallel_unit_num, out, cta_info,
              n_ctas, check_values: bool = False):
    """The whole decision of one prefill call: (out, plans), the launches to run in order on one stream
    (none when there is nothing to compute): the metadata kernel that builds the internal schedule or
    converts a one-row-per-CTA table, if any, then the prefill kernel. Checks, and fills `out` with -inf
    unless an external schedule is given with it. `check_values` validates index values with a host
    sync (checked mode); an external table is checked in this kernel's format, after conversion (the
    reference conversion, which the conversion kernel matches bit for bit)."""
    from .. import checks
    params = check_inputs(q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights, max_seq_len)
    rows = q_fp4.shape[0]
    page = params["page_size"]
    check_knobs(block_k, num_warps, kv_block_size, page)
    check_windows(rows, q_fp4, row_to_batch=row_to_batch, local_starts=local_starts, local_ends=local_ends)
    if (cta_info is None) != (n_ctas is None):
        raise ValueError("cta_info and n_ctas: pass both (an external schedule) or neither")
    width = None if cta_info is None else check_schedule(cta_info, rows, q_fp4, n_ctas)
    if cta_info is None and parallel_unit_num is not None:
        V.check_int("parallel_unit_num", parallel_unit_num, lo=max(rows, 1))
    if out is None:
        out = torch.full((rows, max_seq_len), float("-inf"), dtype=torch.float32, device=q_fp4.device)
    else:
        check_out(out, rows, max_seq_len, q_fp4)
        V.check_no_overlap("out", out, q_fp4=q_fp4, q_scale=q_scale, kv_cache=kv_cache, kv_scale=kv_scale,
                           block_tables=block_tables, weights=weights, row_to_batch=row_to_batch,
                           local_starts=local_starts, local_ends=local_ends, cta_info=cta_info)
        if cta_info is None:
            out.fill_(float("-inf"))
    if rows == 0 or max_seq_len == 0 or block_tables.shape[0] == 0:     # no batch: no row sees a token
        return out, ()
    checked = cta_info
    first = None
    if cta_info is None:
        slots = max(parallel_unit_num or 0, default_slots(rows))
        cta_info = torch.empty(slots, CTA_INFO_INTS, dtype=torch.int32, device=q_fp4.device)
        first = meta.groups(row_to_batch, local_starts, local_ends, cta_info, page_size=page, max_seq_len=max_seq_len)
    elif width == ROW_INFO_INTS:
        table = cta_info
        cta_info, first = meta.convert(table, n_ctas, block_k=block_k, rows=rows, page_size=page,
                                       max_seq_len=max_seq_len)
        if check_values:
            checked = meta_reference.from_row_schedule(table, n_ctas, block_k=block_k, rows=rows, page_size=page,
                                                       max_seq_len=max_seq_len)
    if check_values:
        checks.prefill_values(block_tables=block_tables, num_pages=kv_cache.shape[0], page_size=page,
                              row_to_batch=row_to_batch, local_starts=local_starts, local_ends=local_ends,
                              max_seq_len=max_seq_len, cta_info=checked)
    main = make_plan(params, q_fp4=q_fp4, q_scale=q_scale, kv_cache=kv_cache, kv_scale=kv_scale,
                     block_tables=block_tables, weights=weights, local_starts=local_starts, local_ends=local_ends,
                     cta_info=cta_info, out=out, max_seq_len=max_seq_len, weight_scale=weight_scale)
    return out, (main,) if first is None else (first, main)
