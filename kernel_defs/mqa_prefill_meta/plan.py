"""Launch plans of the prefill metadata kernels (pure Python + torch). Callers validate the tensors
(shapes, int32, contiguity, device); every scalar here is a runtime argument of one of three specs.

- `groups`: the grouped schedule into `out` (int32 [slots, CTA_INFO_INTS], slots >= rows); one
  workgroup. Rows past MAX_ROWS do not fit its LDS: those calls build the table with the reference's
  torch ops instead (no plan).
- `windows`: the varqlen windows into three int32 [rows] tensors; one lane per row.
- `convert`: the first n_ctas slots of a one-row-per-CTA table into a new int32 [n_ctas, CTA_INFO_INTS].
"""
import torch

from ..registry import LaunchPlan
from . import reference
from .geometry import CTA_INFO_INTS, ELEM_THREADS, MAX_ROWS, fit_space, search_rounds
from .specs import FAMILY


def _grid(n: int) -> tuple:
    return (max(1, -(-n // ELEM_THREADS)), 1, 1)


def groups(row_to_batch, local_starts, local_ends, out: torch.Tensor, *, page_size: int, max_seq_len: int):
    """The plan that fills `out` with the grouped schedule, or None when it was built here (rows > MAX_ROWS)."""
    rows = local_ends.shape[0]
    if rows > MAX_ROWS:
        reference.build_schedule(row_to_batch, local_starts, local_ends, page_size=page_size,
                                 max_seq_len=max_seq_len, slots=out.shape[0], out=out)
        return None
    s_max, rounds = fit_space(max_seq_len)
    args = {"cta_info": out, "row_to_batch": row_to_batch, "local_starts": local_starts, "local_ends": local_ends,
            "rows": rows, "slots": out.shape[0], "page_size": page_size, "max_seq_len": max_seq_len,
            "s_max": s_max, "fit_rounds": rounds, "row_rounds": search_rounds(rows)}
    return FAMILY.launch_plan({"layout": "groups"}, (1, 1, 1), args)


def windows(cu_seq_q, context_lens, out) -> LaunchPlan:
    """The plan that fills out = (row_to_batch, local_starts, local_ends) from cu_seq_q and context_lens."""
    row_to_batch, local_starts, local_ends = out
    rows, batches = local_ends.shape[0], context_lens.shape[0]
    args = {"row_to_batch": row_to_batch, "local_starts": local_starts, "local_ends": local_ends,
            "cu_seq_q": cu_seq_q, "context_lens": context_lens, "rows": rows, "batches": batches,
            "search_rounds": search_rounds(batches)}
    return FAMILY.launch_plan({"layout": "windows"}, _grid(rows), args)


def convert(table, n_ctas: int, *, block_k: int, rows: int, page_size: int, max_seq_len: int):
    """(cta_info, plan): a new int32 [n_ctas, CTA_INFO_INTS] and the plan that fills it from `table`."""
    out = torch.empty(n_ctas, CTA_INFO_INTS, dtype=torch.int32, device=table.device)
    args = {"cta_info": out, "table": table, "n_ctas": n_ctas, "block_k": block_k, "rows": rows,
            "page_size": page_size, "max_seq_len": max_seq_len}
    return out, FAMILY.launch_plan({"layout": "convert"}, _grid(n_ctas), args)


def converted(table, n_ctas: int, *, block_k: int, rows: int, page_size: int, max_seq_len: int) -> torch.Tensor:
    """What `convert`'s kernel writes, built on the host by the torch reference (checked mode reads it)."""
    return reference.from_row_schedule(table, n_ctas, block_k=block_k, rows=rows, page_size=page_size,
                                       max_seq_len=max_seq_len)
