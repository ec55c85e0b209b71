"""Dense BF16 x MXFP4 GEMM: the published kernel-benchmark shapes and the TP8 shapes
(docs/families/gemm_a16wfp4.md#performance).

    python benchmarks/gemm_a16wfp4.py [--rounds 9] [--emu-max-m 320] [--only 0,1]

On a gfx950 device: median kernel time of gemm_a16wfp4 (CUDA/HIP graph of 20 launches with a
preallocated output, `--rounds` rounds) next to torch's BF16 linear on the same device with the decoded
weight. Elsewhere the shapes run on the emulator with M capped at --emu-max-m (the cap keeps M in its
dispatch bucket: 1 stays decode, 512 and 4096 stay prefill), which reports per call: weight bytes read
(global bytes minus the activation rows each workgroup loads; still including each wave's kernarg
loads) against the packed weight + scale size (1.0 per M block: each M block of workgroups streams the
weight once, its neighbours in the grid hit the same lines in cache on hardware), MFMAs against the
count the tile implies, and instructions.
"""
import argparse

import torch

from flyaot import runtime
from flyaot.ops.timing import graph_median_us, on_prebuilt_target
from flyaot.kernel_defs.gemm_a16wfp4 import configs, geometry, reference
from flyaot.ops import gemm_a16wfp4, prepare_mxfp4_weight

# (N, K, upstream target us per M), M in {1, 512, 4096}
SHAPES = [(1024, 3584, {1: 10.645, 512: 16.589, 4096: 44.048}),
          (3584, 512, {1: 8.360, 512: 10.912, 4096: 33.172}),
          (8448, 7168, {}), (1536, 7168, {}), (7168, 768, {})]
MS = (1, 512, 4096)


def time_device(n, k, m, rounds):
    g = torch.Generator().manual_seed(0)
    w, s = reference.random_weight(n, k, generator=g)
    prep = prepare_mxfp4_weight(w.cuda(), s.cuda())
    w_bf16 = reference.decode_weight(w, s).cuda()
    x = torch.randn(m, k, generator=g).to(torch.bfloat16).cuda()
    out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
    ours = graph_median_us(lambda: gemm_a16wfp4(x, prep, out=out), rounds)
    torch_us = graph_median_us(lambda: torch.mm(x, w_bf16.t(), out=out), rounds)
    return ours, torch_us


def emulate(n, k, m):
    g = torch.Generator().manual_seed(0)
    w, s = reference.random_weight(n, k, generator=g)
    prep = prepare_mxfp4_weight(w, s)
    x = torch.randn(m, k, generator=g).to(torch.bfloat16)
    y = gemm_a16wfp4(x, prep)
    ref = reference.gemm_reference(x, w, s)
    rel = ((y.float() - ref.float()).norm() / ref.float().norm()).item()
    params = configs.choose(n, k, m)
    t = geometry.tile(params)
    c = runtime.kernel("gemm_a16wfp4", params).loaded(-1).launcher.last_counters
    a_bytes = (n // t.bn) * m * k * 2                      # every N block reads the M rows once
    mfma_min = -(-m // t.bm) * t.m_tiles * (n // 16) * (k // 32)
    return params, c, c.global_bytes_read - a_bytes, n * k // 2 + n * k // 32, mfma_min, rel


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--emu-max-m", type=int, default=320)
    ap.add_argument("--only", default="", help="comma-separated row indices of SHAPES")
    a = ap.parse_args()
    rows = [int(i) for i in a.only.split(",")] if a.only else range(len(SHAPES))
    device = on_prebuilt_target()
    for i in rows:
        n, k, targets = SHAPES[i]
        for m in MS:
            name = f"{n}x{k} M={m}"
            if device:
                ours, base = time_device(n, k, m, a.rounds)
                target = f"   (seed target {targets[m]} us)" if m in targets else ""
                print(f"{name:20s} median {ours:8.3f} us   torch bf16 linear {base:8.3f} us{target}")
                continue
            em = min(m, a.emu_max_m)
            params, c, w_bytes, packed, mfma_min, rel = emulate(n, k, em)
            print(f"{name:20s} emu M={em:4d} {geometry.symbol(params):38s} weight B read/packed "
                  f"{w_bytes / packed:5.2f}  mfma {c.mfma}/{mfma_min}  instr {c.instructions}  "
                  f"workgroups {c.workgroups}  rel L2 {rel:.1e}")


if __name__ == "__main__":
    main()
