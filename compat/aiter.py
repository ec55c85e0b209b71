"""aiter.ops.flydsl's FP4 paged MQA logits and dense A16WFP4 GEMM API, served by flyaot's prebuilt kernels.

A consumer switches by changing `from aiter.ops.flydsl import X` (or the kernel module it names) to
`from flyaot.compat.aiter import X`: the names, positional orders, keyword defaults and return values
are upstream's. Knob combinations follow upstream's rules: what its functions accept is accepted
(where upstream ignores a knob it is ignored here, with a debug log line), what they refuse is
refused with the same exception type (an `assert` of upstream's is UpstreamAssertionError, an
AssertionError that is also a ValueError). Upstream's rules, in its order:
- decode: next_n must match q_fp4; cta_info and total_ctas come together; an external schedule
  ignores parallel_unit_num; the internal one needs parallel_unit_num (default B * next_n *
  ceil(max_seq_len / block_k)) a multiple of next_n with parallel_unit_num // next_n >= B (ValueError).
- prefill: cta_info and n_ctas come together; an external schedule ignores parallel_unit_num; the
  internal one needs an int parallel_unit_num >= the row count (an assert; None is a TypeError).
- varqlen: windows= wins over cu_seq_q / context_lens (ignored when both are given); without windows
  both are needed (ValueError); parallel_unit_num None is total_q * ceil(max_seq_len / block_k).
- every kernel (upstream_tile): block_k's 16-token tiles split evenly over num_warps, kv_block_size a
  multiple of 16 dividing block_k (asserts), and each wave gets exactly four tiles (block_k = 64 *
  num_warps: an assert, or a ValueError when a wave's tiles would span more than one page; upstream's
  prefill kernel aborts the process for any wave of more than four tiles, refused here as decode's).
Differences a caller can observe:
- The knobs upstream passes by default (block_k=256, num_warps=4, parallel_unit_num=None, or 512 for
  prefill) are hints: flyaot picks its fastest kernel for them. Other values and external schedules
  are binding (see flyaot.ops.pa_mqa_logits_fp4 / pa_mqa_logits_fp4_prefill).
- kv_block_size must equal kv_cache's page size (upstream reads a mismatched cache with the wrong
  strides); `stream=` is what upstream's launcher takes (None, a torch stream, an object with an int
  `cuda_stream`, a raw handle), but a negative handle is refused and with CPU tensors a handle is
  ignored (the emulator runs in order). The GEMM takes a torch stream of a's device, as upstream.
- block_tables' width is a runtime argument (no compile per width); next_n up to 16.
- CPU tensors run on flyaot's gfx950 emulator.
- compute_prefill_schedule builds upstream's one-row-per-CTA table (CTA_INFO_WIDTH = 6 ints); the
  prefill op also takes flyaot's own grouped table (flyaot.ops.compute_prefill_schedule).
- FP8 indexer (deepgemm_fp8_paged_mqa_logits): ChunkK, TotalCuCount and WavePerEU are hints (one
  64-token tile per CTA serves every call); the kernel writes every cell of out_logits (-inf where
  hidden), so a caller's -inf pre-fill is not needed; the return value names the kernel (upstream
  returns a Triton cache key). deepgemm_fp8_paged_mqa_logits_schedule returns flyaot's own schedule
  table (pass it on as VarCtxSchedule; upstream's is a 1-int tensor only its kernel reads).
- A16WFP4: `config` names a tile of flyaot's kernels (a16wfp4_config_legal says which), and
  waves_per_eu is ignored (an occupancy hint these kernels do not take).
"""
import logging
from dataclasses import dataclass
from typing import NamedTuple, Optional

import torch

from .. import ops as _ops
from .. import runtime as _runtime
from ..kernel_defs.gemm_a16wfp4 import configs as _configs
from ..kernel_defs.gemm_a16wfp4 import plan as _gemm_plan
from ..kernel_defs.gemm_a16wfp4.layout import PreparedMXFP4Weight as _Prepared
from ..kernel_defs.mqa_runs_schedule.plan import default_parallel_units as _default_units
from ..kernel_defs.mqa_common.prefill_table import ROW_INFO_INTS
from ..kernel_defs.mqa_fp8 import geometry as _fp8_geometry
from ..kernel_defs.mqa_runs_schedule import plan as _runs_schedule
from ..kernel_defs.tensor_checks import check_int as _check_int
from ..kernel_defs.tensor_checks import check_tensor as _check_tensor
from ..ops._torch_ops import dispatch_modes as _dispatch_modes
from ..ops._torch_ops import is_compiling as _is_compiling
from ..ops._torch_ops import launch_stream as _launch_stream
from ..ops._torch_ops import on_stream as _on_stream

