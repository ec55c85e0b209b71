"""flyaot.inputs: the public builders give the layouts the ops read, and an op's layout error names them."""
import pytest
import torch

import flyaot.ops as ops
from flyaot import inputs
from flyaot.kernel_defs.mqa_common import layouts


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


def test_quantize_q_is_mxfp4_with_swizzled_scales():
    q = torch.randn(2, 3, 32, 256, generator=_gen())
    q_fp4, q_scale = inputs.quantize_q(q)
    assert q_fp4.shape == (2, 3, 32, 128) and q_scale.shape == (2, 3, 2, 4, 16, 4)
    values, scales = inputs.quantize_mxfp4(q)
    assert torch.equal(q_fp4, values) and torch.equal(inputs.unswizzle_q_scale(q_scale, 32), scales)
    err = (inputs.dequantize_mxfp4(values, scales) - q).abs().max()
    assert 0 < err <= q.abs().max() / 4       # MXFP4 keeps about two significant bits


@pytest.mark.parametrize("page", [64, 128])
def test_paged_kv_holds_every_sequence_at_its_table_pages(page):
    keys = [torch.randn(n, 128, generator=_gen(n)) for n in (1, 130, 64)]
    kv_cache, kv_scale, tables = inputs.paged_kv(keys, page_size=page)
    assert tables.dtype == torch.int32 and tables.shape[0] == 3
    for b, k in enumerate(keys):
        got = layouts.gather_tokens(kv_cache, kv_scale, tables[b], k.shape[0])
        assert torch.equal(got, inputs.dequantize_mxfp4(*inputs.quantize_mxfp4(k)))


def test_paged_kv_refuses_ragged_head_dims():
    with pytest.raises(ValueError, match=r"keys\[1\]"):
        inputs.paged_kv([torch.zeros(4, 128), torch.zeros(4, 256)])


def test_causal_windows_are_the_ops_windows():
    q_lens, ctx = [3, 1, 2], inputs.lengths([100, 5, 1])
    host = inputs.causal_windows(q_lens, ctx)
    device = ops.compute_varqlen_windows(inputs.cu_seqlens(q_lens), ctx, sum(q_lens))
    assert all(torch.equal(a, b) for a, b in zip(host, device))
    assert host[2].tolist() == [98, 99, 100, 5, 0, 1]


def _decode_inputs():
    keys = [torch.randn(40, 128, generator=_gen())]
    q = torch.randn(1, 1, 16, 128, generator=_gen(1))
    q_fp4, q_scale = inputs.quantize_q(q)
    kv_cache, kv_scale, tables = inputs.paged_kv(keys)
    return [q_fp4, q_scale, kv_cache, kv_scale, tables, torch.ones(1, 16, dtype=torch.bfloat16),
            inputs.lengths(keys), 64]


@pytest.mark.parametrize("slot, bad, builder, section", [
    (1, lambda a: inputs.quantize_mxfp4(torch.randn(1, 1, 16, 128))[1], "quantize_q", "mqa_decode.md#q-scales"),
    (2, lambda a: a[2].reshape(a[2].shape[0], -1), "paged_kv", "mqa_decode.md#kv-pages"),
    (6, lambda a: a[6].long(), "inputs.lengths", "mqa_decode.md#formats"),
])
def test_a_layout_error_names_its_builder_and_section(slot, bad, builder, section):
    args = _decode_inputs()
    args[slot] = bad(args)
    with pytest.raises((TypeError, ValueError)) as e:
        ops.pa_mqa_logits_fp4(*args)
    assert builder in str(e.value) and f"docs/families/{section}" in str(e.value), str(e.value)


def test_a_natural_q_scale_to_prefill_names_the_swizzle():
    q = torch.randn(2, 16, 128)
    q_fp4, _ = inputs.quantize_q(q)
    kv_cache, kv_scale, tables = inputs.paged_kv([torch.randn(8, 128)])
    natural = inputs.quantize_mxfp4(q)[1]
    with pytest.raises(ValueError, match=r"q_scale: .*swizzle_q_scale.*mqa_decode.md#q-scales"):
        ops.pa_mqa_logits_fp4_varqlen(q_fp4, natural, kv_cache, kv_scale, tables, torch.ones(2, 16).bfloat16(), 8,
                                      cu_seq_q=inputs.cu_seqlens([2]), context_lens=inputs.lengths([8]))


def test_a_gemm_weight_error_names_quantize_mxfp4():
    w_packed, scales = inputs.quantize_mxfp4(torch.randn(256, 512))
    with pytest.raises(ValueError, match=r"scales: .*quantize_mxfp4.*gemm_a16wfp4.md#formats"):
        ops.prepare_mxfp4_weight(w_packed, scales.t())
