"""What an op call costs besides its kernel: device ops launched per schedule builder and per op call,
and the host time of one eager op call with the kernel launch replaced by a no-op.

    python benchmarks/schedule_cost.py [--device cpu|cuda] [--n 2000] [--runs 5]

Device kernels are counted two ways around each builder and each op call: flyaot kernel launches
(runtime.launch replaced by a counter, so nothing runs) and torch device ops (a TorchDispatchMode:
every aten op but views and allocations is one device kernel on a GPU). Host times are the best of
`runs` loops of `n` calls, printed as a ratio to one native torch op (`x.add_(1)` on a 16-element
tensor of the same device) measured in the same run.
"""
import argparse
import os
import sys

import torch
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from flyaot import runtime  # noqa: E402
from flyaot.kernel_defs.registry import LaunchPlan  # noqa: E402
from flyaot.compat import aiter  # noqa: E402
from flyaot.kernel_defs.gemm_a16wfp4.reference import random_weight  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from launch_overhead import best_us  # noqa: E402  (one timing loop for the host-cost benchmarks)
from flyaot.kernel_defs.mqa_common import layouts  # noqa: E402
from flyaot.kernel_defs.mqa_decode import plan as decode_plan  # noqa: E402
from flyaot.kernel_defs.mqa_runs_schedule.reference import varctx_reference  # noqa: E402
from flyaot.kernel_defs.mqa_prefill import plan as prefill_plan  # noqa: E402
from flyaot.kernel_defs.mqa_prefill_meta import plan as prefill_meta_plan  # noqa: E402
from flyaot.kernel_defs.mqa_prefill_meta import reference as prefill_meta_reference  # noqa: E402
from flyaot.ops import gemm_a16wfp4, pa_mqa_logits_fp4, pa_mqa_logits_fp4_prefill, prepare_mxfp4_weight  # noqa: E402
from flyaot.ops import compute_prefill_schedule, compute_varqlen_windows  # noqa: E402

NO_KERNEL = {"empty", "empty_strided", "empty_like", "detach", "lift_fresh", "alias", "_local_scalar_dense"}


class DeviceOps(TorchDispatchMode):
    """Counts the aten ops that launch a device kernel, and the host syncs (.item() and the like)."""

    def __init__(self):
        super().__init__()
        self.kernels, self.syncs = [], 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name == "_local_scalar_dense":
            self.syncs += 1
        if not func.is_view and name not in NO_KERNEL:
            self.kernels.append(name)
        return func(*args, **(kwargs or {}))


class NoLaunch:
    """runtime.launch / launch_all replaced by no-ops (nothing runs) that keep the plans they are given
    when `record`."""

    def __init__(self, record=True):
        self.record = record

    def __enter__(self):
        self.plans, self._real = [], (runtime.launch, runtime.launch_all)
        if self.record:
            runtime.launch = lambda plan, stream=None: self.plans.append(plan)
            runtime.launch_all = lambda plans, stream=None: self.plans.extend(plans)
        else:
            runtime.launch = lambda plan, stream=None: None
            runtime.launch_all = lambda plans, stream=None: None
        return self

    def __exit__(self, *exc):
        runtime.launch, runtime.launch_all = self._real


def count(fn):
    """(flyaot kernels, DeviceOps) of one call of fn: the plans it launches, or, for a plan_call body,
    returns as its (out, plans) result (a tuple of plans, one plan or None)."""
    with NoLaunch() as launched, DeviceOps() as d:
        result = fn()
    planned = result[1] if isinstance(result, tuple) and len(result) == 2 else None
    if isinstance(planned, LaunchPlan):
        planned = (planned,)
    elif not (isinstance(planned, tuple) and all(p is None or isinstance(p, LaunchPlan) for p in planned)):
        planned = ()              # e.g. a builder's (table, slots): its kernels were counted as launched
    return len(launched.plans) + len(planned), d