__all__ = ["CTA_INFO_WIDTH", "DenseGemmConfig", "PreshuffledA16WFP4Weight", "a16wfp4_config_legal",
           "a16wfp4_shape_supported", "compute_prefill_schedule", "compute_varctx_schedule",
           "compute_varqlen_windows", "deepgemm_fp8_paged_mqa_logits",
           "deepgemm_fp8_paged_mqa_logits_schedule", "flydsl_gemm_a16wfp4", "flydsl_pa_mqa_logits_fp4",
           "flydsl_pa_mqa_logits_fp4_prefill", "flydsl_pa_mqa_logits_fp4_varqlen", "fp8_mqa_logits",
           "is_flydsl_available", "prepare_gemm_a16wfp4_weight", "upstream_tile", "UpstreamAssertionError"]

log = logging.getLogger(__name__)

CTA_INFO_WIDTH = ROW_INFO_INTS
_DECODE_INFO_WIDTH = 4
_PREFILL_DEFAULT_UNITS = 512      # upstream's prefill default for parallel_unit_num
_TILE = 16                        # tokens of one MFMA tile: upstream's kernels split a chunk into these
_WAVE_TILES = 4                   # tiles per wave and chunk that upstream's kernels are written for


class UpstreamAssertionError(ValueError, AssertionError):
    """A call upstream refuses with an `assert` statement: both types, so a caller's `except
    AssertionError` (upstream's) and `except ValueError` (flyaot's convention) both catch it."""


def upstream_tile(block_k, num_warps, kv_block_size) -> None:
    """Upstream's kernel rules for (block_k, num_warps, kv_block_size), checked in its order (its kernel
    builder, then its tracer). Every tile that passes is one flyaot's kernels run too."""
    _check_int("block_k", block_k, lo=1)
    _check_int("num_warps", num_warps, lo=1)
    _check_int("kv_block_size", kv_block_size, lo=1)
    tiles = block_k // _TILE
    if tiles % num_warps:
        raise UpstreamAssertionError(f"block_k={block_k}: its {tiles} {_TILE}-token tiles do not split evenly over "
                                     f"num_warps={num_warps}")
    if kv_block_size % _TILE:
        raise UpstreamAssertionError(f"kv_block_size={kv_block_size} must be a multiple of {_TILE}")
    if block_k % kv_block_size:
        raise UpstreamAssertionError(f"block_k={block_k} must be a multiple of kv_block_size={kv_block_size}")
    per_wave = tiles // num_warps
    if per_wave > kv_block_size // _TILE:
        raise ValueError(f"block_k={block_k}, num_warps={num_warps}: a wave's {per_wave} tiles span more than one "
                         f"page of kv_block_size={kv_block_size} (upstream's kernels need block_k = "
                         f"{_WAVE_TILES * _TILE} * num_warps)")
    if per_wave != _WAVE_TILES:
        raise UpstreamAssertionError(f"block_k={block_k}, num_warps={num_warps}: upstream's kernels need block_k = "
                                     f"{_WAVE_TILES * _TILE} * num_warps ({_WAVE_TILES} tiles per wave)")


def _kernel_stream(stream, like):
    """`stream=` of the MQA ops as upstream's launcher takes it: None, a torch stream (checked by the op),
    an object with an int `cuda_stream`, or a raw handle (int >= 0; with CPU tensors, which the emulator
    runs in order, a handle is ignored). Anything else is upstream's ValueError."""
    if stream is None or isinstance(stream, (torch.cuda.Stream, torch.Stream)):
        return stream
    handle = getattr(stream, "cuda_stream", stream)
    if isinstance(handle, bool) or not isinstance(handle, int) or handle < 0:
        raise ValueError(f"stream: expected None, a torch stream, an object with an int cuda_stream or a raw stream "
                         f"handle (an int >= 0), got {type(stream).__name__} {stream!r:.60}")
    if not isinstance(like, torch.Tensor) or like.device.type != "cuda":
        log.debug("stream handle 0x%x ignored: CPU tensors run on the emulator, in order", handle)
        return None
    return torch.cuda.ExternalStream(handle, device=like.device)


