"""mqa_common: FP4/E8M0 numerics, the kernel ABI layouts, test-data makers and the shared reference."""
import math

import pytest
import torch

from flyaot.kernel_defs.mqa_common import fp4, layouts
from flyaot.kernel_defs.mqa_common.schedule import smallest_fit
from flyaot.kernel_defs.mqa_common.reference import compare, passes, weighted_relu_logits
from flyaot.kernel_defs.mqa_decode.reference import pa_mqa_logits_reference, visible_mask


def _e2m1_from_bits(c: int) -> float:
    sign = -1.0 if c & 8 else 1.0
    e, m = (c >> 1) & 3, c & 1
    mag = 0.5 * m if e == 0 else 2.0 ** (e - 1) * (1 + 0.5 * m)
    return sign * mag


def test_e2m1_decode_matches_bit_definition():
    got = fp4.e2m1_decode(torch.arange(16, dtype=torch.uint8))
    assert got.tolist() == [_e2m1_from_bits(c) for c in range(16)]


def test_e8m0():
    e = torch.tensor([0, 1, 126, 127, 128, 254, 255], dtype=torch.uint8)
    got = fp4.e8m0_to_f32(e)
    assert got[:6].tolist() == [math.ldexp(1.0, int(v) - 127) for v in e[:6]]
    assert got[0] > 0 and math.isnan(got[6])


def test_nibble_order_and_roundtrip():
    assert fp4.pack_nibbles(torch.tensor([1, 2], dtype=torch.uint8)).item() == 0x21
    codes = torch.randint(0, 16, (3, 64), dtype=torch.uint8)
    assert torch.equal(fp4.unpack_nibbles(fp4.pack_nibbles(codes)), codes)


def test_quant_reproduces_grid_values_and_scale_rule():
    g = torch.Generator().manual_seed(1)
    codes = torch.randint(0, 16, (4, 64), dtype=torch.uint8, generator=g)
    codes[:, 0] = 7                                    # each group's amax is 6 * 2^k exactly
    codes[:, 32] = 7
    exps = torch.randint(-20, 20, (4, 2), generator=g)
    x = fp4.e2m1_decode(codes).reshape(4, 2, 32) * torch.exp2(exps.float()).unsqueeze(-1)
    packed, scales = fp4.quant_mxfp4(x.reshape(4, 64))
    assert torch.equal(scales.long(), exps + 127)
    assert torch.equal(fp4.dequant_mxfp4(packed, scales), x.reshape(4, 64))


def test_quant_error_is_within_half_grid_step():
    x = torch.randn(8, 256, generator=torch.Generator().manual_seed(2))
    packed, scales = fp4.quant_mxfp4(x)
    back = fp4.dequant_mxfp4(packed, scales)
    step = fp4.e8m0_to_f32(scales).repeat_interleave(32, dim=-1)     # largest grid gap is 2 (4 -> 6)
    assert bool(((back - x).abs() <= step + 1e-6).all())
    assert bool((x.reshape(8, 8, 32).abs().amax(-1) <= 6 * fp4.e8m0_to_f32(scales)).all())


