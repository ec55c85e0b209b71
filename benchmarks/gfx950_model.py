"""Modeled MI355X kernel times (the emulator's timing model) against the seed tables' measurements.

    python benchmarks/gfx950_model.py [--aiter DIR [--no-fit] [--swapped]] [--json PATH] [--only decode,prefill,gemm]
        [--rows decode:0,gemm:1] [--samples N] [--refine-to PCT] [--max-refine K] [--repeat] [--plot DIR]

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
upstream, the "New" target, the row's floor (flyaot.ops.floors: the largest of its HBM, MFMA and VALU
terms) and device time / floor (device time = the kernels plus the -inf fill, without the launch
and host terms). Each op time is its kernels' modeled time, plus the -inf fill of the logits for the
MQA ops that fill (upstream's always; flyaot's decode and prefill kernels write the -inf cells
themselves, so those rows have no fill term), plus one launch overhead.
Without --aiter only flyaot's rows run, on the shipped parameters (no calibration); --aiter with
--no-fit validates the shipped parameters on both halves without refitting.
--plot DIR writes one roofline chart per family (DIR/roofline_<family>.png; needs matplotlib, the
`bench` extra). --docs FILE puts the printed tables into FILE's marked block after a clean run.
A row that cannot be modeled makes the run exit with status 1, naming it (and --docs writes nothing).
These are model outputs, not measurements.
"""
import argparse
import contextlib
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
# (B, Q, KV, old us, new us). The table's "AgentX trace" row (781.16 / 610.38 us) has no published shape
# and is left out.
PREFILL = [(1, 512, 65536, 249.20, 200.74), (1, 1024, 65536, 473.36, 377.41),
           (1, 2048, 32768, 451.07, 356.27), (1, 1024, 131072, 910.54, 693.36), (4, 256, 16384, 121.77, 93.07),
           (8, 128, 8192, 69.46, 50.87), (1, 4096, 4096, 98.64, 56.60), (1, 8192, 8192, 372.80, 213.22),
           (2, 8192, 8192, 745.16, 423.80), (1, 8192, 32768, 1519.69, 1206.67)]
# (N, K, M, measured us of aiter's FlyDSL A16WFP4 kernel = the flyaot target)
GEMM = [(1024, 3584, 1, 10.645), (1024, 3584, 512, 16.589), (1024, 3584, 4096, 44.048),
        (3584, 512, 1, 8.360), (3584, 512, 512, 10.912), (3584, 512, 4096, 33.172)]

PAGE, D = 64, 128


class Row:
    def __init__(self, family, shape, kernel, measured, target, floor, fill_bytes=0):
        self.family, self.shape, self.kernel = family, shape, kernel
        self.measured, self.target, self.floor, self.fill_bytes = measured, target, floor, fill_bytes
        self.replays = []           # params -> Timing, one per kernel launch of the op
        self.fit = False
        self.note = ""
        self.failed = ""
        self.sampling_error = 0.0
        self.eager = family == "gemm"     # its table timed eager launches, the MQA tables graph replays

    def device(self, params: timing.Params, fill: bool = True) -> float | None:
        """The op's device time: its kernels plus its -inf fill (if it fills and `fill`), no launch or
        host term."""
        if not self.replays:
            return None
        us = sum(r(params).kernel_us for r in self.replays)
        if fill:
            us += self.fill_bytes / (T.HBM_BYTES_PER_S * min(1.0, params.bandwidth_efficiency)) * 1e6
        return us

    def modeled(self, params: timing.Params, host_us: float = 0.0, fill: bool = True) -> float | None:
        dev = self.device(params, fill)
        return None if dev is None else dev + params.launch_us + (host_us if self.eager else 0.0)

    def timed(self, params: timing.Params, host_us: float = 0.0) -> float | None:
        """The modeled counterpart of the row's measurement: the MQA tables state median kernel times,
        so their op's -inf fill (a kernel of its own) is not in them; the GEMM table's eager launches
        carry the host cost."""
        return self.modeled(params, host_us, fill=False)


# ------------------------------------------------------------------------------------------ upstream
# Every launch's sample doubles (other strata of the same grid) while its sampling error is above
# REFINE["target_error"], up to REFINE["factor"][family] times the family's sample size (--refine-to,
# --max-refine). A GEMM's tiles are alike and heavy to trace: its sample rarely needs more, and costs most.
REFINE = {"target_error": 0.005, "factor": {"decode": 8, "prefill": 8, "gemm": 2}}


