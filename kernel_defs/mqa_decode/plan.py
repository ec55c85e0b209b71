"""Launch plans of the mqa_decode family: validate the call, pick the spec, compute grid and arguments.

Pure Python + torch (no flydsl). Dispatch (`plan_call`), binding knobs against hints:
- hints: block_k None or 256, num_warps None or 4, parallel_unit_num None. These only restate the
  upstream defaults, so they leave the choice to the op: D128 with H64/H128 and next_n <= 8 runs the
  direct kernel, everything else the staged-LDS kernel with the default 256 x 4 tile.
- binding: an external schedule (`cta_info` + `total_ctas`: its chunks are block_k tokens), an explicit
  `parallel_unit_num` (the persistent grid size), any other block_k, any other num_warps, and
  next_n 9..16 (the direct kernel holds at most 8 rows per CTA): all run the staged kernel.
A staged tile outside STAGED_TILES is compiled by the runtime's JIT (MissingSpecError when the JIT is off).
"""
import functools
import math
from typing import NamedTuple

import torch

from ..mqa_common.inputs import DWORD_ALIGN, HEAD_DIMS, HEADS, PAGE_SIZES, VALUE_ALIGN, check_kv_pages
from ..mqa_common.layouts import K_TILE, k_tiles, qs_pad
from ..mqa_runs_schedule import plan as runs_schedule
from ..registry import LaunchPlan
from ..validate import (E8M0, FP4X2, INT32_MAX, check_choice, check_float, check_int, check_no_overlap, check_rows_disjoint,
                        check_same_device, check_tensor)
from .. import checks
from .geometry import DIRECT_HEADS, DIRECT_VARIANTS, QUAD, WAVE, Staged, direct_params, direct_tile, staged_params
from .geometry import MAX_NEXT_N as DIRECT_MAX_NEXT_N

# (block_k, num_warps) of the staged kernel that are prebuilt: the default 256x4 first, then the common
# caller overrides. Any other tile the staged geometry allows is compiled on first use.
STAGED_TILES = ((256, 4), (128, 2), (512, 8), (512, 4), (64, 1))
DEFAULT_TILE = STAGED_TILES[0]
MAX_NEXT_N = 16               # the staged kernel only divides the row index by next_n
MAX_WARPS = 16                # 1024 threads per workgroup
MAX_LDS = 160 * 1024          # gfx950 LDS per workgroup: bounds the staged chunk


def block(params: dict) -> tuple:
    """Workgroup of every spec: num_warps waves (the direct kernel's are its DIRECT_WAVES head waves)."""
    return (WAVE * params["num_warps"], 1, 1)


class Shapes(NamedTuple):
    """What check_inputs established about the inputs: the dispatch axes, and the layout integers the
    kernels take as arguments (so the plan does not read the tensors' metadata again). A tuple: one is
    built per call, in a third of a frozen dataclass's time."""
    batch: int
    next_n: int
    heads: int
    head_dim: int
    page_size: int
    num_pages: int          # kv_cache.shape[0]
    stride_kv: int          # page strides of kv_cache and kv_scale, row stride of block_tables (elements)
    stride_ks: int
    stride_bt: int
    bt_width: int           # block_tables.shape[1]


def check_inputs(q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights, context_lens, max_seq_len,
                 next_n, kv_block_size, weight_scale) -> Shapes:
    """Every check that needs no schedule: raises TypeError/ValueError naming the argument.

    Alignment (mqa_common.inputs): Q and KV values are read 16 bytes per lane, Q and KV scales, weights
    and block-table entries in whole dwords. The common case is decided by one read of each tensor's
    metadata (accepts_inputs); anything it does not accept goes through explain_inputs, which raises
    the error (or accepts what the quick pass was stricter about)."""
    s = accepts_inputs(q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights, context_lens, max_seq_len,
                       next_n, kv_block_size, weight_scale)
    if s is not None:
        return s
    return explain_inputs(q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights, context_lens, max_seq_len,
                          next_n, kv_block_size, weight_scale)


