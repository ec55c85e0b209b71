"""Checked mode: the index and length VALUES the kernels follow, validated on the host.

The always-on checks (tensor_checks.py, each family's inputs.py and plan.py) look at shapes, strides, dtypes and pointers only, so they
cost no device round trip. These functions read tensor values, which means a host sync, and so cannot
run while a CUDA/HIP graph is being captured; the ops call them only when checked mode is on
(FLYAOT_CHECK=1). Each failure is a ValueError naming the argument, the offending index and its value.

What they enforce is each op's documented contract:
- decode: 0 <= context_lens[b]; block_tables has a column for every page of the first
  min(context_lens[b], max_seq_len) tokens, and those entries are in [0, num_pages); an external
  cta_info's first total_ctas rows name existing rows with non-negative chunk ranges and a context
  whose pages the table holds;
- prefill: for every row with a non-empty window (after clipping to [0, max_seq_len)), row_to_batch is
  in [0, B), the window's pages fit the block table and those entries are in [0, num_pages); rows whose
  window is empty may carry any batch (graph padding); an external cta_info's busy slots name rows,
  a batch and a last page that exist;
- varqlen: cu_seq_q[0] == 0, non-decreasing, cu_seq_q[-1] <= total_q, context_lens >= 0.
All index tensors are int32 (enforced always, by dtype), so no value can exceed the int32 range.
Pure torch: no flydsl, no runtime.
"""
import torch


def refuse_capture(what: str) -> None:
    """Checked mode reads values back; during a graph capture that is illegal: say so plainly."""
    if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
        raise RuntimeError(f"{what}: checked mode (FLYAOT_CHECK=1) validates index values with a host sync, "
                           "which cannot run during CUDA/HIP graph capture; capture with FLYAOT_CHECK unset "
                           "(check the same inputs eagerly first)")


def _first(mask: torch.Tensor):
    """Index tuple of the first True of `mask`, or None (the sync happens here)."""
    hits = mask.nonzero()
    if hits.shape[0] == 0:
        return None
    return tuple(int(i) for i in hits[0].tolist())


def _fmt(index) -> str:
    return ", ".join(map(str, index))


def _pages(tokens: torch.Tensor, page_size: int) -> torch.Tensor:
    return (tokens + page_size - 1) // page_size


def _check_table(block_tables, needed, num_pages: int, why: str) -> None:
    """needed[b] columns of row b exist and hold pages in [0, num_pages)."""
    width = block_tables.shape[1]
    bad = _first(needed > width)
    if bad is not None:
        (b,) = bad
        raise ValueError(f"block_tables: batch {b} needs {int(needed[b])} pages ({why}) but the table has "
                         f"{width} columns")
    used = torch.arange(width, device=block_tables.device).unsqueeze(0) < needed.unsqueeze(1)
    bt = block_tables.to(torch.int64)
    bad = _first(used & ((bt < 0) | (bt >= num_pages)))
    if bad is not None:
        raise ValueError(f"block_tables[{_fmt(bad)}]={int(block_tables[bad])} is outside [0, {num_pages}) "
                         f"(kv_cache has {num_pages} pages; {why})")


