"""Dense BF16 x MXFP4 GEMM host ops: `prepare_mxfp4_weight` once at model load, `gemm_a16wfp4` per call.

Fused path (N % 256 == 0 and K % 256 == 0): the prebuilt kernels read the preshuffled packed weight
and scales directly; nothing but the output is ever allocated, and nothing at all when `out` is given.
Other shapes (e.g. 7168 x 4224): `prepare_mxfp4_weight` raises ValueError, as upstream's prepare does,
unless the caller opts in with `allow_fallback=True`: then a BF16 copy of the weight is decoded once per
weight on first use (logged once) and served by torch's linear (`fused_only=True` on the call refuses
that weight again).
"""
import logging

import torch

from .. import runtime
from ..kernel_defs.gemm_a16wfp4 import layout, plan as gemm_plan
from ..kernel_defs.gemm_a16wfp4.layout import PreparedMXFP4Weight
from ..kernel_defs.gemm_a16wfp4.reference import decode_weight
from ..kernel_defs.tensor_checks import E8M0, FP4X2, check_same_device, check_tensor
from ._hints import GEMM, add_hint
from ._torch_ops import dispatch_modes as _dispatch_modes, is_compiling as _is_compiling, launch_stream, on_stream, traced_op

log = logging.getLogger(__name__)


def _as_uint8(t):
    return t if t.dtype == torch.uint8 else t.view(torch.uint8)