_FP4X2, _E8M0 = frozenset(FP4X2), frozenset(E8M0)
_HEADS, _HEAD_DIMS = frozenset(HEADS), frozenset(HEAD_DIMS)
_I32, _BF16, _F32 = torch.int32, torch.bfloat16, torch.float32
Tensor = torch.Tensor


def accepts_inputs(q, qs, kv, ks, bt, w, cl, max_seq_len, next_n, page, weight_scale):
    """Shapes when the inputs pass every check of explain_inputs, else None; never raises.

    The eager op's hot path: each tensor's shape, stride, dtype, device and address read once and
    compared in straight-line code, no error text built. It may refuse more than explain_inputs (exact
    int/float types, a size-1 dim's stride), never less: anything it refuses is decided there."""
    try:
        if not (isinstance(q, Tensor) and isinstance(qs, Tensor) and isinstance(kv, Tensor) and isinstance(ks, Tensor)
                and isinstance(bt, Tensor) and isinstance(w, Tensor) and isinstance(cl, Tensor)):
            return None
        if not (type(next_n) is int and 1 <= next_n <= MAX_NEXT_N and type(page) is int and page in PAGE_SIZES
                and type(max_seq_len) is int and 1 <= max_seq_len <= INT32_MAX
                and (type(weight_scale) is float or type(weight_scale) is int) and math.isfinite(weight_scale)):
            return None
        batch, n, heads, d2 = q.shape
        head_dim, dev = 2 * d2, q.device
        if n != next_n or heads not in _HEADS or head_dim not in _HEAD_DIMS:
            return None
        kt = head_dim // K_TILE
        if not (q.dtype in _FP4X2 and q.is_contiguous() and not q.data_ptr() % VALUE_ALIGN
                and qs.dtype in _E8M0 and qs.shape == (batch, next_n, kt, 4, 16, qs_pad(heads))
                and qs.is_contiguous() and not qs.data_ptr() % DWORD_ALIGN and qs.device == dev):
            return None
        # kv pages: [pages, KT, 4, P, 16] values and [pages, KT, 4, P] scales at a page stride that keeps
        # pages apart and aligned (a single page is never stepped, so its stride is free).
        pages = kv.shape[0]
        kv_stride, ks_stride = kv.stride(), ks.stride()
        if not (kv.dtype in _FP4X2 and kv.shape == (pages, kt, 4, page, 16)
                and kv_stride[1:] == (64 * page, 16 * page, 16, 1) and not kv.data_ptr() % VALUE_ALIGN
                and ks.dtype in _E8M0 and ks.shape == (pages, kt, 4, page) and ks_stride[1:] == (4 * page, page, 1)
                and not ks.data_ptr() % DWORD_ALIGN and kv.device == dev and ks.device == dev
                and (pages <= 1 or (not kv_stride[0] % VALUE_ALIGN and kv_stride[0] >= kt * 64 * page
                                    and not ks_stride[0] % DWORD_ALIGN and ks_stride[0] >= kt * 4 * page))):
            return None
        bt_shape, bt_stride = bt.shape, bt.stride()
        if not (bt.dtype is _I32 and len(bt_shape) == 2 and bt_shape[0] == batch and bt_stride[1] == 1
                and 0 <= bt_stride[0] <= INT32_MAX and not bt.data_ptr() % DWORD_ALIGN and bt.device == dev
                and w.dtype is _BF16 and w.shape == (batch * next_n, heads) and w.is_contiguous()
                and not w.data_ptr() % DWORD_ALIGN and w.device == dev
                and cl.dtype is _I32 and cl.shape == (batch,) and cl.device == dev):
            return None
        return Shapes(batch, next_n, heads, head_dim, page, pages, kv_stride[0], ks_stride[0], bt_stride[0],
                      bt_shape[1])
    except Exception:             # not a tensor, a wrong rank, ...: explain_inputs names it
        return None