def problems(dev):
    g = torch.Generator().manual_seed(0)
    ctx = [900, 1000, 17, 512]                    # decode: 4 sequences, SGLang's H64 D128 page 64
    kv = layouts.make_paged_kv(ctx, 128, 64, g)
    q, qs = layouts.make_q((len(ctx), 1), 64, 128, g)
    w = torch.randn(len(ctx), 64, generator=g).to(torch.bfloat16)
    decode = tuple(t.to(dev) for t in (q, qs, kv.kv_cache, kv.kv_scale, kv.block_tables, w,
                                       torch.tensor(ctx, dtype=torch.int32)))
    rows = 64                                     # prefill: 64 rows, one per token, as SGLang's indexer
    lens = torch.randint(1, 1024, (rows,), generator=g, dtype=torch.int32)
    qp, qps = layouts.make_q((rows,), 64, 128, g)
    prefill = tuple(t.to(dev) for t in (qp, qps, kv.kv_cache, kv.kv_scale, kv.block_tables[:1].expand(rows, -1)
                                        .contiguous(), torch.randn(rows, 64, generator=g).to(torch.bfloat16)))
    windows = tuple(t.to(dev) for t in (torch.zeros(rows, dtype=torch.int32), torch.zeros(rows, dtype=torch.int32),
                                        lens))
    windows = (torch.arange(rows, dtype=torch.int32, device=dev) % 4, windows[1], windows[2])
    wq, sq = random_weight(256, 512, generator=g)
    gemm = (torch.randn(1, 512, generator=g).to(torch.bfloat16).to(dev), prepare_mxfp4_weight(wq.to(dev), sq.to(dev)))
    return decode, prefill, windows, gemm


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    dev = torch.device(a.device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    decode, prefill, windows, (x, weight) = problems(dev)
    msl, rows = 1024, prefill[0].shape[0]
    ctx = decode[-1]
    info8 = prefill_meta_reference.build_schedule(*windows, page_size=64, max_seq_len=msl,
                                                  slots=prefill_plan.default_slots(rows))
    with NoLaunch(record=False):     # a table of the right shape is all the host timing needs (values unread)
        _, info6, units = aiter.compute_prefill_schedule(*windows, 256, max(512, rows), msl)
    cu = torch.tensor([0, 32, 64], dtype=torch.int32, device=dev)
    cl = torch.tensor([900, 500], dtype=torch.int32, device=dev)
    dinfo, _ = varctx_reference(ctx, 256, 16, msl, 1)
    out_d = torch.full((4, msl), float("-inf"), device=dev)
    out_p = torch.full((rows, msl), float("-inf"), device=dev)

    builders = {
        "decode compute_varctx_schedule": lambda: aiter.compute_varctx_schedule(ctx, 256, 16, msl),
        # the ops' bodies (__wrapped__): under a dispatch mode the public ops are one custom op each
        "prefill compute_prefill_schedule (grouped, 8-int)": lambda: compute_prefill_schedule.__wrapped__(
            *windows, page_size=64, max_seq_len=msl),
        "prefill compute_prefill_schedule (aiter 6-int)": lambda: aiter.compute_prefill_schedule(
            *windows, 256, units, msl),
        "prefill 6 -> 8 int table conversion": lambda: prefill_meta_plan.convert(
            info6, units, block_k=256, rows=rows, page_size=64, max_seq_len=msl),
        "compute_varqlen_windows": lambda: compute_varqlen_windows.__wrapped__(cu, cl, rows),
    }
    calls = {
        "decode, SGLang eager (direct kernel)": (
            lambda: decode_plan.plan_call(*decode, msl, **_dk(block_k=256, num_warps=4)),
            lambda: pa_mqa_logits_fp4(*decode, msl, block_k=256, num_warps=4, kv_block_size=64)),
        "decode, SGLang eager, out= (direct kernel)": (
            lambda: decode_plan.plan_call(*decode, msl, **_dk(block_k=256, num_warps=4, out=out_d)),
            lambda: pa_mqa_logits_fp4(*decode, msl, block_k=256, num_warps=4, kv_block_size=64, out=out_d)),
        "decode, internal staged schedule": (
            lambda: decode_plan.plan_call(*decode, msl, **_dk(parallel_unit_num=16)),
            lambda: pa_mqa_logits_fp4(*decode, msl, parallel_unit_num=16)),
        "decode, graph-pinned (cta_info, out)": (
            lambda: decode_plan.plan_call(*decode, msl, **_dk(cta_info=dinfo, total_ctas=16, out=out_d)),
            lambda: pa_mqa_logits_fp4(*decode, msl, cta_info=dinfo, total_ctas=16, out=out_d)),
        "prefill, internal schedule": (
            lambda: prefill_plan.plan_call(*prefill, *windows, msl, **_pk()),
            lambda: pa_mqa_logits_fp4_prefill(*prefill, *windows, msl)),
        "prefill, external 8-int table + out": (
            lambda: prefill_plan.plan_call(*prefill, *windows, msl, **_pk(cta_info=info8, n_ctas=info8.shape[0],
                                                                          out=out_p)),
            lambda: pa_mqa_logits_fp4_prefill(*prefill, *windows, msl, cta_info=info8, n_ctas=info8.shape[0],
                                              out=out_p)),
        "prefill, external 6-int table + out": (
            lambda: prefill_plan.plan_call(*prefill, *windows, msl, **_pk(cta_info=info6, n_ctas=units, out=out_p)),
            lambda: pa_mqa_logits_fp4_prefill(*prefill, *windows, msl, cta_info=info6, n_ctas=units, out=out_p)),
        "gemm M=1 N=256 K=512": (                        # the op body: its output, then its one kernel
            lambda: (torch.empty(1, 256, dtype=torch.bfloat16, device=dev), (None,)),
            lambda: gemm_a16wfp4(x, weight)),
    }

    print(f"device kernels per schedule builder ({dev.type}; torch views and allocations excluded):")
    for name, fn in builders.items():
        kernels, d = count(fn)
        print(f"  {name:46s} {kernels} flyaot kernels, {len(d.kernels):3d} torch ops, {d.syncs} host syncs")
    print("device kernels per op call (its plan's launches + the torch work of the op body):")
    for name, (body, _) in calls.items():
        kernels, d = count(body)
        print(f"  {name:46s} {kernels} flyaot kernels, {len(d.kernels):3d} torch ops, {d.syncs} host syncs")

    with NoLaunch(record=False):
        small = torch.zeros(16, device=dev)
        native = best_us(lambda: small.add_(1), a.n, a.runs, sync)
        print(f"host time per eager call, kernel launch a no-op; baseline x.add_(1) = {native:.2f} us:")
        for name, (_, call) in calls.items():
            us = best_us(call, a.n, a.runs, sync)
            print(f"  {name:44s} {us:8.2f} us  = {us / native:5.1f} native ops")


def _dk(**kw):
    base = dict(weight_scale=1.0, next_n=1, block_k=None, kv_block_size=64, num_warps=None, parallel_unit_num=None,
                out=None, cta_info=None, total_ctas=None)
    base.update(kw)
    return base


def _pk(**kw):
    base = dict(weight_scale=1.0, block_k=256, kv_block_size=None, num_warps=4, parallel_unit_num=None, out=None,
                cta_info=None, n_ctas=None)
    base.update(kw)
    return base


if __name__ == "__main__":
    main()