def decode_values(*, block_tables, context_lens, num_pages: int, page_size: int, max_seq_len: int,
                  next_n: int, cta_info=None, total_ctas=None) -> None:
    refuse_capture("pa_mqa_logits_fp4")
    batch = context_lens.shape[0]
    if batch == 0:
        return
    ctx = context_lens.to(torch.int64)
    bad = _first(ctx < 0)
    if bad is not None:
        raise ValueError(f"context_lens[{bad[0]}]={int(ctx[bad])} is negative")
    needed = _pages(ctx.clamp_max(max_seq_len), page_size)
    why = f"pages of {page_size} tokens for min(context_lens[b], max_seq_len={max_seq_len}) tokens"
    if cta_info is not None:
        info = cta_info[:total_ctas].to(torch.int64)
        row, start, count, cctx = info.unbind(1)
        for name, mask in (("row", (row < 0) | (row >= batch * next_n)), ("chunk start", start < 0),
                           ("chunk count", count < 0), ("ctx", cctx < 0)):
            bad = _first(mask)
            if bad is not None:
                raise ValueError(f"cta_info[{bad[0]}]={info[bad[0]].tolist()}: {name} out of range "
                                 f"(rows [0, {batch * next_n}), chunks and ctx >= 0)")
        # A slot reads the table of batch row // next_n up to its own ctx field.
        slot_pages = _pages(cctx.clamp_max(max_seq_len), page_size)
        needed = needed.scatter_reduce(0, row // next_n, slot_pages, "amax")
        why += " or the ctx fields of cta_info"
    _check_table(block_tables, needed, num_pages, why)


def prefill_values(*, block_tables, num_pages: int, page_size: int, row_to_batch, local_starts, local_ends,
                   max_seq_len: int, cta_info=None) -> None:
    refuse_capture("pa_mqa_logits_fp4_prefill")
    batch, width = block_tables.shape
    if batch == 0:
        return
    rb = row_to_batch.to(torch.int64)
    ls = local_starts.to(torch.int64).clamp_min(0)
    le = local_ends.to(torch.int64).clamp_max(max_seq_len)
    live = le > ls
    bad = _first(live & ((rb < 0) | (rb >= batch)))
    if bad is not None:
        (r,) = bad
        raise ValueError(f"row_to_batch[{r}]={int(rb[r])} is outside [0, {batch}) (block_tables has {batch} "
                         f"rows) for a row with the non-empty window [{int(local_starts[r])}, {int(local_ends[r])})")
    row_pages = _pages(le, page_size)
    bad = _first(live & (row_pages > width))
    if bad is not None:
        (r,) = bad
        raise ValueError(f"local_ends[{r}]={int(local_ends[r])} needs {int(row_pages[r])} pages of {page_size} "
                         f"tokens but block_tables has {width} columns (a window must end inside the table)")
    needed = torch.zeros(batch, dtype=torch.int64, device=block_tables.device)
    needed = needed.scatter_reduce(0, torch.where(live, rb, 0), torch.where(live, row_pages, 0), "amax")
    if cta_info is not None:
        needed = _check_prefill_schedule(cta_info, rows=rb.shape[0], batch=batch, width=width, needed=needed)
    _check_table(block_tables, needed, num_pages, "pages of the rows' windows")


def _check_prefill_schedule(cta_info, *, rows: int, batch: int, width: int, needed):
    info = cta_info.to(torch.int64)
    first, n_rows, b, start, count, last_page = info[:, :6].unbind(1)
    busy = count != 0
    for name, mask in (("chunk count", count < 0),
                       ("first_row / n_rows", busy & ((first < 0) | (n_rows < 1) | (n_rows > 4)
                                                      | (first + n_rows > rows))),
                       ("batch", busy & ((b < 0) | (b >= batch))),
                       ("chunk start", busy & (start < 0)),
                       ("last_page", busy & ((last_page < 0) | (last_page >= width)))):
        bad = _first(mask)
        if bad is not None:
            raise ValueError(f"cta_info[{bad[0]}]={info[bad[0]].tolist()}: {name} out of range ({rows} rows, "
                             f"{batch} batches, {width} block-table columns)")
    return needed.scatter_reduce(0, torch.where(busy, b, 0), torch.where(busy, last_page + 1, 0), "amax")


def varqlen_values(*, cu_seq_q, context_lens, total_q: int) -> None:
    refuse_capture("compute_varqlen_windows")
    cu = cu_seq_q.to(torch.int64)
    if int(cu[0]) != 0:
        raise ValueError(f"cu_seq_q[0]={int(cu[0])} must be 0")
    bad = _first(cu[1:] < cu[:-1])
    if bad is not None:
        i = bad[0] + 1
        raise ValueError(f"cu_seq_q[{i}]={int(cu[i])} is below cu_seq_q[{i - 1}]={int(cu[i - 1])} "
                         "(must be non-decreasing)")
    if int(cu[-1]) > total_q:
        raise ValueError(f"cu_seq_q[{cu.shape[0] - 1}]={int(cu[-1])} exceeds total_q={total_q} query rows")
    bad = _first(context_lens < 0)
    if bad is not None:
        raise ValueError(f"context_lens[{bad[0]}]={int(context_lens[bad])} is negative")
