"""Launch plans of the mqa_decode family: validate the call, pick the spec, compute grid and arguments.

Pure Python + torch (no flydsl). Dispatch (`plan_call`), binding knobs against hints:
- hints: block_k None or 256, num_warps None or 4, parallel_unit_num None. These only restate the
  upstream defaults, so they leave the choice to the op: D128 with H64/H128 and next_n <= 8 runs the
  direct path (the walk kernel for H64 with next_n 3..4 on large grids, else the direct kernel), everything else the
  staged-LDS kernel with the default 256 x 4 tile.
- binding: an external schedule (`cta_info` + `total_ctas`: its chunks are block_k tokens), an explicit
  `parallel_unit_num` (the persistent grid size), any other block_k, any other num_warps, and
  next_n 9..16 (the direct kernel holds at most 8 rows per CTA): all run the staged kernel.
A staged tile outside STAGED_TILES is compiled by the runtime's JIT (MissingSpecError when the JIT is off).
"""
import functools

import torch

from ..mqa_common.inputs import DWORD_ALIGN
from ..mqa_runs_schedule import plan as runs_schedule
from ..registry import LaunchPlan
from ..tensor_checks import check_int, check_no_overlap, check_tensor
from .. import value_checks
from .geometry import (DEFAULT_TILE, DIRECT_HEADS, DIRECT_VARIANTS, MAX_WARPS, QUAD, WALK_SPAN, Staged,
                       direct_params, direct_tile, staged_params, takes_walk, walk_params)
from .geometry import MAX_NEXT_N as DIRECT_MAX_NEXT_N
from .inputs import Shapes, check_inputs, check_out, check_schedule
from .specs import FAMILY

_I32 = torch.int32
Tensor = torch.Tensor


def staged_tile(block_k, num_warps, page_size: int, head_dim: int = 128):
    """(block_k, num_warps) of the staged kernel; None picks the default 256 x 4.

    Every pair upstream accepts is served: block_k a multiple of kv_block_size whose 16-token tiles split
    evenly over num_warps. The staged kernel splits a chunk by 64-token quads, so when num_warps does not
    divide block_k / 64 it runs with the largest wave count below num_warps that does (the logits do not
    depend on the wave count)."""
    bk = DEFAULT_TILE[0] if block_k is None else check_int("block_k", block_k, lo=1)
    w = DEFAULT_TILE[1] if num_warps is None else check_int("num_warps", num_warps, lo=1, hi=MAX_WARPS)
    return _staged_tile(bk, w, page_size, head_dim)


