"""Modeled MI355X kernel times (the emulator's timing model) against the seed tables' measurements.

    python benchmarks/gfx950_model.py --aiter DIR [--json PATH] [--only decode,prefill,gemm] [--samples N]

DIR is a local aiter checkout holding its FlyDSL A16WFP4 GEMM and FP4 MQA kernels (e.g. ROCm/aiter at
commit cae82635, the code the seed tables timed). Its kernels are compiled with this build's FlyDSL
toolchain and run in timing mode at every seed-table shape, sampled (a subset of workgroups is
emulated; see docs/timing-model.md):
- decode (H64/H128, D128, page 64, ragged contexts as benchmarks/mqa_decode.py draws them) and prefill
  (B x Q x KV with the varqlen tail-causal windows, as benchmarks/mqa_prefill.py reads the seed shapes):
  upstream = aiter main's FP4 MQA kernels (the tables' "Old" columns), internal schedules;
- GEMM: upstream = aiter's FlyDSL A16WFP4 kernel with its own config choice (its measured time is the
  table's "Target" column; the "Triton best" column is a Triton kernel this benchmark cannot compile).
A handful of global model parameters (launch overhead, memory-latency scale, bandwidth efficiency) is
fitted on every other row of each table and validated on the rest; both halves are printed. Then
flyaot's kernels run on the same model at every shape: modeled flyaot, modeled upstream, measured
upstream, the "New" target, and the row's physical bound (max of HBM bytes / bandwidth and MFMA work /
peak). Each op time is its kernel's modeled time, plus the -inf fill of the logits for the MQA ops
(both sides fill the same output), plus one launch overhead.
These are model outputs, not measurements.
"""
import argparse
import json
import math
import pathlib
import sys
import time

import torch

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from flyaot.emu import timing                                  # noqa: E402
from flyaot.emu.isa.gfx950 import timing as T                  # noqa: E402

# (B, next_n, max_ctx, heads, old us, new us)
DECODE = [(2, 1, 512, 64, 2.510, 1.942), (3, 1, 1024, 64, 2.539, 2.013), (4, 1, 2048, 64, 2.628, 2.027),
          (16, 1, 4352, 64, 3.303, 2.392), (8, 1, 8192, 64, 2.730, 2.416), (1, 1, 32768, 64, 2.641, 2.056),
          (1, 1, 65536, 64, 2.697, 2.270), (1, 1, 131072, 64, 3.372, 2.384), (2, 2, 512, 64, 2.582, 1.961),
          (2, 1, 768, 128, 3.287, 2.048), (32, 4, 32768, 64, 47.598, 23.658)]
# (B, Q, KV, old us, new us); None: the AgentX trace row has no published shape
PREFILL = [(None, None, None, 781.16, 610.38), (1, 512, 65536, 249.20, 200.74), (1, 1024, 65536, 473.36, 377.41),
           (1, 2048, 32768, 451.07, 356.27), (1, 1024, 131072, 910.54, 693.36), (4, 256, 16384, 121.77, 93.07),
           (8, 128, 8192, 69.46, 50.87), (1, 4096, 4096, 98.64, 56.60), (1, 8192, 8192, 372.80, 213.22),
           (2, 8192, 8192, 745.16, 423.80), (1, 8192, 32768, 1519.69, 1206.67)]
# (N, K, M, measured us of aiter's FlyDSL A16WFP4 kernel = the flyaot target)
GEMM = [(1024, 3584, 1, 10.645), (1024, 3584, 512, 16.589), (1024, 3584, 4096, 44.048),
        (3584, 512, 1, 8.360), (3584, 512, 512, 10.912), (3584, 512, 4096, 33.172)]

FP4_FLOPS = T.MFMA_FLOPS_PER_CLK_PER_SIMD["fp4"] * T.SIMDS_PER_CU * T.CUS * T.CLOCK_HZ
BF16_FLOPS = T.MFMA_FLOPS_PER_CLK_PER_SIMD["bf16"] * T.SIMDS_PER_CU * T.CUS * T.CLOCK_HZ
PAGE, D = 64, 128


