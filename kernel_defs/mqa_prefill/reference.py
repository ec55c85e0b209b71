"""Torch reference of the prefill logits (docs/families/mqa_prefill.md#operation), its window rules, and test data.

L[r, t] = weight_scale * sum_h w[r, h] * relu(Qd[r, h, :] . Kd[rb[r], t, :])   for ls[r] <= t < le[r]
L[r, t] = -inf                                                                 elsewhere, t < max_seq_len
A window token whose page is invalid (past the table's width, an entry outside kv_cache, or a row whose
batch is not a row of block_tables) is -inf too.
Columns are sequence-local token indices of the row's own batch. Written from the formula with the
shared dequantizers of mqa_common (independent of the kernel and of the metadata builders).
"""
from dataclasses import dataclass

import torch

from ..mqa_common import layouts
from ..mqa_common.reference import weighted_relu_logits


def visible(row_to_batch, local_starts, local_ends, max_seq_len: int) -> torch.Tensor:
    """bool [T, max_seq_len]: the cells the kernel must write."""
    t = torch.arange(max_seq_len)
    ls = local_starts.cpu().long().clamp(min=0)[:, None]
    le = local_ends.cpu().long()[:, None]
    return (t >= ls) & (t < le)


def prefill_logits(q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights, row_to_batch, local_starts,
                   local_ends, max_seq_len: int, weight_scale: float = 1.0) -> torch.Tensor:
    """float32 [T, max_seq_len] with -inf outside each row's window."""
    rows = q_fp4.shape[0]
    out = torch.full((rows, max_seq_len), float("-inf"))
    if rows == 0:
        return out
    qd = layouts.dequant_q(q_fp4.cpu(), q_scale.cpu())
    rb = row_to_batch.cpu().long()
    mask = visible(row_to_batch, local_starts, local_ends, max_seq_len)
    ends = local_ends.cpu().long().clamp(0, max_seq_len)
    for b in rb.unique().tolist():
        sel = (rb == b).nonzero().flatten()
        n_tok = int(ends[sel].max())
        if n_tok == 0:
            continue
        if 0 <= b < block_tables.shape[0]:
            row = block_tables.cpu()[b]
        else:                                     # no table row: every page is invalid
            row = torch.zeros(0, dtype=torch.int32)
        keys = layouts.gather_tokens(kv_cache.cpu(), kv_scale.cpu(), row, n_tok)
        logits = weighted_relu_logits(qd[sel], keys, weights.cpu()[sel], weight_scale)
        ok = layouts.valid_tokens(row, n_tok, kv_cache.shape[3], kv_cache.shape[0])
        logits = logits.masked_fill(~ok, float("-inf"))
        cells = mask[sel, :n_tok]
        block = out[sel, :n_tok]
        block[cells] = logits[cells]
        out[sel, :n_tok] = block
    return out


def varqlen_windows(cu_seq_q, context_lens, rows: int):
    """The variable-qlen window rule, row by row in Python: (row_to_batch, local_starts, local_ends)."""
    cu = [int(x) for x in cu_seq_q]
    ctx = [int(x) for x in context_lens]
    rb, ls, le = [], [], []
    for r in range(rows):
        b = max(i for i in range(len(ctx)) if cu[i] <= r) if r < cu[-1] else len(ctx) - 1
        n, qlen = r - cu[b], cu[b + 1] - cu[b]
        rb.append(b)
        ls.append(0)
        le.append(max(ctx[b] - qlen + n + 1, 0) if r < cu[-1] else 0)
    return tuple(torch.tensor(v, dtype=torch.int32) for v in (rb, ls, le))


# ----------------------------------------------------------------------------------------------- test data

@dataclass
class Case:
    q_fp4: torch.Tensor
    q_scale: torch.Tensor
    kv_cache: torch.Tensor
    kv_scale: torch.Tensor
    block_tables: torch.Tensor
    weights: torch.Tensor
    max_seq_len: int


def make_case(rows: int, context_lens, *, heads: int, head_dim: int = 128, page_size: int = 64,
              max_seq_len: int = None, seed: int = 0, **kv_kwargs) -> Case:
    """Random quantized Q/KV/weights for `rows` packed query rows over batches of the given contexts."""
    gen = torch.Generator().manual_seed(seed)
    q_fp4, q_scale = layouts.make_q((rows,), heads, head_dim, gen)
    kv = layouts.make_paged_kv(context_lens, head_dim, page_size, gen, **kv_kwargs)
    weights = (torch.rand(rows, heads, generator=gen) * 2 - 0.5).to(torch.bfloat16)
    width = max_seq_len if max_seq_len is not None else max(int(c) for c in context_lens)
    return Case(q_fp4, q_scale, kv.kv_cache, kv.kv_scale, kv.block_tables, weights, width)
