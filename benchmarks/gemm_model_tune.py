"""Pick the A16WFP4 GEMM tile config of each tuned (N, K) and M bucket by modeled MI355X time.

    python benchmarks/gemm_model_tune.py [--samples 8]

For every seed shape (N, K, M) runs each prebuilt config of the family that can serve it on the
emulator's timing model (sampled), prints the modeled times, the config configs.choose picks now and
the one the model prefers per bucket (least geometric-mean time over the bucket's seed rows). These are
model outputs, not measurements.
"""
import argparse
import math

import torch

from flyaot import runtime
from flyaot.emu import timing
from flyaot.kernel_defs.gemm_a16wfp4 import configs, plan, reference
from flyaot.ops import prepare_mxfp4_weight

ROWS = [(1024, 3584, 1), (1024, 3584, 512), (1024, 3584, 4096), (3584, 512, 1), (3584, 512, 512),
        (3584, 512, 4096)]


def modeled(n, k, m, cfg, samples):
    g = torch.Generator().manual_seed(0)
    w, s = reference.random_weight(n, k, generator=g)
    prep = prepare_mxfp4_weight(w, s)
    x = torch.randn(m, k, generator=g).to(torch.bfloat16)
    out = torch.empty(m, n, dtype=torch.bfloat16)
    with timing.record(samples=samples, functional=False) as rec:
        runtime.launch(plan.plan(x, prep, out, params=cfg))
    return sum(t.kernel_us for _, t, _ in rec.launches) + timing.Params().launch_us


def serves(cfg, n, k, m):
    decode = cfg["order"] == "decode"
    return (decode == (m <= 32)) and n % cfg["bn"] == 0      # other limits: the plan refuses


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=8)
    a = ap.parse_args()
    results = {}
    for n, k, m in ROWS:
        now = configs.choose(n, k, m)
        for cfg in configs.all_configs():
            if not serves(cfg, n, k, m) or (cfg["order"] == "decode" and cfg["bm"] < m):
                continue
            try:
                us = modeled(n, k, m, cfg, a.samples)
            except Exception as e:            # a config this shape cannot use
                print(f"{n}x{k} M={m} {cfg}: {type(e).__name__}: {e}"[:160])
                continue
            results.setdefault((n, k, configs.bucket(m)), {}).setdefault(tuple(sorted(cfg.items())), []).append(us)
            print(f"{n}x{k} M={m:5d} {cfg}: {us:8.2f} us{'  <- current' if cfg == now else ''}", flush=True)
    print("\nper (N, K, bucket): current vs model's choice (geomean over the bucket's seed rows)")
    for (n, k, b), by_cfg in results.items():
        full = {c: v for c, v in by_cfg.items() if len(v) == max(map(len, by_cfg.values()))}
        gm = {c: math.exp(sum(map(math.log, v)) / len(v)) for c, v in full.items()}
        best = min(gm, key=gm.get)
        cur = tuple(sorted(configs.choose(n, k, {"d16": 1, "d32": 32, "mid": 64, "prefill": 512}[b]).items()))
        print(f"{n}x{k} {b:8s} current {dict(cur)} {gm.get(cur, float('nan')):.2f} us; "
              f"best {dict(best)} {gm[best]:.2f} us")


if __name__ == "__main__":
    main()