def explain_inputs(q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights, context_lens, max_seq_len,
                 next_n, kv_block_size, weight_scale) -> Shapes:
    """The checks of check_inputs one by one: raises the TypeError/ValueError naming the first argument
    that fails. The rules of record; `accepts_inputs` only ever accepts a subset of what this accepts."""
    dims = {}
    check_int("next_n", next_n, lo=1, hi=MAX_NEXT_N)
    check_int("kv_block_size", kv_block_size)
    check_choice("kv_block_size", kv_block_size, PAGE_SIZES)
    check_int("max_seq_len", max_seq_len, lo=1)
    check_float("weight_scale", weight_scale)
    check_tensor("q_fp4", q_fp4, dtype=FP4X2, shape=("B", None, "H", "D2"), dims=dims, contiguous=True,
                 align=VALUE_ALIGN)
    if q_fp4.shape[1] != next_n:
        raise ValueError(f"q_fp4: dim 1 is {q_fp4.shape[1]} but next_n={next_n}")
    batch, heads, head_dim = dims["B"], dims["H"], 2 * dims["D2"]
    check_choice("heads (q_fp4.shape[2])", heads, HEADS)
    check_choice("head_dim (2 * q_fp4.shape[3])", head_dim, HEAD_DIMS)
    kt, p = k_tiles(head_dim), kv_block_size
    check_tensor("q_scale", q_scale, dtype=E8M0, shape=(batch, next_n, kt, 4, 16, qs_pad(heads)), contiguous=True,
                 align=DWORD_ALIGN)
    check_tensor("kv_cache", kv_cache, dtype=FP4X2, ndim=5)
    if kv_cache.shape[3] != p:
        raise ValueError(f"kv_cache: page size (dim 3) is {kv_cache.shape[3]} but kv_block_size={p}")
    check_kv_pages(kv_cache, kv_scale, k_tiles=kt, page_size=p, like=q_fp4)
    check_tensor("block_tables", block_tables, dtype=torch.int32, shape=(batch, None), stride=(None, 1),
                 align=DWORD_ALIGN)
    check_int("block_tables.stride(0)", block_tables.stride(0), lo=0)
    check_tensor("weights", weights, dtype=torch.bfloat16, shape=(batch * next_n, heads), contiguous=True,
                 align=DWORD_ALIGN)
    # int32 only: the kernels read 32-bit lengths, and converting int64 would wrap 2**32 + 70 to 70.
    check_tensor("context_lens", context_lens, dtype=torch.int32, shape=(batch,))
    check_same_device(q_fp4=q_fp4, q_scale=q_scale, kv_cache=kv_cache, kv_scale=kv_scale,
                      block_tables=block_tables, weights=weights, context_lens=context_lens)
    return Shapes(batch, next_n, heads, head_dim, p, kv_cache.shape[0], kv_cache.stride(0), kv_scale.stride(0),
                  block_tables.stride(0), block_tables.shape[1])


def check_out(out, rows: int, max_seq_len: int, like: torch.Tensor) -> None:
    """f32 [rows, max_seq_len], unit column stride, dword aligned, rows apart, on the inputs' device."""
    if isinstance(out, Tensor) and out.dtype is _F32 and out.shape == (rows, max_seq_len):
        stride = out.stride()
        if (stride[1] == 1 and (rows <= 1 or max_seq_len <= 0 or stride[0] >= max_seq_len)
                and not out.data_ptr() % DWORD_ALIGN and out.device == like.device):
            return
    check_tensor("out", out, dtype=torch.float32, shape=(rows, max_seq_len), stride=(None, 1), align=DWORD_ALIGN)
    check_rows_disjoint("out", out)
    check_same_device(out=out, q_fp4=like)


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
    if lds > MAX_LDS:
        raise ValueError(f"block_k={bk} stages {lds} bytes of KV per chunk at head_dim={head_dim}, above the "
                         f"{MAX_LDS}-byte LDS of a workgroup")
    quads = bk // QUAD
    while quads % w:
        w -= 1
    return bk, w


