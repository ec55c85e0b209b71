"""Launch plans of the mqa_fp8 family: check the call, pick the spec, compute grid and arguments.

Pure Python + torch. On the tiles grid the paged kernel writes every cell of its [B*next_n,
max_model_len] output (value or -inf), so no fill precedes it. With a varctx schedule (the runs-schedule
kernel's table over 64-token chunks, schedule_plan) it writes the chunks the table lists, after a -inf
fill of the output. Upstream's tuning knobs (ChunkK, WavePerEU) choose nothing here: one 64-token tile
per CTA serves every call.
"""
import torch

from .. import value_checks
from ..mqa_runs_schedule import plan as runs_schedule
from ..tensor_checks import check_int, check_no_overlap, check_tensor
from . import geometry as G
from .inputs import check_out, check_paged, check_ragged
from .specs import FAMILY

SLOTS_PER_CU = 32           # most one-wave CTAs of the varctx grid per CU (16 are resident at <= 128 VGPRs)
GFX950_CUS = 256            # MI355X; the default when the caller names no CU count and no GPU is present


def default_slots(batch: int, max_model_len: int, cu_count=None) -> int:
    """Persistent CTAs of the varctx grid: one per 64-token chunk the output rows can hold, at most
    SLOTS_PER_CU per CU, at least one per sequence. On the timing model a slot's chunks run one after
    another, so fewer chunks per slot win until idle slots cost more than they save
    (docs/families/mqa_fp8.md#performance)."""
    cus = GFX950_CUS if cu_count is None else check_int("TotalCuCount", cu_count, lo=1)
    chunks = batch * -(-check_int("max_model_len", max_model_len, lo=1) // G.TILE)
    return max(batch, 1, min(cus * SLOTS_PER_CU, chunks))


def schedule_plan(context_lens, max_model_len: int, next_n: int, slots: int, out=None):
    """(table int32 [slots * next_n, 4], the runs-schedule launch writing it): sequence b's 64-token chunks
    over min(ctx_b, max_model_len) tokens in runs of the smallest length that fits the slots."""
    check_int("next_n", next_n, lo=1, hi=G.MAX_NEXT_N)
    table, _, plan = runs_schedule.varctx_plan(context_lens, G.TILE, check_int("slots", slots, lo=1) * next_n,
                                               max_model_len, next_n, out=out)
    return table, plan


def paged_plan(q_fp8, kv_cache, weights, out, context_lens, block_tables, max_model_len, *, page_size=1,
               preshuffle=False, schedule=None, check_values=False):
    """(out, the LaunchPlan writing all of it, or None when B == 0); `out` [B*next_n, max_model_len] f32 is
    allocated when None."""
    s = check_paged(q_fp8, kv_cache, weights, context_lens, block_tables, max_model_len, page_size, preshuffle)
    if out is None:
        out = torch.empty((s.batch * s.next_n, max_model_len), dtype=torch.float32, device=q_fp8.device)
    check_out("out_logits", out, s.batch * s.next_n, max_model_len, q_fp8, q_fp8=q_fp8, kv_cache=kv_cache,
              weights=weights, context_lens=context_lens, kv_indices=block_tables)
    if schedule is not None:
        check_tensor("VarCtxSchedule", schedule, dtype=torch.int32, shape=(None, 4), contiguous=True, device=q_fp8)
        if schedule.shape[0] == 0 or schedule.shape[0] % s.next_n:
            raise ValueError(f"VarCtxSchedule: {schedule.shape[0]} rows is not a positive multiple of next_n="
                             f"{s.next_n} (build it with the schedule function for this next_n)")
        if not preshuffle or page_size != G.TILE:
            raise ValueError(f"VarCtxSchedule: the varctx grid runs preshuffled {G.TILE}-token pages "
                             f"(Preshuffle=True, KVBlockSize={G.TILE})")
        check_no_overlap("out_logits", out, VarCtxSchedule=schedule)
    if s.batch == 0:
        return out, None
    if check_values:
        # refused here first so the message names this op (decode_values' own refusal names the FP4 one;
        # value_checks.py is a shared source, so editing it would change every family's content ids)
        value_checks.refuse_capture("fp8_paged_mqa_logits")
        value_checks.decode_values(block_tables=block_tables, context_lens=context_lens, num_pages=s.num_pages,
                                   page_size=page_size, max_seq_len=max_model_len, next_n=s.next_n,
                                   cta_info=None, total_ctas=None)
    grid = "tiles" if schedule is None else "varctx"
    params = G.params("paged", s.heads, page_size, "preshuffle" if preshuffle else "plain", grid)
    args = {"out": out, "q": q_fp8, "kv_cache": kv_cache, "weights": weights, "context_lens": context_lens,
            "block_tables": block_tables, "schedule": context_lens if schedule is None else schedule,
            "next_n": s.next_n, "max_model_len": max_model_len, "stride_out": out.stride(0),
            "stride_kv": s.stride_kv, "stride_w": s.stride_w, "stride_bt": s.stride_bt, "num_pages": s.num_pages,
            "bt_width": s.bt_width, "batch": s.batch}
    if schedule is None:
        return out, FAMILY.launch_plan(params, (-(-max_model_len // G.TILE), s.batch, 1), args)
    out.fill_(float("-inf"))          # cells past the listed chunks are not written
    return out, FAMILY.launch_plan(params, (schedule.shape[0] // s.next_n, 1, 1), args)


def ragged_plan(q, kv, kv_scales, weights, cu_starts, cu_ends, *, clean_logits=True, out=None):
    """(logits [S, S_kv] f32, the LaunchPlan or None when there is nothing to launch). With clean_logits
    every cell is written (-inf outside [cu_starts[i], cu_ends[i])); without, only the window cells (the
    rest of a new buffer is uninitialized, as upstream)."""
    s = check_ragged(q, kv, kv_scales, weights, cu_starts, cu_ends)
    if not isinstance(clean_logits, bool):
        raise TypeError(f"clean_logits: expected a bool, got {type(clean_logits).__name__}")
    if out is None:
        out = torch.empty((s.seq_len, s.seq_len_kv), dtype=torch.float32, device=q.device)
    check_out("out", out, s.seq_len, s.seq_len_kv, q, Q=q, KV=kv, kv_scales=kv_scales, weights=weights,
              cu_starts=cu_starts, cu_ends=cu_ends)
    if s.seq_len == 0 or s.seq_len_kv == 0:
        return out, None
    args = {"out": out, "q": q, "kv": kv, "kv_scales": kv_scales, "weights": weights, "cu_starts": cu_starts,
            "cu_ends": cu_ends, "seq_len": s.seq_len, "seq_len_kv": s.seq_len_kv, "stride_out": out.stride(0),
            "stride_kv": s.stride_kv, "stride_w": s.stride_w, "clean": int(clean_logits)}
    grid = (-(-s.seq_len_kv // G.TILE), -(-s.seq_len // G.ROWS), 1)
    return out, FAMILY.launch_plan(G.params("ragged", s.heads), grid, args)
