"""FP8 MQA logits host ops (the DeepSeek-V3.2 / GLM-5 indexer): paged decode, argument-compatible with
aiter's deepgemm_fp8_paged_mqa_logits through flyaot.compat.aiter."""
from typing import Optional

import torch

from .. import runtime
from ..kernel_defs.mqa_fp8 import plan as P
from ._torch_ops import on_stream, traced_op


def _fake_paged(q_fp8, max_model_len, **_):
    return torch.empty((q_fp8.shape[0] * q_fp8.shape[1], max_model_len), dtype=torch.float32, device=q_fp8.device)


@traced_op(fake=_fake_paged)
def fp8_paged_mqa_logits(q_fp8: torch.Tensor, kv_cache: torch.Tensor, weights: torch.Tensor,
                         context_lens: torch.Tensor, block_tables: torch.Tensor, max_model_len: int, *,
                         kv_block_size: int = 1, preshuffle: bool = False,
                         schedule: Optional[torch.Tensor] = None, out=None, stream=None):
    """Logits [B*next_n, max_model_len] f32 of the FP8 indexer decode step (docs/families/mqa_fp8.md).

    q_fp8 [B, next_n, H, 128] E4M3 (float8_e4m3fn or its uint8 bytes), next_n 1..4, H 32 or 64;
    kv_cache [num_blocks, kv_block_size, 1, 132] uint8 in aiter's page layout (kv_block_size * 128 E4M3
    values, token-major or preshuffled, then one f32 scale per token); weights [B*next_n, H] f32;
    context_lens [B] and block_tables [B, W] int32. out[b*next_n + i, t] = sum_h weights[.., h] *
    relu(q[b, i, h] . k_t * scale_t) for t <= context_lens[b] - next_n + i, -inf elsewhere and for visible
    tokens whose page is past the table or not a page of kv_cache. Every cell of `out` is written (no
    -inf pre-fill needed). `schedule` (fp8_paged_mqa_logits_schedule; preshuffled 64-token pages) runs
    the persistent varctx grid over the chunks it lists, after a -inf fill of `out`. Values of block_tables / context_lens are checked only in checked mode
    (FLYAOT_CHECK=1). Under torch.compile: torch.ops.flyaot.fp8_paged_mqa_logits(_out); `stream` must
    then be None.
    """
    with on_stream(stream):
        out, plan = P.paged_plan(q_fp8, kv_cache, weights, out, context_lens, block_tables, max_model_len,
                            page_size=kv_block_size, preshuffle=preshuffle, schedule=schedule,
                            check_values=runtime.runtime().config.check)
        if plan is not None:
            runtime.launch(plan, stream=stream)
    return out


def fp8_paged_mqa_logits_schedule(context_lens: torch.Tensor, max_model_len: int, next_n: int = 1, *,
                                  cu_count: Optional[int] = None, out: Optional[torch.Tensor] = None,
                                  stream=None) -> torch.Tensor:
    """The varctx schedule of fp8_paged_mqa_logits: int32 [slots * next_n, 4], built by one kernel launch
    on the current stream (no host sync; `out` of that shape is refilled in place for graph capture).
    slots = one per 64-token chunk of B rows of max_model_len tokens, at most 32 per CU of `cu_count`
    (default: MI355X's 256), at least one per sequence; each slot scores a run of chunks of one sequence."""
    batch = context_lens.shape[0] if isinstance(context_lens, torch.Tensor) and context_lens.dim() == 1 else 0
    with on_stream(stream):
        table, plan = P.schedule_plan(context_lens, max_model_len, next_n, P.default_slots(batch, max_model_len, cu_count),
                                      out=out)
        runtime.launch(plan, stream=stream)
    return table


def _fake_ragged(Q, KV, **_):
    return torch.empty((Q.shape[0], KV.shape[0]), dtype=torch.float32, device=Q.device)


@traced_op(fake=_fake_ragged)
def fp8_mqa_logits(Q: torch.Tensor, KV: torch.Tensor, kv_scales: torch.Tensor, weights: torch.Tensor,
                   cu_starts: torch.Tensor, cu_ends: torch.Tensor, clean_logits: bool = True, *, out=None,
                   stream=None):
    """Ragged prefill logits [S, S_kv] f32 (DeepGEMM's fp8_mqa_logits contract): row i scores keys
    t in [cu_starts[i], cu_ends[i]) as sum_h weights[i, h] * relu(Q[i, h] . KV[t] * kv_scales[t]).

    Q [S, H, 128] E4M3 (H 32 or 64), KV [S_kv, 128] E4M3, kv_scales [S_kv] f32, weights [S, H] f32,
    cu_starts / cu_ends [S] int32. clean_logits: cells outside the window are -inf; without it they
    are not written (a new output's are uninitialized). Windows past S_kv are clipped. Under
    torch.compile: torch.ops.flyaot.fp8_mqa_logits(_out).
    """
    with on_stream(stream):
        out, plan = P.ragged_plan(Q, KV, kv_scales, weights, cu_starts, cu_ends, clean_logits=clean_logits,
                                  out=out)
        if plan is not None:
            runtime.launch(plan, stream=stream)
    return out


