"""FP4 paged MQA logits decode host op, argument-compatible with aiter's `flydsl_pa_mqa_logits_fp4`."""
import torch

from .. import runtime
from ..kernel_defs.mqa_decode import plan as P
from ..kernel_defs.mqa_decode.schedule import build_schedule, default_parallel_units


def pa_mqa_logits_fp4(q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights, context_lens, max_seq_len,
                      *, weight_scale=1.0, next_n=1, block_k=None, kv_block_size=64, num_warps=None,
                      parallel_unit_num=None, out=None, cta_info=None, total_ctas=None, stream=None):
    """Logits [B*next_n, max_seq_len] f32 of the DeepSeek sparse-attention indexer decode step.

    out[b*next_n + n, t] = weight_scale * sum_h weights[b*next_n + n, h] * relu(q[b, n, h] . k[b, t]) for
    t <= context_lens[b] - next_n + n, and -inf elsewhere. The kernel writes only visible cells, so:
    out=None -> allocated and filled with -inf; `out` given with the internal schedule -> filled with -inf
    here; `out` given with an external schedule (`cta_info`, `total_ctas`) -> the caller pre-fills -inf
    (graph replay keeps the fill outside).

    Dispatch: with the internal schedule and no block_k / num_warps / parallel_unit_num, D128 with H64 or
    H128 runs the direct kernel (2-D grid, tile chosen from B and max_seq_len); everything else runs the
    staged-LDS kernel (block_k / num_warps: None picks its default tile, 256 x 4).
    """
    s = P.check_inputs(q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights, context_lens, max_seq_len,
                       next_n, kv_block_size, weight_scale)
    if (cta_info is None) != (total_ctas is None):
        raise ValueError("cta_info and total_ctas must be given together or not at all")
    rows = s.batch * next_n
    if out is not None:
        P.check_out(out, rows, max_seq_len, q_fp4)
    if P.takes_direct_path(s, cta_info=cta_info, total_ctas=total_ctas, block_k=block_k, num_warps=num_warps,
                           parallel_unit_num=parallel_unit_num):
        out = _prefilled(out, rows, max_seq_len, q_fp4.device)
        plan = P.direct_plan(s, max_seq_len, out=out, q_fp4=q_fp4, q_scale=q_scale, kv_cache=kv_cache,
                             kv_scale=kv_scale, block_tables=block_tables, weights=weights,
                             context_lens=context_lens.to(torch.int32).contiguous(),
                             weight_scale=float(weight_scale))
        runtime.launch(plan, stream=stream)
        return out
    bk, w = P.staged_tile(block_k, num_warps, s.page_size)
    external = cta_info is not None
    if external:
        if parallel_unit_num is not None:
            raise ValueError("parallel_unit_num applies to the internal schedule only; it cannot be combined "
                             "with cta_info")
        P.check_schedule(cta_info, total_ctas, q_fp4)
        if out is None:
            out = _prefilled(None, rows, max_seq_len, q_fp4.device)
    else:
        total_ctas = (default_parallel_units(s.batch, next_n, max_seq_len, bk) if parallel_unit_num is None
                      else P.check_int("parallel_unit_num", parallel_unit_num, lo=1))
        ctx = context_lens if context_lens.dtype == torch.int32 else context_lens.to(torch.int32)
        cta_info, _ = build_schedule(ctx, bk, total_ctas, max_seq_len, next_n)
        out = _prefilled(out, rows, max_seq_len, q_fp4.device)
    plan = P.staged_plan(s, bk, w, out=out, q_fp4=q_fp4, q_scale=q_scale, kv_cache=kv_cache,
                         kv_scale=kv_scale, block_tables=block_tables, weights=weights, cta_info=cta_info,
                         total_ctas=total_ctas, weight_scale=float(weight_scale))
    runtime.launch(plan, stream=stream)
    return out


def _prefilled(out, rows: int, max_seq_len: int, device):
    """`out` (or a new [rows, max_seq_len] f32 buffer) filled with -inf: the kernels store visible cells only."""
    if out is None:
        return torch.full((rows, max_seq_len), float("-inf"), dtype=torch.float32, device=device)
    return out.fill_(float("-inf"))
