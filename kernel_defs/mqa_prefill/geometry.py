"""Compile-time geometry of one prefill spec (heads H, head_dim D, page size P), its `symbol` and
`block` (a function of the params and the target row).

Pure Python: kernel.py, plan.py and specs.py (budget) all derive sizes from here so the kernel,
its launch plan and the resource gate cannot disagree.
"""
from dataclasses import dataclass

from ..mqa_common import layouts
from ..mqa_common.prefill_table import CHUNK_TOKENS, CTA_INFO_INTS, WAVES  # noqa: F401  (re-exported)

WAVE_SIZE = 64            # lanes per wave the lane layouts below are written for (block() checks the target's)
THREADS = WAVES * WAVE_SIZE
MFMA_M = 32               # v_mfma_scale_f32_32x32x64_f8f6f4: 32 heads x 32 tokens x 64 dims
MFMA_N = 32
MFMA_K = 64


def spec_params(heads: int, head_dim: int, page_size: int) -> dict:
    """The params of one spec, from its axes: what specs() enumerates and what a call's plan looks up."""
    return {"heads": heads, "head_dim": head_dim, "page_size": page_size}


def symbol(params: dict) -> str:
    g = Geometry.of(params)
    return f"mqa_prefill_fp4_h{g.heads}_d{g.head_dim}_p{g.page_size}"


def block(params: dict, target) -> tuple:
    target.wave(WAVE_SIZE, "mqa_prefill")
    return (THREADS, 1, 1)


@dataclass(frozen=True)
class Geometry:
    heads: int              # (the fields are the spec's params, in spec_params' order)
    head_dim: int
    page_size: int

    @classmethod
    def of(cls, params: dict) -> "Geometry":
        return cls(**params)

    @property
    def m_tiles(self) -> int:          # 32-head MFMA row tiles (the last one is half padding when H % 32 == 16)
        return -(-self.heads // MFMA_M)

    @property
    def k_steps(self) -> int:          # 64-dim MFMA reduction steps
        return self.head_dim // MFMA_K

    @property
    def k_tiles(self) -> int:          # 128-dim tiles of the page / q-scale layouts
        return self.head_dim // 128

    @property
    def qs_pad(self) -> int:           # bytes per (kt, group, head%16) in the swizzled Q scales
        return layouts.qs_pad(self.heads)

    @property
    def pages_per_chunk(self) -> int:
        return CHUNK_TOKENS // self.page_size

    @property
    def tiles_per_page(self) -> int:   # 32-token MFMA column tiles in one page
        return self.page_size // MFMA_N

    @property
    def page_value_bytes(self) -> int:
        return self.page_size * self.head_dim // 2

    @property
    def page_scale_bytes(self) -> int:
        return self.page_size * self.head_dim // 32

    @property
    def lds_value_bytes(self) -> int:
        return self.pages_per_chunk * self.page_value_bytes

    @property
    def lds_bytes(self) -> int:        # exactly one staged chunk: values then scales
        return self.pages_per_chunk * (self.page_value_bytes + self.page_scale_bytes)

    @property
    def value_pieces_per_thread(self) -> int:   # 16-byte pieces each thread stages per chunk
        return self.lds_value_bytes // 16 // THREADS

    @property
    def scale_dwords_per_thread(self) -> int:
        return self.pages_per_chunk * self.page_scale_bytes // 4 // THREADS
