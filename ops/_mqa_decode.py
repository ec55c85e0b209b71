"""FP4 paged MQA logits decode host op, argument-compatible with aiter's `flydsl_pa_mqa_logits_fp4`."""
from typing import Optional

import torch

from .. import runtime
from ..kernel_defs.mqa_decode import plan as P
from ..kernel_defs.mqa_runs_schedule.plan import varctx_plan
from ._hints import MQA, add_hint
from ._torch_ops import launch_stream, on_stream, traced_op


def _fake(q_fp4, max_seq_len, next_n, **_):
    return torch.empty((q_fp4.shape[0] * next_n, max_seq_len), dtype=torch.float32, device=q_fp4.device)


@traced_op(fake=_fake)
def pa_mqa_logits_fp4(q_fp4: torch.Tensor, q_scale: torch.Tensor, kv_cache: torch.Tensor, kv_scale: torch.Tensor,
                      block_tables: torch.Tensor, weights: torch.Tensor, context_lens: torch.Tensor, max_seq_len: int,
                      *, weight_scale: float = 1.0, next_n: int = 1, block_k: Optional[int] = None,
                      kv_block_size: int = 64, num_warps: Optional[int] = None,
                      parallel_unit_num: Optional[int] = None, out=None, cta_info: Optional[torch.Tensor] = None,
                      total_ctas: Optional[int] = None, stream=None):
    """Logits [B*next_n, max_seq_len] f32 of the DeepSeek sparse-attention indexer decode step.

    out[b*next_n + n, t] = weight_scale * sum_h weights[b*next_n + n, h] * relu(q[b, n, h] . k[b, t]) for
    t <= context_lens[b] - next_n + n, and -inf elsewhere. The direct kernel (the default for D128 with
    H64/H128, see plan.takes_direct_path) writes every cell, the -inf ones too, so nothing is filled. The
    staged kernel writes only visible cells, so: out=None -> allocated and filled with -inf; `out` given
    with the internal schedule -> filled with -inf here; `out` given with an external schedule
    (`cta_info`, `total_ctas`) -> the caller pre-fills -inf (graph replay keeps the fill outside).

    Contexts longer than max_seq_len: the output row ends at max_seq_len, so row n sees the tokens
    t < min(context_lens[b] - next_n + 1 + n, max_seq_len) (the causal rule uses the true context length;
    only the visible region is clipped). No kernel stores at a column >= max_seq_len, the -inf cells cover
    exactly the [B*next_n, max_seq_len] view, block_tables needs entries only for the pages of the first
    min(context_lens[b], max_seq_len) tokens, and the internal schedule counts chunks over those tokens.
    An external cta_info keeps the true context length in its ctx field; chunks it lists past
    max_seq_len are skipped.

    Knobs (which kernel runs): block_k=None/256, num_warps=None/4 and parallel_unit_num=None are hints,
    the values upstream passes by default, and leave the choice to the op: D128 with H64/H128 and
    next_n <= 8 runs the direct kernel (2-D grid, tile chosen from B and max_seq_len), everything else
    the staged-LDS kernel with its 256 x 4 tile. Binding: an external schedule (cta_info, total_ctas; its
    chunks are block_k tokens), an explicit parallel_unit_num (the persistent grid), any other block_k or
    num_warps, next_n 9..16; these run the staged kernel with that tile (a tile that is not prebuilt is
    JIT-compiled once; with FLYAOT_DISABLE_JIT=1 that is a MissingSpecError). A num_warps the staged
    kernel cannot split block_k by runs with the largest wave count below it that it can.

    Inputs: context_lens, block_tables and cta_info are int32 (int64 is refused: the kernels read 32-bit
    values, and a conversion would wrap a length of 2**32 + 70 to 70). `out` must not overlap any input
    nor itself (row stride >= max_seq_len). B=0 returns the empty [0, max_seq_len] result without a
    launch. The values of block_tables, context_lens and cta_info are validated only in checked mode
    (FLYAOT_CHECK=1, one host sync per call, not under graph capture; see kernel_defs/value_checks.py).

    Layouts: docs/families/mqa_decode.md#formats; flyaot.inputs builds them from natural tensors
    (quantize_q, paged_kv, lengths).

    Under torch.compile (or a dispatch mode) the call is torch.ops.flyaot.pa_mqa_logits_fp4, or
    pa_mqa_logits_fp4_out with `out`; `stream` must then be None. Eager, `stream` is None (torch's
    current stream) or a torch stream on the inputs' device.
    """
    stream = launch_stream(stream, q_fp4)
    with on_stream(stream):
        try:
            out, plans = P.plan_call(q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights, context_lens,
                                    max_seq_len, weight_scale=weight_scale, next_n=next_n, block_k=block_k,
                                    kv_block_size=kv_block_size, num_warps=num_warps,
                                    parallel_unit_num=parallel_unit_num, out=out, cta_info=cta_info,
                                    total_ctas=total_ctas, check_values=runtime.runtime().config.check)
        except (TypeError, ValueError) as e:
            add_hint(e, MQA)
            raise
        runtime.launch_all(plans, stream=stream)      # the internal schedule (if any), then the kernel
    return out


