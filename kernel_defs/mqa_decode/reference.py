"""Torch reference of FP4 paged MQA logits decode (docs/families/mqa_decode.md#operation), from the formula.

Row b*next_n + n sees logical tokens t <= ctx_b - next_n + n; every other cell up to max_seq_len is -inf,
and so is a visible token whose page is invalid (past the table's width or an entry outside kv_cache).
"""
import torch

from ..mqa_common.layouts import dequant_q, gather_tokens, valid_tokens
from ..mqa_common.reference import weighted_relu_logits


def visible_mask(context_lens, next_n: int, max_seq_len: int) -> torch.Tensor:
    """Bool [B*next_n, max_seq_len]: True where row b*next_n+n may see token t."""
    ctx = torch.as_tensor(context_lens).long().cpu()
    limit = (ctx.unsqueeze(1) - next_n + 1 + torch.arange(next_n)).reshape(-1)     # tokens t < limit
    return torch.arange(max_seq_len).unsqueeze(0) < limit.unsqueeze(1)


def pa_mqa_logits_reference(q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights, context_lens,
                            max_seq_len: int, *, weight_scale: float = 1.0, next_n: int = 1) -> torch.Tensor:
    """float32 [B*next_n, max_seq_len] logits; invisible cells exactly -inf."""
    b_count = q_fp4.shape[0]
    q = dequant_q(q_fp4, q_scale)                                   # [B, next_n, H, D]
    mask = visible_mask(context_lens, next_n, max_seq_len)
    out = torch.full((b_count * next_n, max_seq_len), float("-inf"), dtype=torch.float32)
    ctx = torch.as_tensor(context_lens).tolist()
    for b in range(b_count):
        n_tok = min(int(ctx[b]), max_seq_len)
        if n_tok <= 0:
            continue
        k = gather_tokens(kv_cache, kv_scale, block_tables[b], n_tok)
        rows = slice(b * next_n, (b + 1) * next_n)
        logits = weighted_relu_logits(q[b], k, weights[rows], weight_scale)
        ok = valid_tokens(block_tables[b], n_tok, kv_cache.shape[3], kv_cache.shape[0])
        out[rows, :n_tok] = logits.masked_fill(~ok, float("-inf"))
    return out.masked_fill(~mask, float("-inf"))
