"""FP4 paged MQA logits prefill: the published prefill benchmark (docs/families/mqa_prefill.md#performance).

    python benchmarks/mqa_prefill.py [--rounds 9] [--only 0,3] [--emu-max-kv 1024] [--emu-max-q 32]

Shapes are B x Q x KV: B sequences, each with Q new query rows scored against a KV of KV tokens, with
the tail-causal windows of the varqlen rule (row n sees t <= KV - Q + n; square shapes are fully
causal): our reading of the undefined published shapes (docs/families/mqa_prefill.md#decisions); the "AgentX trace" row
has no published shape and is not reproduced. H64, D128, page 64.
On a gfx950 device: median kernel time (a graph of 20 launches with a fixed schedule, `--rounds`
rounds). Elsewhere the shapes are scaled down (KV and Q capped) and run on the emulator with the fewest
schedule slots allowed (one per row), so CTAs walk several chunks as they do at full size. Reported per
visible (row, token) cell: global bytes the emulator counted (every load: KV, Q, weights, metadata,
per lane), the KV bytes of the launched schedule (one staged chunk per CTA and chunk), the KV bytes a
one-row-per-CTA design reads for the same windows (every chunk up to the row's window end, the upstream
"Old" kernel) and the ratio of the two KV figures, which should be near 1/4 (four rows share a chunk).
"""
import argparse

import torch

from flyaot import runtime
from flyaot.ops.timing import graph_median_us, on_prebuilt_target
from flyaot.kernel_defs.mqa_common import layouts
from flyaot.kernel_defs.mqa_prefill.geometry import CHUNK_TOKENS, Geometry
from flyaot.ops import pa_mqa_logits_fp4_prefill
from flyaot.ops import compute_prefill_schedule, compute_varqlen_windows

# (batch, q rows per sequence, kv tokens, upstream target in us)
SHAPES = [(1, 512, 65536, 200.74), (1, 1024, 65536, 377.41), (1, 2048, 32768, 356.27),
          (1, 1024, 131072, 693.36), (4, 256, 16384, 93.07), (8, 128, 8192, 50.87), (1, 4096, 4096, 56.60),
          (1, 8192, 8192, 213.22), (2, 8192, 8192, 423.80), (1, 8192, 32768, 1206.67)]
HEADS, HEAD_DIM, PAGE = 64, 128, 64


def scaled(batch, q, kv, max_kv, max_q):
    """Shape capped for the emulator, keeping Q <= KV."""
    kv2 = min(kv, max_kv)
    return batch, min(q, max_q, kv2), kv2


def problem(batch, q, kv, device):
    g = torch.Generator().manual_seed(1)
    rows = batch * q
    paged = layouts.make_paged_kv([kv] * batch, HEAD_DIM, PAGE, g)
    q_fp4, q_scale = layouts.make_q((rows,), HEADS, HEAD_DIM, g)
    w = torch.randn(rows, HEADS, generator=g).to(torch.bfloat16)
    cu = torch.arange(batch + 1, dtype=torch.int32) * q
    windows = compute_varqlen_windows(cu, torch.full((batch,), kv, dtype=torch.int32), rows)
    tensors = [t.to(device) for t in (q_fp4, q_scale, paged.kv_cache, paged.kv_scale, paged.block_tables, w)]
    return tensors, [t.to(device) for t in windows], kv


def time_device(tensors, windows, msl, rounds):
    rows = tensors[0].shape[0]
    out = torch.empty((rows, msl), device="cuda")           # the kernel writes every cell
    info, slots = compute_prefill_schedule(*windows, page_size=PAGE, max_seq_len=msl)
    call = lambda: pa_mqa_logits_fp4_prefill(*tensors, *windows, msl, out=out, cta_info=info,   # noqa: E731
                                             n_ctas=slots)
    return graph_median_us(call, rounds)


def emulate(tensors, windows, msl):
    """(emulator counters, KV bytes the schedule stages) of one launch with one slot per row."""
    rows = tensors[0].shape[0]
    info, slots = compute_prefill_schedule(*windows, page_size=PAGE, max_seq_len=msl, parallel_unit_num=rows)
    pa_mqa_logits_fp4_prefill(*tensors, *windows, msl, out=torch.empty((rows, msl)), cta_info=info, n_ctas=slots)
    params = {"heads": HEADS, "head_dim": HEAD_DIM, "page_size": PAGE}
    counters = runtime.kernel("mqa_prefill", params).loaded(-1).launcher.last_counters
    return counters, int(info[:, 4].sum()) * Geometry(HEADS, HEAD_DIM, PAGE).lds_bytes


def one_row_per_cta_kv_bytes(windows) -> int:
    """KV bytes (values + scales) a kernel with one row per CTA reads: chunks [0, ceil(le / chunk))."""
    chunks = (windows[2].long() + CHUNK_TOKENS - 1) // CHUNK_TOKENS
    per_token = Geometry(HEADS, HEAD_DIM, PAGE).lds_bytes // CHUNK_TOKENS
    return int(chunks.sum()) * CHUNK_TOKENS * per_token


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--only", default="", help="comma-separated row indices of the table")
    ap.add_argument("--emu-max-kv", type=int, default=4096)
    ap.add_argument("--emu-max-q", type=int, default=32)
    a = ap.parse_args()
    picked = [int(i) for i in a.only.split(",")] if a.only else range(len(SHAPES))
    device = on_prebuilt_target()
    if device:
        print(f"{'B x Q x KV':>20} {'median us':>10} {'target us':>10}")
    else:
        print("no gfx950: scaled-down shapes on the emulator, per visible (row, token) cell")
        print(f"{'B x Q x KV':>20} {'emulated':>16} {'bytes read':>11} {'KV bytes':>9} {'1-row KV':>9} "
              f"{'ratio':>6} {'instr':>7} {'mfma':>7}")
    for i in picked:
        batch, q, kv, target = SHAPES[i]
        label = f"{batch} x {q} x {kv}"
        if device:
            tensors, windows, msl = problem(batch, q, kv, "cuda")
            print(f"{label:>20} {time_device(tensors, windows, msl, a.rounds):>10.2f} {target:>10.2f}")
            continue
        b2, q2, kv2 = scaled(batch, q, kv, a.emu_max_kv, a.emu_max_q)
        tensors, windows, msl = problem(b2, q2, kv2, "cpu")
        c, kv_bytes = emulate(tensors, windows, msl)
        cells = int((windows[2].long() - windows[1].long()).clamp(min=0).sum())
        old, mine = one_row_per_cta_kv_bytes(windows) / cells, kv_bytes / cells
        print(f"{label:>20} {f'{b2} x {q2} x {kv2}':>16} {c.global_bytes_read / cells:>11.2f} {mine:>9.2f} "
              f"{old:>9.2f} {mine / old:>6.3f} {c.instructions / cells:>7.3f} {c.mfma / cells:>7.4f}")


if __name__ == "__main__":
    main()