def _internal_units(op: str, parallel_unit_num, rows):
    """An internal prefill schedule's parallel_unit_num by upstream's rule (an int >= rows, asserted);
    what the flyaot op takes (None: its own slot count, for no rows)."""
    _check_int("parallel_unit_num", parallel_unit_num)
    if rows is not None and parallel_unit_num < rows:
        raise UpstreamAssertionError(f"{op}: parallel_unit_num={parallel_unit_num} < rows={rows} would drop rows; "
                                     f"pass parallel_unit_num >= the number of rows")
    return parallel_unit_num if parallel_unit_num >= 1 else None


def _ignored(op: str, what: str, why: str):
    log.debug("%s: %s ignored: %s (as upstream)", op, what, why)


def is_flydsl_available(device=None) -> bool:
    """Whether these ops can run on `device` (default: torch's current GPU): a GPU of a target flyaot
    ships code objects for, or "cpu" (the emulator). Imports no FlyDSL and launches nothing."""
    from .. import targets
    if device is not None and torch.device(device).type == "cpu":
        return True
    if not torch.cuda.is_available() or not torch.version.hip:
        return False
    index = torch.cuda.current_device() if device is None else torch.device(device).index or 0
    arch = torch.cuda.get_device_properties(index).gcnArchName.split(":")[0]
    return arch in targets.TARGETS


# ------------------------------------------------------------------------------------- decode

def flydsl_pa_mqa_logits_fp4(q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights, context_lens, max_seq_len,
                             *, weight_scale=1.0, next_n=1, block_k=256, kv_block_size=64, num_warps=4,
                             parallel_unit_num=None, out=None, cta_info=None, total_ctas=None, stream=None):
    """Decode logits [B * next_n, max_seq_len] f32. With an external schedule (cta_info, total_ctas) and
    `out`, `out` is not filled with -inf here (the caller pre-fills it); otherwise it is."""
    upstream_tile(block_k, num_warps, kv_block_size)
    if parallel_unit_num is not None and cta_info is not None and total_ctas is not None:
        _ignored("flydsl_pa_mqa_logits_fp4", f"parallel_unit_num={parallel_unit_num!r}",
                 "the external schedule (cta_info, total_ctas) sets the grid")
        parallel_unit_num = None
    stream = _kernel_stream(stream, q_fp4)
    return _ops.pa_mqa_logits_fp4(q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights, context_lens,
                                  max_seq_len, weight_scale=weight_scale, next_n=next_n, block_k=block_k,
                                  kv_block_size=kv_block_size, num_warps=num_warps,
                                  parallel_unit_num=parallel_unit_num, out=out, cta_info=cta_info,
                                  total_ctas=total_ctas, stream=stream)


def compute_varctx_schedule(context_lens, block_k, parallel_unit_num, max_seq_len, next_n=1, cta_info_out=None):
    """(safe, cta_info int32 [P, 4], P) of the decode op's persistent grid, built by one kernel launch on
    the current stream, without a host sync. parallel_unit_num None: B * next_n * ceil(max_seq_len /
    block_k). `cta_info_out` (int32, at least P rows of 4) is refilled in place and returned whole
    (graph capture)."""
    # int32 only, as the ops take it: narrowing int64 would wrap a length of 2**32 + 70 to 70.
    _check_tensor("context_lens", context_lens, dtype=torch.int32, ndim=1)
    _check_int("block_k", block_k, lo=1)
    _check_int("max_seq_len", max_seq_len, lo=1)
    _check_int("next_n", next_n, lo=1)
    batch = context_lens.shape[0]
    units = _default_units(batch, next_n, max_seq_len, block_k) if parallel_unit_num is None else \
        _check_int("parallel_unit_num", parallel_unit_num, lo=1)
    target = _pooled_rows(cta_info_out, _DECODE_INFO_WIDTH, units, context_lens)
    info, safe, plan = _runs_schedule.varctx_plan(context_lens, block_k, units, max_seq_len, next_n, out=target)
    _runtime.launch(plan)
    return safe, (info if cta_info_out is None else cta_info_out), units


def _pooled_rows(cta_info_out, width: int, units: int, like):
    """The first `units` rows of a caller's pooled int32 [>= units, width] schedule buffer (None: the
    builder allocates)."""
    if cta_info_out is None:
        return None
    _check_tensor("cta_info_out", cta_info_out, dtype=torch.int32, shape=(None, width), device=like, contiguous=True)
    if cta_info_out.shape[0] < units:
        raise ValueError(f"cta_info_out: {cta_info_out.shape[0]} rows < parallel_unit_num={units}")
    return cta_info_out[:units]


