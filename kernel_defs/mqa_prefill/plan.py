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
import torch

from .. import value_checks
from .. import tensor_checks as V
from ..mqa_common.prefill_table import ROW_INFO_INTS
from ..mqa_prefill_meta import plan as meta
from ..registry import LaunchPlan
from .geometry import CTA_INFO_INTS
from .inputs import check_inputs, check_knobs, check_out, check_schedule, check_windows
from .specs import FAMILY

MIN_SLOTS = 2048          # default schedule slots: about 8 CTAs per CU on a 256-CU MI355X


def default_slots(rows: int) -> int:
    """Schedule slots when the caller gives none: at least one per row (so any grouping fits)."""
    return max(rows, MIN_SLOTS)


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
    return FAMILY.launch_plan(dict(params), (cta_info.shape[0], 1, 1), args)


def plan_call(q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights, row_to_batch, local_starts, local_ends,
              max_seq_len, *, weight_scale, block_k, kv_block_size, num_warps, parallel_unit_num, out, cta_info,
              n_ctas, check_values: bool = False):
    """The whole decision of one prefill call: (out, plans), the launches to run in order on one stream
    (none when there is nothing to compute): the metadata kernel that builds the internal schedule or
    converts a one-row-per-CTA table, if any, then the prefill kernel. Checks; the kernel writes every
    cell of `out` under a schedule built here (then `out=None` is allocated uninitialized) or by
    compute_prefill_schedule; a given `out` is filled with -inf here only when nothing is launched, and
    under a converted one-row-per-CTA table the caller pre-fills it (`out=None` with an external table
    is allocated filled; docs/families/mqa_prefill.md#operation). `check_values` validates index values with a host
    sync (checked mode); an external table is checked in this kernel's format, after conversion (the
    reference conversion, which the conversion kernel matches bit for bit)."""
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
    if out is not None:
        check_out(out, rows, max_seq_len, q_fp4)
        V.check_no_overlap("out", out, q_fp4=q_fp4, q_scale=q_scale, kv_cache=kv_cache, kv_scale=kv_scale,
                           block_tables=block_tables, weights=weights, row_to_batch=row_to_batch,
                           local_starts=local_starts, local_ends=local_ends, cta_info=cta_info)
    if rows == 0 or max_seq_len == 0 or block_tables.shape[0] == 0:     # no batch: no row sees a token
        if out is None:
            return torch.full((rows, max_seq_len), float("-inf"), dtype=torch.float32, device=q_fp4.device), ()
        return out.fill_(float("-inf")), ()
    if out is None and cta_info is None:      # the schedule built here has the kernel write every cell
        out = torch.empty((rows, max_seq_len), dtype=torch.float32, device=q_fp4.device)
    elif out is None:                         # an external table may leave cells to a fill
        out = torch.full((rows, max_seq_len), float("-inf"), dtype=torch.float32, device=q_fp4.device)
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
            checked = meta.converted(table, n_ctas, block_k=block_k, rows=rows, page_size=page,
                                     max_seq_len=max_seq_len)
    if check_values:
        value_checks.prefill_values(block_tables=block_tables, num_pages=kv_cache.shape[0], page_size=page,
                              row_to_batch=row_to_batch, local_starts=local_starts, local_ends=local_ends,
                              max_seq_len=max_seq_len, cta_info=checked)
    main = make_plan(params, q_fp4=q_fp4, q_scale=q_scale, kv_cache=kv_cache, kv_scale=kv_scale,
                     block_tables=block_tables, weights=weights, local_starts=local_starts, local_ends=local_ends,
                     cta_info=cta_info, out=out, max_seq_len=max_seq_len, weight_scale=weight_scale)
    return out, (main,) if first is None else (first, main)
