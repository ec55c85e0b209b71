"""Host ops of the FP4 paged MQA logits prefill (aiter's names and argument order).

-inf contract: cells outside a row's window are never written by the kernel. `out=None` allocates
the output filled with -inf; a given `out` is filled with -inf when the schedule is built here; with
an external schedule (`cta_info` + `n_ctas`, built once with `compute_prefill_schedule`) the caller
pre-fills `out` (the graph-replay pattern: the fill stays outside the captured kernel) and the call
allocates nothing. Schedules and windows are built on the tensors' device without a host sync.
"""
import torch

from .. import runtime
from ..kernel_defs.mqa_prefill import plan as _plan
from ..kernel_defs.mqa_prefill import schedule as _schedule
from ..kernel_defs.mqa_prefill.geometry import CHUNK_TOKENS, WAVES
from ..kernel_defs.validate import check_int

__all__ = ["pa_mqa_logits_fp4_prefill", "pa_mqa_logits_fp4_varqlen", "compute_prefill_schedule",
           "compute_varqlen_windows"]


def _check_knobs(block_k, num_warps, kv_block_size, page_size):
    if block_k != CHUNK_TOKENS:
        raise ValueError(f"block_k={block_k!r} is not supported (supported: {CHUNK_TOKENS})")
    if num_warps != WAVES:
        raise ValueError(f"num_warps={num_warps!r} is not supported (supported: {WAVES})")
    if kv_block_size is not None and kv_block_size != page_size:
        raise ValueError(f"kv_block_size={kv_block_size!r} does not match kv_cache.shape[3]={page_size}")


def compute_prefill_schedule(row_to_batch, local_starts, local_ends, *, page_size: int, max_seq_len: int,
                             parallel_unit_num: int = None, cta_info_out: torch.Tensor = None):
    """(cta_info, n_ctas) for the explicit windows; pass `cta_info_out` (int32 [slots, 8]) to refill a
    fixed buffer (graph capture). Needs parallel_unit_num >= rows."""
    rows = local_ends.shape[0]
    _plan.check_windows(rows, local_ends, row_to_batch=row_to_batch, local_starts=local_starts,
                        local_ends=local_ends)
    check_int("page_size", page_size, lo=1)
    check_int("max_seq_len", max_seq_len, lo=0)
    slots = cta_info_out.shape[0] if cta_info_out is not None else (
        parallel_unit_num if parallel_unit_num is not None else _plan.default_slots(rows))
    check_int("parallel_unit_num", slots, lo=max(rows, 1))
    if cta_info_out is not None:
        _plan.check_schedule(cta_info_out, rows, local_ends)
    info = _schedule.build_schedule(row_to_batch, local_starts, local_ends, page_size=page_size,
                                    max_seq_len=max_seq_len, slots=slots, out=cta_info_out)
    return info, slots


def compute_varqlen_windows(cu_seq_q, context_lens, total_q: int, *, out=None):
    """(row_to_batch, local_starts, local_ends) int32 [total_q] for per-batch variable qlen; `out` = three
    fixed int32 buffers to refill (graph capture). cu_seq_q[0] must be 0."""
    check_int("total_q", total_q, lo=0)
    if context_lens.dim() != 1 or context_lens.shape[0] < 1:
        raise ValueError(f"context_lens: expected shape [B] with B >= 1, got {tuple(context_lens.shape)}")
    if cu_seq_q.shape != (context_lens.shape[0] + 1,):
        raise ValueError(f"cu_seq_q: expected shape ({context_lens.shape[0] + 1},), got {tuple(cu_seq_q.shape)}")
    if cu_seq_q.device != context_lens.device:
        raise ValueError(f"cu_seq_q: on {cu_seq_q.device}, but context_lens is on {context_lens.device}")
    if out is not None:
        _plan.check_windows(total_q, context_lens.device, row_to_batch=out[0], local_starts=out[1],
                            local_ends=out[2])
    return _schedule.varqlen_windows(cu_seq_q, context_lens, total_q, out=out)