def _refine(samples, family) -> dict:
    return {"target_error": REFINE["target_error"], "max_samples": samples * REFINE["factor"][family]}


def _time(launch, samples, family):
    res = timing.time_launch(launch, samples=samples, functional=False, **_refine(samples, family))
    return res, timing.replay(launch)


def _unpoisoned(bt, pages):
    """The test data marks unused block-table entries with an invalid page; the upstream kernels
    prefetch the next chunk's page ids past a sequence's end, so point those at a real page."""
    return torch.where((bt < 0) | (bt >= pages), torch.zeros_like(bt), bt)


def upstream_decode(up, row, b, nn, ctx_max, heads, samples):
    import aiter_kernels as AK
    from mqa_decode import problem
    from flyaot.kernel_defs.mqa_runs_schedule.plan import default_parallel_units
    from flyaot.kernel_defs.mqa_runs_schedule.reference import varctx_reference as build_schedule
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
    res, rep = _time(L, samples, row.family)
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
    res, rep = _time(L, samples, row.family)
    row.replays.append(rep)
    row.sampling_error = res.sampling_error
    return res


def upstream_gemm(up, row, n, k, m, samples):
    import aiter_kernels as AK
    a = torch.randn(m, k, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    L, note = AK.gemm_launch(up, n, k, m, a)
    res, rep = _time(L, samples, row.family)
    row.replays.append(rep)
    row.sampling_error = res.sampling_error
    row.note = "cfg " + note
    return res


# ------------------------------------------------------------------------------------------ flyaot
def _recorded(call, samples, family, phase=0.0):
    from flyaot.runtime.drivers import emu
    with emu.recording(samples=samples, functional=False, phase=phase, **_refine(samples, family)) as rec:
        call()
    return rec.launches


def _recorded_fill(row, call, samples, phase, shape):
    """_recorded(call(out)) for an output of `shape`, and the row's -inf fill kept only when the op
    fills that output itself."""
    from flyaot.ops.modeled import FillWatch
    watch = FillWatch(torch.empty(shape))
    launches = _recorded(lambda: call(watch.out), samples, row.family, phase)
    if not watch.filled:
        row.fill_bytes = 0
    return launches


def flyaot_decode(row, b, nn, ctx_max, heads, samples, phase=0.0):
    from mqa_decode import problem
    from flyaot.ops import pa_mqa_logits_fp4
    args, msl, _ = problem(b, nn, ctx_max, heads, "cpu")
    launches = _recorded_fill(row, lambda out: pa_mqa_logits_fp4(*args, msl, next_n=nn, out=out), samples, phase,
                              (b * nn, msl))
    row.replays += [rep for _, _, rep in launches]
    row.sampling_error = max(r.sampling_error for _, r, _ in launches)
    row.note = " + ".join(name for name, _, _ in launches)


def flyaot_prefill(row, b, q, kv, samples, phase=0.0):
    from mqa_prefill import problem
    from flyaot.ops import compute_prefill_schedule, pa_mqa_logits_fp4_prefill
    tensors, windows, msl = problem(b, q, kv, "cpu")
    info, slots = compute_prefill_schedule(*windows, page_size=PAGE, max_seq_len=msl)
    launches = _recorded_fill(row, lambda out: pa_mqa_logits_fp4_prefill(*tensors, *windows, msl, out=out,
                                                                          cta_info=info, n_ctas=slots),
                              samples, phase, (tensors[0].shape[0], msl))
    row.replays += [rep for _, _, rep in launches]
    row.sampling_error = max(r.sampling_error for _, r, _ in launches)
    row.note = " + ".join(name for name, _, _ in launches)


def flyaot_gemm(row, n, k, m, samples, phase=0.0):
    from flyaot.kernel_defs.gemm_a16wfp4 import reference
    from flyaot.ops import gemm_a16wfp4, prepare_mxfp4_weight
    g = torch.Generator().manual_seed(0)
    w, s = reference.random_weight(n, k, generator=g)
    prep = prepare_mxfp4_weight(w, s)
    x = torch.randn(m, k, generator=g).to(torch.bfloat16)
    out = torch.empty(m, n, dtype=torch.bfloat16)
    launches = _recorded(lambda: gemm_a16wfp4(x, prep, out=out), samples, row.family, phase)
    row.replays += [rep for _, _, rep in launches]
    row.sampling_error = max(r.sampling_error for _, r, _ in launches)
    row.note = " + ".join(name for name, _, _ in launches)


# ------------------------------------------------------------------------------------------ table
def build_rows(families, picks=None, extra=()):
    """[(family, shape label, runner args, measured, target, Floor, fill bytes)] of the seed rows of
    `families` (only the table indices picks[family] where given), then of the `extra` (family, dims)
    shapes, which have no measurement or target."""
    from flyaot.ops import floors
    seeds = {"decode": [((b, nn, c, h), old, new) for b, nn, c, h, old, new in DECODE],
             "prefill": [((b, q, kv), old, new) for b, q, kv, old, new in PREFILL],
             "gemm": [((n, k, m), meas, meas) for n, k, m, meas in GEMM]}
    chosen = [(fam, dims, meas, new) for fam in ("decode", "prefill", "gemm") if fam in families
              for i, (dims, meas, new) in enumerate(seeds[fam]) if picks is None or i in picks.get(fam, ())]
    jobs = []
    for fam, dims, meas, new in chosen + [(fam, dims, None, None) for fam, dims in extra]:
        if fam == "decode":
            b, nn, c, h = dims
            shape = f"{b}x{nn}x{c}" + ("" if h == 64 else f" H{h}")
            jobs.append((fam, shape, dims, meas, new, floors.mqa_decode(_ctx(b, c), nn, h, max_seq_len=c),
                         b * nn * c * 4))
        elif fam == "prefill":
            b, q, kv = dims
            jobs.append((fam, f"{b}x{q}x{kv}", dims, meas, new, floors.mqa_prefill(b, q, kv), b * q * kv * 4))
        else:
            n, k, m = dims
            jobs.append((fam, f"{n}x{k} M={m}", dims, meas, new, floors.gemm_a16wfp4(n, k, m), 0))
    return jobs


def parse_shape(spec: str):
    """--shape decode:BxNEXT_NxMAX_CTX[xHEADS] | prefill:BxQxKV | gemm:NxKxM -> (family, dims)."""
    fam, _, dims = spec.partition(":")
    arity = {"decode": (3, 4), "prefill": (3,), "gemm": (3,)}
    try:
        vals = tuple(int(x) for x in dims.split("x"))
    except ValueError:
        vals = ()
    if fam not in arity or len(vals) not in arity[fam] or min(vals, default=0) < 1:
        raise SystemExit(f"--shape {spec!r}: expected decode:BxNEXT_NxMAX_CTX[xHEADS], prefill:BxQxKV or "
                         f"gemm:NxKxM (positive integers)")
    return fam, (vals + (64,) if fam == "decode" and len(vals) == 3 else vals)


def _ctx(b, c):
    from mqa_decode import contexts
    return contexts(b, c)


def error(mod, meas):
    return mod / meas - 1


def geomean_abs(errs):
    errs = [abs(math.log(1 + e)) for e in errs]
    return math.exp(sum(errs) / len(errs)) - 1 if errs else float("nan")


# The fit's search grid per parameter, and the range each may take physically (docs/timing-model.md
# says why). The fit searches inside the physical ranges only; the grid points outside them are probes:
# from the fit, each parameter is moved to its outside points one at a time, and where that lowers the
# fit rows' geomean |error| by more than BOUND_COST the parameter is reported as not physical (the
# data wants a value the part cannot have). Two grids stop at a hard limit of the part: no level moves
# more than its peak bandwidth, no VALU instruction issues faster than the ISA's rate.
GRID = {"mem_latency_scale": (0.35, 0.5, 0.6, 0.7, 0.85, 1.0, 1.2, 1.4, 1.7, 2.0, 2.8),
        "bandwidth_efficiency": (0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0),
        "valu_scale": (1.0, 1.1, 1.2, 1.35, 1.5, 2.0, 3.0),
        "scaled_cvt_cycles": (4, 8, 12, 16, 20, 24, 32)}
PHYSICAL = {"mem_latency_scale": (0.5, 2.0), "bandwidth_efficiency": (0.5, 1.0), "valu_scale": (1.0, 2.0),
            "scaled_cvt_cycles": (4, 32)}
BOUND_COST = 0.01      # geomean |error| points a probe outside the physical range must gain to count


def inside(name, v) -> bool:
    lo, hi = PHYSICAL[name]
    return lo <= v <= hi


class Objective:
    """The fit's loss over `rows` (sum of squared log errors, the two fixed overheads searched exactly
    for each point: the graph-replayed launch, and the extra host cost of an eager launch, which only
    the GEMM table includes), cached per point of the grid."""
    OVERHEADS = [(g * 0.1, h * 0.5) for g in range(0, 41) for h in range(0, 21)]

    def __init__(self, rows):
        self.rows, self.cache = rows, {}

    def __call__(self, p) -> tuple:
        """(loss, launch_us, host_us, geomean |error|) at the grid point of `p`."""
        key = tuple(getattr(p, name) for name in GRID)
        if key not in self.cache:
            base = timing.Params(launch_us=0.0, **dict(zip(GRID, key)))
            pre = [(r.timed(base), r.measured, r.eager) for r in self.rows]
            loss, g, h = min((sum(math.log((m + g + (h if e else 0.0)) / meas) ** 2 for m, meas, e in pre), g, h)
                             for g, h in self.OVERHEADS)
            gm = geomean_abs([(m + g + (h if e else 0.0)) / meas - 1 for m, meas, e in pre])
            self.cache[key] = (loss, g, h, gm)
        return self.cache[key]


def fit(rows):
    """Least squares of the log error over `rows`: coordinate descent over each parameter's grid points
    inside its physical range. Returns (Params, host_us, probes), probes {name: (outside value, fit
    geomean there, fit geomean at the fit)} for the parameters whose best outside point beats the fit."""
    loss_of = Objective(rows)
    cur = timing.Params(launch_us=0.0, mem_latency_scale=1.0, bandwidth_efficiency=1.0, valu_scale=1.0,
                        scaled_cvt_cycles=T.VALU_CYCLES)
    assert all(getattr(cur, name) in values and inside(name, getattr(cur, name)) for name, values in GRID.items())
    for _ in range(3):
        for name, values in GRID.items():
            cur = min((timing.Params(**{**cur.__dict__, name: v}) for v in values if inside(name, v)),
                      key=lambda p: loss_of(p)[0])
    _, g, h, gm = loss_of(cur)
    probes = {}
    for name, values in GRID.items():
        out = [(loss_of(timing.Params(**{**cur.__dict__, name: v})), v) for v in values if not inside(name, v)]
        better = [(res[3], v) for res, v in out if res[0] < loss_of(cur)[0]]
        if better:
            probes[name] = (*min(better)[::-1], gm)
    return timing.Params(**{**cur.__dict__, "launch_us": g}), h, probes


def parameter_checks(params, probes=None) -> list:
    """(name, value, ok, why) per parameter: inside its physical range, and (after a fit) no probe
    outside it that gains more than BOUND_COST on the fit rows."""
    out = []
    for name in PHYSICAL:
        v, why, note = getattr(params, name), [], ""
        if not inside(name, v):
            why.append(f"outside its physical range {list(PHYSICAL[name])}")
        if probes and name in probes:
            pv, there, here = probes[name]
            gain = f"{pv} outside the range: fit geomean {100 * here:.1f}% -> {100 * there:.1f}%"
            if here - there > BOUND_COST:
                why.append(f"the fit rows want {gain}")
            else:
                note = f" (at its bound; {gain}, within {100 * BOUND_COST:.0f} point)"
        out.append((name, v, not why, "; ".join(why) or note))
    return out


def parse_rows(spec: str, families) -> dict:
    """--rows "decode:0,3,gemm:1" -> {"decode": {0, 3}, "gemm": {1}} (indices into the seed tables)."""
    sizes = {"decode": len(DECODE), "prefill": len(PREFILL), "gemm": len(GEMM)}
    picks, fam = {}, None
    for item in filter(None, spec.split(",")):
        if ":" in item:
            fam, item = item.split(":", 1)
            if fam not in sizes:
                raise SystemExit(f"--rows: unknown family {fam!r}; known: {', '.join(sizes)}")
        if fam is None or not item.isdigit() or int(item) >= sizes[fam]:
            raise SystemExit(f"--rows: {item!r} is not an index of a seed table (FAMILY:I[,I...], "
                             f"sizes {sizes})")
        picks.setdefault(fam, set()).add(int(item))
    unknown = set(picks) - set(families)
    if unknown:
        raise SystemExit(f"--rows names {', '.join(sorted(unknown))}, which --only leaves out")
    return picks


def fmt(x, width=9):
    return f"{x:{width}.2f}" if x is not None else f"{'-':>{width}s}"


def ratio(x, y, width=7):
    return f"{x / y:{width}.2f}" if x is not None and y else f"{'-':>{width}s}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--aiter", help="local aiter checkout (e.g. at commit cae82635); without it only flyaot's "
                                    "rows run, on the shipped model parameters")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--no-fit", action="store_true",
                    help="with --aiter: validate the shipped parameters on both halves instead of refitting "
                         "(regenerates the docs tables without the fit's minutes)")
    ap.add_argument("--only", default="decode,prefill,gemm")
    ap.add_argument("--rows", default=None, help="only these seed-table rows: FAMILY:I[,I...][,FAMILY:I...]")
    ap.add_argument("--shape", action="append", default=[],
                    help="also model this shape (no measurement; repeatable): decode:BxNEXT_NxMAX_CTX[xHEADS], "
                         "prefill:BxQxKV, gemm:NxKxM; without --rows, only these")
    ap.add_argument("--samples", type=int, default=12, help="workgroups emulated per launch")
    ap.add_argument("--decode-samples", type=int, default=96,
                    help="workgroups emulated per decode launch (cheap ones; ragged contexts need more)")
    ap.add_argument("--prefill-samples", type=int, default=4,
                    help="workgroups emulated per prefill launch (flyaot's walk every chunk of a row)")
    ap.add_argument("--refine-to", type=float, default=100 * REFINE["target_error"],
                    help="double a launch's sample while its sampling error is above this many percent")
    ap.add_argument("--max-refine", type=int, default=None,
                    help="... up to this many times the family's sample size, every family (1: never refine; "
                         "default: " + ", ".join(f"{k} {v}" for k, v in REFINE["factor"].items()) + ")")
    ap.add_argument("--fit-half", type=int, choices=(0, 1), default=0,
                    help="fit on the seed rows 0, 2, 4 ... of each table (0) or 1, 3, 5 ... (1); validate on "
                         "the others")
    ap.add_argument("--swapped", action="store_true",
                    help="with --aiter: also fit on the other half of the rows and print that split's "
                         "parameters and fit/validation errors (the fit's minutes once more)")
    ap.add_argument("--repeat", action="store_true",
                    help="model every flyaot row a second time from other workgroups of the same grid and "
                         f"print how far the two estimates differ (goal <= {100 * STABILITY_GOAL:.0f}%%)")
    ap.add_argument("--plot", help="write a roofline chart per family into this folder (needs matplotlib)")
    ap.add_argument("--docs", help="after a clean run, put the printed tables into this markdown file's "
                                   f"{DOCS_BEGIN} block")
    a = ap.parse_args(argv)
    families = [f for f in a.only.split(",") if f]
    bad = set(families) - {"decode", "prefill", "gemm"}
    if bad or not families:
        ap.error(f"--only: expected some of decode,prefill,gemm, got {a.only!r}")
    if min(a.samples, a.decode_samples, a.prefill_samples, 1 if a.max_refine is None else a.max_refine) < 1:
        ap.error("--samples, --decode-samples, --prefill-samples and --max-refine must be >= 1")
    if a.refine_to < 0:
        ap.error("--refine-to must be >= 0")
    REFINE["target_error"] = a.refine_to / 100
    if a.max_refine is not None:
        REFINE["factor"] = dict.fromkeys(REFINE["factor"], a.max_refine)
    if a.docs and (not pathlib.Path(a.docs).is_file() or DOCS_BEGIN not in pathlib.Path(a.docs).read_text()):
        ap.error(f"--docs {a.docs}: no {DOCS_BEGIN} block")
    if a.no_fit and not a.aiter:
        ap.error("--no-fit needs --aiter (without it nothing is fitted)")
    if a.swapped and not a.aiter:
        ap.error("--swapped needs --aiter (without it nothing is fitted)")
    if a.aiter and not pathlib.Path(a.aiter).is_dir():
        ap.error(f"--aiter {a.aiter}: not a folder")
    if a.plot:
        import plots                # fails before any row runs when matplotlib is missing
        plots.require()
    extra = [parse_shape(x) for x in a.shape]
    picks = parse_rows(a.rows, families) if a.rows is not None else ({} if extra else None)
    jobs = build_rows(set(families), picks, extra)
    up = None
    if a.aiter:
        import aiter_kernels
        up = aiter_kernels.Upstream(a.aiter)
    else:
        print("no --aiter: flyaot rows only, on the shipped model parameters (no calibration)")
    upstream, ours = [], []
    family_samples = {"decode": a.decode_samples, "prefill": a.prefill_samples, "gemm": a.samples}
    t0 = time.time()
    for fam, shape, dims, meas, new, floor, fill in jobs:
        ru = Row(fam, shape, "upstream", meas, new, floor, fill)
        rf = Row(fam, shape, "flyaot", None, new, floor, fill)
        rf.dims = dims
        upstream.append(ru)
        ours.append(rf)
        runs = [("flyaot", rf, {"decode": flyaot_decode, "prefill": flyaot_prefill, "gemm": flyaot_gemm}[fam])]
        if up is not None:
            runs.insert(0, ("upstream", ru, {"decode": upstream_decode, "prefill": upstream_prefill,
                                             "gemm": upstream_gemm}[fam]))
        for kind, row, fn in runs:
            t = time.time()
            samples = family_samples[fam]
            try:
                fn(up, row, *dims, samples) if kind == "upstream" else fn(row, *dims, samples)
            except Exception as e:        # reported with the row, and the run fails at the end
                row.failed = f"{type(e).__name__}: {e}"[:200]
            print(f"[{time.time() - t0:6.0f}s] {fam:8s} {shape:18s} {kind:8s} ({time.time() - t:.1f}s)"
                  + (f" FAILED {row.failed}" if row.failed else ""), flush=True)
        if a.repeat and not rf.failed:
            rf.repeat = Row(fam, shape, "flyaot", None, new, floor, fill)
            try:
                runs[-1][2](rf.repeat, *dims, family_samples[fam], phase=0.5)
            except Exception as e:
                rf.failed = f"repeat: {type(e).__name__}: {e}"[:200]
    report = Tee(sys.stdout)
    with contextlib.redirect_stdout(report):
        params, host_us, out = tables(upstream, ours, up is not None, not a.no_fit, a.fit_half, a.swapped)
        floor_goals(ours, params)
        if a.repeat:
            stability(ours, params)
        print(f"\ntotal {time.time() - t0:.0f}s. Modeled times are outputs of a calibrated model, not measurements.")
    if a.json:
        write_atomic(pathlib.Path(a.json), json.dumps({"params": {**params.__dict__, "eager_host_us": host_us},
                                                       "rows": out}, indent=1))
    if a.plot:
        for path in plots.roofline(out, pathlib.Path(a.plot)):
            print(f"wrote {path}")
    failed = [f"{r.family} {r.shape} ({r.kernel}): {r.failed}" for r in upstream + ours if r.failed]
    if failed:
        print(f"{len(failed)} rows could not be modeled:\n  " + "\n  ".join(failed), file=sys.stderr)
        return 1
    if a.docs:
        replace_block(pathlib.Path(a.docs), report.text.strip("\n"))
        print(f"wrote the tables into {a.docs}")
    return 0


