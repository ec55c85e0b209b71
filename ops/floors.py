"""The physical floor of one op call on MI355X: the time no kernel can beat, one function per family.

A floor has three terms, each the time one resource of the part needs at its peak for work the
operation cannot avoid; the floor is the largest (the three units run concurrently, so at best the
others hide under it):
- HBM: every input byte read once and every output byte written once, at the HBM peak;
- MFMA: the matrix work at the peak dense rate of its operand format;
- VALU: the family's inherent vector work at the ISA's best rate for it.
The peaks come from the timing tables (emu/isa/gfx950/timing.py); docs/timing-model.md#floors gives
the arithmetic per family. A floor is arithmetic on the shape, not a model output or a measurement.
"""
from dataclasses import dataclass

from .. import targets
from ..emu.decode import ISA_ARCH
from ..emu.isa.gfx950 import timing as T

HEAD_DIM, PAGE = 128, 64
SCALE_BLOCK = 32                  # elements per E8M0 scale of the MXFP4 operands
LOGIT_BYTES = 4                   # f32 output cells
BF16_BYTES = 2


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
        lanes_per_clk = targets.get(ISA_ARCH).warp_size / T.VALU_CYCLES      # per SIMD
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


def _mqa(pairs: int, rows: int, kv_tokens: int, table_entries: int, max_seq_len: int, heads: int) -> Floor:
    """Logits of `rows` query rows over paged FP4 KV: `pairs` visible (query row, key) pairs."""
    hbm = (_fp4_bytes(kv_tokens * HEAD_DIM)                       # K, read once
           + _fp4_bytes(rows * heads * HEAD_DIM)                  # Q
           + rows * heads * BF16_BYTES                            # head weights
           + table_entries * 4                                    # block table
           + rows * max_seq_len * LOGIT_BYTES)                    # every output cell, -inf ones too
    # Per visible pair and head: a ReLU (one full-rate op) and a weighted accumulation (an FMA, two
    # pairs per packed op): 1 + 1/2 lane-instructions.
    valu = pairs * heads * (1 + 1 / T.PACKED_F32_PER_LANE)
    return Floor(hbm, 2 * pairs * heads * HEAD_DIM, "fp4", valu)


def mqa_decode(context_lens, next_n: int, heads: int = 64, max_seq_len: int = None) -> Floor:
    """Decode: len(context_lens) sequences, next_n query rows each; row i of a sequence of length c
    sees c - (next_n - 1 - i) keys. The output is [batch * next_n, max_seq_len] (default max(c))."""
    ctx = [int(c) for c in context_lens]
    if not ctx or min(ctx) < 0 or next_n < 1 or heads < 1:
        raise ValueError(f"mqa_decode floor: context_lens {ctx}, next_n {next_n}, heads {heads}")
    msl = max(ctx) if max_seq_len is None else int(max_seq_len)
    pairs = sum(max(0, c - (next_n - 1 - i)) for c in ctx for i in range(next_n))
    table = len(ctx) * -(-max(ctx) // PAGE)
    return _mqa(pairs, len(ctx) * next_n, sum(ctx), table, msl, heads)


def mqa_prefill(batch: int, q: int, kv: int, heads: int = 64) -> Floor:
    """Prefill: `batch` sequences of `q` new rows over `kv` tokens each, tail-causal windows (row n
    sees keys t <= kv - q + n), output [batch * q, kv]."""
    if batch < 1 or q < 1 or kv < q or heads < 1:
        raise ValueError(f"mqa_prefill floor: batch {batch}, q {q}, kv {kv}, heads {heads} (need kv >= q >= 1)")
    pairs = batch * (q * (kv - q) + q * (q + 1) // 2)
    return _mqa(pairs, batch * q, batch * kv, batch * -(-kv // PAGE), kv, heads)


def gemm_a16wfp4(n: int, k: int, m: int) -> Floor:
    """out[M, N] = x[M, K] (BF16) @ W[N, K]^T (MXFP4) in BF16: the weight converted to BF16 once (two
    codes per v_cvt_scalef32_pk_bf16_fp4 lane-instruction) and BF16 MFMA work."""
    if min(n, k, m) < 1 or k % SCALE_BLOCK:
        raise ValueError(f"gemm_a16wfp4 floor: N {n}, K {k}, M {m} (K a multiple of {SCALE_BLOCK})")
    hbm = _fp4_bytes(n * k) + m * k * BF16_BYTES + m * n * BF16_BYTES
    return Floor(hbm, 2 * m * n * k, "bf16", n * k / 2)


FAMILIES = {"decode": mqa_decode, "prefill": mqa_prefill, "gemm": gemm_a16wfp4}
