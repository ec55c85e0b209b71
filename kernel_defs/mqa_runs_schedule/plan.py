"""Launch plans of the mqa_runs_schedule family (pure Python + torch, no flydsl).

Both layouts share one algorithm (the torch references in reference.py state it): per item a chunk
count; `safe`, the smallest run length in [1, s_max] whose total run count fits the slots (a binary
search of `rounds` steps), else the longest item's chunk count; runs handed to slots in item order;
idle slots get a filler row. One launch writes the whole table and `safe`; every scalar is a kernel
argument, so one spec per layout serves every call. Allocations only: no torch device op, no host sync.
"""
import torch

from ..tensor_checks import check_int, check_no_overlap, check_tensor
from .geometry import MAX_SLOTS, MAX_TABLE_BYTES, WIDTH
from .specs import FAMILY

def default_parallel_units(batch: int, next_n: int, max_seq_len: int, block_k: int) -> int:
    """The decode persistent grid when the caller names none: one slot per row and chunk."""
    return batch * next_n * longest_run(max_seq_len, block_k)


def check_parallel_units(pgrid: int, batch: int, next_n: int) -> None:
    if pgrid % next_n:
        raise ValueError(f"parallel_unit_num={pgrid} must be a multiple of next_n={next_n}")
    if pgrid // next_n < batch:
        raise ValueError(f"parallel_unit_num={pgrid}: parallel_unit_num // next_n must be >= the batch size "
                         f"{batch}, else sequences would be dropped")


def longest_run(max_seq_len: int, block_k: int) -> int:
    """s_max: the chunk count of a max_seq_len-token row (at least 1)."""
    return max(1, -(-max_seq_len // block_k))


def search_rounds(max_seq_len: int, block_k: int) -> int:
    """Binary-search steps that always reach the smallest fitting run length in [1, s_max]."""
    return longest_run(max_seq_len, block_k).bit_length() + 1


def _table(name, out, rows: int, width: int, like, slots: int):
    if slots > MAX_SLOTS:
        raise ValueError(f"{name}: {slots} slots is more than the kernel's {MAX_SLOTS}")
    if rows * width * 4 > MAX_TABLE_BYTES:
        raise ValueError(f"{name}: a table of {rows} rows of {width} ints is past the kernel's 2 GiB offsets")
    if out is None:
        return torch.empty(rows, width, dtype=torch.int32, device=like.device)
    check_tensor(name, out, dtype=torch.int32, shape=(rows, width), device=like, contiguous=True)
    return out


def _items(name, t):
    check_tensor(name, t, dtype=torch.int32, ndim=1)
    if t.shape[0] * 4 > MAX_TABLE_BYTES:
        raise ValueError(f"{name}: {t.shape[0]} entries is past the kernel's 2 GiB offsets")
    return t.contiguous()


def varctx_plan(context_lens, block_k: int, pgrid: int, max_seq_len: int, next_n: int, out=None):
    """(cta_info int32 [pgrid, 4], safe int32 [1], plan) of the decode varctx table; `out` is filled in
    place when given. pgrid must be a multiple of next_n with pgrid // next_n >= B (check_parallel_units)."""
    cl = _items("context_lens", context_lens)
    check_int("block_k", block_k, lo=1)
    check_int("max_seq_len", max_seq_len, lo=1)
    check_int("next_n", next_n, lo=1)
    check_int("parallel_unit_num", pgrid, lo=1)
    check_parallel_units(pgrid, cl.shape[0], next_n)
    out = _table("cta_info", out, pgrid, WIDTH["varctx"], cl, pgrid // next_n)
    check_no_overlap("cta_info", out, context_lens=cl)
    safe = torch.empty(1, dtype=torch.int32, device=cl.device)
    args = {"cta_info": out, "safe": safe, "context_lens": cl, "items": cl.shape[0], "slots": pgrid // next_n,
            "next_n": next_n, "block_k": block_k, "max_seq_len": max_seq_len,
            "rounds": search_rounds(max_seq_len, block_k)}
    return out, safe, FAMILY.launch_plan({"layout": "varctx"}, (1, 1, 1), args)


def rows_plan(row_to_batch, local_starts, local_ends, *, block_k: int, slots: int, max_seq_len: int, out=None):
    """(safe int32 [1], table int32 [slots, 6], plan) of the one-row-per-CTA table; `out` is filled in
    place when given."""
    le = _items("local_ends", local_ends)
    rows = le.shape[0]
    rb = _items("row_to_batch", row_to_batch)
    ls = _items("local_starts", local_starts)
    for name, t in (("row_to_batch", rb), ("local_starts", ls)):
        if t.shape[0] != rows or t.device != le.device:
            raise ValueError(f"{name}: must be int32 [{rows}] on {le.device} like local_ends")
    check_int("block_k", block_k, lo=1)
    check_int("max_seq_len", max_seq_len, lo=0)
    check_int("slots", slots, lo=1)
    out = _table("cta_info", out, slots, WIDTH["rows"], le, slots)
    check_no_overlap("cta_info", out, row_to_batch=rb, local_starts=ls, local_ends=le)
    safe = torch.empty(1, dtype=torch.int32, device=le.device)
    args = {"cta_info": out, "safe": safe, "local_ends": le, "row_to_batch": rb, "local_starts": ls,
            "items": rows, "slots": slots, "block_k": block_k, "max_seq_len": max_seq_len,
            "rounds": search_rounds(max_seq_len, block_k)}
    return safe, out, FAMILY.launch_plan({"layout": "rows"}, (1, 1, 1), args)
