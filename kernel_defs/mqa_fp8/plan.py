"""Launch plans of the mqa_fp8 family: check the call, pick the spec, compute grid and arguments.

Pure Python + torch. The paged kernel writes every cell of its [B*next_n, max_model_len] output (value
or -inf), so no fill precedes it. Upstream's tuning knobs (ChunkK, WavePerEU, TotalCuCount) choose
nothing here: one 64-token tile per CTA serves every call.
"""
import torch

from .. import checks
from ..registry import LaunchPlan
from . import geometry as G
from .inputs import check_out, check_paged
from .specs import FAMILY


def paged_plan(q_fp8, kv_cache, weights, out, context_lens, block_tables, max_model_len, *, page_size=1,
               preshuffle=False, check_values=False):
    """(out, the LaunchPlan writing all of it, or None when B == 0); `out` [B*next_n, max_model_len] f32 is
    allocated when None."""
    s = check_paged(q_fp8, kv_cache, weights, context_lens, block_tables, max_model_len, page_size, preshuffle)
    if out is None:
        out = torch.empty((s.batch * s.next_n, max_model_len), dtype=torch.float32, device=q_fp8.device)
    check_out("out_logits", out, s.batch * s.next_n, max_model_len, q_fp8, q_fp8=q_fp8, kv_cache=kv_cache,
              weights=weights, context_lens=context_lens, kv_indices=block_tables)
    if s.batch == 0:
        return out, None
    if check_values:
        checks.decode_values(block_tables=block_tables, context_lens=context_lens, num_pages=s.num_pages,
                             page_size=page_size, max_seq_len=max_model_len, next_n=s.next_n, cta_info=None,
                             total_ctas=None)
    params = G.params("paged", s.heads, page_size, "preshuffle" if preshuffle else "plain")
    args = {"out": out, "q": q_fp8, "kv_cache": kv_cache, "weights": weights, "context_lens": context_lens,
            "block_tables": block_tables, "next_n": s.next_n, "max_model_len": max_model_len,
            "stride_out": out.stride(0), "stride_kv": s.stride_kv, "stride_w": s.stride_w, "stride_bt": s.stride_bt,
            "num_pages": s.num_pages, "bt_width": s.bt_width}
    return out, FAMILY.launch_plan(params, (-(-max_model_len // G.TILE), s.batch, 1), args)
