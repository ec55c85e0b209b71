"""Modeled MI355X time of the FP8 indexer ops (mqa_fp8) on the emulator's timing model.

    python benchmarks/mqa_fp8_model.py [--samples N] [--json PATH]

Decode rows: the FP4 decode table's shapes (B x next_n x max_ctx, H64 D128, page 64), every context
max_ctx (the worst case of the ragged draws), both engine conventions: SGLang's (plain pages, the
tiles grid, no fill) and vLLM's (preshuffled pages, the -inf fill and the persistent grid per call; the
varctx schedule, built once per step for all layers, in its own column). Prefill rows: fp8_mqa_logits at S x S_kv with causal windows, clean_logits. Each
row also gives its physical floor: max(HBM bytes / bandwidth, FP8 MFMA work / peak). Sampled
workgroups (docs/timing-model.md); these are model outputs, not measurements.
"""
import argparse
import json
import sys

import torch

from flyaot.emu import timing
from flyaot.runtime.drivers import emu
from flyaot.emu.isa.gfx950 import timing as T

DECODE = [(2, 1, 512), (3, 1, 1024), (4, 1, 2048), (16, 1, 4352), (8, 1, 8192), (1, 1, 32768), (1, 1, 65536),
          (1, 1, 131072), (2, 2, 512), (32, 4, 32768)]
PREFILL = [(4096, 4096), (8192, 8192)]
HEADS, D, PAGE = 64, 128, 64
FP8_FLOPS = T.MFMA_FLOPS_PER_CLK_PER_SIMD["fp8"] * T.SIMDS_PER_CU * T.CUS * T.CLOCK_HZ


def _fp8_bytes(*shape):
    """Random finite E4M3 bytes (timing only: values do not matter, NaN codes avoided)."""
    return torch.randint(0, 0x70, shape, dtype=torch.uint8)


def _floor_us(hbm_bytes, flops):
    return max(hbm_bytes / T.HBM_BYTES_PER_S, flops / FP8_FLOPS) * 1e6


def _modeled(call, samples, fill_bytes=0):
    params = timing.Params()
    with emu.recording(params=params, samples=samples, functional=False) as rec:
        call()
    kernels = [(name, t.kernel_us) for name, t, _ in rec.launches]
    fill = fill_bytes / (T.HBM_BYTES_PER_S * min(1.0, params.bandwidth_efficiency)) * 1e6
    return sum(us for _, us in kernels) + fill + params.launch_us, kernels


def decode_row(b, nn, ctx, samples):
    from flyaot.ops import fp8_paged_mqa_logits, fp8_paged_mqa_logits_schedule
    pages = b * -(-ctx // PAGE)
    cache = _fp8_bytes(pages, PAGE, 1, D + 4)
    cache.view(pages, -1)[:, PAGE * D:] = torch.ones(pages, PAGE).view(torch.uint8)
    bt = torch.arange(pages, dtype=torch.int32).reshape(b, -1)
    q = _fp8_bytes(b, nn, HEADS, D)
    w = torch.randn(b * nn, HEADS)
    cl = torch.full((b,), ctx, dtype=torch.int32)
    out = torch.empty(b * nn, ctx)
    tiles, _ = _modeled(lambda: fp8_paged_mqa_logits(q, cache, w, cl, bt, ctx, kv_block_size=PAGE, out=out),
                        samples)
    sched = fp8_paged_mqa_logits_schedule(cl, ctx, nn)
    build, _ = _modeled(lambda: fp8_paged_mqa_logits_schedule(cl, ctx, nn, out=sched), samples)
    varctx, _ = _modeled(lambda: fp8_paged_mqa_logits(q, cache, w, cl, bt, ctx, kv_block_size=PAGE, preshuffle=True,
                                                      schedule=sched, out=out), samples, fill_bytes=out.numel() * 4)
    hbm = b * ctx * (D + 4) + out.numel() * 4 + q.numel() + w.numel() * 4
    return {"shape": f"{b}x{nn}x{ctx}", "sglang_tiles_us": tiles, "vllm_varctx_us": varctx,
            "vllm_schedule_us": build, "floor_us": _floor_us(hbm, 2.0 * b * nn * HEADS * D * ctx)}


def prefill_row(s, s_kv, samples):
    from flyaot.ops import fp8_mqa_logits
    q = _fp8_bytes(s, HEADS, D)
    kv = _fp8_bytes(s_kv, D)
    scales = torch.ones(s_kv)
    w = torch.randn(s, HEADS)
    ends = torch.arange(s_kv - s + 1, s_kv + 1, dtype=torch.int32)
    starts = torch.zeros(s, dtype=torch.int32)
    out = torch.empty(s, s_kv)
    us, _ = _modeled(lambda: fp8_mqa_logits(q, kv, scales, w, starts, ends, out=out), samples)
    visible = int(ends.long().sum())
    hbm = s_kv * (D + 4) + s * s_kv * 4 + q.numel() + w.numel() * 4
    return {"shape": f"1x{s}x{s_kv}", "flyaot_us": us, "floor_us": _floor_us(hbm, 2.0 * HEADS * D * visible)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    import os
    os.environ["FLYAOT_DEVICE"] = "emu"
    rows = {"decode": [], "prefill": []}
    print("decode H64 D128 page 64 (modeled us)   SGLang tiles   vLLM varctx   vLLM schedule   floor")
    for b, nn, ctx in DECODE:
        r = decode_row(b, nn, ctx, a.samples)
        rows["decode"].append(r)
        print(f"  {r['shape']:>14}   {r['sglang_tiles_us']:12.2f}   {r['vllm_varctx_us']:11.2f}   "
              f"{r['vllm_schedule_us']:13.2f}   {r['floor_us']:6.2f}", flush=True)
    print("prefill fp8_mqa_logits H64 D128, causal (modeled us)   flyaot   floor")
    for s, s_kv in PREFILL:
        r = prefill_row(s, s_kv, a.samples)
        rows["prefill"].append(r)
        print(f"  {r['shape']:>14}   {r['flyaot_us']:9.2f}   {r['floor_us']:7.2f}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