class Tee:
    """A stdout that also keeps what was written (the report --docs puts into the docs)."""

    def __init__(self, stream):
        self.stream, self.parts = stream, []

    def write(self, text):
        self.parts.append(text)
        return self.stream.write(text)

    def flush(self):
        self.stream.flush()

    @property
    def text(self) -> str:
        return "".join(self.parts)


DOCS_BEGIN, DOCS_END = "<!-- gfx950_model.py tables:begin -->", "<!-- gfx950_model.py tables:end -->"


def replace_block(path: pathlib.Path, report: str) -> None:
    """Put `report` in a code block between the markers of `path` (written whole or not at all)."""
    text = path.read_text()
    if text.count(DOCS_BEGIN) != 1 or text.count(DOCS_END) != 1 or text.index(DOCS_BEGIN) > text.index(DOCS_END):
        raise SystemExit(f"--docs {path}: needs one {DOCS_BEGIN} ... {DOCS_END} block")
    head, rest = text.split(DOCS_BEGIN)
    _, tail = rest.split(DOCS_END)
    write_atomic(path, f"{head}{DOCS_BEGIN}\n```\n{report}\n```\n{DOCS_END}{tail}")


def tables(upstream, ours, calibrated: bool, refit: bool = True, half: int = 0, swapped: bool = False):
    """Print the calibration (when upstream ran; refit=False: on the shipped parameters) and the
    flyaot table; (Params, host_us, JSON rows)."""
    if calibrated:
        params, host_us = calibrate(upstream, refit, half, swapped)
    else:
        params, host_us = timing.Params(), 0.0
    print("\nflyaot vs upstream on the model (us; floor = max of its HBM, MFMA, VALU terms; dev = device time: "
          "kernels + -inf fill, no launch or host term)")
    print(f"{'family':8s} {'shape':18s} {'flyaot':>9s} {'upstream':>9s} {'measured':>9s} {'target':>9s} "
          f"{'floor':>8s} {'bound':>5s} {'dev/flr':>7s} {'up/flr':>7s} {'fly/up':>7s}")
    out = []
    for ru, rf in zip(upstream, ours):
        mu, mf = ru.modeled(params, host_us), rf.modeled(params, host_us)
        du, df = ru.device(params), rf.device(params)
        fl = rf.floor
        print(f"{ru.family:8s} {ru.shape:18s} {fmt(mf)} {fmt(mu)} {fmt(ru.measured)} {fmt(ru.target)} "
              f"{fl.us:8.2f} {fl.bound:>5s} {ratio(df, fl.us)} {ratio(du, fl.us)} {ratio(mf, mu)}  {rf.note}")
        for r, mod, dev in ((ru, mu, du), (rf, mf, df)):
            if r.kernel == "upstream" and not calibrated:
                continue
            out.append({"family": r.family, "shape": r.shape, "kernel": r.kernel, "modeled_us": mod,
                        "device_us": dev, "measured_us": r.measured if r.kernel == "upstream" else None,
                        "target_us": r.target, "floor_us": fl.us, "floor_terms_us": fl.terms,
                        "floor_bound": fl.bound, "fit": r.fit, "sampling_error": r.sampling_error,
                        "note": r.note, "failed": r.failed})
    return params, host_us, out