@functools.lru_cache(maxsize=256)
def _staged_tile(bk: int, w: int, page_size: int, head_dim: int):
    """staged_tile past the type checks (so a cache hit never stands in for one: True == 1)."""
    if bk % page_size:
        raise ValueError(f"block_k={bk} must be a multiple of kv_block_size={page_size}")
    if (bk // 16) % w:
        raise ValueError(f"block_k={bk} has {bk // 16} 16-token tiles, not a multiple of num_warps={w}")
    lds = Staged(16, head_dim, page_size, bk, 1).lds_bytes
    limit = min(t.lds_bytes for t in FAMILY.target_rows)     # a plan is made before the device is known
    if lds > limit:
        raise ValueError(f"block_k={bk} stages {lds} bytes of KV per chunk at head_dim={head_dim}, above the "
                         f"{limit}-byte LDS of a workgroup")
    quads = bk // QUAD
    while quads % w:
        w -= 1
    return bk, w


def is_hint(block_k, num_warps, parallel_unit_num) -> bool:
    """True when the knobs only restate the upstream defaults (block_k 256, num_warps 4, no grid size)."""
    return block_k in (None, DEFAULT_TILE[0]) and num_warps in (None, DEFAULT_TILE[1]) and parallel_unit_num is None


def staged_plan(s: Shapes, block_k: int, num_warps: int, *, out, q_fp4, q_scale, kv_cache, kv_scale,
                block_tables, weights, cta_info, total_ctas: int, weight_scale: float) -> LaunchPlan:
    """1-D grid of total_ctas; the kernel's max_seq_len (its store bound) is the width of `out`."""
    params = staged_params(s.heads, s.head_dim, s.page_size, block_k, num_warps)
    args = {
        "out": out, "q": q_fp4, "q_scale": q_scale, "kv_cache": kv_cache, "kv_scale": kv_scale,
        "block_tables": block_tables, "weights": weights, "cta_info": cta_info,
        "next_n": s.next_n, "max_seq_len": out.shape[1], "stride_out": out.stride(0),
        "stride_kv": s.stride_kv, "stride_ks": s.stride_ks, "stride_bt": s.stride_bt,
        "weight_scale": weight_scale, "rows": out.shape[0], "num_pages": s.num_pages, "bt_width": s.bt_width,
    }
    return FAMILY.launch_plan(params, (total_ctas, 1, 1), args)


def takes_direct_path(s: Shapes, *, cta_info=None, total_ctas=None, block_k=None, num_warps=None,
                      parallel_unit_num=None) -> bool:
    """The direct kernel: internal schedule, knobs that are only hints, D128, H64/H128, next_n <= 8."""
    internal = cta_info is None and total_ctas is None
    return (internal and is_hint(block_k, num_warps, parallel_unit_num) and s.head_dim == 128
            and s.heads in DIRECT_HEADS and s.next_n <= DIRECT_MAX_NEXT_N)


def direct_plan(s: Shapes, max_seq_len: int, *, out, q_fp4, q_scale, kv_cache, kv_scale, block_tables,
                weights, context_lens, weight_scale: float, variant=None) -> LaunchPlan:
    """The direct path's kernel: the walk kernel (geometry.takes_walk) or a direct variant, on the 2-D grid
    (ceil(max_seq_len / tile), B); context_lens must be int32 and contiguous (the kernels read its
    entries as scalar dwords).

    variant: None picks the walk kernel or (tile, weight_load, waves) from the shape (geometry.direct_tile);
    tests and benchmarks may force one of DIRECT_VARIANTS[heads].
    """
    cl = context_lens
    if not (isinstance(cl, Tensor) and cl.dtype is _I32 and cl.shape == (s.batch,) and cl.is_contiguous()
            and not cl.data_ptr() % DWORD_ALIGN):
        check_tensor("context_lens", cl, dtype=torch.int32, shape=(s.batch,), contiguous=True, align=DWORD_ALIGN)
    if variant is None and takes_walk(s.heads, s.head_dim, s.next_n, s.batch, max_seq_len):
        tile, params = WALK_SPAN, walk_params(s.page_size)
    else:
        if variant is None:
            tile, scalar, waves = direct_tile(s.heads, s.batch, s.next_n, max_seq_len)
        elif tuple(variant) in DIRECT_VARIANTS[s.heads]:
            tile, scalar, waves = variant[0], variant[1] == "scalar", variant[2]
        else:
            raise ValueError(f"variant={variant!r} is not prebuilt; supported: {list(DIRECT_VARIANTS[s.heads])}")
        params = direct_params(s.heads, s.page_size, tile, scalar, waves)
    args = {
        "out": out, "q": q_fp4, "q_scale": q_scale, "kv_cache": kv_cache, "kv_scale": kv_scale,
        "block_tables": block_tables, "weights": weights, "context_lens": context_lens,
        "next_n": s.next_n, "max_seq_len": max_seq_len, "stride_out": out.stride(0),
        "stride_kv": s.stride_kv, "stride_ks": s.stride_ks, "stride_bt": s.stride_bt,
        "weight_scale": weight_scale, "num_pages": s.num_pages, "bt_width": s.bt_width,
    }
    return FAMILY.launch_plan(params, (-(-max_seq_len // tile), s.batch, 1), args)


def plan_call(q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights, context_lens, max_seq_len, *,
              weight_scale, next_n, block_k, kv_block_size, num_warps, parallel_unit_num, out, cta_info,
              total_ctas, check_values: bool = False):
    """The whole decision of one `pa_mqa_logits_fp4` call: check, choose the kernel (see the module doc)
    and fill `out` with -inf where the op owns that. Returns (out, plans): the LaunchPlans to launch in
    order on one stream, none when there is nothing to launch (no sequence); the internal staged
    schedule is the first of two (the mqa_runs_schedule kernel writes cta_info, then the staged kernel
    reads it). `check_values` validates index values with a host sync (checked mode). Device work here
    is the -inf fill on the inputs' device, never a host sync outside checked mode."""
    s = check_inputs(q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights, context_lens, max_seq_len,
                     next_n, kv_block_size, weight_scale)
    if (cta_info is None) != (total_ctas is None):
        raise ValueError("cta_info and total_ctas must be given together or not at all")
    rows = s.batch * next_n
    if cta_info is not None:
        check_schedule(cta_info, total_ctas, q_fp4)
    if out is not None:
        check_out(out, rows, max_seq_len, q_fp4)
        check_no_overlap("out", out, q_fp4=q_fp4, q_scale=q_scale, kv_cache=kv_cache, kv_scale=kv_scale,
                         block_tables=block_tables, weights=weights, context_lens=context_lens, cta_info=cta_info)
    if s.batch == 0:              # no sequence: the empty [0, max_seq_len] result, nothing launched
        staged_tile(block_k, num_warps, s.page_size, s.head_dim)        # bad knobs are errors all the same
        if parallel_unit_num is not None:
            if cta_info is not None:
                raise ValueError("parallel_unit_num applies to the internal schedule only; it cannot be combined "
                                 "with cta_info")
            check_int("parallel_unit_num", parallel_unit_num, lo=1)
        return _minus_inf(out, 0, max_seq_len, q_fp4.device), ()
    if check_values:
        value_checks.decode_values(block_tables=block_tables, context_lens=context_lens, num_pages=kv_cache.shape[0],
                             page_size=s.page_size, max_seq_len=max_seq_len, next_n=next_n, cta_info=cta_info,
                             total_ctas=total_ctas)
    if takes_direct_path(s, cta_info=cta_info, total_ctas=total_ctas, block_k=block_k, num_warps=num_warps,
                         parallel_unit_num=parallel_unit_num):
        # the direct and walk kernels write every cell of out[:, :max_seq_len], the -inf ones too: no fill
        if out is None:
            out = torch.empty((rows, max_seq_len), dtype=torch.float32, device=q_fp4.device)
        return out, (direct_plan(s, max_seq_len, out=out, q_fp4=q_fp4, q_scale=q_scale, kv_cache=kv_cache,
                                 kv_scale=kv_scale, block_tables=block_tables, weights=weights,
                                 context_lens=context_lens.contiguous(), weight_scale=float(weight_scale)),)
    bk, w = staged_tile(block_k, num_warps, s.page_size, s.head_dim)
    schedule = ()
    if cta_info is not None:
        if parallel_unit_num is not None:
            raise ValueError("parallel_unit_num applies to the internal schedule only; it cannot be combined "
                             "with cta_info")
        if out is None:                   # an external schedule never fills a caller's out
            out = _minus_inf(None, rows, max_seq_len, q_fp4.device)
    else:
        total_ctas = (runs_schedule.default_parallel_units(s.batch, next_n, max_seq_len, bk)
                      if parallel_unit_num is None
                      else check_int("parallel_unit_num", parallel_unit_num, lo=1))
        cta_info, _, sched = runs_schedule.varctx_plan(context_lens, bk, total_ctas, max_seq_len, next_n)
        schedule = (sched,)
        out = _minus_inf(out, rows, max_seq_len, q_fp4.device)
    return out, schedule + (staged_plan(s, bk, w, out=out, q_fp4=q_fp4, q_scale=q_scale, kv_cache=kv_cache,
                                        kv_scale=kv_scale, block_tables=block_tables, weights=weights,
                                        cta_info=cta_info, total_ctas=total_ctas, weight_scale=float(weight_scale)),)


def _minus_inf(out, rows: int, max_seq_len: int, device):
    """`out` (or a new [rows, max_seq_len] f32 buffer) filled with -inf: the kernels store visible cells only."""
    if out is None:
        return torch.full((rows, max_seq_len), float("-inf"), dtype=torch.float32, device=device)
    return out.fill_(float("-inf"))
