"""Modeled MI355X time of a flyaot op at a shape, from the emulator's timing model (`flyaot model`: cli.py
parses its arguments and prints the result).

The op runs on the emulator with random inputs of that shape (contexts of decode rows are MAX_CTX,
prefill rows use the tail-causal windows of the varqlen rule; fp8 decode uses 64-token pages, plain on
the tiles grid as SGLang passes them, preshuffled with the varctx schedule as vLLM does; fp8-prefill is
the ragged op with causal windows, clean_logits) and only a sample of its workgroups
emulated; the kernel time comes from a cycle-approximate model of gfx950, calibrated against published
MI355X kernel times (docs/timing-model.md). It is a model, not a measurement: the printed validation
error is how far the model was from measured upstream kernels it was not fitted on.
"""
import torch

PAGE, HEAD_DIM = 64, 128


def _gemm(n, k, m):
    from ..kernel_defs.gemm_a16wfp4 import reference
    from . import gemm_a16wfp4, prepare_mxfp4_weight
    g = torch.Generator().manual_seed(0)
    w, s = reference.random_weight(n, k, generator=g)
    prep = prepare_mxfp4_weight(w, s)
    x = torch.randn(m, k, generator=g).to(torch.bfloat16)
    out = torch.empty(m, n, dtype=torch.bfloat16)
    return lambda: gemm_a16wfp4(x, prep, out=out), 0


def _decode(b, next_n, ctx, heads=64):
    from ..kernel_defs.mqa_common import layouts
    from . import pa_mqa_logits_fp4
    g = torch.Generator().manual_seed(0)
    kv = layouts.make_paged_kv([ctx] * b, HEAD_DIM, PAGE, g)
    q, qs = layouts.make_q((b, next_n), heads, HEAD_DIM, g)
    w = torch.randn(b * next_n, heads, generator=g).to(torch.bfloat16)
    cl = torch.full((b,), ctx, dtype=torch.int32)
    args = (q, qs, kv.kv_cache, kv.kv_scale, kv.block_tables, w, cl)
    watch = FillWatch(torch.empty((b * next_n, ctx)))
    # priced only when the op fills `out` itself (the staged path); the direct kernel writes the -inf cells
    return (lambda: pa_mqa_logits_fp4(*args, ctx, next_n=next_n, out=watch.out),
            lambda: b * next_n * ctx * 4 if watch.filled else 0)


class FillWatch:
    """Whether an op call fills `out` with `fill_` (the ops' -inf pre-fill): the output cannot tell,
    since a grid traced whole writes every cell either way. `watch.out` is `out` as a subclass that
    records its fill_ calls; pass it to the op."""

    def __init__(self, out: torch.Tensor):
        self.filled = False
        watch = self

        class _Watched(torch.Tensor):
            def fill_(self, value):
                watch.filled = True
                return super().fill_(value)

        self.out = out.as_subclass(_Watched)


def _prefill(b, q, kv, heads=64):
    from ..kernel_defs.mqa_common import layouts
    from . import compute_prefill_schedule, compute_varqlen_windows, pa_mqa_logits_fp4_prefill
    g = torch.Generator().manual_seed(0)
    rows = b * q
    paged = layouts.make_paged_kv([kv] * b, HEAD_DIM, PAGE, g)
    qf, qs = layouts.make_q((rows,), heads, HEAD_DIM, g)
    w = torch.randn(rows, heads, generator=g).to(torch.bfloat16)
    cu = torch.arange(b + 1, dtype=torch.int32) * q
    windows = compute_varqlen_windows(cu, torch.full((b,), kv, dtype=torch.int32), rows)
    info, slots = compute_prefill_schedule(*windows, page_size=PAGE, max_seq_len=kv)
    out = torch.empty(rows, kv)
    tensors = (qf, qs, paged.kv_cache, paged.kv_scale, paged.block_tables, w)
    # the kernel writes every output cell (-inf included): no fill
    return (lambda: pa_mqa_logits_fp4_prefill(*tensors, *windows, kv, out=out, cta_info=info, n_ctas=slots), 0)


def _fp8_bytes(*shape):
    """Random finite E4M3 bytes (timing only: values do not matter, NaN codes avoided)."""
    return torch.randint(0, 0x70, shape, dtype=torch.uint8, generator=torch.Generator().manual_seed(0))