# The device-time / floor goals for flyaot's large seed-table rows (throughput rows; the small ones are
# latency-bound): (family, which rows, predicate on the row's dims, the goal). Decode dims are
# (B, next_n, max_ctx, heads), prefill (B, Q, KV), GEMM (N, K, M). Extra --shape rows are not judged.
FLOOR_GOALS = [("decode", "next_n 4", lambda d: d[1] == 4, 1.5),
               ("prefill", ">= 16M query-key cells", lambda d: d[0] * d[1] * d[2] >= 2**24, 1.5),
               ("gemm", "M >= 512", lambda d: d[2] >= 512, 2.0)]


def floor_goals(ours, params) -> None:
    """Print, per goal of FLOOR_GOALS with seed rows in this run (those with a target), how many rows
    meet it and the worst one."""
    lines = []
    for fam, which, pick, goal in FLOOR_GOALS:
        rows = [(r.device(params) / r.floor.us, r) for r in ours
                if r.family == fam and r.replays and r.target is not None and pick(r.dims)]
        if rows:
            met = sum(q <= goal for q, _ in rows)
            worst, wr = max(rows, key=lambda x: x[0])
            lines.append(f"  {fam:8s} {which:24s} <= {goal:.1f}x: {met}/{len(rows)} rows "
                         f"(worst {wr.shape} {worst:.2f}x)" + ("" if met == len(rows) else "  NOT MET"))
    if lines:
        print("\nFloor goals (flyaot device time / floor)", *lines, sep="\n")


