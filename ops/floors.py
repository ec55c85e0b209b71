"""The physical floor of one op call on MI355X: the time no kernel can beat, one function per family.

A floor has three terms, each the time one resource of the part needs at its peak for work the
operation cannot avoid; the floor is the largest (the three units run concurrently, so at best the
others hide under it):
- HBM: every input byte read once and every output byte written once, at the HBM peak;
- MFMA: the matrix work at the peak dense rate of its operand format;
- VALU: the family's inherent vector work at the ISA's best rate for it.
The peaks come from the emulated ISA's timing tables (emu.isa.load(isa.ARCH).timing);
docs/timing-model.md#floors gives the arithmetic per family. A floor is arithmetic on the shape, not a
model output or a measurement.
"""
from dataclasses import dataclass

from .. import targets
from ..emu import isa

T = isa.load(isa.ARCH).timing

HEAD_DIM, PAGE = 128, 64
SCALE_BLOCK = 32                  # elements per E8M0 scale of the MXFP4 operands
LOGIT_BYTES = 4                   # f32 output cells
BF16_BYTES = 2
F32_BYTES = 4
INDEX_BYTES = 4                   # int32 block-table entries and window bounds
# VALU lane-instructions per visible (query row, key) pair and head of the ReLU x weight head sum: a
# ReLU (one full-rate op) and a weighted accumulation (an FMA, two pairs per packed op).
HEAD_SUM = 1 + 1 / T.PACKED_F32_PER_LANE
# The FP8 family's math multiplies each head's dot product by the key's f32 scale before the ReLU (the
# scale's sign matters there): one more f32 multiply per pair and head, packed in pairs.
FP8_SCALE_MUL = 1 / T.PACKED_F32_PER_LANE


@dataclass(frozen=True)
class Floor:
    hbm_bytes: int                # bytes moved once (inputs read, output written)
    mfma_flops: int
    mfma_format: str              # the operand format whose peak the MFMA term uses
    valu_lane_ops: float          # lane-instructions at the full VALU rate (packed ops already halved)

    @property
    def hbm_us(self) -> float:
        return self.hbm_bytes / T.HBM_BYTES_PER_S * 1e6

    @property
    def mfma_us(self) -> float:
        peak = T.MFMA_FLOPS_PER_CLK_PER_SIMD[self.mfma_format] * T.SIMDS_PER_CU * T.CUS * T.CLOCK_HZ
        return self.mfma_flops / peak * 1e6

    @property
    def valu_us(self) -> float:
        lanes_per_clk = targets.get(isa.ARCH).warp_size / T.VALU_CYCLES      # per SIMD
        lanes_per_s = T.SIMDS_PER_CU * T.CUS * lanes_per_clk * T.CLOCK_HZ
        return self.valu_lane_ops / lanes_per_s * 1e6

    @property
    def terms(self) -> dict:
        return {"hbm": self.hbm_us, "mfma": self.mfma_us, "valu": self.valu_us}

    @property
    def us(self) -> float:
        return max(self.terms.values())

    @property
    def bound(self) -> str:
        """The term that sets the floor."""
        t = self.terms
        return max(t, key=t.get)


def _fp4_bytes(elements: int) -> int:
    """MXFP4 operand: two codes a byte plus one E8M0 scale byte per 32 elements."""
    return elements // 2 + elements // SCALE_BLOCK


def _logits(pairs: int, heads: int, in_bytes: int, out_cells: int, fmt: str, valu_per_pair_head: float) -> Floor:
    """An MQA logits op: `pairs` visible (query row, key) pairs scored over `heads` heads of D=HEAD_DIM
    in `fmt`, its inputs read once and every f32 output cell (the -inf ones too) written once."""
    return Floor(in_bytes + out_cells * LOGIT_BYTES, 2 * pairs * heads * HEAD_DIM, fmt,
                 pairs * heads * valu_per_pair_head)


def _decode_pairs(context_lens, next_n: int, heads: int, family: str) -> tuple:
    """(contexts, visible pairs): row i of the next_n rows of a sequence of c tokens sees
    c - (next_n - 1 - i) keys."""
    ctx = [int(c) for c in context_lens]
    if not ctx or min(ctx) < 0 or next_n < 1 or heads < 1:
        raise ValueError(f"{family} floor: context_lens {ctx}, next_n {next_n}, heads {heads}")
    return ctx, sum(max(0, c - (next_n - 1 - i)) for c in ctx for i in range(next_n))


def _tail_causal_pairs(q: int, kv: int) -> int:
    """Row n of q new rows over kv tokens sees kv - q + n + 1 keys."""
    return q * (kv - q) + q * (q + 1) // 2