# ------------------------------------------------------------------------------------- prefill

def compute_prefill_schedule(row_to_batch, local_starts, local_ends, block_k, parallel_unit_num, max_seq_len,
                             cta_info_out=None):
    """(safe, cta_info int32 [P, CTA_INFO_WIDTH], P) in upstream's one-row-per-CTA format (row, batch,
    chunk_start, chunk_count, local_start, local_end; block_k-token chunks), built by one kernel launch on
    the current stream, without a host sync. Needs parallel_unit_num >= rows. `cta_info_out` (int32, at
    least P rows of CTA_INFO_WIDTH) is refilled in place and returned whole (graph capture)."""
    rows = local_ends.shape[0] if isinstance(local_ends, torch.Tensor) else None
    for name, t in (("row_to_batch", row_to_batch), ("local_starts", local_starts), ("local_ends", local_ends)):
        _check_tensor(name, t, dtype=torch.int32, shape=(rows,), device=local_ends)
    if rows < 1:
        raise ValueError("compute_prefill_schedule: needs at least one row")
    _check_int("block_k", block_k, lo=1)
    _check_int("max_seq_len", max_seq_len, lo=0)
    units = _internal_units("compute_prefill_schedule", parallel_unit_num, rows)
    target = _pooled_rows(cta_info_out, CTA_INFO_WIDTH, units, local_ends)
    safe, info, plan = _runs_schedule.rows_plan(row_to_batch, local_starts, local_ends, block_k=block_k, slots=units,
                                                max_seq_len=max_seq_len, out=target)
    _runtime.launch(plan)
    return safe, (info if cta_info_out is None else cta_info_out), units


def flydsl_pa_mqa_logits_fp4_prefill(q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights, row_to_batch,
                                     local_starts, local_ends, max_seq_len, *, weight_scale=1.0, block_k=256,
                                     kv_block_size=64, num_warps=4, parallel_unit_num=512, out=None, cta_info=None,
                                     n_ctas=None, stream=None):
    """Ragged prefill logits [T, max_seq_len] f32: row r scores [local_starts[r], local_ends[r]) of batch
    row_to_batch[r]. `cta_info` may be upstream's 6-int table (compute_prefill_schedule or a caller's own
    builder of that format; its first n_ctas slots run) or flyaot's 8-int one."""
    op = "flydsl_pa_mqa_logits_fp4_prefill"
    if (cta_info is None) != (n_ctas is None):
        raise ValueError(f"{op}: pass both cta_info and n_ctas, or neither")
    if cta_info is None:
        rows = local_ends.shape[0] if isinstance(local_ends, torch.Tensor) and local_ends.dim() else None
        parallel_unit_num = _internal_units(op, parallel_unit_num, rows)
    else:
        if parallel_unit_num not in (None, _PREFILL_DEFAULT_UNITS):
            _ignored(op, f"parallel_unit_num={parallel_unit_num!r}", "the external schedule (cta_info, n_ctas) "
                     "sets the grid")
        parallel_unit_num = None
    upstream_tile(block_k, num_warps, kv_block_size)
    stream = _kernel_stream(stream, q_fp4)
    return _ops.pa_mqa_logits_fp4_prefill(q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights, row_to_batch,
                                          local_starts, local_ends, max_seq_len, weight_scale=weight_scale,
                                          block_k=block_k, kv_block_size=kv_block_size, num_warps=num_warps,
                                          parallel_unit_num=parallel_unit_num, out=out, cta_info=cta_info,
                                          n_ctas=n_ctas, stream=stream)


def compute_varqlen_windows(cu_seq_q, context_lens, total_q, *, out=None):
    """(row_to_batch, local_starts, local_ends) int32 for per-batch variable qlen; `out`: three int32
    buffers of at least total_q entries, refilled in place and returned whole."""
    if out is None:
        return _ops.compute_varqlen_windows(cu_seq_q, context_lens, total_q)
    _check_int("total_q", total_q, lo=0)
    if not isinstance(out, (tuple, list)) or len(out) != 3:
        got = f"{len(out)} items" if isinstance(out, (tuple, list)) else type(out).__name__
        raise ValueError(f"out: expected three int32 buffers (row_to_batch, local_starts, local_ends), got {got}")
    out = tuple(out)
    for name, t in zip(("row_to_batch", "local_starts", "local_ends"), out):
        _check_tensor(f"out ({name})", t, dtype=torch.int32, ndim=1)
        if t.shape[0] < total_q:
            raise ValueError(f"out ({name}): {t.shape[0]} entries < total_q={total_q}")
    _ops.compute_varqlen_windows(cu_seq_q, context_lens, total_q, out=tuple(t[:total_q] for t in out))
    return out


