"""Pick the A16WFP4 GEMM tile config of each tuned (N, K) and M bucket by modeled MI355X time.

    python benchmarks/gemm_model_tune.py [--samples 8] [--aiter DIR] [--host-us 8.0] [--only 0,3] [--jobs N]

For every seed shape (N, K, M) runs each prebuilt config of the family that can serve it on the
emulator's timing model (sampled; the runs go through benchmarks/sweep.py's executor: processes
here, Ray's workers when Ray is installed), prints the modeled times, the config configs.choose picks now and
the one the model prefers per bucket (least geometric-mean time over the bucket's seed rows). With
--aiter (a local aiter checkout, as for benchmarks/gfx950_model.py) it then prints the chosen config
against aiter's A16WFP4 kernel with its own config at each seed shape, and the seed table's target.
Op times are kernel + the model's launch overhead + --host-us, the eager host cost the calibration
fitted for the GEMM table (docs/timing-model.md). These are model outputs, not measurements.
"""
import argparse
import math
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import sweep  # noqa: E402
from flyaot import runtime  # noqa: E402
from flyaot.emu import timing  # noqa: E402
from flyaot.kernel_defs.gemm_a16wfp4 import configs, geometry, plan, reference  # noqa: E402
from flyaot.ops import prepare_mxfp4_weight  # noqa: E402
from flyaot.runtime.drivers import emu  # noqa: E402

# (N, K, M, the seed table's MI355X time of aiter's kernel = the target, us)
ROWS = [(1024, 3584, 1, 10.645), (1024, 3584, 512, 16.589), (1024, 3584, 4096, 44.048),
        (3584, 512, 1, 8.360), (3584, 512, 512, 10.912), (3584, 512, 4096, 33.172)]
BUCKET_M = {"d16": 1, "d32": 32, "mid": 64, "prefill": 512, "large": 4096}   # an M of each bucket


def _problem(n, k, m):
    g = torch.Generator().manual_seed(0)
    w, s = reference.random_weight(n, k, generator=g)
    x = torch.randn(m, k, generator=g).to(torch.bfloat16)
    return w, s, x


def modeled(n, k, m, cfg, samples):
    """Kernel time (us) of `cfg` at (N, K, M) on the model."""
    w, s, x = _problem(n, k, m)
    out = torch.empty(m, n, dtype=torch.bfloat16)
    with emu.recording(samples=samples, functional=False) as rec:
        runtime.launch(plan.plan(x, prepare_mxfp4_weight(w, s), out, params=cfg))
    return sum(t.kernel_us for _, t, _ in rec.launches)


def upstream(up, n, k, m, samples):
    """(kernel time, config note) of aiter's kernel with its own config choice."""
    import aiter_kernels as AK
    _, _, a = _problem(n, k, m)
    L, note = AK.gemm_launch(up, n, k, m, a)
    t = timing.time_launch(L, samples=samples, functional=False)
    return t.kernel_us, note


def serves(cfg, n, k, m):
    if cfg["order"] == "prefill":
        fits_m = m > 32
    else:                   # decode-M tiles, and decode-order tiles above decode M (3584 x 512's)
        fits_m = cfg["bm"] >= m if m <= 32 else cfg["bm"] > configs.DECODE_MAX_BM
    return fits_m and n % cfg["bn"] == 0 and k % (128 * cfg["sk"] * cfg["kb"]) == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--aiter", help="local aiter checkout: compare the chosen configs with its kernel")
    ap.add_argument("--host-us", type=float, default=8.0, help="eager host cost added to every op time")
    ap.add_argument("--only", default="", help="comma-separated row indices of ROWS")
    ap.add_argument("--jobs", type=int, default=0, help="worker processes of the sweep (0: one per CPU; Ray "
                                                         "schedules its own when installed)")
    a = ap.parse_args()
    try:
        rows = [ROWS[int(i)] for i in a.only.split(",")] if a.only else ROWS
    except (ValueError, IndexError):
        ap.error(f"--only {a.only!r}: expected indices 0..{len(ROWS) - 1}")
    extra = timing.Params().launch_us + a.host_us
    results, chosen = {}, {}
    jobs = [(n, k, m, cfg) for n, k, m, _ in rows for cfg in configs.all_configs() if serves(cfg, n, k, m)]
    with sweep.executor(a.jobs) as ex:          # every (shape, config) is an independent model run
        times = ex.map(modeled, *zip(*jobs), [a.samples] * len(jobs))
        for (n, k, m, cfg), kernel_us in zip(jobs, times):
            us = kernel_us + extra
            now = cfg == configs.choose(n, k, m)
            results.setdefault((n, k, configs.bucket(m)), {}).setdefault(tuple(sorted(cfg.items())), []).append(us)
            if now:
                chosen[(n, k, m)] = us
            print(f"{n}x{k} M={m:5d} {cfg}: {us:8.2f} us{'  <- current' if now else ''}", flush=True)
    print("\nper (N, K, bucket): current vs model's choice (geomean over the bucket's seed rows)")
    for (n, k, b), by_cfg in results.items():
        full = {c: v for c, v in by_cfg.items() if len(v) == max(map(len, by_cfg.values()))}
        gm = {c: math.exp(sum(map(math.log, v)) / len(v)) for c, v in full.items()}
        best = min(gm, key=gm.get)
        cur = tuple(sorted(configs.choose(n, k, BUCKET_M[b]).items()))
        print(f"{n}x{k} {b:8s} current {dict(cur)} {gm.get(cur, float('nan')):.2f} us; "
              f"best {dict(best)} {gm[best]:.2f} us")
    if not a.aiter:
        return
    import aiter_kernels
    up = aiter_kernels.Upstream(a.aiter)
    print(f"\nchosen config vs aiter's kernel (op us = kernel + {extra:.1f}; model outputs, not measurements)")
    print(f"{'shape':18s} {'flyaot':>8s} {'upstream':>9s} {'target':>7s} {'fly/up':>7s}  configs")
    for n, k, m, target in rows:
        cfg = configs.choose(n, k, m)
        fly = chosen[(n, k, m)]
        uk, note = upstream(up, n, k, m, a.samples)
        print(f"{n}x{k} M={m:<5d}  {fly:8.2f} {uk + extra:9.2f} {target:7.2f} {fly / (uk + extra):7.2f}  "
              f"flyaot {geometry.symbol(cfg)}; upstream {note}", flush=True)


if __name__ == "__main__":
    main()