def prepare_mxfp4_weight(w_packed, scales, *, allow_fallback: bool = False) -> PreparedMXFP4Weight:
    """w_packed [N, K/2] (uint8 or float4_e2m1fn_x2), scales [N, K/32] (uint8 or float8_e8m0fnu),
    natural layout (element 2i in the low nibble, one E8M0 per 32 consecutive K). Run once per weight.
    N or K not a multiple of 256: ValueError, or with allow_fallback=True a weight served by the BF16
    fallback. flyaot.inputs.quantize_mxfp4(W) makes both from W [N, K] (docs/families/gemm_a16wfp4.md#formats)."""
    dims = {}
    try:
        check_tensor("w_packed", w_packed, dtype=FP4X2, shape=("N", "K2"), dims=dims)
        n, k = dims["N"], dims["K2"] * 2
        check_tensor("scales", scales, dtype=E8M0, ndim=2)
        if k % 32 or tuple(scales.shape) != (n, k // 32):
            raise ValueError(f"scales: shape {tuple(scales.shape)} does not match w_packed {tuple(w_packed.shape)} "
                             f"(expected [{n}, {k // 32}] with K % 32 == 0)")
    except (TypeError, ValueError) as e:
        add_hint(e, GEMM)
        raise
    check_same_device(w_packed=w_packed, scales=scales)
    w, s = _as_uint8(w_packed), _as_uint8(scales)
    if not gemm_plan.fused_supported(n, k):
        if not allow_fallback:
            raise ValueError(f"w_packed: N={n}, K={k}: the fused kernels need N and K to be multiples of "
                             f"{gemm_plan.FUSED_ALIGN} (allow_fallback=True serves it from a BF16 copy)")
        return PreparedMXFP4Weight(w, s, n, k, fused=False)
    return PreparedMXFP4Weight(layout.shuffle_weight(w), layout.shuffle_scales(s), n, k, fused=True)


def _fallback_weight(weight: PreparedMXFP4Weight) -> torch.Tensor:
    if weight.bf16_cache is None:
        log.warning("gemm_a16wfp4: N=%d, K=%d is not a multiple of %d; using a cached BF16 copy of this "
                    "weight (%d bytes) with torch linear", weight.n, weight.k, gemm_plan.FUSED_ALIGN,
                    weight.n * weight.k * 2)
        weight.bf16_cache = decode_weight(weight.weight, weight.scales)
    return weight.bf16_cache


# ------------------------------------------------------------------------------- torch.library op
# A fused PreparedMXFP4Weight travels as its tensors and sizes: preshuffled uint8 weight [N, K/2] and
# scales [N, K/32].

def _prepared(weight: torch.Tensor, scales: torch.Tensor, n: int, k: int) -> PreparedMXFP4Weight:
    """The fused weight the op's tensors describe, checked (a direct op call bypasses prepare_mxfp4_weight)."""
    if not gemm_plan.fused_supported(n, k):
        raise ValueError(f"n={n}, k={k}: the fused kernels need positive multiples of {gemm_plan.FUSED_ALIGN}")
    check_tensor("weight", weight, dtype=torch.uint8, shape=(n, k // 2), contiguous=True)
    check_tensor("scales", scales, dtype=torch.uint8, shape=(n, k // 32), contiguous=True)
    check_same_device(weight=weight, scales=scales)
    return PreparedMXFP4Weight(weight, scales, n, k, fused=True)


def _weight_tensors(weight: PreparedMXFP4Weight) -> tuple:
    return weight.weight, weight.scales, weight.n, weight.k


def _fused(weight, **_) -> bool:
    """A traced call becomes the op for a fused weight (checked here, at trace time); the fallback and a
    wrong argument run the public function under the trace (torch ops, or its error)."""
    if not isinstance(weight, PreparedMXFP4Weight):
        return False
    gemm_plan.check_weight(weight)
    return weight.fused


def _fake(x, n, **_):
    return torch.empty((x.shape[0], n), dtype=torch.bfloat16, device=x.device)


@traced_op(fake=_fake, expand={"weight": (_weight_tensors, _prepared)}, local=("fused_only",), route=_fused)
def gemm_a16wfp4(x: torch.Tensor, weight: PreparedMXFP4Weight, out=None, *, fused_only: bool = False, stream=None):
    """out[M, N] (bf16) = x[M, K] (bf16, row stride allowed) @ W^T, W the MXFP4 weight decoded to bf16,
    accumulated in fp32. Returns `out` (allocated when None). `out` must not overlap x, the weight's
    tensors nor itself (row stride >= N); a hand-built PreparedMXFP4Weight must hold tensors of the
    shapes its n and k promise (both checked on every call, from metadata only). M=0 returns [0, N].
    `stream`: the stream to launch on, a torch stream on x's device (default: torch's current stream).
    Layouts: docs/families/gemm_a16wfp4.md#formats (`prepare_mxfp4_weight` makes the fused one).

    Under torch.compile (or a dispatch mode) a fused weight runs torch.ops.flyaot.gemm_a16wfp4 (or
    gemm_a16wfp4_out with `out`) on the prepared tensors; the fallback is traced as torch ops."""
    if not isinstance(weight, PreparedMXFP4Weight):
        raise TypeError(f"weight: expected the result of prepare_mxfp4_weight, got {type(weight).__name__}")
    gemm_plan.check_weight(weight)
    stream = launch_stream(stream, x)
    if not weight.fused:
        if fused_only:
            raise ValueError(f"weight: N={weight.n}, K={weight.k} has no fused kernel (needs multiples of "
                             f"{gemm_plan.FUSED_ALIGN}) and fused_only=True")
        if _is_compiling() or _dispatch_modes():
            return _traced_fallback(x, weight, out)
        gemm_plan.check_x(x, weight.k)
        if out is not None:
            gemm_plan.check_out(out, x.shape[0], weight.n, x, weight)
        with on_stream(stream):
            w = _fallback_weight(weight)
            return torch.nn.functional.linear(x, w) if out is None else torch.mm(x, w.t(), out=out)
    m = gemm_plan.check_x(x, weight.k)
    if out is None:
        with on_stream(stream):
            out = torch.empty((m, weight.n), dtype=torch.bfloat16, device=x.device)
    elif m == 0:
        gemm_plan.check_out(out, m, weight.n, x, weight)      # (the plan checks it otherwise)
    if m == 0:
        return out
    runtime.launch(gemm_plan.plan(x, weight, out), stream=stream)
    return out


def _traced_fallback(x, weight: PreparedMXFP4Weight, out):
    """The non-fused path as traceable torch ops. Under torch.compile the BF16 copy decoded on first use
    is stored like in eager (dynamo replays the attribute write after the graph, and its guard on
    `bf16_cache` then retraces once with the copy); under a bare dispatch mode it may be a fake tensor,
    so it is not kept. Not logged here: logging would break the graph."""
    w = weight.bf16_cache
    if w is None:
        w = decode_weight(weight.weight, weight.scales)
        if _is_compiling():
            weight.bf16_cache = w
    if out is None:
        return torch.nn.functional.linear(x, w)
    return torch.mm(x, w.t(), out=out)


# ------------------------------------------------------------------------------- CLI selftest and bench

def selftest(device):
    """Decode (split-K) and prefill configs through `gemm_a16wfp4` on small shapes, against the torch
    reference with arbitrary bf16 activations: relative L2 error <= 1e-4 and >= 99.9% bit-exact outputs.
    N and K are kernel arguments, so small N, K run the same code objects as the production shapes."""
    from ..kernel_defs.gemm_a16wfp4 import configs, geometry
    from ..kernel_defs.gemm_a16wfp4.reference import gemm_reference, random_weight
    from .hooks import check
    torch.device(device)          # a bad device string fails the hook, not each case

    def case(m, n, k, seed):
        g = torch.Generator().manual_seed(seed)
        w, s = random_weight(n, k, generator=g)
        x = torch.randn(m, k, generator=g).to(torch.bfloat16)
        y = gemm_a16wfp4(x.to(device), prepare_mxfp4_weight(w.to(device), s.to(device))).cpu()
        ref = gemm_reference(x, w, s)
        rel = ((y.float() - ref.float()).norm() / ref.float().norm()).item()
        exact = (y.view(torch.int16) == ref.view(torch.int16)).float().mean().item()
        return rel <= 1e-4 and exact >= 0.999, f"rel L2 {rel:.3g}, bit-exact {100 * exact:.2f}%"

    for m, n, k in ((7, 256, 512), (40, 256, 256)):
        name = f"{geometry.symbol(configs.choose(n, k, m))} M{m} N{n} K{k}"
        yield check(name, lambda: case(m, n, k, m + n + k))


# (M, N, K): the published benchmark shapes (docs/families/gemm_a16wfp4.md#performance) at M in {1, 512, 4096}.
_BENCH_GPU = ((1, 8448, 7168), (512, 8448, 7168), (4096, 8448, 7168), (1, 1536, 7168), (1, 7168, 768),
              (4096, 1024, 3584), (1, 3584, 512))
_BENCH_EMU = ((1, 256, 512), (64, 256, 256))


def bench(device):
    """Median us per `gemm_a16wfp4` call with a preallocated output; on a GPU also torch's bf16 linear
    on the same device (in `detail`) as the baseline."""
    from ..kernel_defs.gemm_a16wfp4 import configs, geometry
    from ..kernel_defs.gemm_a16wfp4.reference import random_weight
    from .hooks import timed
    emu = torch.device(device).type == "cpu"
    for m, n, k in _BENCH_EMU if emu else _BENCH_GPU:
        g = torch.Generator().manual_seed(m + n + k)
        w, s = random_weight(n, k, generator=g)
        weight = prepare_mxfp4_weight(w.to(device), s.to(device))
        x = torch.randn(m, k, generator=g).to(torch.bfloat16).to(device)
        out = torch.empty(m, n, dtype=torch.bfloat16, device=device)
        detail = geometry.symbol(configs.choose(n, k, m))
        if not emu:
            dense = torch.randn(n, k, generator=g).to(torch.bfloat16).to(device)
            _, base, _ = timed("", lambda: torch.nn.functional.linear(x, dense), device)
            detail += f"; torch bf16 linear {base:.2f} us" if base is not False else ""
        yield timed(f"M{m} N{n} K{k}", lambda: gemm_a16wfp4(x, weight, out=out), device, detail)
