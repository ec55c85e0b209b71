"""Persistent varctx schedule (cta_info) of the staged decode kernel: its grid size rules, and
`build_schedule`, the table in torch ops, the reference of the mqa_runs_schedule kernel that builds it
in one launch (docs/families/mqa_decode.md#schedule):
  chunks_b = ceil(min(ctx_b, max_seq_len) / block_k); safe = the smallest s in [1, s_max] with
  next_n * sum_b ceil(chunks_b / s) <= Pgrid (max_b chunks_b if none); batch b gets ceil(chunks_b / safe)
  slots of `safe` chunks; slot s serves rows s*next_n + n with (b*next_n + n, start, count, ctx_b);
  unused slots get (0, 0, 1, 0) (ctx 0: the kernel stores nothing). With no sequences (B=0) every slot is
  unused.
Deviation from upstream for ctx_b > max_seq_len: the output row ends at max_seq_len, so chunks are counted
over min(ctx_b, max_seq_len) tokens (upstream counts ceil(ctx_b / block_k) and would schedule CTAs that can
store nothing). The ctx field stays the true ctx_b: the causal limit of row n is ctx_b - next_n + 1 + n.
"""
import torch

from ..mqa_common.schedule import smallest_fit


def default_parallel_units(batch: int, next_n: int, max_seq_len: int, block_k: int) -> int:
    return batch * next_n * max(1, -(-max_seq_len // block_k))


def check_parallel_units(pgrid: int, batch: int, next_n: int) -> None:
    if pgrid % next_n:
        raise ValueError(f"parallel_unit_num={pgrid} must be a multiple of next_n={next_n}")
    if pgrid // next_n < batch:
        raise ValueError(f"parallel_unit_num={pgrid}: parallel_unit_num // next_n must be >= the batch size "
                         f"{batch}, else sequences would be dropped")


def build_schedule(context_lens: torch.Tensor, block_k: int, pgrid: int, max_seq_len: int, next_n: int,
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