STABILITY_GOAL = 0.03


def stability(ours, params) -> float:
    """Print each repeated row's two device-time estimates (samples at phase 0 and 0.5 of their
    strata: disjoint workgroups where the grid has more than twice the samples) and return the
    largest relative difference."""
    print(f"\nStability (flyaot rows modeled twice, from two different samples of the grid's workgroups; "
          f"goal <= {100 * STABILITY_GOAL:.0f}%)")
    worst = 0.0
    for r in ours:
        rep = getattr(r, "repeat", None)
        if rep is None or not r.replays or not rep.replays:
            continue
        a, b = r.device(params), rep.device(params)
        d = abs(a - b) / max(a, b)
        worst = max(worst, d)
        print(f"{r.family:8s} {r.shape:18s} {a:9.2f} {b:9.2f} {100 * d:5.1f}%")
    print(f"stability: max difference {100 * worst:.1f}% "
          + ("(within the goal)" if worst <= STABILITY_GOAL else "(ABOVE the goal)"))
    return worst


def write_atomic(path: pathlib.Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def split(upstream, half: int) -> list:
    """Mark every other modeled upstream row of each family, from row `half` on, as a fit row; return them."""
    for fam in ("decode", "prefill", "gemm"):
        reach = [r for r in upstream if r.family == fam and r.replays and r.measured is not None]
        for i, r in enumerate(reach):
            r.fit = i % 2 == half
    return [r for r in upstream if r.fit]


def print_params(head, params, host_us, probes=None) -> None:
    print(f"\n{head}: launch_us={params.launch_us:.2f} "
          + " ".join(f"{name}={getattr(params, name)}" for name in GRID)
          + f" eager_host_us={host_us:.1f} (GEMM table only)")
    for name, v, ok, why in parameter_checks(params, probes):
        lo, hi = PHYSICAL[name]
        print(f"  {name:21s} {v:<6} grid {GRID[name][0]}..{GRID[name][-1]}, physical [{lo}, {hi}]: "
              + (f"ok{why}" if ok else f"NOT PHYSICAL ({why})"))


def summary(upstream, params, host_us) -> dict:
    """{True: fit errors, False: validation errors} of the modeled upstream rows."""
    halves = {True: [], False: []}
    for r in upstream:
        mod = r.timed(params, host_us) if r.measured is not None else None
        if mod is not None:
            halves[r.fit].append(error(mod, r.measured))
    return halves


def print_summary(halves, prefix="") -> None:
    for half, name in ((True, "fit"), (False, "validation")):
        es = halves[half]
        if es:
            inside = sum(abs(e) <= 0.30 for e in es)
            print(f"{prefix}{name}: {len(es)} rows, geomean |error| {100 * geomean_abs(es):.1f}%, "
                  f"max |error| {100 * max(map(abs, es)):.1f}%, within +-30%: {inside}/{len(es)}")


def calibrate(upstream, refit: bool = True, half: int = 0, swapped: bool = False):
    """Fit on every other modeled upstream row of each family, from row `half` on (or, refit=False,
    take the shipped parameters), validate on the rest; print both halves and the parameters'
    physical checks. swapped: also fit on the other half and print that split's parameters and errors."""
    fitted = split(upstream, half)
    if refit and fitted:
        params, host_us, probes = fit(fitted)
        head = f"fitted on {len(fitted)} rows"
    else:
        params, host_us, probes = timing.Params(), T.EAGER_HOST_US, None
        head = "shipped parameters (no refit)"
    print_params(head, params, host_us, probes)
    print()
    print("Calibration (upstream kernels, modeled vs measured on MI355X)")
    print(f"{'family':8s} {'shape':18s} {'half':4s} {'modeled':>9s} {'measured':>9s} {'error':>7s} {'samp':>5s}")
    for r in upstream:
        if r.measured is None:
            continue
        mod = r.timed(params, host_us)
        if mod is None:
            print(f"{r.family:8s} {r.shape:18s} {'-':4s} {'-':>9s} {r.measured:9.2f} {'-':>7s}   FAILED")
            continue
        print(f"{r.family:8s} {r.shape:18s} {'fit' if r.fit else 'val':4s} {mod:9.2f} {r.measured:9.2f} "
              f"{100 * error(mod, r.measured):+6.1f}% {100 * r.sampling_error:4.1f}%  {r.note}")
    print_summary(summary(upstream, params, host_us))
    if swapped:
        other = split(upstream, 1 - half)
        if other:
            p2, h2, probes2 = fit(other)
            print_params(f"swapped split (fit on the other half, {len(other)} rows)", p2, h2, probes2)
            print_summary(summary(upstream, p2, h2), prefix="swapped split ")
        split(upstream, half)
    return params, host_us


if __name__ == "__main__":
    sys.exit(main())