# ------------------------------------------------------------------------------- CLI selftest

def selftest(device):
    """The paged op on preshuffled 64-token pages (tiles and varctx grids) and on 1-token pages, and the
    ragged op, on small problems against the torch references: every -inf where the reference has one,
    max |err| <= 1e-5 max |ref| elsewhere."""
    from ..kernel_defs.mqa_fp8 import reference as R
    from ..kernel_defs.mqa_runs_schedule.reference import varctx_reference
    from .hooks import check, describe
    torch.device(device)

    def compare(out, ref):
        live = ref != float("-inf")
        err = (out.cpu()[live] - ref[live]).abs().max().item() if live.any() else 0.0
        m = {"inf_placement": bool(torch.equal(out.cpu() == float("-inf"), ~live)),
             "max_rel_err": err / max(ref[live].abs().max().item(), 1e-30) if live.any() else 0.0}
        return m["inf_placement"] and m["max_rel_err"] <= 1e-5, describe(m)

    def paged(page, preshuffle, varctx):
        g = torch.Generator().manual_seed(page)
        ctx, next_n, msl = [100, 0, 37], 2, 128
        n = sum(-(-c // page) for c in ctx) + 1
        cache = R.write_paged_cache(torch.randn(n, page, 1, 128, generator=g))
        cache = R.preshuffle_cache(cache) if preshuffle else cache
        bt = torch.randint(0, n, (3, -(-msl // page)), generator=g, dtype=torch.int32)
        q = torch.randn(3, next_n, 64, 128, generator=g).to(R.FP8)
        w = torch.randn(3 * next_n, 64, generator=g)
        cl = torch.tensor(ctx, dtype=torch.int32)
        dev = [t.to(device) for t in (q, cache, w, cl, bt)]
        # the table from its torch reference: the case then needs one code object, which a selftest with
        # misses recorded names (a schedule launch failing first would hide it)
        sched = (varctx_reference(dev[3], 64, 8 * next_n, msl, next_n)[0] if varctx else None)
        out = fp8_paged_mqa_logits(*dev, msl, kv_block_size=page, preshuffle=preshuffle, schedule=sched)
        return compare(out, R.paged_logits_reference(q, R.dequant_pages(cache, preshuffle), w, cl, bt, msl))

    def ragged():
        g = torch.Generator().manual_seed(5)
        q = torch.randn(11, 32, 128, generator=g).to(R.FP8)
        kv = torch.randn(90, 128, generator=g).to(R.FP8)
        sc, w = torch.rand(90, generator=g), torch.randn(11, 32, generator=g)
        ends = torch.arange(80, 91, dtype=torch.int32)
        starts = (ends - 50).clamp_min(0)
        out = fp8_mqa_logits(*[t.to(device) for t in (q, kv, sc, w, starts, ends)])
        return compare(out, R.ragged_logits_reference(q, kv.double() * sc.double()[:, None], w, starts, ends))

    yield check("paged H64 p64 preshuffled next_n=2 ctx=[100,0,37]", lambda: paged(64, True, False))
    yield check("paged H64 p64 preshuffled varctx schedule", lambda: paged(64, True, True))
    yield check("paged H64 p1 next_n=2", lambda: paged(1, False, False))
    yield check("ragged H32 S=11 S_kv=90 sliding windows", ragged)


# (batch, next_n, context): rows of the FP4 decode benchmark, H64 D128, preshuffled 64-token pages
_BENCH_GPU = ((2, 1, 512), (16, 1, 4352), (1, 1, 65536), (32, 4, 32768))
_BENCH_EMU = ((2, 1, 512),)


def bench(device):
    """Median us per fp8_paged_mqa_logits call (tiles grid, preshuffled 64-token pages, H64, every
    context at its row's length) on rows of the FP4 decode benchmark."""
    from .hooks import timed
    emu = torch.device(device).type == "cpu"
    for batch, next_n, ctx in _BENCH_EMU if emu else _BENCH_GPU:
        pages = batch * -(-ctx // 64)
        cache = torch.randint(0, 0x70, (pages, 64, 1, 132), dtype=torch.uint8)
        cache.view(pages, -1)[:, 64 * 128:] = torch.ones(pages, 64).view(torch.uint8)
        bt = torch.arange(pages, dtype=torch.int32).reshape(batch, -1)
        q = torch.randint(0, 0x70, (batch, next_n, 64, 128), dtype=torch.uint8)
        w = torch.randn(batch * next_n, 64)
        cl = torch.full((batch,), ctx, dtype=torch.int32)
        dev = [t.to(device) for t in (q, cache, w, cl, bt)]
        out = torch.empty(batch * next_n, ctx, device=device)
        yield timed(f"{batch}x{next_n}x{ctx} H64", lambda: fp8_paged_mqa_logits(*dev, ctx, kv_block_size=64,
                                                                                preshuffle=True, out=out), device)
