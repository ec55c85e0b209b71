"""Torch references of the two layouts: the builders the kernel replaced, in fixed-shape torch ops (no
host sync, no data-dependent shapes: graph-capturable). The tests hold the kernel to them bit for bit.

varctx (the staged decode kernel's persistent schedule, docs/families/mqa_decode.md#schedule):
  chunks_b = ceil(min(ctx_b, max_seq_len) / block_k); safe = the smallest s in [1, s_max] with
  next_n * sum_b ceil(chunks_b / s) <= Pgrid (max_b chunks_b if none); batch b gets ceil(chunks_b / safe)
  slots of `safe` chunks; slot s serves rows s*next_n + n with (b*next_n + n, start, count, ctx_b);
  unused slots get (0, 0, 1, 0) (ctx 0: the kernel stores nothing). With no sequences (B=0) every slot is
  unused.
Deviation from upstream for ctx_b > max_seq_len: the output row ends at max_seq_len, so chunks are counted
over min(ctx_b, max_seq_len) tokens (upstream counts ceil(ctx_b / block_k) and would schedule CTAs that can
store nothing). The ctx field stays the true ctx_b: the causal limit of row n is ctx_b - next_n + 1 + n.

rows: the one-row-per-CTA table serving engines build for upstream's prefill kernel, int32
[slots, ROW_INFO_INTS] = (row, batch, chunk_start, chunk_count, local_start, local_end), chunks of
`block_k` tokens counted from token 0, one query row per CTA; idle slots hold (0, 0, 0, 1, 0, 0).
"""
import torch

from ..mqa_common.prefill_table import ROW_INFO_INTS
from ..mqa_common.schedule import smallest_fit
from .plan import check_parallel_units


def varctx_reference(context_lens: torch.Tensor, block_k: int, pgrid: int, max_seq_len: int, next_n: int,
                     out: torch.Tensor = None):
    """Fill (or allocate) int32 cta_info [pgrid, 4]; returns (cta_info, safe) with safe a 1-element tensor.
    Fixed-shape torch ops, no host sync (every shape derives from the host ints B, next_n, pgrid,
    max_seq_len)."""
    batch = context_lens.shape[0]
    check_parallel_units(pgrid, batch, next_n)
    dev = context_lens.device
    if out is None:
        out = torch.empty(pgrid, 4, dtype=torch.int32, device=dev)
    if batch == 0:            # no sequence: every slot idle (and max() below has nothing to reduce)
        out.copy_(torch.tensor([0, 0, 1, 0], dtype=torch.int32, device=dev).expand(pgrid, 4))
        return out, torch.ones(1, dtype=torch.int32, device=dev)
    ctx = context_lens.to(torch.int64).clamp_min(0)
    chunks = (ctx.clamp_max(max_seq_len) + block_k - 1) // block_k
    s_max = max(1, -(-max_seq_len // block_k))

    def needed(s):            # CTAs with slots of s chunks: next_n * sum_b ceil(chunks_b / s)
        return next_n * ((chunks + s - 1) // s).sum()

    best = smallest_fit(needed, pgrid, s_max, dev)
    safe = torch.where(needed(best) <= pgrid, best, chunks.max().clamp_min(1)).reshape(1)

    ctas = (chunks + safe - 1) // safe
    incl = torch.cumsum(ctas, 0)
    excl = incl - ctas
    slots = torch.arange(pgrid // next_n, device=dev)
    b = torch.searchsorted(incl, slots, right=True).clamp_max(batch - 1)
    valid = slots < incl[-1]
    start = (slots - excl[b]) * safe
    count = torch.minimum(safe, chunks[b] - start)
    n = torch.arange(next_n, device=dev)
    rows = torch.stack([
        torch.where(valid.unsqueeze(1), b.unsqueeze(1) * next_n + n, 0),
        torch.where(valid, start, 0).unsqueeze(1).expand(-1, next_n),
        torch.where(valid, count, 1).unsqueeze(1).expand(-1, next_n),
        torch.where(valid, ctx[b], 0).unsqueeze(1).expand(-1, next_n),
    ], dim=-1)
    out.copy_(rows.reshape(pgrid, 4))
    return out, safe.to(torch.int32)


def rows_reference(row_to_batch, local_starts, local_ends, *, block_k: int, slots: int, max_seq_len: int,
                   out: torch.Tensor = None):
    """(safe, table) in the one-row-per-CTA format: row r has ceil(max(local_ends[r], 0) / block_k) chunks,
    cut into runs of `safe` chunks, the smallest run length whose run count fits `slots` (the longest
    row's chunk count when none does); run k of the row-major list goes to slot k. `safe` is a 1-element
    int32 tensor; `out` (int32 [slots, 6]) is filled in place when given."""
    dev = local_ends.device
    rows = local_ends.shape[0]
    le = local_ends.to(torch.int64)
    chunks = (le.clamp(min=0) + block_k - 1) // block_k
    s_max = max(1, -(-max_seq_len // block_k))

    def needed(s):
        return ((chunks + s - 1) // s).sum()

    best = smallest_fit(needed, slots, s_max, dev)
    safe = torch.where(needed(best) <= slots, best, chunks.max().clamp(min=1))
    runs = (chunks + safe - 1) // safe
    incl = torch.cumsum(runs, dim=0)
    k = torch.arange(slots, device=dev, dtype=torch.int64)
    r = torch.searchsorted(incl, k, right=True).clamp_(max=rows - 1)
    valid = k < incl[-1]
    start = (k - (incl[r] - runs[r])) * safe
    count = torch.where(valid, torch.minimum(safe, chunks[r] - start).clamp(min=0), 1)
    zero = torch.zeros_like(k)
    fields = (r, row_to_batch.to(torch.int64)[r], start, count, local_starts.to(torch.int64)[r], le[r])
    info = torch.stack([f if f is count else torch.where(valid, f, zero) for f in fields], dim=1)
    if out is None:
        out = torch.empty(slots, ROW_INFO_INTS, dtype=torch.int32, device=dev)
    out.copy_(info)
    return safe.reshape(1).to(torch.int32), out
