"""Host-side contracts a final review found holes in: each case once failed (wrong device accepted,
int64 narrowed, knobs unchecked with B=0); the real plan/op code runs."""
import dataclasses

import pytest
import torch

from flyaot.compat import aiter
from flyaot.kernel_defs.gemm_a16wfp4 import plan as gemm_plan
from tests.hostile.guard_cases import MSL, decode_inputs, prepared_weight, run_decode


def test_gemm_plan_refuses_scales_on_another_device():
    w = prepared_weight()
    bad = dataclasses.replace(w, scales=torch.empty_like(w.scales, device="meta"))
    x = torch.zeros(2, w.k, dtype=torch.bfloat16)
    out = torch.empty(2, w.n, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="weight.scales"):
        gemm_plan.plan(x, bad, out)


def test_varctx_schedule_refuses_int64_lengths_instead_of_wrapping():
    with pytest.raises(TypeError, match="context_lens"):
        aiter.compute_varctx_schedule(torch.tensor([2 ** 32 + 70]), 64, None, 128)


@pytest.mark.parametrize("knobs", [dict(block_k=7), dict(block_k=100, num_warps=3), dict(parallel_unit_num=-5)])
def test_decode_knobs_are_checked_with_no_sequence(knobs):
    a = decode_inputs()
    empty = dict(a, q_fp4=a["q_fp4"][:0], q_scale=a["q_scale"][:0], block_tables=a["block_tables"][:0],
                 weights=a["weights"][:0], context_lens=a["context_lens"][:0])
    assert run_decode(empty).shape == (0, MSL)             # B=0 itself is fine
    with pytest.raises(ValueError):
        run_decode(empty, **knobs)
    with pytest.raises(ValueError):
        run_decode(a, **knobs)                              # the same verdict as with a batch