def pa_mqa_logits_fp4_prefill(q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights, row_to_batch,
                              local_starts, local_ends, max_seq_len, *, weight_scale=1.0, block_k=256,
                              kv_block_size=None, num_warps=4, parallel_unit_num=None, out=None,
                              cta_info=None, n_ctas=None, stream=None):
    """Logits float32 [T, max_seq_len]: row r scores tokens [local_starts[r], local_ends[r]) of batch
    row_to_batch[r]; -inf elsewhere."""
    params = _plan.check_inputs(q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights, max_seq_len)
    rows = q_fp4.shape[0]
    _check_knobs(block_k, num_warps, kv_block_size, params["page_size"])
    _plan.check_windows(rows, q_fp4, row_to_batch=row_to_batch, local_starts=local_starts,
                        local_ends=local_ends)
    if (cta_info is None) != (n_ctas is None):
        raise ValueError("cta_info and n_ctas: pass both (an external schedule) or neither")
    if cta_info is not None:
        _plan.check_schedule(cta_info, rows, q_fp4)
        if n_ctas != cta_info.shape[0]:
            raise ValueError(f"n_ctas={n_ctas!r} must equal cta_info.shape[0]={cta_info.shape[0]}")
    if out is None:
        out = torch.full((rows, max_seq_len), float("-inf"), dtype=torch.float32, device=q_fp4.device)
    else:
        _plan.check_out(out, rows, max_seq_len, q_fp4)
        if cta_info is None:
            out.fill_(float("-inf"))
    if rows == 0 or max_seq_len == 0:
        return out
    if cta_info is None:
        cta_info, _ = compute_prefill_schedule(row_to_batch, local_starts, local_ends,
                                               page_size=params["page_size"], max_seq_len=max_seq_len,
                                               parallel_unit_num=parallel_unit_num)
    runtime.launch(_plan.make_plan(params, q_fp4=q_fp4, q_scale=q_scale, kv_cache=kv_cache, kv_scale=kv_scale,
                                   block_tables=block_tables, weights=weights, local_starts=local_starts,
                                   local_ends=local_ends, cta_info=cta_info, out=out, max_seq_len=max_seq_len,
                                   weight_scale=weight_scale), stream=stream)
    return out


def pa_mqa_logits_fp4_varqlen(q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights, max_seq_len, *,
                              cu_seq_q=None, context_lens=None, windows=None, weight_scale=1.0, block_k=256,
                              kv_block_size=None, num_warps=4, parallel_unit_num=None, out=None,
                              cta_info=None, n_ctas=None, stream=None):
    """Per-batch variable qlen (MTP / chunked prefill tail): row n of batch b sees t <= ctx_b - qlen_b + n.
    Pass `windows` (from compute_varqlen_windows, reusable) or `cu_seq_q` + `context_lens`."""
    if windows is None:
        if cu_seq_q is None or context_lens is None:
            raise ValueError("pa_mqa_logits_fp4_varqlen: pass windows=(row_to_batch, local_starts, local_ends) "
                             "or both cu_seq_q and context_lens")
        if not isinstance(q_fp4, torch.Tensor):
            raise TypeError(f"q_fp4: expected a torch.Tensor, got {type(q_fp4).__name__}")
        windows = compute_varqlen_windows(cu_seq_q, context_lens, q_fp4.shape[0])
    row_to_batch, local_starts, local_ends = windows
    return pa_mqa_logits_fp4_prefill(q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights, row_to_batch,
                                     local_starts, local_ends, max_seq_len, weight_scale=weight_scale,
                                     block_k=block_k, kv_block_size=kv_block_size, num_warps=num_warps,
                                     parallel_unit_num=parallel_unit_num, out=out, cta_info=cta_info,
                                     n_ctas=n_ctas, stream=stream)