def mqa_decode(context_lens, next_n: int, heads: int = 64, max_seq_len: int = None) -> Floor:
    """FP4 paged decode: len(context_lens) sequences, next_n query rows each. The output is
    [batch * next_n, max_seq_len] (default max(c))."""
    ctx, pairs = _decode_pairs(context_lens, next_n, heads, "mqa_decode")
    msl = max(ctx) if max_seq_len is None else int(max_seq_len)
    rows = len(ctx) * next_n
    table = len(ctx) * -(-max(ctx) // PAGE)
    inputs = (_fp4_bytes(sum(ctx) * HEAD_DIM)                     # K codes + scales, read once
              + _fp4_bytes(rows * heads * HEAD_DIM)               # Q
              + rows * heads * BF16_BYTES                         # head weights
              + table * INDEX_BYTES)                              # block table
    return _logits(pairs, heads, inputs, rows * msl, "fp4", HEAD_SUM)


def mqa_prefill(batch: int, q: int, kv: int, heads: int = 64) -> Floor:
    """FP4 prefill: `batch` sequences of `q` new rows over `kv` paged tokens each, tail-causal windows,
    output [batch * q, kv]."""
    if batch < 1 or q < 1 or kv < q or heads < 1:
        raise ValueError(f"mqa_prefill floor: batch {batch}, q {q}, kv {kv}, heads {heads} (need kv >= q >= 1)")
    rows = batch * q
    inputs = (_fp4_bytes(batch * kv * HEAD_DIM) + _fp4_bytes(rows * heads * HEAD_DIM)
              + rows * heads * BF16_BYTES + batch * -(-kv // PAGE) * INDEX_BYTES)
    return _logits(batch * _tail_causal_pairs(q, kv), heads, inputs, rows * kv, "fp4", HEAD_SUM)


def mqa_fp8_decode(context_lens, next_n: int, heads: int = 64, max_seq_len: int = None,
                   page: int = PAGE) -> Floor:
    """FP8 paged decode (fp8_paged_mqa_logits): len(context_lens) sequences, next_n query rows each,
    `page`-token pages; output [batch * next_n, max_seq_len] (default max(c))."""
    ctx, pairs = _decode_pairs(context_lens, next_n, heads, "mqa_fp8_decode")
    if page < 1:
        raise ValueError(f"mqa_fp8_decode floor: page {page}")
    msl = max(ctx) if max_seq_len is None else int(max_seq_len)
    rows = len(ctx) * next_n
    inputs = (sum(ctx) * (HEAD_DIM + F32_BYTES)                   # E4M3 K values + per-token f32 scale
              + rows * heads * HEAD_DIM                           # E4M3 Q
              + rows * heads * F32_BYTES                          # head weights
              + len(ctx) * -(-max(ctx) // page) * INDEX_BYTES)    # block table
    return _logits(pairs, heads, inputs, rows * msl, "fp8", HEAD_SUM + FP8_SCALE_MUL)


def mqa_fp8_prefill(s: int, s_kv: int, heads: int = 64) -> Floor:
    """FP8 ragged prefill (fp8_mqa_logits, clean_logits): S query rows over S_kv contiguous keys with
    the tail-causal windows (cu_starts 0, cu_ends[i] = S_kv - S + i + 1), output [S, S_kv]."""
    if s < 1 or s_kv < s or heads < 1:
        raise ValueError(f"mqa_fp8_prefill floor: S {s}, S_kv {s_kv}, heads {heads} (need S_kv >= S >= 1)")
    inputs = (s_kv * (HEAD_DIM + F32_BYTES)                       # KV + kv_scales
              + s * heads * (HEAD_DIM + F32_BYTES)                # Q + weights
              + 2 * s * INDEX_BYTES)                              # cu_starts, cu_ends
    return _logits(_tail_causal_pairs(s, s_kv), heads, inputs, s * s_kv, "fp8", HEAD_SUM + FP8_SCALE_MUL)


def gemm_a16wfp4(n: int, k: int, m: int) -> Floor:
    """out[M, N] = x[M, K] (BF16) @ W[N, K]^T (MXFP4) in BF16: the weight converted to BF16 once (two
    codes per v_cvt_scalef32_pk_bf16_fp4 lane-instruction) and BF16 MFMA work."""
    if min(n, k, m) < 1 or k % SCALE_BLOCK:
        raise ValueError(f"gemm_a16wfp4 floor: N {n}, K {k}, M {m} (K a multiple of {SCALE_BLOCK})")
    hbm = _fp4_bytes(n * k) + m * k * BF16_BYTES + m * n * BF16_BYTES
    return Floor(hbm, 2 * m * n * k, "bf16", n * k / 2)