class Row:
    def __init__(self, family, shape, kernel, measured, target, bound_us, fill_bytes=0):
        self.family, self.shape, self.kernel = family, shape, kernel
        self.measured, self.target, self.bound_us, self.fill_bytes = measured, target, bound_us, fill_bytes
        self.replays = []           # params -> Timing, one per kernel launch of the op
        self.fit = False
        self.note = ""
        self.sampling_error = 0.0
        self.eager = family == "gemm"     # its table timed eager launches, the MQA tables graph replays

    def modeled(self, params: timing.Params, host_us: float = 0.0) -> float | None:
        if not self.replays:
            return None
        us = sum(r(params).kernel_us for r in self.replays)
        fill = self.fill_bytes / (T.HBM_BYTES_PER_S * min(1.0, params.bandwidth_efficiency)) * 1e6
        return us + fill + params.launch_us + (host_us if self.eager else 0.0)


def _bound(hbm_bytes, flops, peak):
    return max(hbm_bytes / T.HBM_BYTES_PER_S, flops / peak) * 1e6


# ------------------------------------------------------------------------------------------ upstream
def _time(launch, samples):
    res = timing.time_launch(launch, samples=samples, functional=False)
    return res, timing.replay(launch)


def _unpoisoned(bt, pages):
    """The test data marks unused block-table entries with an invalid page; the upstream kernels
    prefetch the next chunk's page ids past a sequence's end, so point those at a real page."""
    return torch.where((bt < 0) | (bt >= pages), torch.zeros_like(bt), bt)


def upstream_decode(up, row, b, nn, ctx_max, heads, samples):
    import aiter_kernels as AK
    from mqa_decode import problem
    from flyaot.kernel_defs.mqa_runs_schedule.reference import varctx_reference as build_schedule, default_parallel_units
    args, msl, _ = problem(b, nn, ctx_max, heads, "cpu")
    q, qs, kv, kvs, bt, w, cl = args
    bt = _unpoisoned(bt, kv.shape[0])
    q, qs, kv, kvs, bt, w = (AK.padded(t) for t in (q, qs, kv, kvs, bt, w))
    pgrid = default_parallel_units(b, nn, msl, 256)
    cta = AK.padded(build_schedule(cl, 256, pgrid, msl, nn)[0])
    out = torch.empty(b * nn, msl)
    launcher, threads = up.decode_kernel(bt.shape[1], nn, heads)
    vals = [out, q, qs, kv, kvs, bt, w, cta, out.stride(0), 1.0]
    code, kern = AK.compile_with(launcher, vals + [pgrid, None])
    L = AK.launch(code, kern, (pgrid, 1, 1), (threads, 1, 1), AK.pack_kernarg(kern, vals),
                  [out, q, qs, kv, kvs, bt, w, cta])
    res, rep = _time(L, samples)
    row.replays.append(rep)
    row.sampling_error = res.sampling_error
    return res


