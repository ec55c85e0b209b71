"""The torch builders of the prefill metadata: the rules the kernels of this family reproduce bit for bit
(fixed-shape device ops, no host sync), and the groups builder for rows past MAX_ROWS.

- `varqlen_windows`: per packed query row (batch, window start, window end) from cu_seq_q and
  context_lens (docs/families/mqa_prefill.md#operation): row n of batch b sees t <= ctx_b - qlen_b + n; rows at or
  past cu[B] (graph padding) get an empty window; with no batch every row is padding, batch -1.
- `build_schedule`: the row groups and the per-CTA work list (cta_info, int32 [slots, 8]):
  (first_row, n_rows, batch, chunk_start, chunk_count, last_page, 1, 0).
  A row group is a maximal run of consecutive rows with the same batch, cut every four rows (one
  row per wave, never two batches in one CTA). Its chunks are the CHUNK_TOKENS-token chunks of the
  union of its rows' non-empty windows (clamped to [0, max_seq_len)). A group of c chunks gets
  u = ceil(c / per_slot) slices, per_slot the smallest value whose slice count fits into `slots`
  (found by a fixed-length binary search); its slices are nearly equal, c // u chunks each and one
  more for the last c % u, so the longest CTA is as short as u slices allow. A group whose windows
  are all empty gets one slice of no chunks (its CTA only writes the rows' -inf). Of the S slices of the flattened list, slice k goes to slot
  S - 1 - k: later rows see longer windows (causal prefill), so the longest groups' slices are
  dispatched first and the short ones fill in behind them (longest processing time first). The
  remaining slots get zeros (n_rows 0) and exit at once. The 1 in field 6 tells the kernel to write the -inf of
  every cell of the group's rows outside their windows (its share of the cells outside the group's
  chunks, docs/families/mqa_prefill.md#kernel), so the output needs no fill.
  With slots >= rows a fit always exists (there are at most `rows` groups).
- `from_row_schedule`: the 8-int table of a one-row-per-CTA table (see its docstring).
"""
import torch

from ..mqa_common.schedule import smallest_fit
from .geometry import CHUNK_TOKENS, CTA_INFO_INTS, WAVES

_BIG = (1 << 31) - 1


def varqlen_windows(cu_seq_q: torch.Tensor, context_lens: torch.Tensor, rows: int, *, out=None):
    """(row_to_batch, local_starts, local_ends), int32 [rows] each, written into `out` if given."""
    dev = context_lens.device
    cu = cu_seq_q.to(device=dev, dtype=torch.int64)
    ctx = context_lens.to(torch.int64)
    n_batch = ctx.shape[0]
    r = torch.arange(rows, device=dev, dtype=torch.int64)
    b = torch.searchsorted(cu[1:].contiguous(), r, right=True).clamp_(max=n_batch - 1)
    if n_batch:
        start = cu[b]
        qlen = cu[b + 1] - start
        le = (ctx[b] - qlen + (r - start) + 1).clamp_(min=0)
        le = torch.where(r < cu[n_batch], le, torch.zeros_like(le))
    else:                         # no batch: every row is padding, its batch -1 (the clamp above)
        le = torch.zeros_like(r)
    if out is None:
        out = tuple(torch.empty(rows, dtype=torch.int32, device=dev) for _ in range(3))
    row_to_batch, local_starts, local_ends = out
    row_to_batch.copy_(b)
    local_starts.zero_()
    local_ends.copy_(le)
    return row_to_batch, local_starts, local_ends


def _row_groups(rb: torch.Tensor):
    """Group index of every row: a new group starts at a batch change and every WAVES rows of a run."""
    rows = rb.shape[0]
    r = torch.arange(rows, device=rb.device, dtype=torch.int64)
    boundary = torch.ones(rows, dtype=torch.bool, device=rb.device)
    boundary[1:] = rb[1:] != rb[:-1]
    run_start = torch.cummax(torch.where(boundary, r, torch.zeros_like(r)), dim=0).values
    starts = boundary | ((r - run_start) % WAVES == 0)
    return r, torch.cumsum(starts.to(torch.int64), dim=0) - 1