def _fp8_paged(b, next_n, ctx, heads):
    pages = b * -(-ctx // PAGE)
    cache = _fp8_bytes(pages, PAGE, 1, HEAD_DIM + 4)
    cache.view(pages, -1)[:, PAGE * HEAD_DIM:] = torch.ones(pages, PAGE).view(torch.uint8)
    bt = torch.arange(pages, dtype=torch.int32).reshape(b, -1)
    w = torch.randn(b * next_n, heads, generator=torch.Generator().manual_seed(1))
    return (_fp8_bytes(b, next_n, heads, HEAD_DIM), cache, w, torch.full((b,), ctx, dtype=torch.int32), bt,
            torch.empty(b * next_n, ctx))


def _fp8(b, next_n, ctx, heads=64):
    """SGLang's call: plain pages, the tiles grid (every cell written by the kernel, no fill)."""
    from . import fp8_paged_mqa_logits
    q, cache, w, cl, bt, out = _fp8_paged(b, next_n, ctx, heads)
    return lambda: fp8_paged_mqa_logits(q, cache, w, cl, bt, ctx, kv_block_size=PAGE, out=out), 0


def _fp8_varctx(b, next_n, ctx, heads=64):
    """vLLM's step: the schedule kernel, the -inf fill, the varctx kernel on preshuffled pages."""
    from . import fp8_paged_mqa_logits, fp8_paged_mqa_logits_schedule
    q, cache, w, cl, bt, out = _fp8_paged(b, next_n, ctx, heads)
    sched = fp8_paged_mqa_logits_schedule(cl, ctx, next_n)

    def call():
        fp8_paged_mqa_logits_schedule(cl, ctx, next_n, out=sched)
        fp8_paged_mqa_logits(q, cache, w, cl, bt, ctx, kv_block_size=PAGE, preshuffle=True, schedule=sched, out=out)
    return call, out.numel() * 4


def _fp8_prefill(s, s_kv, heads=64):
    from . import fp8_mqa_logits
    q, kv = _fp8_bytes(s, heads, HEAD_DIM), _fp8_bytes(s_kv, HEAD_DIM)
    w = torch.randn(s, heads, generator=torch.Generator().manual_seed(1))
    ends = torch.arange(s_kv - s + 1, s_kv + 1, dtype=torch.int32)
    starts = torch.zeros(s, dtype=torch.int32)
    out = torch.empty(s, s_kv)
    return lambda: fp8_mqa_logits(q, kv, torch.ones(s_kv), w, starts, ends, out=out), 0


OPS = {"gemm": _gemm, "decode": _decode, "prefill": _prefill, "fp8": _fp8, "fp8-varctx": _fp8_varctx,
       "fp8-prefill": _fp8_prefill}


def modeled_us(family: str, *shape, samples: int = 8) -> dict:
    """modeled_call's result for the op `flyaot model FAMILY SHAPE` models, with the model's
    'validation_error' for that family."""
    if family not in OPS:
        raise ValueError(f"family {family!r}: expected one of {', '.join(sorted(OPS))}")
    call, fill_bytes = OPS[family](*shape)
    return {**modeled_call(call, fill_bytes, samples), "validation_error": _timing().VALIDATION.get(family)}


def modeled_call(call, fill_bytes: int = 0, samples: int = 8) -> dict:
    """{'us', 'kernels': [(name, us, sampling error)], 'fill_us', 'launch_us', 'device_us'} of one op
    call `call()` on the shipped model parameters; 'us' is the sum of the kernels, the `-inf` fill of
    `fill_bytes` (an int, or a function called after the call) at the modeled HBM bandwidth and the
    launch term, 'device_us' the same without the launch term. CPU tensors run on the emulator; the caller's runtime and environment are left as
    they are."""
    from ..emu import timing
    from ..runtime.drivers import emu
    params = timing.Params()
    with emu.recording(params=params, samples=samples, functional=False) as rec:
        call()
    kernels = [(name, t.kernel_us, t.sampling_error) for name, t, _ in rec.launches]
    fill_bytes = fill_bytes() if callable(fill_bytes) else fill_bytes
    fill = fill_bytes / (_timing().HBM_BYTES_PER_S * min(1.0, params.bandwidth_efficiency)) * 1e6
    device = sum(k[1] for k in kernels) + fill
    return {"us": device + params.launch_us, "kernels": kernels, "fill_us": fill, "launch_us": params.launch_us,
            "device_us": device}


def _timing():
    """The emulated ISA's timing tables (imported on first use: `import flyaot.ops` stays light)."""
    from ..emu import isa
    return isa.load(isa.ARCH).timing


def floor(family: str, *shape):
    """The physical floor (flyaot.ops.floors.Floor) of the call `flyaot model FAMILY SHAPE` models:
    decode rows all at MAX_CTX, prefill with the varqlen tail-causal windows."""
    from . import floors
    if family == "decode":
        b, next_n, ctx, *heads = shape
        return floors.mqa_decode([ctx] * b, next_n, *heads, max_seq_len=ctx)
    if family in ("fp8", "fp8-varctx"):
        b, next_n, ctx, *heads = shape
        return floors.mqa_fp8_decode([ctx] * b, next_n, *heads, max_seq_len=ctx, page=PAGE)
    if family == "fp8-prefill":
        return floors.mqa_fp8_prefill(*shape)
    if family == "prefill":
        return floors.mqa_prefill(*shape)
    if family == "gemm":
        return floors.gemm_a16wfp4(*shape)
    raise ValueError(f"family {family!r}: expected one of {', '.join(sorted(OPS))}")