# ------------------------------------------------------------------------------- CLI selftest and bench

def _hook_problem(seed, ctx, next_n, heads, device, *, head_dim=128, page=64):
    """Quantized inputs of the reference's test-data makers, moved to `device` (reference stays on CPU)."""
    from ..kernel_defs.mqa_common import layouts
    g = torch.Generator().manual_seed(seed)
    kv = layouts.make_paged_kv(ctx, head_dim, page, g)
    q, qs = layouts.make_q((len(ctx), next_n), heads, head_dim, g)
    w = (torch.randn(len(ctx) * next_n, heads, generator=g) * 0.5).to(torch.bfloat16)
    cl = torch.tensor(ctx, dtype=torch.int32)
    cpu = (q, qs, kv.kv_cache, kv.kv_scale, kv.block_tables, w, cl)
    return cpu, tuple(t.to(device) for t in cpu)


def selftest(device):
    """Both paths through `pa_mqa_logits_fp4` on small problems, against the torch reference: cosine >=
    0.99999 and max |err| <= 1e-3 max|ref| on visible cells, every invisible cell exactly -inf."""
    from ..kernel_defs.mqa_common.reference import compare, passes
    from ..kernel_defs.mqa_decode.reference import pa_mqa_logits_reference, visible_mask
    from .hooks import check, describe
    torch.device(device)          # a bad device string fails the hook, not each case

    def case(seed, ctx, next_n, heads, msl, *, head_dim=128, page=64, external=False):
        cpu, dev = _hook_problem(seed, ctx, next_n, heads, device, head_dim=head_dim, page=page)
        kw = {"kv_block_size": page}
        if external:              # caller-built schedule in a fixed buffer; the caller pre-fills -inf
            cta_info, _, plan = varctx_plan(dev[-1], P.DEFAULT_TILE[0], len(ctx) * next_n, msl, next_n)
            runtime.launch(plan)
            kw.update(cta_info=cta_info, total_ctas=len(ctx) * next_n,
                      out=torch.full((len(ctx) * next_n, msl), float("-inf"), device=device))
        out = pa_mqa_logits_fp4(*dev, msl, next_n=next_n, weight_scale=1.5, **kw)
        ref = pa_mqa_logits_reference(*cpu, msl, weight_scale=1.5, next_n=next_n)
        m = compare(out.cpu(), ref, visible_mask(cpu[-1], next_n, msl))
        return passes(m), describe(m)

    yield check("staged H16 D128 p64 next_n=2 ctx=[100,0,37]", lambda: case(1, [100, 0, 37], 2, 16, 128))
    yield check("staged H16 D128 p64 next_n=1 external schedule", lambda: case(2, [90, 5], 1, 16, 96,
                                                                               external=True))
    yield check("staged H32 D256 p128 next_n=4 ctx=[200,3]", lambda: case(4, [200, 3], 4, 32, 256, head_dim=256,
                                                                            page=128))
    yield check("direct H64 D128 p64 next_n=3 ctx=[70,0,130]", lambda: case(3, [70, 0, 130], 3, 64, 160))


# (batch, next_n, max_ctx, heads): rows of the published decode benchmark (docs/families/mqa_decode.md#performance).
_BENCH_GPU = ((2, 1, 512, 64), (16, 1, 4352, 64), (1, 1, 65536, 64), (2, 1, 768, 128), (32, 4, 32768, 64))
_BENCH_EMU = ((2, 1, 512, 64),)


def bench(device):
    """Median us per `pa_mqa_logits_fp4` call (including the op's -inf fill and schedule) on rows of the
    published decode benchmark: H64 (or H128), D128, page 64, ragged contexts averaging max_ctx / 2."""
    from .hooks import timed
    emu = torch.device(device).type == "cpu"
    for batch, next_n, max_ctx, heads in _BENCH_EMU if emu else _BENCH_GPU:
        g = torch.Generator().manual_seed(batch * 1000 + max_ctx)
        avg = max_ctx // 2                  # ragged: uniform in [avg/2, 3avg/2], rounded up to the page
        ctx = [min(max_ctx, -(-int(avg * (0.5 + torch.rand(1, generator=g).item())) // 64) * 64)
               for _ in range(batch)]
        _, dev = _hook_problem(batch, ctx, next_n, heads, device)
        out = torch.empty(batch * next_n, max_ctx, device=device)
        yield timed(f"{batch}x{next_n}x{max_ctx} H{heads}",
                    lambda: pa_mqa_logits_fp4(*dev, max_ctx, next_n=next_n, out=out), device,
                    f"ctx sum {sum(ctx)}")
