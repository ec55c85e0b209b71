"""Tile geometry of one gemm_a16wfp4 spec, derived from its params (pure Python, shared by the kernel,
the plan and the specs so that all three agree), with `symbol`, `block` and the LDS limits (functions
of the params and the target row).

A workgroup is 4 waves computing a (bm x bn) output tile. The waves form a (nw x sk) grid: `sk` waves
split every K step between them (intra-workgroup split-K, partials reduced through LDS), the
4/sk wave groups split the bn columns. Every wave covers all bm rows, so each decoded B fragment
feeds bm/mfma MFMAs and no B element is decoded twice inside a workgroup.

K advances in steps of `kstep` = 128 * sk * kb elements; inside a step each wave owns `kb`
consecutive 128-K blocks (one 16-byte preshuffled load per lane per 16 columns per block).

`mfma` is the MFMA's output tile: 16 (v_mfma_f32_16x16x32_bf16, 16 cycles) or 32
(v_mfma_f32_32x32x16_bf16, 32 cycles: half the issue slots for the same work, and room for a weight
conversion under every MFMA without stalling the matrix pipe).
"""
from dataclasses import dataclass

WAVES = 4
WAVE = 64             # lanes per wave the fragment layouts below are written for (block() checks the target's)
MFMAS = {16: 32, 32: 16}   # output tile (rows = columns) -> K of v_mfma_f32_{16x16x32,32x32x16}_bf16
KBLOCK = 128          # K elements one lane's 16-byte weight load covers (4 groups of 32, one per lane row)
A_CHUNK = 16          # bytes per cooperative A load / LDS read (8 bf16), and per output store
OUT_PAD = 16          # LDS output tile row padding (bytes)
ORDERS = ("prefill", "decode")
DECODE_MAX_LDS = 80 * 1024   # decode order: two 4-wave workgroups per CU (the family budget)
DECODE_MAX_REGS = 256        # decode order: VGPR + AGPR per lane that keep 2 waves per SIMD


@dataclass(frozen=True)
class Tile:
    order: str        # "prefill": next A and B issued before the MFMAs; "decode": next B after them
    bm: int
    bn: int
    sk: int
    kb: int
    mfma: int         # MFMA output tile, a key of MFMAS

    @property
    def mfma_k(self) -> int:
        return MFMAS[self.mfma]

    @property
    def kstep(self) -> int:
        return KBLOCK * self.sk * self.kb

    @property
    def wave_groups_n(self) -> int:
        return WAVES // self.sk

    @property
    def wave_n(self) -> int:
        return self.bn // self.wave_groups_n

    @property
    def n_tiles(self) -> int:         # MFMA tiles per wave along N
        return self.wave_n // self.mfma

    @property
    def m_tiles(self) -> int:
        return self.bm // self.mfma

    @property
    def accumulators(self) -> int:    # 4-float accumulator units per lane (an MFMA tile holds (mfma / 16)^2)
        return self.bm * self.wave_n // (16 * 16)

    @property
    def a_stage_bytes(self) -> int:   # one LDS stage of A: bm rows x kstep bf16
        return self.bm * self.kstep * 2

    @property
    def a_chunks_per_thread(self) -> int:
        return self.a_stage_bytes // A_CHUNK // (WAVES * WAVE)

    @property
    def reduce_bytes(self) -> int:    # split-K partials: sk - 1 per accumulator of each group (all but its owner's)
        return self.wave_groups_n * (self.sk - 1) * self.accumulators * WAVE * 16

    @property
    def staged_out(self) -> bool:     # 32x32 tiles store through an LDS copy of the output (kernel.py says why)
        return self.mfma == 32

    @property
    def out_pitch(self) -> int:       # bytes per row of the LDS output tile: 16 of padding spread the rows over banks
                                      # (a ds_write_b64 of 16 rows meets at most two to a bank)
        return self.bn * 2 + OUT_PAD

    @property
    def out_bytes(self) -> int:       # the bf16 output tile staged in LDS for row-contiguous stores
        return self.bm * self.out_pitch

    @property
    def out_base(self) -> int:        # LDS offset of the output tile: past the split-K partials (read while it fills)
        return self.reduce_bytes

    @property
    def lds_bytes(self) -> int:       # the reduction and the output tile reuse the A stages after the K loop
        return max(2 * self.a_stage_bytes, self.reduce_bytes,
                   self.out_base + self.out_bytes if self.staged_out else 0)

    def check(self) -> None:
        if self.order not in ORDERS:
            raise ValueError(f"order {self.order!r} not in {ORDERS}")
        if self.sk not in (1, 2, 4) or WAVES % self.sk:
            raise ValueError(f"sk={self.sk} must divide {WAVES}")
        if self.mfma not in MFMAS:
            raise ValueError(f"mfma={self.mfma} not in {tuple(MFMAS)}")
        if self.bm % self.mfma or self.bm <= 0:
            raise ValueError(f"bm={self.bm} must be a positive multiple of mfma={self.mfma}")
        if self.bn % (self.mfma * self.wave_groups_n):
            raise ValueError(f"bn={self.bn} leaves a wave less than {self.mfma} columns (sk={self.sk}, mfma={self.mfma})")
        if 256 % self.bn and self.bn % 256:
            raise ValueError(f"bn={self.bn} must divide 256 or be a multiple of it")
        if self.a_stage_bytes % (A_CHUNK * WAVES * WAVE):
            raise ValueError(f"A stage of {self.a_stage_bytes} bytes does not split over {WAVES * WAVE} threads")
        if self.kstep * 2 // A_CHUNK < 8:
            raise ValueError("an A row must span at least 8 chunks for the LDS swizzle")


def tile(params: dict) -> Tile:
    t = Tile(params["order"], params["bm"], params["bn"], params["sk"], params["kb"], params["mfma"])
    t.check()
    return t


def symbol(params: dict) -> str:
    return "gemm_a16wfp4_{order}_m{bm}_n{bn}_s{sk}_k{kb}".format(**params) + (
        "" if params["mfma"] == 16 else "_x{mfma}".format(**params))


def block(params: dict, target) -> tuple:
    return (WAVES * target.wave(WAVE, "gemm_a16wfp4"), 1, 1)


def lds_limit(order: str, target) -> int:
    """LDS one workgroup of that pipeline order may use on the target: decode keeps two per CU."""
    return min(DECODE_MAX_LDS, target.lds_bytes) if order == "decode" else target.lds_bytes
