"""flyaot.ops.floors: each family's floor counts the work of its shape and prices it at the timing
tables' peaks (no rate of its own)."""
import pytest

from flyaot.emu import isa
from flyaot.ops import floors

T = isa.load(isa.ARCH).timing


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


def test_fp8_decode_row_by_hand():
    """Two sequences of 100 and 3 tokens, next_n 2, H32, in 64-token and in 1-token pages."""
    f = floors.mqa_fp8_decode([100, 3], 2, heads=32)
    pairs = (99 + 100) + (2 + 3)                       # row i of a sequence of c tokens sees c - 1 + i keys
    assert pairs == _decode_pairs([100, 3], 2)
    kv = 103 * (128 + 4)                               # E4M3 values + one f32 scale per token
    q_w = 4 * 32 * 128 + 4 * 32 * 4                    # E4M3 Q and f32 weights of the 4 query rows
    out = 4 * 100 * 4                                  # [4, max_seq_len 100] f32, written once
    assert f.hbm_bytes == kv + q_w + 2 * 2 * 4 + out   # table: 2 sequences x ceil(100 / 64) entries
    assert floors.mqa_fp8_decode([100, 3], 2, heads=32, page=1).hbm_bytes == kv + q_w + 2 * 100 * 4 + out
    assert floors.mqa_fp8_decode([100, 3], 2, heads=32, max_seq_len=256).hbm_bytes == kv + q_w + 16 + 4 * 256 * 4
    assert f.mfma_format == "fp8" and f.mfma_flops == 2 * 204 * 32 * 128
    assert f.valu_lane_ops == 204 * 32 * 2.0           # scale multiply 1/2 + ReLU 1 + weighted FMA 1/2


def test_fp8_prefill_row_by_hand():
    """S 4 over S_kv 10, causal windows [0, 7), [0, 8), [0, 9), [0, 10)."""
    f = floors.mqa_fp8_prefill(4, 10, heads=64)
    assert _prefill_pairs(1, 4, 10) == 7 + 8 + 9 + 10
    assert f.hbm_bytes == 10 * 132 + 4 * 64 * (128 + 4) + 2 * 4 * 4 + 4 * 10 * 4   # KV+scales, Q+w, windows, out
    assert f.mfma_flops == 2 * 34 * 64 * 128 and f.valu_lane_ops == 34 * 64 * 2.0


def test_fp8_times_at_the_fp8_peak():
    """1x8192x8192: the same visible pairs as the FP4 row, priced at half the MFMA rate, with the scale
    multiply on the VALU; at FP8 the two terms are equal (2 x 128 / 2048 = 2 / 16 clocks per pair and head)."""
    f, fp4 = floors.mqa_fp8_prefill(8192, 8192), floors.mqa_prefill(1, 8192, 8192)
    pairs = 8192 * 8193 // 2
    peak = 2048 * 4 * 256 * 2.4e9
    assert f.mfma_us == pytest.approx(2 * pairs * 64 * 128 / peak * 1e6) == pytest.approx(2 * fp4.mfma_us)
    assert f.valu_us == pytest.approx(pairs * 64 * 2 / (1024 * 16 * 2.4e9) * 1e6) == pytest.approx(f.mfma_us)
    assert f.valu_us == pytest.approx(fp4.valu_us * 2 / 1.5)
    assert f.hbm_us == pytest.approx(f.hbm_bytes / 8e12 * 1e6) and f.us == pytest.approx(109.24, abs=0.01)
    d = floors.mqa_fp8_decode([32768] * 32, 4)
    assert d.bound == "hbm" and d.hbm_bytes == 32 * 32768 * 132 + 128 * 64 * 132 + 32 * 512 * 4 + 128 * 32768 * 4


@pytest.mark.parametrize("call, word", [(lambda: floors.mqa_prefill(1, 8, 4), "kv"),
                                        (lambda: floors.mqa_decode([], 1), "context_lens"),
                                        (lambda: floors.mqa_fp8_decode([5, -1], 1), "context_lens"),
                                        (lambda: floors.mqa_fp8_decode([5], 1, page=0), "page"),
                                        (lambda: floors.mqa_fp8_prefill(8, 4), "S_kv"),
                                        (lambda: floors.gemm_a16wfp4(16, 48, 1), "K")])
def test_bad_shapes_are_refused_naming_them(call, word):
    with pytest.raises(ValueError, match=word):
        call()