def flydsl_pa_mqa_logits_fp4_varqlen(q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights, max_seq_len, *,
                                     cu_seq_q=None, context_lens=None, windows=None, weight_scale=1.0,
                                     block_k=256, kv_block_size=64, num_warps=4, parallel_unit_num=None, out=None,
                                     cta_info=None, n_ctas=None, stream=None):
    """Per-batch variable qlen logits [total_q, max_seq_len] f32: pass `windows` (compute_varqlen_windows)
    or cu_seq_q + context_lens (with windows, they are ignored)."""
    op = "flydsl_pa_mqa_logits_fp4_varqlen"
    if windows is not None and (cu_seq_q is not None or context_lens is not None):
        _ignored(op, "cu_seq_q / context_lens", "windows= gives the rows")
        cu_seq_q = context_lens = None
    if cta_info is None and n_ctas is None and parallel_unit_num is not None:
        rows = q_fp4.shape[0] if isinstance(q_fp4, torch.Tensor) and q_fp4.dim() else None
        parallel_unit_num = _internal_units(op, parallel_unit_num, rows)
    elif cta_info is not None and n_ctas is not None:
        if parallel_unit_num is not None:
            _ignored(op, f"parallel_unit_num={parallel_unit_num!r}", "the external schedule (cta_info, n_ctas) "
                     "sets the grid")
        parallel_unit_num = None
    upstream_tile(block_k, num_warps, kv_block_size)
    stream = _kernel_stream(stream, q_fp4)
    return _ops.pa_mqa_logits_fp4_varqlen(q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights, max_seq_len,
                                          cu_seq_q=cu_seq_q, context_lens=context_lens, windows=windows,
                                          weight_scale=weight_scale, block_k=block_k, kv_block_size=kv_block_size,
                                          num_warps=num_warps, parallel_unit_num=parallel_unit_num, out=out,
                                          cta_info=cta_info, n_ctas=n_ctas, stream=stream)


# ------------------------------------------------------------------------------------- FP8 indexer

def deepgemm_fp8_paged_mqa_logits(q_fp8, kv_cache, weights, out_logits, context_lens, kv_indices, max_model_len,
                                  Preshuffle=False, KVBlockSize=1, ChunkK=256, TotalCuCount=None, WavePerEU=2,
                                  VarCtxSchedule=None):
    """Fills out_logits [B*next_n, max_model_len] f32 with the FP8 indexer logits (flyaot.ops.
    fp8_paged_mqa_logits); returns the name of the kernel that ran."""
    _ops.fp8_paged_mqa_logits(q_fp8, kv_cache, weights, context_lens, kv_indices, max_model_len,
                              kv_block_size=KVBlockSize, preshuffle=bool(Preshuffle), schedule=VarCtxSchedule,
                              out=out_logits)
    return _fp8_geometry.symbol(_fp8_geometry.params("paged", q_fp8.shape[2], KVBlockSize,
                                                     "preshuffle" if Preshuffle else "plain",
                                                     "tiles" if VarCtxSchedule is None else "varctx"))


def deepgemm_fp8_paged_mqa_logits_schedule(batch_size, next_n, context_lens, max_model_len, ChunkK=256,
                                           TotalCuCount=None, WavePerEU=2):
    """The VarCtxSchedule to pass to deepgemm_fp8_paged_mqa_logits (flyaot's int32 [slots * next_n, 4]
    table of 64-token chunk runs, one kernel launch; upstream returns a 1-int chunks-per-CTA tensor that
    only its own kernel reads). ChunkK and WavePerEU are hints; TotalCuCount None: the device's CU count."""
    _check_int("batch_size", batch_size, lo=0)
    _check_tensor("context_lens", context_lens, dtype=torch.int32, shape=(batch_size,))
    if TotalCuCount is None and context_lens.is_cuda:
        TotalCuCount = torch.cuda.get_device_properties(context_lens.device).multi_processor_count
    return _ops.fp8_paged_mqa_logits_schedule(context_lens, max_model_len, next_n, cu_count=TotalCuCount)


