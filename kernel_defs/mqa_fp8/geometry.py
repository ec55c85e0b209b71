"""Compile-time geometry of the FP8 MQA logits kernels: sizes as functions of the params and the target,
the workgroup and the symbol (kernel.py, plan.py and specs.py all derive from here; pure Python).

Paged kernel (one wave): CTA (x, b) of the "tiles" grid (ceil(max_model_len / TILE), B) owns output
columns [x*TILE, (x+1)*TILE) of the next_n rows of sequence b and writes every one of them (its value or
-inf); CTA s of the "varctx" grid (slots) walks the TILE-token chunks its schedule row names.
Ragged kernel (one wave, grid (ceil(S_kv / TILE), ceil(S / ROWS))): CTA (x, y) owns columns
[x*TILE, (x+1)*TILE) of query rows [y*ROWS, (y+1)*ROWS).
"""
from dataclasses import dataclass

WAVE = 64               # lanes per wave the lane layouts below are written for (block() checks the target's)
NTILE = 16              # tokens per MFMA n-tile (and heads per m-tile)
TILE = 64               # tokens per CTA: 4 n-tiles, one per lane group after the head reduction
HEAD_DIM = 128          # one 16x16x128 MFMA K step: a lane holds 32 FP8 values of each operand
SCALE_BYTES = 4         # one f32 scale per token, after the page's values
ROWS = 8                # ragged kernel: query rows per CTA (they share its KV registers)
MIN_WAVES_PER_SIMD = 4  # resident waves a SIMD keeps: a quarter of the target's VGPRs + AGPRs per wave

HEADS = (32, 64)
PAGE_SIZES = (1, 64)
LAYOUTS = ("plain", "preshuffle")
PATHS = ("paged", "ragged")
GRIDS = ("tiles", "varctx")
MAX_NEXT_N = 4


@dataclass(frozen=True)
class Kernel:
    """One spec. `page_size`/`layout` only mean something on the paged path (ragged: 1, plain)."""
    path: str
    heads: int
    page_size: int
    layout: str
    grid: str = "tiles"
    head_dim: int = HEAD_DIM

    def __post_init__(self):
        if self.path not in PATHS:
            raise ValueError(f"mqa_fp8: path={self.path!r} (one of {PATHS})")
        if self.heads not in HEADS or self.head_dim != HEAD_DIM:
            raise ValueError(f"mqa_fp8: heads={self.heads}, head_dim={self.head_dim} (heads {HEADS}, head_dim "
                             f"{HEAD_DIM})")
        if self.page_size not in PAGE_SIZES or self.layout not in LAYOUTS:
            raise ValueError(f"mqa_fp8: page_size={self.page_size}, layout={self.layout!r}")
        if self.layout == "preshuffle" and self.page_size % NTILE:
            raise ValueError(f"mqa_fp8: the preshuffled layout needs a page size multiple of {NTILE}")
        if self.grid not in GRIDS:
            raise ValueError(f"mqa_fp8: grid={self.grid!r} (one of {GRIDS})")
        if self.path == "ragged" and (self.page_size, self.layout, self.grid) != (1, "plain", "tiles"):
            raise ValueError("mqa_fp8: the ragged path has no pages (page_size=1, layout='plain', grid='tiles')")

    @property
    def m_tiles(self): return self.heads // NTILE
    @property
    def n_tiles(self): return TILE // NTILE
    @property
    def page_bytes(self):
        """Bytes of one page: page_size * head_dim FP8 values, then page_size f32 scales."""
        return self.page_size * (self.head_dim + SCALE_BYTES)
    @property
    def value_bytes(self): return self.page_size * self.head_dim


def params(path: str, heads: int, page_size: int = 1, layout: str = "plain", grid: str = "tiles") -> dict:
    return {"path": path, "heads": heads, "head_dim": HEAD_DIM, "page_size": page_size, "layout": layout,
            "grid": grid}


def of(p: dict) -> Kernel:
    return Kernel(p["path"], p["heads"], p["page_size"], p["layout"], p["grid"], p["head_dim"])


def symbol(p: dict) -> str:
    if p["path"] == "ragged":
        return "mqa_fp8_ragged_h{heads}_d{head_dim}".format(**p)
    name = "mqa_fp8_paged_h{heads}_d{head_dim}_p{page_size}_{layout}".format(**p)
    return name + ("_varctx" if p["grid"] == "varctx" else "")


def block(p: dict, target) -> tuple:
    """Workgroup of every spec: one wave."""
    return (target.wave(WAVE, "mqa_fp8"), 1, 1)
