"""Host ops of the FP4 paged MQA logits prefill (aiter's names and argument order).

-inf contract: the kernel writes every output cell, -inf outside a row's window, under a schedule
built here or by `compute_prefill_schedule` (an external one, the graph-replay pattern), so the output
needs no fill (`out=None` with the schedule built here is allocated uninitialized); under a converted
one-row-per-CTA table the kernel stores only window cells and the caller pre-fills `out` with -inf. With an
external schedule the call allocates nothing. Schedules and windows are built on the tensors' device without a host sync, each
by one kernel launch (the mqa_prefill_meta family) on the current stream, ahead of the op's own.
"""
from typing import Optional, Tuple

import torch

from .. import runtime
from ..kernel_defs import value_checks
from ..kernel_defs.mqa_prefill import plan as _plan
from ..kernel_defs.mqa_prefill.geometry import CTA_INFO_INTS
from ..kernel_defs.mqa_prefill_meta import plan as _meta
from ..kernel_defs.tensor_checks import check_int, check_no_overlap, check_tensor
from ._hints import MQA, add_hint
from ._torch_ops import launch_stream, on_stream, traced_op

__all__ = ["pa_mqa_logits_fp4_prefill", "pa_mqa_logits_fp4_varqlen", "compute_prefill_schedule",
           "compute_varqlen_windows"]


def _schedule_fake(local_ends, parallel_unit_num, **_):
    slots = parallel_unit_num if parallel_unit_num is not None else _plan.default_slots(local_ends.shape[0])
    return torch.empty((slots, CTA_INFO_INTS), dtype=torch.int32, device=local_ends.device)


def _schedule_tensor(schedule) -> torch.Tensor:
    return schedule[0]


def _with_slots(cta_info):
    """(cta_info, n_ctas): the schedule has one row per slot."""
    return cta_info, cta_info.shape[0]


@traced_op(fake=_schedule_fake, out="cta_info_out", result=(_schedule_tensor, _with_slots))
def compute_prefill_schedule(row_to_batch: torch.Tensor, local_starts: torch.Tensor, local_ends: torch.Tensor, *,
                             page_size: int, max_seq_len: int, parallel_unit_num: Optional[int] = None,
                             cta_info_out: Optional[torch.Tensor] = None):
    """(cta_info, n_ctas) for the explicit windows; pass `cta_info_out` (int32 [slots, 8]) to refill a
    fixed buffer (graph capture). Needs parallel_unit_num >= rows. Under torch.compile (or a dispatch
    mode): the op of the same name, or its `_out` variant with `cta_info_out`."""
    rows = local_ends.shape[0]
    _plan.check_windows(rows, local_ends, row_to_batch=row_to_batch, local_starts=local_starts,
                        local_ends=local_ends)
    check_int("page_size", page_size, lo=1)
    check_int("max_seq_len", max_seq_len, lo=0, hi=(1 << 30) - 1)
    slots = cta_info_out.shape[0] if cta_info_out is not None else (
        parallel_unit_num if parallel_unit_num is not None else _plan.default_slots(rows))
    check_int("parallel_unit_num", slots, lo=max(rows, 1))
    if cta_info_out is not None:
        _plan.check_schedule(cta_info_out, rows, local_ends)
        check_no_overlap("cta_info_out", cta_info_out, row_to_batch=row_to_batch, local_starts=local_starts,
                         local_ends=local_ends)
        if cta_info_out.shape[1] != CTA_INFO_INTS:
            raise ValueError(f"cta_info_out: this builder writes {CTA_INFO_INTS} int32 per slot, got shape "
                             f"{tuple(cta_info_out.shape)}")
    info = cta_info_out if cta_info_out is not None else torch.empty(
        (slots, CTA_INFO_INTS), dtype=torch.int32, device=local_ends.device)
    plan = _meta.groups(row_to_batch, local_starts, local_ends, info, page_size=page_size, max_seq_len=max_seq_len)
    if plan is not None:
        runtime.launch(plan)
    return info, slots


def _windows_fake(context_lens, total_q, **_):
    return tuple(torch.empty(total_q, dtype=torch.int32, device=context_lens.device) for _ in range(3))


