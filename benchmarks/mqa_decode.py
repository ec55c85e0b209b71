"""FP4 paged MQA logits decode: the published decode benchmark (docs/families/mqa_decode.md#performance).

    python benchmarks/mqa_decode.py [--rounds 9] [--emu-max-ctx 1024] [--only 0,1,9]

H64 (or H128), D128, page 64, ragged contexts uniform in [0.5, 1.5] x max_ctx/2 rounded up to the page.
On a gfx950 device: median kernel time (CUDA/HIP graph of 20 launches, `--rounds` rounds) of the op's
own dispatch (the direct kernel for these shapes). Elsewhere each shape runs on the emulator twice, on
the same data: the direct kernel in the variant (tile, weight loads) the op picks for the full shape,
and the staged-LDS kernel (256 x 4, internal schedule); counters per visible (row, token) cell: global
bytes read, instructions, MFMAs, LDS bytes. Contexts and the output width are capped at --emu-max-ctx
there (per-cell figures depend on the context length only through chunk rounding and the Q/weight
re-reads per chunk, which the cap keeps).
"""
import argparse

import torch

from flyaot import runtime
from flyaot.ops.timing import graph_median_us, on_prebuilt_target
from flyaot.kernel_defs.mqa_common import layouts
from flyaot.kernel_defs.mqa_decode import plan as P
from flyaot.kernel_defs.mqa_decode.geometry import direct_tile
from flyaot.kernel_defs.mqa_decode.specs import FAMILY
from flyaot.kernel_defs.mqa_runs_schedule.plan import default_parallel_units
from flyaot.ops import pa_mqa_logits_fp4

# (batch, next_n, max_ctx, heads, upstream target in us)
SHAPES = [(2, 1, 512, 64, 1.942), (3, 1, 1024, 64, 2.013), (4, 1, 2048, 64, 2.027), (16, 1, 4352, 64, 2.392),
          (8, 1, 8192, 64, 2.416), (1, 1, 32768, 64, 2.056), (1, 1, 65536, 64, 2.270),
          (1, 1, 131072, 64, 2.384), (2, 2, 512, 64, 1.961), (2, 1, 768, 128, 2.048),
          (32, 4, 32768, 64, 23.658)]
HEAD_DIM, PAGE = 128, 64


def contexts(batch, max_ctx, seed=0):
    avg = max_ctx // 2
    g = torch.Generator().manual_seed(seed)
    raw = torch.randint(avg // 2, avg + avg // 2 + 1, (batch,), generator=g).tolist()
    return [min(-(-c // PAGE) * PAGE, max_ctx) for c in raw]


def problem(batch, next_n, max_ctx, heads, device, cap=None):
    ctx = contexts(batch, max_ctx)
    if cap is not None:
        ctx = [min(c, cap) for c in ctx]
        max_ctx = min(max_ctx, cap)
    g = torch.Generator().manual_seed(1)
    kv = layouts.make_paged_kv(ctx, HEAD_DIM, PAGE, g)
    q, qs = layouts.make_q((batch, next_n), heads, HEAD_DIM, g)
    w = torch.randn(batch * next_n, heads, generator=g).to(torch.bfloat16)
    args = [t.to(device) for t in (q, qs, kv.kv_cache, kv.kv_scale, kv.block_tables, w,
                                   torch.tensor(ctx, dtype=torch.int32))]
    visible = sum(max(0, c - (next_n - 1 - n)) for c in ctx for n in range(next_n))
    return args, max_ctx, visible


def time_device(args, msl, next_n, rounds):
    out = torch.empty(args[0].shape[0] * next_n, msl, device="cuda")
    call = lambda: pa_mqa_logits_fp4(*args, msl, next_n=next_n, out=out)        # noqa: E731
    return graph_median_us(call, rounds)     # includes the -inf fill the op issues on the internal schedule


def _counters(params):
    """Emulator counters of the last launch of the spec `params`."""
    return runtime.kernel(FAMILY.name, params).loaded(-1).launcher.last_counters


def emulate(args, msl, next_n, full_msl):
    """[(label, counters)] of the direct kernel (variant of the full shape) and the staged kernel."""
    q, qs, kv_cache, kv_scale, tables, w, cl = args
    s = P.check_inputs(*args, msl, next_n, PAGE, 1.0)
    tile, scalar, waves = direct_tile(s.heads, s.batch, next_n, full_msl)
    variant = (tile, "scalar" if scalar else "vector", waves)
    out = torch.full((s.batch * next_n, msl), float("-inf"))
    plan = P.direct_plan(s, msl, out=out, q_fp4=q, q_scale=qs, kv_cache=kv_cache, kv_scale=kv_scale,
                         block_tables=tables, weights=w, context_lens=cl, weight_scale=1.0, variant=variant)
    runtime.launch(plan)
    direct = _counters(plan.params)
    bk, nw = P.DEFAULT_TILE
    # an explicit parallel_unit_num is not a hint: the op takes the staged path with its internal schedule
    units = default_parallel_units(s.batch, next_n, msl, bk)
    pa_mqa_logits_fp4(*args, msl, next_n=next_n, block_k=bk, num_warps=nw, parallel_unit_num=units)
    staged = P.staged_params(s.heads, s.head_dim, PAGE, bk, nw)
    return [(f"direct t{tile}{' sw' if scalar else ''}", direct),
            (f"staged {bk}x{nw}", _counters(staged))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--emu-max-ctx", type=int, default=1024)
    ap.add_argument("--only", default="", help="comma-separated row indices of the table")
    a = ap.parse_args()
    rows = [int(i) for i in a.only.split(",")] if a.only else range(len(SHAPES))
    device = on_prebuilt_target()
    for i in rows:
        batch, next_n, max_ctx, heads, target = SHAPES[i]
        name = f"{batch}x{next_n}x{max_ctx} H{heads}"
        if device:
            args, msl, _ = problem(batch, next_n, max_ctx, heads, "cuda")
            us = time_device(args, msl, next_n, a.rounds)
            print(f"{name:22s} median {us:8.3f} us   (seed target {target} us)")
        else:
            args, msl, visible = problem(batch, next_n, max_ctx, heads, "cpu", cap=a.emu_max_ctx)
            v = max(visible, 1)
            for label, c in emulate(args, msl, next_n, max_ctx):
                print(f"{name:20s} {label:13s} ctx<={msl:5d} cells {visible:6d}: global B read/cell "
                      f"{c.global_bytes_read / v:7.2f}  instr/cell {c.instructions / v:7.3f}  mfma/cell "
                      f"{c.mfma / v:6.3f}  lds B/cell {(c.lds_bytes_read + c.lds_bytes_written) / v:7.2f}  "
                      f"workgroups {c.workgroups}")


if __name__ == "__main__":
    main()