def prefill_schedule(le, block_k, slots):
    """(row, batch, chunk_start, chunk_count, local_start, local_end) per slot: the upstream kernel's
    one-row-per-CTA schedule (rows split into CTAs of `safe` chunks, the smallest split that fits)."""
    chunks = [max(0, -(-e // block_k)) for e in le]
    safe = next((s for s in range(1, max(chunks + [1]) + 1) if sum(-(-c // s) for c in chunks) <= slots),
                max(chunks + [1]))
    info = []
    for r, c in enumerate(chunks):
        for start in range(0, c, safe):
            info.append((r, start, min(safe, c - start)))
    return info, safe


def upstream_prefill(up, row, b, q, kv, samples):
    import aiter_kernels as AK
    from mqa_prefill import problem
    tensors, windows, msl = problem(b, q, kv, "cpu")
    qf, qs, kvc, kvs, bt, w = tensors
    bt = _unpoisoned(bt, kvc.shape[0])
    qf, qs, kvc, kvs, bt, w = (AK.padded(t) for t in (qf, qs, kvc, kvs, bt, w))
    rb, ls, le = windows
    rows = qf.shape[0]
    slots = rows * max(1, -(-msl // 256))
    sched, _ = prefill_schedule(le.tolist(), 256, slots)
    cta = torch.zeros(slots, 6, dtype=torch.int32)
    cta[:, 3] = 1
    if sched:
        t = torch.tensor(sched, dtype=torch.int32)
        cta[:len(sched), 0] = t[:, 0]
        cta[:len(sched), 1] = rb[t[:, 0].long()]
        cta[:len(sched), 2] = t[:, 1]
        cta[:len(sched), 3] = t[:, 2]
        cta[:len(sched), 4] = ls[t[:, 0].long()]
        cta[:len(sched), 5] = le[t[:, 0].long()]
    cta = AK.padded(cta)
    out = torch.empty(rows, msl)          # lazily backed: only the sampled workgroups write
    launcher, threads = up.prefill_kernel(bt.shape[1], qf.shape[1])
    vals = [out, qf, qs, kvc, kvs, bt, w, cta, out.stride(0), 1.0]
    code, kern = AK.compile_with(launcher, vals + [slots, None])
    L = AK.launch(code, kern, (slots, 1, 1), (threads, 1, 1), AK.pack_kernarg(kern, vals),
                  [out, qf, qs, kvc, kvs, bt, w, cta])
    res, rep = _time(L, samples)
    row.replays.append(rep)
    row.sampling_error = res.sampling_error
    return res


def upstream_gemm(up, row, n, k, m, samples):
    import aiter_kernels as AK
    a = torch.randn(m, k, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    L, note = AK.gemm_launch(up, n, k, m, a)
    res, rep = _time(L, samples)
    row.replays.append(rep)
    row.sampling_error = res.sampling_error
    row.note = "cfg " + note
    return res


# ------------------------------------------------------------------------------------------ flyaot
def _recorded(call, samples):
    with timing.record(samples=samples, functional=False) as rec:
        call()
    return rec.launches


def flyaot_decode(row, b, nn, ctx_max, heads, samples):
    from mqa_decode import problem
    from flyaot.ops import pa_mqa_logits_fp4
    args, msl, _ = problem(b, nn, ctx_max, heads, "cpu")
    launches = _recorded(lambda: pa_mqa_logits_fp4(*args, msl, next_n=nn), samples)
    row.replays += [rep for _, _, rep in launches]
    row.sampling_error = max(r.sampling_error for _, r, _ in launches)
    row.note = " + ".join(name for name, _, _ in launches)


def flyaot_prefill(row, b, q, kv, samples):
    from mqa_prefill import problem
    from flyaot.ops import compute_prefill_schedule, pa_mqa_logits_fp4_prefill
    tensors, windows, msl = problem(b, q, kv, "cpu")
    info, slots = compute_prefill_schedule(*windows, page_size=PAGE, max_seq_len=msl)
    out = torch.empty(tensors[0].shape[0], msl)
    launches = _recorded(lambda: pa_mqa_logits_fp4_prefill(*tensors, *windows, msl, out=out, cta_info=info,
                                                           n_ctas=slots), samples)
    row.replays += [rep for _, _, rep in launches]
    row.sampling_error = max(r.sampling_error for _, r, _ in launches)
    row.note = " + ".join(name for name, _, _ in launches)


def flyaot_gemm(row, n, k, m, samples):
    from flyaot.kernel_defs.gemm_a16wfp4 import reference
    from flyaot.ops import gemm_a16wfp4, prepare_mxfp4_weight
    g = torch.Generator().manual_seed(0)
    w, s = reference.random_weight(n, k, generator=g)
    prep = prepare_mxfp4_weight(w, s)
    x = torch.randn(m, k, generator=g).to(torch.bfloat16)
    out = torch.empty(m, n, dtype=torch.bfloat16)
    launches = _recorded(lambda: gemm_a16wfp4(x, prep, out=out), samples)
    row.replays += [rep for _, _, rep in launches]
    row.sampling_error = max(r.sampling_error for _, r, _ in launches)
    row.note = " + ".join(name for name, _, _ in launches)


# ------------------------------------------------------------------------------------------ table
def build_rows(families):
    """(upstream rows, flyaot rows, [(family, shape, runner args)])."""
    jobs = []
    if "decode" in families:
        for b, nn, c, h, old, new in DECODE:
            shape = f"{b}x{nn}x{c}" + ("" if h == 64 else f" H{h}")
            ctx = [min(-(-x // PAGE) * PAGE, c) for x in _ctx(b, c)]
            kv_bytes = sum(ctx) * (D // 2 + D // 32)
            visible = sum(max(0, x - (nn - 1 - i)) for x in ctx for i in range(nn))
            bound = _bound(kv_bytes + b * nn * c * 4, 2 * h * D * visible, FP4_FLOPS)
            fill = b * nn * c * 4
            jobs.append(("decode", shape, (b, nn, c, h), old, new, bound, fill))
    if "prefill" in families:
        for b, q, kv, old, new in PREFILL:
            if b is None:
                jobs.append(("prefill", "AgentX trace", None, old, new, None, 0))
                continue
            rows = b * q
            cells = b * sum(max(0, kv - q + i + 1) for i in range(q))
            hbm = b * kv * (D // 2 + D // 32) + rows * (64 * D // 2 + 64 * 2) + rows * kv * 4
            bound = _bound(hbm, 2 * 64 * D * cells, FP4_FLOPS)
            jobs.append(("prefill", f"{b}x{q}x{kv}", (b, q, kv), old, new, bound, rows * kv * 4))
    if "gemm" in families:
        for n, k, m, meas in GEMM:
            hbm = n * k // 2 + n * k // 32 + m * k * 2 + m * n * 2
            jobs.append(("gemm", f"{n}x{k} M={m}", (n, k, m), meas, meas, _bound(hbm, 2 * m * n * k, BF16_FLOPS), 0))
    return jobs


def _ctx(b, c):
    from mqa_decode import contexts
    return contexts(b, c)


def error(mod, meas):
    return mod / meas - 1


def geomean_abs(errs):
    errs = [abs(math.log(1 + e)) for e in errs]
    return math.exp(sum(errs) / len(errs)) - 1 if errs else float("nan")


GRID = {"mem_latency_scale": (0.5, 0.7, 1.0, 1.4, 2.0, 2.8, 4.0),
        "bandwidth_efficiency": (0.5, 0.7, 1.0, 1.4, 2.0, 2.8, 4.0),
        "valu_scale": (0.5, 0.75, 1.0, 1.5, 2.0, 3.0),
        "scaled_cvt_cycles": (4, 8, 16, 24, 32)}


def fit(rows):
    """Least squares of the log error over `rows`: coordinate descent over the grid of each model
    parameter; the two fixed overheads (graph-replayed launch, and the extra host cost of an eager
    launch, which only the GEMM table includes) need no re-simulation and are searched at every step.
    Returns (Params, host_us)."""
    cache = {}
    overheads = [(g * 0.1, h * 0.5) for g in range(0, 41) for h in range(0, 21)]

    def loss_of(p):
        key = tuple(getattr(p, name) for name in GRID)
        if key not in cache:
            base = timing.Params(launch_us=0.0, **dict(zip(GRID, key)))
            pre = [(r.modeled(base), r.measured, r.eager) for r in rows]
            cache[key] = min((sum(math.log((m + g + (h if e else 0.0)) / meas) ** 2 for m, meas, e in pre), g, h)
                             for g, h in overheads)
        return cache[key]

    cur = timing.Params(launch_us=0.0, mem_latency_scale=1.0, bandwidth_efficiency=1.0, valu_scale=1.0,
                        scaled_cvt_cycles=T.VALU_CYCLES)
    for _ in range(3):
        for name, values in GRID.items():
            cur = min((timing.Params(**{**cur.__dict__, name: v}) for v in values), key=lambda p: loss_of(p)[0])
    _, g, h = loss_of(cur)
    return timing.Params(**{**cur.__dict__, "launch_us": g}), h


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--aiter", required=True, help="local aiter checkout (e.g. at commit cae82635)")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--only", default="decode,prefill,gemm")
    ap.add_argument("--samples", type=int, default=12, help="workgroups emulated per launch")
    ap.add_argument("--prefill-samples", type=int, default=4,
                    help="workgroups emulated per prefill launch (flyaot's walk every chunk of a row)")
    a = ap.parse_args()
    import aiter_kernels
    up = aiter_kernels.Upstream(a.aiter)
    jobs = build_rows(set(a.only.split(",")))
    upstream, ours = [], []
    t0 = time.time()
    for fam, shape, dims, meas, new, bound, fill in jobs:
        ru = Row(fam, shape, "upstream", meas, new, bound, fill)
        rf = Row(fam, shape, "flyaot", None, new, bound, fill)
        upstream.append(ru)
        ours.append(rf)
        if dims is None:
            ru.note = rf.note = "no published shape: not modeled"
            continue
        for kind, fn in (("upstream", {"decode": upstream_decode, "prefill": upstream_prefill,
                                       "gemm": upstream_gemm}[fam]),
                         ("flyaot", {"decode": flyaot_decode, "prefill": flyaot_prefill, "gemm": flyaot_gemm}[fam])):
            t = time.time()
            samples = a.prefill_samples if fam == "prefill" else a.samples
            try:
                if kind == "upstream":
                    fn(up, ru, *dims, samples)
                else:
                    fn(rf, *dims, samples)
            except Exception as e:        # a row the model cannot reach is reported, not dropped
                (ru if kind == "upstream" else rf).note = f"failed: {type(e).__name__}: {e}"[:160]
            print(f"[{time.time() - t0:6.0f}s] {fam:8s} {shape:18s} {kind:8s} ({time.time() - t:.1f}s)",
                  flush=True)
    # fit on every other reachable row of each family, validate on the rest
    for fam in ("decode", "prefill", "gemm"):
        reach = [r for r in upstream if r.family == fam and r.replays]
        for i, r in enumerate(reach):
            r.fit = i % 2 == 0
    fitted = [r for r in upstream if r.fit]
    params, host_us = fit(fitted) if fitted else (timing.Params(), 0.0)
    print(f"\nfitted on {len(fitted)} rows: launch_us={params.launch_us:.2f} "
          + " ".join(f"{name}={getattr(params, name)}" for name in GRID)
          + f" eager_host_us={host_us:.1f} (GEMM table only)\n")
    print("Calibration (upstream kernels, modeled vs measured on MI355X)")
    print(f"{'family':8s} {'shape':18s} {'half':4s} {'modeled':>9s} {'measured':>9s} {'error':>7s} {'samp':>5s}")
    halves = {True: [], False: []}
    for r in upstream:
        mod = r.modeled(params, host_us)
        if mod is None:
            print(f"{r.family:8s} {r.shape:18s} {'-':4s} {'-':>9s} {r.measured:9.2f} {'-':>7s}   {r.note}")
            continue
        e = error(mod, r.measured)
        halves[r.fit].append(e)
        print(f"{r.family:8s} {r.shape:18s} {'fit' if r.fit else 'val':4s} {mod:9.2f} {r.measured:9.2f} "
              f"{100 * e:+6.1f}% {100 * r.sampling_error:4.1f}%  {r.note}")
    for half, name in ((True, "fit"), (False, "validation")):
        es = halves[half]
        if es:
            inside = sum(abs(e) <= 0.30 for e in es)
            print(f"{name}: {len(es)} rows, geomean |error| {100 * geomean_abs(es):.1f}%, "
                  f"max |error| {100 * max(map(abs, es)):.1f}%, within +-30%: {inside}/{len(es)}")
    print("\nflyaot vs upstream on the model (us; bound = max(HBM bytes / 8 TB/s, MFMA work / peak))")
    print(f"{'family':8s} {'shape':18s} {'flyaot':>9s} {'upstream':>9s} {'measured':>9s} {'target':>9s} "
          f"{'bound':>8s} {'fly/up':>7s}")
    out = []
    for ru, rf in zip(upstream, ours):
        mu, mf = ru.modeled(params, host_us), rf.modeled(params, host_us)
        f = lambda x: f"{x:9.2f}" if x is not None else f"{'-':>9s}"   # noqa: E731
        ratio = f"{mf / mu:7.2f}" if mu and mf else f"{'-':>7s}"
        print(f"{ru.family:8s} {ru.shape:18s} {f(mf)} {f(mu)} {f(ru.measured)} {f(ru.target)} "
              f"{(ru.bound_us or 0):8.2f} {ratio}  {rf.note}")
        for r, mod in ((ru, mu), (rf, mf)):
            out.append({"family": r.family, "shape": r.shape, "kernel": r.kernel, "modeled_us": mod,
                        "measured_us": r.measured if r.kernel == "upstream" else None,
                        "target_us": r.target, "bound_us": r.bound_us, "fit": r.fit,
                        "sampling_error": r.sampling_error, "note": r.note})
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps({"params": {**params.__dict__, "eager_host_us": host_us},
                                                    "rows": out}, indent=1))
    print(f"\ntotal {time.time() - t0:.0f}s. Modeled times are outputs of a calibrated model, not measurements.")


if __name__ == "__main__":
    main()
