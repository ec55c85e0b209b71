"""Cost of the always-on host checks per op call (output overlap, out aliasing an input, prepared-weight
shapes), as ratios against baselines measured in the same run:

- the op's whole host path (every check, plan, -inf fill; the launch itself replaced by a no-op, so
  the ratio is the share of the host work, the most demanding comparison: with a real launch the
  share only falls);
- one native torch op on a tiny tensor (x.add_(1)), a unit of "one extra torch call".

Also the checked mode's value checks (FLYAOT_CHECK=1; a host sync on a GPU), for comparison.
Best of 9 rounds each. CPU tensors with the shapes of the tests (the checks read metadata only, so shapes barely matter).

    python benchmarks/host_checks.py [--reps N]
"""
import argparse
import time

import torch


def per_call_us(fn, reps: int) -> float:
    """Best of 9 rounds of the mean microseconds per call (the minimum is the least disturbed by other
    load on a shared machine)."""
    for _ in range(max(10, reps // 10)):
        fn()
    rounds = []
    for _ in range(9):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        rounds.append((time.perf_counter() - t0) / reps * 1e6)
    return min(rounds)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=2000)
    reps = ap.parse_args().reps

    from flyaot.kernel_defs import value_checks
    from flyaot.kernel_defs.gemm_a16wfp4 import plan as gemm_plan
    from flyaot.kernel_defs.gemm_a16wfp4.reference import random_weight
    from flyaot.kernel_defs.mqa_common import layouts
    from flyaot.kernel_defs.mqa_prefill.reference import make_case
    from flyaot.kernel_defs.tensor_checks import check_no_overlap, check_rows_disjoint
    from flyaot.ops import _gemm_a16wfp4 as gemm
    from flyaot.ops import _mqa_decode as decode
    from flyaot.ops import _mqa_prefill as prefill

    for module in (decode, prefill, gemm):
        module.runtime.launch = lambda plan, stream=None: None     # host path only

    msl, gen = 160, torch.Generator().manual_seed(0)
    kv = layouts.make_paged_kv([130, 70], 128, 64, gen)
    q, qs = layouts.make_q((2, 1), 64, 128, gen)
    d = dict(q_fp4=q, q_scale=qs, kv_cache=kv.kv_cache, kv_scale=kv.kv_scale, block_tables=kv.block_tables,
             weights=torch.randn(2, 64, generator=gen).to(torch.bfloat16),
             context_lens=torch.tensor([130, 70], dtype=torch.int32))
    d_out = torch.empty(2, msl)
    c = make_case(3, [130, 70], heads=64, page_size=64, max_seq_len=msl)
    p = dict(q_fp4=c.q_fp4, q_scale=c.q_scale, kv_cache=c.kv_cache, kv_scale=c.kv_scale,
             block_tables=c.block_tables, weights=c.weights,
             row_to_batch=torch.tensor([0, 0, 1], dtype=torch.int32), local_starts=torch.zeros(3, dtype=torch.int32),
             local_ends=torch.full((3,), 60, dtype=torch.int32))
    p_out = torch.empty(3, msl)
    w = gemm.prepare_mxfp4_weight(*random_weight(256, 256, generator=gen))
    x, g_out = torch.randn(4, 256).to(torch.bfloat16), torch.empty(4, 256, dtype=torch.bfloat16)

    def decode_checks():
        check_rows_disjoint("out", d_out)
        check_no_overlap("out", d_out, cta_info=None, **d)

    def prefill_checks():
        check_rows_disjoint("out", p_out)
        check_no_overlap("out", p_out, cta_info=None, **p)

    def gemm_checks():
        gemm_plan.check_weight(w)
        check_rows_disjoint("out", g_out)
        check_no_overlap("out", g_out, x=x, **{"weight.weight": w.weight, "weight.scales": w.scales})

    cases = [
        ("pa_mqa_logits_fp4 (direct, out=)", decode_checks,
         lambda: decode.pa_mqa_logits_fp4(*d.values(), msl, out=d_out)),
        ("pa_mqa_logits_fp4_prefill (out=)", prefill_checks,
         lambda: prefill.pa_mqa_logits_fp4_prefill(*p.values(), msl, out=p_out)),
        ("gemm_a16wfp4 (out=)", gemm_checks, lambda: gemm.gemm_a16wfp4(x, w, out=g_out)),
    ]
    t = torch.zeros(4)
    native = per_call_us(lambda: t.add_(1), reps)
    print(f"baseline: x.add_(1) on a 4-element CPU tensor: {native:.2f} us")
    for name, added, whole in cases:
        c, h = per_call_us(added, reps), per_call_us(whole, reps)
        print(f"{name}: always-on checks {c:.2f} us per call; whole host path {h:.2f} us "
              f"-> {100 * c / h:.1f}% of the host path, {c / native:.2f}x one x.add_(1)")

    info = torch.tensor([[0, 0, 1, 130], [1, 0, 1, 70]], dtype=torch.int32)

    def decode_values():
        value_checks.decode_values(block_tables=d["block_tables"], context_lens=d["context_lens"],
                             num_pages=d["kv_cache"].shape[0], page_size=64, max_seq_len=msl, next_n=1)

    def prefill_values():
        value_checks.prefill_values(block_tables=p["block_tables"], num_pages=p["kv_cache"].shape[0], page_size=64,
                              row_to_batch=p["row_to_batch"], local_starts=p["local_starts"],
                              local_ends=p["local_ends"], max_seq_len=msl)

    def decode_values_external():
        value_checks.decode_values(block_tables=d["block_tables"], context_lens=d["context_lens"],
                             num_pages=d["kv_cache"].shape[0], page_size=64, max_seq_len=msl, next_n=1,
                             cta_info=info, total_ctas=2)

    for name, fn in (("decode", decode_values), ("decode, external cta_info", decode_values_external),
                     ("prefill", prefill_values)):
        c = per_call_us(fn, max(1, reps // 10))
        print(f"checked mode (FLYAOT_CHECK=1) value checks, {name}: {c:.1f} us per call on CPU "
              f"({c / native:.0f}x one x.add_(1); plus one host sync on a GPU)")


if __name__ == "__main__":
    main()