def build_schedule(row_to_batch, local_starts, local_ends, *, page_size: int, max_seq_len: int,
                   slots: int, out: torch.Tensor = None) -> torch.Tensor:
    """cta_info int32 [slots, CTA_INFO_INTS] (see module doc); `out` is filled in place when given."""
    dev = local_ends.device
    rb = row_to_batch.to(torch.int64)
    rows = rb.shape[0]
    ls = local_starts.to(torch.int64).clamp(min=0)
    le = local_ends.to(torch.int64).clamp(max=max_seq_len)
    live = le > ls
    r, gid = _row_groups(rb)

    first = torch.full((rows,), _BIG, dtype=torch.int64, device=dev).scatter_reduce_(0, gid, r, "amin")
    n_rows = torch.zeros(rows, dtype=torch.int64, device=dev).scatter_add_(0, gid, torch.ones_like(r))
    lo = torch.full((rows,), _BIG, dtype=torch.int64, device=dev).scatter_reduce_(
        0, gid, torch.where(live, ls, torch.full_like(ls, _BIG)), "amin")
    hi = torch.zeros(rows, dtype=torch.int64, device=dev).scatter_reduce_(
        0, gid, torch.where(live, le, torch.zeros_like(le)), "amax")
    has_work = hi > 0
    chunk_lo = torch.where(has_work, lo // CHUNK_TOKENS, torch.zeros_like(lo))
    n_chunks = torch.where(has_work, (hi + CHUNK_TOKENS - 1) // CHUNK_TOKENS - chunk_lo, torch.zeros_like(hi))
    last_page = ((hi + page_size - 1) // page_size - 1).clamp(min=0)
    batch = rb[first.clamp(max=rows - 1)]

    s_max = max(1, -(-max_seq_len // CHUNK_TOKENS))
    is_group = n_rows > 0
    slice_chunks = torch.where(is_group, n_chunks.clamp(min=1), torch.zeros_like(n_chunks))  # an empty group: one slice
    per_slot = smallest_fit(lambda s: ((slice_chunks + s - 1) // s).sum(), slots, s_max, dev)
    units = (slice_chunks + per_slot - 1) // per_slot
    incl = torch.cumsum(units, dim=0)
    excl = incl - units

    slot = torch.arange(slots, device=dev, dtype=torch.int64)
    valid = slot < incl[-1]
    k = incl[-1] - 1 - slot                     # slot 0 holds the last slice (reverse order)
    g = torch.searchsorted(incl, k, right=True).clamp_(max=rows - 1)
    part = k - excl[g]
    u = units[g].clamp(min=1)
    q, big = n_chunks[g] // u, u - n_chunks[g] % u          # slices from `big` on hold q + 1 chunks
    start = chunk_lo[g] + part * q + (part - big).clamp(min=0)
    count = q + (part >= big).to(torch.int64)
    zero = torch.zeros_like(k)
    fields = [first[g], n_rows[g], batch[g], start, count, last_page[g], torch.ones_like(k), zero]
    info = torch.stack([torch.where(valid, f, zero) for f in fields], dim=1)
    if out is None:
        out = torch.empty(slots, CTA_INFO_INTS, dtype=torch.int32, device=dev)
    out.copy_(info)
    return out


def from_row_schedule(table: torch.Tensor, n_ctas: int, *, block_k: int, rows: int, page_size: int,
                      max_seq_len: int) -> torch.Tensor:
    """The kernel's table (int32 [n_ctas, CTA_INFO_INTS]) for the first n_ctas slots of a one-row-per-CTA
    table, on the device, graph-safe (fixed shapes, no host read). Each slot keeps its row as a
    one-row group over the CHUNK_TOKENS chunks that cover its block_k-token run clipped to its window
    (with block_k < CHUNK_TOKENS two slots may cover one chunk; both store the same logits). Slots whose
    run misses the window, or whose row is outside [0, rows), are idle. The kernel reads the row's
    window from local_starts / local_ends, which the table's window fields repeat."""
    t = table[:n_ctas].to(torch.int64)
    row, batch, start, count, ls, le = t.unbind(1)
    lo = torch.maximum(start * block_k, ls.clamp(min=0))
    hi = torch.minimum((start + count) * block_k, le.clamp(max=max_seq_len))
    live = (hi > lo) & (row >= 0) & (row < rows)
    first = torch.where(live, lo // CHUNK_TOKENS, 0)
    n = torch.where(live, (hi + CHUNK_TOKENS - 1) // CHUNK_TOKENS - first, 0)
    last_page = ((le.clamp(max=max_seq_len) + page_size - 1) // page_size - 1).clamp(min=0)
    zero = torch.zeros_like(row)
    fields = (torch.where(live, row, zero), torch.ones_like(row), torch.where(live, batch, zero), first, n,
              torch.where(live, last_page, zero), zero, zero)
    return torch.stack(fields, dim=1).to(torch.int32)
