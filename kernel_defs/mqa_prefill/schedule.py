"""The one-row-per-CTA table serving engines build for upstream's prefill kernel, built with fixed-shape
torch ops (no host sync, no data-dependent shapes: graph-capturable). The prefill kernel's own metadata
(grouped schedule, varqlen windows, conversion of this table) is built by kernel_defs/mqa_prefill_meta.
"""
import torch

from ..mqa_common.prefill_table import ROW_INFO_INTS  # noqa: F401  (the table's width)
from ..mqa_common.schedule import smallest_fit

# ------------------------------------------------------------------------------- one-row-per-CTA tables
# The table format serving engines build for upstream's prefill kernel: int32 [slots, ROW_INFO_INTS] =
# (row, batch, chunk_start, chunk_count, local_start, local_end), chunks of `block_k` tokens counted from
# token 0, one query row per CTA. Idle slots hold (0, 0, 0, 1, 0, 0): an empty window.


def build_row_schedule(row_to_batch, local_starts, local_ends, *, block_k: int, slots: int, max_seq_len: int,
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
