"""FP8 MQA logits host ops (the DeepSeek-V3.2 / GLM-5 indexer): paged decode, argument-compatible with
aiter's deepgemm_fp8_paged_mqa_logits through flyaot.compat.aiter."""
from typing import Optional

import torch

from .. import runtime
from ..kernel_defs.mqa_fp8 import plan as P
from ._torch_ops import on_stream, traced_op


def _fake_paged(q_fp8, max_model_len, **_):
    return torch.empty((q_fp8.shape[0] * q_fp8.shape[1], max_model_len), dtype=torch.float32, device=q_fp8.device)


@traced_op(fake=_fake_paged)
def fp8_paged_mqa_logits(q_fp8: torch.Tensor, kv_cache: torch.Tensor, weights: torch.Tensor,
                         context_lens: torch.Tensor, block_tables: torch.Tensor, max_model_len: int, *,
                         kv_block_size: int = 1, preshuffle: bool = False,
                         schedule: Optional[torch.Tensor] = None, out=None, stream=None):
    """Logits [B*next_n, max_model_len] f32 of the FP8 indexer decode step (docs/families/mqa_fp8.md).

    q_fp8 [B, next_n, H, 128] E4M3 (float8_e4m3fn or its uint8 bytes), next_n 1..4, H 32 or 64;
    kv_cache [num_blocks, kv_block_size, 1, 132] uint8 in aiter's page layout (kv_block_size * 128 E4M3
    values, token-major or preshuffled, then one f32 scale per token); weights [B*next_n, H] f32;
    context_lens [B] and block_tables [B, W] int32. out[b*next_n + i, t] = sum_h weights[.., h] *
    relu(q[b, i, h] . k_t * scale_t) for t <= context_lens[b] - next_n + i, -inf elsewhere and for visible
    tokens whose page is past the table or not a page of kv_cache. Every cell of `out` is written (no
    -inf pre-fill needed). `schedule` (fp8_paged_mqa_logits_schedule; preshuffled 64-token pages) runs
    the persistent varctx grid over the chunks it lists, after a -inf fill of `out`. Values of block_tables / context_lens are checked only in checked mode
    (FLYAOT_CHECK=1). Under torch.compile: torch.ops.flyaot.fp8_paged_mqa_logits(_out); `stream` must
    then be None.
    """
    with on_stream(stream):
        out, plan = P.paged_plan(q_fp8, kv_cache, weights, out, context_lens, block_tables, max_model_len,
                            page_size=kv_block_size, preshuffle=preshuffle, schedule=schedule,
                            check_values=runtime.runtime().config.check)
        if plan is not None:
            runtime.launch(plan, stream=stream)
    return out


def fp8_paged_mqa_logits_schedule(context_lens: torch.Tensor, max_model_len: int, next_n: int = 1, *,
                                  cu_count: Optional[int] = None, out: Optional[torch.Tensor] = None,
                                  stream=None) -> torch.Tensor:
    """The varctx schedule of fp8_paged_mqa_logits: int32 [slots * next_n, 4], built by one kernel launch
    on the current stream (no host sync; `out` of that shape is refilled in place for graph capture).
    slots = 8 one-wave CTAs per CU of `cu_count` (default: MI355X's 256), at least one per sequence; each
    slot scores a run of 64-token chunks of one sequence."""
    batch = context_lens.shape[0] if isinstance(context_lens, torch.Tensor) and context_lens.dim() == 1 else 0
    with on_stream(stream):
        table, plan = P.schedule_plan(context_lens, max_model_len, next_n, P.default_slots(batch, cu_count), out=out)
        runtime.launch(plan, stream=stream)
    return table


def _fake_ragged(Q, KV, **_):
    return torch.empty((Q.shape[0], KV.shape[0]), dtype=torch.float32, device=Q.device)


@traced_op(fake=_fake_ragged)
def fp8_mqa_logits(Q: torch.Tensor, KV: torch.Tensor, kv_scales: torch.Tensor, weights: torch.Tensor,
                   cu_starts: torch.Tensor, cu_ends: torch.Tensor, clean_logits: bool = True, *, out=None,
                   stream=None):
    """Ragged prefill logits [S, S_kv] f32 (DeepGEMM's fp8_mqa_logits contract): row i scores keys
    t in [cu_starts[i], cu_ends[i]) as sum_h weights[i, h] * relu(Q[i, h] . KV[t] * kv_scales[t]).

    Q [S, H, 128] E4M3 (H 32 or 64), KV [S_kv, 128] E4M3, kv_scales [S_kv] f32, weights [S, H] f32,
    cu_starts / cu_ends [S] int32. clean_logits: cells outside the window are -inf; without it they
    are not written (a new output's are uninitialized). Windows past S_kv are clipped. Under
    torch.compile: torch.ops.flyaot.fp8_mqa_logits(_out).
    """
    with on_stream(stream):
        out, plan = P.ragged_plan(Q, KV, kv_scales, weights, cu_starts, cu_ends, clean_logits=clean_logits,
                                  out=out)
        if plan is not None:
            runtime.launch(plan, stream=stream)
    return out