def fp8_mqa_logits(Q, KV, kv_scales, weights, cu_starts, cu_ends, clean_logits=True):
    """Ragged prefill logits [S, S_kv] f32 (flyaot.ops.fp8_mqa_logits)."""
    return _ops.fp8_mqa_logits(Q, KV, kv_scales, weights, cu_starts, cu_ends, clean_logits)


# ------------------------------------------------------------------------------------- A16WFP4 GEMM

class DenseGemmConfig(NamedTuple):
    """A tile: block_m x tile_n outputs per workgroup, tile_k K per wave per step, k_wave waves per step."""
    block_m: int
    tile_n: int
    tile_k: int
    k_wave: int
    waves_per_eu: Optional[int]


@dataclass(frozen=True)
class PreshuffledA16WFP4Weight:
    """A weight prepared once by prepare_gemm_a16wfp4_weight: preshuffled uint8 codes [N, K/2] and E8M0
    scales [N, K/32]. Rebuilding it from the four fields (as engines do per call) is free."""
    weight: torch.Tensor
    scale: torch.Tensor
    n: int
    k: int


def a16wfp4_shape_supported(n: int, k: int) -> bool:
    """Whether an [N, K] weight runs the fused kernels (N and K positive multiples of 256)."""
    return _gemm_plan.fused_supported(n, k)


def a16wfp4_config_legal(n: int, k: int, cfg: DenseGemmConfig) -> bool:
    """Whether `cfg` names a tile flyaot's kernels compute an [N, K] weight with."""
    return _configs.tile_legal(n, k, cfg.block_m, cfg.tile_n, cfg.tile_k, cfg.k_wave)


def prepare_gemm_a16wfp4_weight(weight, scale) -> PreshuffledA16WFP4Weight:
    """Preshuffle byte-packed E2M1 codes [N, K/2] and byte E8M0 scales [N, K/32] once. N or K not a
    multiple of 256: ValueError (callers fall back on it)."""
    for name, t in (("weight", weight), ("scale", scale)):
        _check_tensor(name, t, ndim=2)
        if t.element_size() != 1:
            raise TypeError(f"{name}: must hold one byte per element, got {t.dtype}")
    n, k = weight.shape[0], weight.shape[1] * 2
    if not a16wfp4_shape_supported(n, k):
        raise ValueError(f"weight: N={n} and K={k} must be positive multiples of 256")
    p = _ops.prepare_mxfp4_weight(weight.contiguous().view(torch.uint8), scale.contiguous().view(torch.uint8))
    return PreshuffledA16WFP4Weight(weight=p.weight, scale=p.scales, n=p.n, k=p.k)


def flydsl_gemm_a16wfp4(a, prepared_weight, *, out=None, stream=None, config=None):
    """a [M, K] bf16 @ W.T -> [M, N] bf16 (into `out` when given), on `stream` (default: torch's current
    stream). `config`: a DenseGemmConfig tile (ValueError when not legal for this weight)."""
    if not isinstance(prepared_weight, PreshuffledA16WFP4Weight):
        raise TypeError("prepared_weight must come from prepare_gemm_a16wfp4_weight()")
    if not isinstance(a, torch.Tensor) or a.ndim != 2:
        raise ValueError(f"a must be a 2-D tensor, got {getattr(a, 'shape', type(a).__name__)}")
    if a.shape[0] <= 0:
        raise ValueError(f"M must be positive, got {a.shape[0]}")
    w = prepared_weight
    native = _Prepared(w.weight, w.scale, w.n, w.k, fused=True)
    if config is None:
        return _ops.gemm_a16wfp4(a, native, out=out, fused_only=True, stream=stream)
    if not isinstance(config, DenseGemmConfig):
        raise TypeError(f"config must be a DenseGemmConfig, got {type(config).__name__}")
    if _is_compiling() or _dispatch_modes():
        raise TypeError("flydsl_gemm_a16wfp4: config= is eager only; under torch.compile the op picks the tile")
    params = _configs.from_tile(w.n, w.k, config.block_m, config.tile_n, config.tile_k, config.k_wave)
    stream = _launch_stream(stream, a)
    with _on_stream(stream):
        if out is None:
            _gemm_plan.check_x(a, w.k)
            out = torch.empty((a.shape[0], w.n), dtype=torch.bfloat16, device=a.device)
        _runtime.launch(_gemm_plan.plan(a, native, out, params=params), stream=stream)
    return out

