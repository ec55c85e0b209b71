"""One NaN contract for E8M0 0xFF scales (docs/safety.md): in the GEMM, decode and prefill kernels a NaN
scale makes exactly the outputs it reaches NaN, as in the torch references; hidden cells stay -inf."""
import pytest
import torch

from flyaot.kernel_defs.gemm_a16wfp4.reference import gemm_reference, random_weight
from flyaot.kernel_defs.mqa_common import layouts
from flyaot.kernel_defs.mqa_decode.reference import pa_mqa_logits_reference, visible_mask
from flyaot.kernel_defs.mqa_prefill.reference import prefill_logits, visible
from flyaot.ops import gemm_a16wfp4, pa_mqa_logits_fp4, pa_mqa_logits_fp4_prefill, prepare_mxfp4_weight

NAN_SCALE = 0xFF


def _same_nans_and_close(out, ref, shown):
    """NaN exactly where the reference is NaN; -inf where it is -inf; the finite cells close."""
    assert bool((torch.isnan(out) == torch.isnan(ref)).all()), "NaN cells differ from the reference"
    fin = torch.isfinite(ref)
    assert bool((out[~fin & ~torch.isnan(ref)] == ref[~fin & ~torch.isnan(ref)]).all())
    assert bool(torch.isnan(ref[shown]).any()), "the case has no NaN cell to check"
    assert torch.allclose(out[fin].double(), ref[fin].double(), rtol=1e-3, atol=1e-3 * ref[fin].abs().max().item())


def _kv_token_scale_nan(kv, page, slot, group=0):
    """Set the E8M0 scale of token slot `slot` of page `page`, scale group `group`, to 0xFF."""
    kt, c = divmod(group, 4)
    kv.kv_scale[page, kt, c, layouts.kv_scale_slot(slot, kv.kv_cache.shape[3])] = NAN_SCALE


def _q_scale_nan(q_scale, index, head, group=0):
    """Set the swizzled Q scale of (row `index`, head, group) to 0xFF."""
    kt, g = divmod(group, 4)
    q_scale[index][kt, g, head % 16, head // 16] = NAN_SCALE


@pytest.mark.parametrize("heads", [64, 16], ids=["direct", "staged"])
def test_decode_nan_scales(heads):
    g = torch.Generator().manual_seed(11)
    ctx, next_n, msl = [150, 90], 2, 160
    kv = layouts.make_paged_kv(ctx, 128, 64, g)
    q, qs = layouts.make_q((2, next_n), heads, 128, g)
    w = (torch.randn(4, heads, generator=g) * 0.5).to(torch.bfloat16)
    cl = torch.tensor(ctx, dtype=torch.int32)
    _kv_token_scale_nan(kv, int(kv.block_tables[0, 1]), 5, group=3)      # token 69 of sequence 0
    _q_scale_nan(qs, (1, 0), head=heads - 1, group=2)                     # row 2 (b 1, n 0)
    out = pa_mqa_logits_fp4(q, qs, kv.kv_cache, kv.kv_scale, kv.block_tables, w, cl, msl, next_n=next_n)
    ref = pa_mqa_logits_reference(q, qs, kv.kv_cache, kv.kv_scale, kv.block_tables, w, cl, msl, next_n=next_n)
    assert bool(torch.isnan(ref[0:2, 69]).all()) and bool(torch.isnan(ref[2, :89]).all())
    assert bool((ref[2, 89:] == float("-inf")).all())
    _same_nans_and_close(out, ref, visible_mask(cl, next_n, msl))


def test_prefill_nan_scales():
    g = torch.Generator().manual_seed(12)
    q, qs = layouts.make_q((3,), 32, 128, g)
    kv = layouts.make_paged_kv([200, 100], 128, 64, g)
    w = (torch.rand(3, 32, generator=g) * 2 - 0.5).to(torch.bfloat16)
    rb, ls, le = (torch.tensor(v, dtype=torch.int32) for v in ([0, 0, 1], [0, 50, 0], [200, 120, 100]))
    _kv_token_scale_nan(kv, int(kv.block_tables[0, 1]), 7, group=1)      # token 71 of batch 0
    _q_scale_nan(qs, 2, head=17, group=0)                                  # every cell of row 2
    out = pa_mqa_logits_fp4_prefill(q, qs, kv.kv_cache, kv.kv_scale, kv.block_tables, w, rb, ls, le, 256)
    ref = prefill_logits(q, qs, kv.kv_cache, kv.kv_scale, kv.block_tables, w, rb, ls, le, 256)
    assert bool(torch.isnan(ref[0:2, 71]).all()) and bool(torch.isnan(ref[2, :100]).all())
    _same_nans_and_close(out, ref, visible(rb, ls, le, 256))


def test_gemm_nan_scale():
    g = torch.Generator().manual_seed(13)
    w_packed, scales = random_weight(256, 256, generator=g)
    scales[37, 5] = NAN_SCALE                                              # column 37, K [160, 192)
    x = torch.randn(8, 256, generator=g).to(torch.bfloat16)
    x[3, 160:192] = 0                                                      # NaN * 0 is NaN too
    out = gemm_a16wfp4(x, prepare_mxfp4_weight(w_packed, scales))
    ref = gemm_reference(x, w_packed, scales)
    assert bool(torch.isnan(ref[:, 37]).all()) and int(torch.isnan(ref).sum()) == 8
    assert bool((torch.isnan(out) == torch.isnan(ref)).all())
    fin = ~torch.isnan(ref)
    assert torch.allclose(out[fin].float(), ref[fin].float(), rtol=2e-2, atol=1e-2)
