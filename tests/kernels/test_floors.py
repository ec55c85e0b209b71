"""flyaot.ops.floors: each family's floor counts the work of its shape and prices it at the timing
tables' peaks (no rate of its own)."""
import pytest

from flyaot.emu.isa.gfx950 import timing as T
from flyaot.ops import floors


def _decode_pairs(ctx, next_n):
    return sum(1 for c in ctx for i in range(next_n) for t in range(c) if t <= c - next_n + i)


def _prefill_pairs(b, q, kv):
    return b * sum(1 for n in range(q) for t in range(kv) if t <= kv - q + n)


@pytest.mark.parametrize("ctx, next_n, heads", [([64, 100, 3], 1, 64), ([130, 7], 4, 128), ([5], 2, 64)])
def test_decode_counts_every_visible_pair_and_head(ctx, next_n, heads):
    f = floors.mqa_decode(ctx, next_n, heads)
    pairs = _decode_pairs(ctx, next_n)
    assert f.mfma_flops == 2 * pairs * heads * floors.HEAD_DIM
    assert f.valu_lane_ops == pytest.approx(1.5 * pairs * heads)      # ReLU + half a packed FMA
    out = len(ctx) * next_n * max(ctx) * 4
    assert f.hbm_bytes > out + sum(ctx) * (floors.HEAD_DIM // 2)      # output once plus at least the K codes


@pytest.mark.parametrize("b, q, kv", [(1, 4, 4), (2, 3, 10), (3, 8, 64)])
def test_prefill_counts_the_tail_causal_windows(b, q, kv):
    f = floors.mqa_prefill(b, q, kv, heads=64)
    assert f.mfma_flops == 2 * _prefill_pairs(b, q, kv) * 64 * floors.HEAD_DIM


def test_floor_is_the_largest_term_priced_at_the_tables_peaks(monkeypatch):
    f = floors.mqa_prefill(1, 8192, 8192)
    assert f.us == max(f.hbm_us, f.mfma_us, f.valu_us) and f.bound == "valu"
    g = floors.gemm_a16wfp4(1024, 3584, 512)
    assert g.bound == "mfma" and g.mfma_flops == 2 * 1024 * 3584 * 512
    before = (f.valu_us, f.mfma_us, f.hbm_us, g.mfma_us)
    monkeypatch.setattr(T, "CLOCK_HZ", T.CLOCK_HZ * 2)
    monkeypatch.setattr(T, "HBM_BYTES_PER_S", T.HBM_BYTES_PER_S * 4)
    monkeypatch.setitem(T.MFMA_FLOPS_PER_CLK_PER_SIMD, "bf16", T.MFMA_FLOPS_PER_CLK_PER_SIMD["bf16"] * 2)
    assert f.valu_us == pytest.approx(before[0] / 2) and f.mfma_us == pytest.approx(before[1] / 2)
    assert f.hbm_us == pytest.approx(before[2] / 4) and g.mfma_us == pytest.approx(before[3] / 4)


def test_gemm_hbm_term_is_weight_activation_and_output_once():
    a, b = floors.gemm_a16wfp4(1024, 512, 1), floors.gemm_a16wfp4(1024, 512, 2)
    assert b.hbm_bytes - a.hbm_bytes == 512 * 2 + 1024 * 2          # one more BF16 row in, one out
    assert a.valu_lane_ops == 1024 * 512 / 2                         # each weight byte converted once


@pytest.mark.parametrize("call, word", [(lambda: floors.mqa_prefill(1, 8, 4), "kv"),
                                        (lambda: floors.mqa_decode([], 1), "context_lens"),
                                        (lambda: floors.gemm_a16wfp4(16, 48, 1), "K")])
def test_bad_shapes_are_refused_naming_them(call, word):
    with pytest.raises(ValueError, match=word):
        call()
