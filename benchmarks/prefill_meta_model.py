"""Modeled MI355X time of the prefill metadata kernels (the emulator's timing model: a model, not a
measurement; docs/timing-model.md), on the varqlen windows of B sequences of Q new rows over KV tokens.

    python benchmarks/prefill_meta_model.py [--shapes 1x64x4096 2x4096x8192] [--samples 1]

Prints per shape the rows, the schedule slots and the modeled time of each launch: windows, groups (the
internal schedule of one prefill call) and convert (of a one-row-per-CTA table of as many slots).
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from flyaot import runtime  # noqa: E402
from flyaot.compat import aiter  # noqa: E402
from flyaot.runtime.drivers import emu  # noqa: E402
from flyaot.kernel_defs.mqa_prefill import plan as prefill_plan  # noqa: E402
from flyaot.kernel_defs.mqa_prefill_meta import plan as meta  # noqa: E402
from flyaot.kernel_defs.mqa_prefill_meta.geometry import CTA_INFO_INTS  # noqa: E402


def modeled(plan, samples):
    with emu.recording(samples=samples, functional=True) as rec:
        runtime.launch(plan)
    (name, t, _), = rec.launches
    return t.kernel_us


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="*", default=["1x64x4096", "2x4096x8192"])
    ap.add_argument("--samples", type=int, default=1)
    a = ap.parse_args()
    print("modeled MI355X kernel time (a model, not a measurement):")
    for shape in a.shapes:
        b, q, kv = (int(x) for x in shape.split("x"))
        rows = b * q
        cu = torch.arange(b + 1, dtype=torch.int32) * q
        cl = torch.full((b,), kv, dtype=torch.int32)
        windows = tuple(torch.empty(rows, dtype=torch.int32) for _ in range(3))
        t_win = modeled(meta.windows(cu, cl, windows), a.samples)
        slots = prefill_plan.default_slots(rows)
        info = torch.empty(slots, CTA_INFO_INTS, dtype=torch.int32)
        t_grp = modeled(meta.groups(*windows, info, page_size=64, max_seq_len=kv), a.samples)
        _, table, units = aiter.compute_prefill_schedule(*windows, 256, max(512, rows), kv)
        _, conv = meta.convert(table, units, block_k=256, rows=rows, page_size=64, max_seq_len=kv)
        t_cnv = modeled(conv, a.samples)
        print(f"  B={b} Q={q} KV={kv}: rows={rows} slots={slots}: windows {t_win:7.2f} us, groups {t_grp:7.2f} us, "
              f"convert ({units} slots) {t_cnv:7.2f} us")


if __name__ == "__main__":
    main()
