"""mqa_fp8 ragged prefill (fp8_mqa_logits, DeepGEMM's contract) on the gfx950 emulator against the torch
reference: causal and sliding windows, empty and out-of-range windows, clean_logits on and off, a
strided KV; both shipped head counts."""
import pytest
import torch

from flyaot.compat import aiter as compat
from flyaot.kernel_defs.mqa_fp8 import reference as R
from flyaot.ops import fp8_mqa_logits

D = 128


@pytest.fixture(autouse=True)
def _private_jit_cache(private_jit_cache):
    """Every test here may JIT-build a kernel the prebuilt store lacks (the root conftest's fixture)."""


def make_problem(seed, s, s_kv, heads, *, kv_row=D):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(s, heads, D, generator=g).to(torch.bfloat16)
    k = torch.randn(s_kv, D, generator=g).to(torch.bfloat16)
    scale = k.float().abs().amax(dim=1).clamp(1e-4) / R.FP8_MAX_USED
    pool = torch.zeros(s_kv, kv_row, dtype=R.FP8)
    pool[:, :D] = (k.float() / scale.unsqueeze(1)).to(R.FP8)
    w = torch.randn(s, heads, generator=g)
    return q, k, pool[:, :D], scale, w


def causal(s, s_kv, window=None):
    ends = torch.arange(s_kv - s + 1, s_kv + 1, dtype=torch.int32)
    starts = torch.zeros(s, dtype=torch.int32) if window is None else (ends - window).clamp_min(0)
    return starts, ends


def check(out, q, k, kv, scale, w, starts, ends, *, clean=True, unquantized_diff=None):
    ref = R.ragged_logits_reference(q.to(R.FP8), kv.double() * scale.double().unsqueeze(1), w, starts, ends)
    live = ref != float("-inf")
    if clean:
        assert torch.equal(out == float("-inf"), ~live)
    if live.any():
        err = (out[live] - ref[live]).abs().max().item()
        assert err <= 1e-5 * ref[live].abs().max().item(), err
    if unquantized_diff is not None:
        ref_u = R.ragged_logits_reference(q.float(), k.float(), w, starts, ends)
        assert R.diff(out.masked_fill(~live, 0), ref_u.masked_fill(~live, 0), live) <= unquantized_diff


@pytest.mark.parametrize("heads", [32, 64])
def test_causal_prefill(heads):
    s, s_kv = 21, 150                                # neither a multiple of the 8-row / 64-key tiles
    q, k, kv, scale, w = make_problem(heads, s, s_kv, heads)
    starts, ends = causal(s, s_kv)
    out = fp8_mqa_logits(q.to(R.FP8), kv, scale, w, starts, ends)
    assert out.shape == (s, s_kv)
    check(out, q, k, kv, scale, w, starts, ends, unquantized_diff=1e-3)


def test_windows_empty_and_out_of_range():
    s, s_kv = 10, 200
    q, k, kv, scale, w = make_problem(3, s, s_kv, 64, kv_row=144)
    assert kv.stride(0) == 144
    starts = torch.tensor([0, 50, 70, 199, -5, 150, 10, 0, 64, 63], dtype=torch.int32)
    ends = torch.tensor([1, 120, 70, 400, 3, 100, 11, 200, 128, 65], dtype=torch.int32)
    out = compat.fp8_mqa_logits(q.to(R.FP8), kv, scale, w, starts, ends)
    check(out, q, k, kv, scale, w, starts, ends.clamp_max(s_kv))


def test_clean_logits_false_writes_only_the_windows():
    s, s_kv = 12, 130
    q, k, kv, scale, w = make_problem(4, s, s_kv, 32)
    starts, ends = causal(s, s_kv, window=40)
    out = torch.full((s, s_kv), 9.0)
    fp8_mqa_logits(q.to(R.FP8), kv, scale, w, starts, ends, False, out=out)
    t = torch.arange(s_kv)
    window = (t >= starts.long().unsqueeze(1)) & (t < ends.long().unsqueeze(1))
    assert (out[~window] == 9.0).all()
    check(out, q, k, kv, scale, w, starts, ends, clean=False)


def test_bad_arguments_are_named():
    q, _, kv, scale, w = make_problem(5, 4, 64, 64)
    starts, ends = causal(4, 64)
    qf = q.to(R.FP8)
    with pytest.raises(TypeError, match="Q"):
        fp8_mqa_logits(q, kv, scale, w, starts, ends)
    with pytest.raises(ValueError, match="kv_scales"):
        fp8_mqa_logits(qf, kv, scale[:10], w, starts, ends)
    with pytest.raises(TypeError, match="cu_ends"):
        fp8_mqa_logits(qf, kv, scale, w, starts, ends.long())
    with pytest.raises(ValueError, match="heads"):
        fp8_mqa_logits(qf[:, :16].contiguous(), kv, scale, w[:, :16].contiguous(), starts, ends)