@pytest.mark.parametrize("heads,head_dim", [(16, 128), (64, 256), (80, 128), (128, 256)])
def test_q_scale_swizzle(heads, head_dim):
    nat = torch.randint(0, 255, (2, heads, head_dim // 32), dtype=torch.uint8)
    sw = layouts.swizzle_q_scale(nat)
    pad = layouts.qs_pad(heads)
    assert sw.shape == (2, head_dim // 128, 4, 16, pad)
    assert pad == (4 if heads <= 64 else 8)
    for kt in range(head_dim // 128):
        for g in range(4):
            for r in range(16):
                for mi in range(pad):
                    want = nat[:, 16 * mi + r, 4 * kt + g] if mi < heads // 16 else torch.zeros(2, dtype=torch.uint8)
                    assert torch.equal(sw[:, kt, g, r, mi], want)
    assert torch.equal(layouts.unswizzle_q_scale(sw, heads), nat)


@pytest.mark.parametrize("page_size,head_dim", [(64, 128), (128, 256), (16, 128)])
def test_kv_page_layout_bytes(page_size, head_dim):
    n = 2
    values = torch.randint(0, 256, (n, page_size, head_dim // 2), dtype=torch.uint8)
    scales = torch.randint(0, 256, (n, page_size, head_dim // 32), dtype=torch.uint8)
    cache, sc = layouts.pack_kv_pages(values, scales)
    flat_v, flat_s = cache.reshape(-1), sc.reshape(-1)
    page_v, page_s = page_size * head_dim // 2, head_dim // 128 * 4 * page_size
    q = page_size // 4
    for p in range(n):
        for o in range(page_size):
            for grp in range(head_dim // 32):
                kt, c = divmod(grp, 4)
                base = p * page_v + kt * 4 * page_size * 16 + c * page_size * 16 + o * 16
                assert torch.equal(flat_v[base:base + 16], values[p, o, 16 * grp:16 * grp + 16])
                s = (o % q) * 4 + o // q
                assert flat_s[p * page_s + kt * 4 * page_size + c * page_size + s] == scales[p, o, grp]
    back_v, back_s = layouts.unpack_kv_pages(cache, sc)
    assert torch.equal(back_v, values) and torch.equal(back_s, scales)


def test_scale_dword_holds_four_token_groups():
    p = 128
    slots = layouts.kv_scale_slot(torch.arange(p), p)
    assert sorted(slots.tolist()) == list(range(p))
    for x in range(p // 4):
        assert [int(t) for t in torch.nonzero((slots // 4) == x).flatten()] == [x + k * p // 4 for k in range(4)]


def test_strided_and_shared_pool_views_decode_identically():
    g = torch.Generator().manual_seed(3)
    kv = layouts.make_paged_kv([100, 0, 64], 128, 64, g)
    cache, scale = layouts.shared_pool(kv.kv_cache, kv.kv_scale, gap=48)
    assert cache.stride(0) == scale.stride(0) == 64 * 64 + 4 * 64 + 48
    assert cache.data_ptr() != scale.data_ptr() and cache.untyped_storage().data_ptr() == scale.untyped_storage().data_ptr()
    for b, n in [(0, 100), (2, 64)]:
        assert torch.equal(layouts.gather_tokens(cache, scale, kv.block_tables[b], n),
                           layouts.gather_tokens(kv.kv_cache, kv.kv_scale, kv.block_tables[b], n))
    one = layouts.strided_pages(kv.kv_cache, 5000, offset=7)
    assert one.stride(0) == 5000 and torch.equal(one, kv.kv_cache)


def test_make_paged_kv_tables():
    kv = layouts.make_paged_kv([130, 0, 64, 1], 256, 64, torch.Generator().manual_seed(4), table_width=4)
    t = kv.block_tables
    assert t.shape == (4, 4) and t.dtype == torch.int32
    used = [t[0, :3], t[2, :1], t[3, :1]]
    ids = torch.cat(used).tolist()
    assert len(set(ids)) == len(ids) and max(ids) < kv.kv_cache.shape[0]
    assert (t[0, 3:] == 0x7FFFFFFF).all() and (t[1] == 0x7FFFFFFF).all()


def test_reference_matches_elementwise_formula():
    g = torch.Generator().manual_seed(5)
    ctx, next_n, heads, d, p = [5, 0, 3], 3, 16, 128, 64
    kv = layouts.make_paged_kv(ctx, d, p, g)
    q_fp4, q_scale = layouts.make_q((3, next_n), heads, d, g)
    w = torch.randn(3 * next_n, heads, generator=g).to(torch.bfloat16)
    out = pa_mqa_logits_reference(q_fp4, q_scale, kv.kv_cache, kv.kv_scale, kv.block_tables, w,
                                  torch.tensor(ctx, dtype=torch.int32), 8, weight_scale=1.5, next_n=next_n)
    assert out.shape == (9, 8)
    qd = layouts.dequant_q(q_fp4, q_scale)
    for b in range(3):
        for n in range(next_n):
            for t in range(8):
                row = b * next_n + n
                if t > ctx[b] - next_n + n:
                    assert out[row, t] == float("-inf")
                    continue
                page, slot = int(kv.block_tables[b, t // p]), t % p
                vals, scs = layouts.unpack_kv_pages(kv.kv_cache[page:page + 1], kv.kv_scale[page:page + 1])
                k = fp4.dequant_mxfp4(vals[0, slot], scs[0, slot]).double()
                want = sum(float(w[row, h]) * max(float(qd[b, n, h].double() @ k), 0.0) for h in range(heads)) * 1.5
                assert out[row, t].item() == pytest.approx(want, rel=1e-6, abs=1e-6)


def test_visible_mask_short_contexts():
    m = visible_mask([0, 2, 10], 4, 12)
    assert not m[0:4].any()
    assert m[4:8].sum(1).tolist() == [0, 0, 1, 2]          # row n sees t <= ctx - next_n + n
    assert m[8:12].sum(1).tolist() == [7, 8, 9, 10]


def test_compare_metrics_detect_errors():
    ref = torch.randn(4, 8, generator=torch.Generator().manual_seed(6))
    vis = torch.ones(4, 8, dtype=torch.bool)
    vis[:, 6:] = False
    out = ref.clone()
    out[~vis] = float("-inf")
    assert passes(compare(out, ref, vis))
    bad = out.clone()
    bad[0, 0] += 0.1
    assert not passes(compare(bad, ref, vis))
    bad = out.clone()
    bad[0, 7] = 0.0
    assert not passes(compare(bad, ref, vis))


def test_weighted_relu_logits_small():
    q = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])
    k = torch.tensor([[2.0, -3.0], [-1.0, 1.0]])
    w = torch.tensor([[0.5, 2.0]])
    assert weighted_relu_logits(q, k, w, 2.0).tolist() == [[2.0, 4.0]]


@pytest.mark.parametrize("seed", range(4))
def test_smallest_fit_matches_a_linear_scan(seed):
    """The schedules' device binary search: the smallest s in [1, s_max] whose cost fits, s_max if none,
    for the cost both families use (sum of ceil(chunks / s)) over random chunk counts and budgets."""
    g = torch.Generator().manual_seed(seed)
    for _ in range(40):
        chunks = torch.randint(0, 40, (int(torch.randint(1, 6, (1,), generator=g)),), generator=g)
        s_max = int(torch.randint(1, 50, (1,), generator=g))
        budget = int(torch.randint(0, 60, (1,), generator=g))

        def cost(s):
            return ((chunks + s - 1) // s).sum()

        fits = [s for s in range(1, s_max + 1) if int(((chunks + s - 1) // s).sum()) <= budget]
        got = smallest_fit(cost, budget, s_max, chunks.device)
        assert got.shape == () and int(got) == (fits[0] if fits else s_max)