@traced_op(fake=_windows_fake, out_fields=("row_to_batch", "local_starts", "local_ends"))
def compute_varqlen_windows(cu_seq_q: torch.Tensor, context_lens: torch.Tensor, total_q: int, *,
                            out=None) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(row_to_batch, local_starts, local_ends) int32 [total_q] for per-batch variable qlen; `out` = three
    fixed int32 buffers to refill (graph capture), disjoint from each other and the inputs.

    cu_seq_q int32 [B+1] and context_lens int32 [B] (int64 is refused). Their values (cu_seq_q[0] == 0,
    non-decreasing, cu_seq_q[B] <= total_q, context_lens >= 0) are the caller's contract, validated in
    checked mode (FLYAOT_CHECK=1) only. B=0: every row is padding (empty windows). Under torch.compile
    (or a dispatch mode): the op of the same name, or its `_out` variant with `out`."""
    check_int("total_q", total_q, lo=0)
    # int32 only (int64 is refused): the windows are int32, a conversion would wrap large values.
    check_tensor("context_lens", context_lens, dtype=torch.int32, ndim=1)
    check_tensor("cu_seq_q", cu_seq_q, dtype=torch.int32, shape=(context_lens.shape[0] + 1,), device=context_lens)
    if out is not None:
        out = _three_buffers("out", out)
        _plan.check_windows(total_q, context_lens.device, row_to_batch=out[0], local_starts=out[1],
                            local_ends=out[2])
        inputs = {"cu_seq_q": cu_seq_q, "context_lens": context_lens}
        for name, t in zip(("row_to_batch", "local_starts", "local_ends"), out):
            check_no_overlap(f"out ({name})", t, **inputs)
            inputs[name] = t
    if runtime.runtime().config.check:
        value_checks.varqlen_values(cu_seq_q=cu_seq_q, context_lens=context_lens, total_q=total_q)
    if out is None:
        out = tuple(torch.empty(total_q, dtype=torch.int32, device=context_lens.device) for _ in range(3))
    if total_q:
        runtime.launch(_meta.windows(cu_seq_q, context_lens, out))
    return tuple(out)


def _three_buffers(name: str, value) -> tuple:
    """Windows as a sequence of exactly three tensors (row_to_batch, local_starts, local_ends), else a
    ValueError naming the argument."""
    if not isinstance(value, (tuple, list)) or len(value) != 3:
        got = f"{len(value)} items" if isinstance(value, (tuple, list)) else type(value).__name__
        raise ValueError(f"{name}: expected three int32 tensors (row_to_batch, local_starts, local_ends), got {got}")
    return tuple(value)


def _prefill_fake(q_fp4, max_seq_len, **_):
    return torch.empty((q_fp4.shape[0], max_seq_len), dtype=torch.float32, device=q_fp4.device)


@traced_op(fake=_prefill_fake)
def pa_mqa_logits_fp4_prefill(q_fp4: torch.Tensor, q_scale: torch.Tensor, kv_cache: torch.Tensor, kv_scale: torch.Tensor,
                              block_tables: torch.Tensor, weights: torch.Tensor, row_to_batch: torch.Tensor,
                              local_starts: torch.Tensor, local_ends: torch.Tensor, max_seq_len: int, *,
                              weight_scale: float = 1.0, block_k: int = 256, kv_block_size: Optional[int] = None,
                              num_warps: int = 4, parallel_unit_num: Optional[int] = None, out=None,
                              cta_info: Optional[torch.Tensor] = None, n_ctas: Optional[int] = None, stream=None):
    """Logits float32 [T, max_seq_len]: row r scores tokens [local_starts[r], local_ends[r]) of batch
    row_to_batch[r]; -inf elsewhere. Under torch.compile (or a dispatch mode): the op of the same name,
    or its `_out` variant with `out`; `stream` must then be None.

    Knobs: block_k and num_warps are checked as upstream checks them but are hints (one prefill kernel
    serves every value); parallel_unit_num must be at least the row count, as upstream's, and above that
    is a hint (the schedule gets max(parallel_unit_num, the op's own slot count) slots). Binding: an external schedule, either this kernel's table (int32 [slots, 8],
    from compute_prefill_schedule) or a one-row-per-CTA table (int32 [slots, 6]: row, batch,
    chunk_start, chunk_count, local_start, local_end, chunks of block_k tokens), converted on the device
    without a host sync; n_ctas is then the number of its slots to run.

    Inputs: every index tensor (block_tables, windows, cta_info) is int32; int64 is refused. `out` must
    not overlap any input nor itself (row stride >= max_seq_len). No batch (block_tables with 0 rows),
    no rows or max_seq_len 0: the all -inf result, nothing launched. Index values (row_to_batch, windows
    inside the block table, table entries, cta_info) are validated only in checked mode (FLYAOT_CHECK=1,
    one host sync, not under graph capture). Eager, `stream` is None (torch's current stream) or a torch
    stream on the inputs' device.

    Layouts: docs/families/mqa_prefill.md#formats (Q [T, ...], the KV pages of decode); flyaot.inputs
    builds them from natural tensors (quantize_q, paged_kv, causal_windows)."""
    stream = launch_stream(stream, q_fp4)
    with on_stream(stream):
        try:
            out, plans = _plan.plan_call(q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights, row_to_batch,
                                         local_starts, local_ends, max_seq_len, weight_scale=weight_scale,
                                         block_k=block_k, kv_block_size=kv_block_size, num_warps=num_warps,
                                         parallel_unit_num=parallel_unit_num, out=out, cta_info=cta_info,
                                         n_ctas=n_ctas, check_values=runtime.runtime().config.check)
        except (TypeError, ValueError) as e:
            add_hint(e, MQA)
            raise
        runtime.launch_all(plans, stream=stream)      # the metadata kernel (if any), then the kernel
    return out


def _from_cu(windows, cu_seq_q, context_lens, **_) -> bool:
    """A traced call with cu_seq_q + context_lens becomes the varqlen op; one with `windows` forwards them to
    the prefill op (and a call with neither raises its error under the trace)."""
    return windows is None and cu_seq_q is not None and context_lens is not None


@traced_op(fake=_prefill_fake, local=("windows",), route=_from_cu)
def pa_mqa_logits_fp4_varqlen(q_fp4: torch.Tensor, q_scale: torch.Tensor, kv_cache: torch.Tensor,
                              kv_scale: torch.Tensor, block_tables: torch.Tensor, weights: torch.Tensor,
                              max_seq_len: int, *, cu_seq_q: Optional[torch.Tensor] = None,
                              context_lens: Optional[torch.Tensor] = None, windows=None, weight_scale: float = 1.0,
                              block_k: int = 256, kv_block_size: Optional[int] = None, num_warps: int = 4,
                              parallel_unit_num: Optional[int] = None, out=None,
                              cta_info: Optional[torch.Tensor] = None, n_ctas: Optional[int] = None, stream=None):
    """Per-batch variable qlen (MTP / chunked prefill tail): row n of batch b sees t <= ctx_b - qlen_b + n.
    Pass `windows` (from compute_varqlen_windows, reusable) or `cu_seq_q` + `context_lens`, not both
    (flyaot.inputs.cu_seqlens, lengths; layouts: docs/families/mqa_prefill.md#formats). Under
    torch.compile (or a dispatch mode), cu_seq_q + context_lens go to the op of the same name (or its
    `_out` variant); `windows` go to the prefill op. The windows built here run on `stream` too."""
    if windows is None:
        if cu_seq_q is None or context_lens is None:
            raise ValueError("pa_mqa_logits_fp4_varqlen: pass windows=(row_to_batch, local_starts, local_ends) "
                             "or both cu_seq_q and context_lens")
        if not isinstance(q_fp4, torch.Tensor):
            raise TypeError(f"q_fp4: expected a torch.Tensor, got {type(q_fp4).__name__}")
        stream = launch_stream(stream, q_fp4)
        with on_stream(stream):
            windows = compute_varqlen_windows(cu_seq_q, context_lens, q_fp4.shape[0])
    elif cu_seq_q is not None or context_lens is not None:
        raise ValueError("pa_mqa_logits_fp4_varqlen: windows= and cu_seq_q/context_lens describe the rows twice; "
                         "pass one of them")
    else:
        windows = _three_buffers("windows", windows)
    row_to_batch, local_starts, local_ends = windows
    return pa_mqa_logits_fp4_prefill(q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights, row_to_batch,
                                     local_starts, local_ends, max_seq_len, weight_scale=weight_scale,
                                     block_k=block_k, kv_block_size=kv_block_size, num_warps=num_warps,
                                     parallel_unit_num=parallel_unit_num, out=out, cta_info=cta_info,
                                     n_ctas=n_ctas, stream=stream)


# ------------------------------------------------------------------------------- CLI selftest and bench

def _hook_case(rows, ctx, heads, max_seq_len, seed, device, page_size=64):
    """(CPU case, its tensors on `device`) from the reference's test-data maker."""
    from ..kernel_defs.mqa_prefill.reference import make_case
    case = make_case(rows, ctx, heads=heads, page_size=page_size, max_seq_len=max_seq_len, seed=seed)
    dev = tuple(t.to(device) for t in (case.q_fp4, case.q_scale, case.kv_cache, case.kv_scale,
                                       case.block_tables, case.weights))
    return case, dev


def _hook_metrics(out, case, rb, ls, le, weight_scale):
    """(passes, detail) of `out` against the reference over the windows (criteria of mqa_common.reference)."""
    from ..kernel_defs.mqa_common.reference import compare, passes
    from ..kernel_defs.mqa_prefill import reference as R
    from .hooks import describe
    ref = R.prefill_logits(case.q_fp4, case.q_scale, case.kv_cache, case.kv_scale, case.block_tables,
                           case.weights, rb, ls, le, case.max_seq_len, weight_scale)
    m = compare(out.cpu(), ref, R.visible(rb, ls, le, case.max_seq_len))
    return passes(m), describe(m)


def selftest(device):
    """Explicit windows and variable qlen through the public ops on small problems, against the torch
    reference: cosine >= 0.99999 and max |err| <= 1e-3 max|ref| in-window, every other cell exactly -inf."""
    from ..kernel_defs.mqa_prefill import reference as R
    from .hooks import check
    torch.device(device)          # a bad device string fails the hook, not each case

    def i32(values):
        return torch.tensor(values, dtype=torch.int32)

    def explicit(heads, page, ctx, rb, ls, le, max_seq_len):
        rb, ls, le = i32(rb), i32(ls), i32(le)
        case, dev = _hook_case(len(rb), ctx, heads, max_seq_len, heads + page, device, page_size=page)
        out = pa_mqa_logits_fp4_prefill(*dev, rb.to(device), ls.to(device), le.to(device), max_seq_len,
                                        weight_scale=1.5)
        return _hook_metrics(out, case, rb, ls, le, 1.5)

    def varqlen():
        # qlens 2, 0, 1 (an empty batch) plus one graph padding row.
        cu, ctx = i32([0, 2, 2, 3]), [130, 64, 100]
        case, dev = _hook_case(4, ctx, 64, 130, 2, device)
        out = pa_mqa_logits_fp4_varqlen(*dev, case.max_seq_len, cu_seq_q=cu.to(device),
                                        context_lens=i32(ctx).to(device))
        return _hook_metrics(out, case, *R.varqlen_windows(cu, ctx, 4), 1.0)

    # Two batches interleaved (row groups of 3, 1, 1), non-zero lower bounds, an empty window.
    yield check("explicit windows H64 D128 p64 rows=5 batches=2", lambda: explicit(
        64, 64, [150, 90], [0, 0, 0, 1, 0], [0, 10, 70, 0, 5], [150, 120, 70, 90, 149], 160))
    yield check("explicit windows H128 D128 p128 rows=3 batches=1", lambda: explicit(
        128, 128, [260], [0, 0, 0], [0, 100, 255], [260, 131, 259], 260))
    yield check("varqlen H64 D128 p64 qlens=[2,0,1] + 1 padding row", varqlen)


# (batch, q rows per batch, kv tokens): rows of the published prefill benchmark, causal windows (row n of a
# batch sees t <= kv - q + n); see docs/families/mqa_prefill.md#performance.
_BENCH_GPU = ((8, 128, 8192), (4, 256, 16384), (1, 4096, 4096), (1, 512, 65536))
_BENCH_EMU = ((1, 4, 256),)


def bench(device):
    """Median us per `pa_mqa_logits_fp4_varqlen` call (including its windows and schedule),
    H64, D128, page 64."""
    from .hooks import timed
    emu = torch.device(device).type == "cpu"
    for batch, qlen, kv in _BENCH_EMU if emu else _BENCH_GPU:
        rows = batch * qlen
        case, dev = _hook_case(rows, [kv] * batch, 64, kv, batch, device)
        cu = torch.arange(0, rows + 1, qlen, dtype=torch.int32, device=device)
        cl = torch.full((batch,), kv, dtype=torch.int32, device=device)
        out = torch.empty(rows, kv, device=device)
        yield timed(f"{batch}x{qlen}x{kv} H64", lambda: pa_mqa_logits_fp4_varqlen(
            *dev, kv, cu_seq_q=cu, context_lens=cl, out=out), device, f"{rows} rows, causal windows")