def is_hint(block_k, num_warps, parallel_unit_num) -> bool:
    """True when the knobs only restate the upstream defaults (block_k 256, num_warps 4, no grid size)."""
    return block_k in (None, DEFAULT_TILE[0]) and num_warps in (None, DEFAULT_TILE[1]) and parallel_unit_num is None


def check_schedule(cta_info, total_ctas, like: torch.Tensor) -> int:
    """int32 [>= total_ctas, 4] contiguous, dword aligned, on the inputs' device; returns total_ctas."""
    if (isinstance(cta_info, Tensor) and cta_info.dtype is _I32 and type(total_ctas) is int
            and cta_info.dim() == 2 and cta_info.shape[1] == 4 and 1 <= total_ctas <= min(cta_info.shape[0], INT32_MAX)
            and cta_info.is_contiguous() and not cta_info.data_ptr() % DWORD_ALIGN and cta_info.device == like.device):
        return total_ctas
    check_tensor("cta_info", cta_info, dtype=torch.int32, shape=(None, 4), contiguous=True, align=DWORD_ALIGN)
    check_int("total_ctas", total_ctas, lo=1, hi=cta_info.shape[0])
    check_same_device(cta_info=cta_info, q_fp4=like)
    return total_ctas


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
    return _family().launch_plan(params, (total_ctas, 1, 1), args)


def takes_direct_path(s: Shapes, *, cta_info=None, total_ctas=None, block_k=None, num_warps=None,
                      parallel_unit_num=None) -> bool:
    """The direct kernel: internal schedule, knobs that are only hints, D128, H64/H128, next_n <= 8."""
    internal = cta_info is None and total_ctas is None
    return (internal and is_hint(block_k, num_warps, parallel_unit_num) and s.head_dim == 128
            and s.heads in DIRECT_HEADS and s.next_n <= DIRECT_MAX_NEXT_N)


def direct_plan(s: Shapes, max_seq_len: int, *, out, q_fp4, q_scale, kv_cache, kv_scale, block_tables,
                weights, context_lens, weight_scale: float, variant=None) -> LaunchPlan:
    """2-D grid (ceil(max_seq_len / tile), B); context_lens must be int32 and contiguous (the kernel
    reads its entries as scalar dwords).

    variant: None picks (tile, weight_load, waves) from the shape (geometry.direct_tile); tests and
    benchmarks may force one of DIRECT_VARIANTS[heads].
    """
    cl = context_lens
    if not (isinstance(cl, Tensor) and cl.dtype is _I32 and cl.shape == (s.batch,) and cl.is_contiguous()
            and not cl.data_ptr() % DWORD_ALIGN):
        check_tensor("context_lens", cl, dtype=torch.int32, shape=(s.batch,), contiguous=True, align=DWORD_ALIGN)
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
    return _family().launch_plan(params, (-(-max_seq_len // tile), s.batch, 1), args)


@functools.cache
def _family():
    """This family's declaration (specs.py imports this module, so it is looked up on first use)."""
    from .specs import FAMILY
    return FAMILY


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
        checks.decode_values(block_tables=block_tables, context_lens=context_lens, num_pages=kv_cache.shape[0],
                             page_size=s.page_size, max_seq_len=max_seq_len, next_n=next_n, cta_info=cta_info,
                             total_ctas=total_ctas)
    if takes_direct_path(s, cta_info=cta_info, total_ctas=total_ctas, block_k=block_k, num_warps=num_warps,
                         parallel_unit_num=parallel_unit_num):
        out = _minus_inf(out, rows, max_seq_len, q_fp4.device)
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
