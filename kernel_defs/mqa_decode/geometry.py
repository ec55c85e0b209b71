"""Compile-time geometry of the decode kernels, shared by kernel.py (tracing), plan.py and specs.py:
every size, the spec tables, `symbol` and `block` (a function of the params and the target row).

Pure Python (plus mqa_common.layouts for the Q-scale padding): the runtime imports it.
"""
from dataclasses import dataclass

from ..mqa_common import layouts

WAVE = 64              # lanes per wave the lane layouts below are written for (block() checks the target's)
NTILE = 16             # tokens per MFMA n-tile
QUAD = 4 * NTILE       # 4 n-tiles whose scales share one dword (docs/families/mqa_decode.md#kv-scales)
VALUE_LOAD = 16        # bytes per lane per KV value load
SCALE_LOAD = 4         # bytes per lane per KV scale load


@dataclass(frozen=True)
class Staged:
    """Staged-LDS generic kernel: one query row per CTA, `block_k` tokens per chunk staged in LDS.

    A chunk is block_k / P whole pages copied verbatim (values, then scales) into LDS. Within a page the
    P/64 quads h own tokens {q*P/4 + 16h + r : q < 4, r < 16}: the four n-tiles of a quad read their
    scales from one LDS dword (byte q = MFMA opsel). Wave w computes quads w, w + W, ... of the chunk.
    """
    heads: int
    head_dim: int
    page_size: int
    block_k: int
    num_warps: int

    def __post_init__(self):
        if self.heads % 16 or not 16 <= self.heads <= 128:
            raise ValueError(f"heads={self.heads}: must be a multiple of 16 in [16, 128]")
        if self.head_dim % 128:
            raise ValueError(f"head_dim={self.head_dim}: must be a multiple of 128")
        if self.page_size % QUAD:
            raise ValueError(f"page_size={self.page_size}: must be a multiple of {QUAD}")
        if self.block_k % self.page_size or (self.block_k // QUAD) % self.num_warps:
            raise ValueError(f"block_k={self.block_k}, num_warps={self.num_warps}, page_size={self.page_size}: "
                             f"block_k must be a multiple of the page size and of {QUAD} * num_warps")

    @property
    def m_tiles(self): return self.heads // 16
    @property
    def k_tiles(self): return self.head_dim // 128
    @property
    def qs_pad(self): return layouts.qs_pad(self.heads)
    @property
    def threads(self): return WAVE * self.num_warps
    @property
    def pages_per_chunk(self): return self.block_k // self.page_size
    @property
    def page_value_bytes(self): return self.page_size * self.head_dim // 2
    @property
    def page_scale_bytes(self): return self.page_size * self.head_dim // 32
    @property
    def lds_scale_base(self): return self.block_k * self.head_dim // 2
    @property
    def lds_bytes(self): return self.block_k * (self.head_dim // 2 + self.head_dim // 32)
    @property
    def value_loads(self):     # per lane per chunk; one wave-load = 1 KiB, inside one page
        return self.lds_scale_base // (VALUE_LOAD * self.threads)
    @property
    def scale_loads(self):     # per lane per chunk; one wave-load = 256 B, inside one page
        return (self.lds_bytes - self.lds_scale_base) // (SCALE_LOAD * self.threads)
    @property
    def quads_per_wave(self): return self.block_k // QUAD // self.num_warps


# (block_k, num_warps) of the staged kernel that are prebuilt: the default 256x4 first, then the common
# caller overrides. Any other tile the staged geometry allows is compiled on first use.
STAGED_TILES = ((256, 4), (128, 2), (512, 8), (512, 4), (64, 1))
DEFAULT_TILE = STAGED_TILES[0]
STAGED_MAX_NEXT_N = 16        # the staged kernel only divides the row index by next_n
MAX_WARPS = 16                # 1024 threads per workgroup
STAGED_LDS_PER_TOKEN = 64 + 4  # D128 values and scales: the staged chunk's bytes per token at the least D

MAX_NEXT_N = 8                # rows one direct CTA holds
DIRECT_HEADS = (64, 128)
DIRECT_WAVES = 2                # most waves of a direct CTA (two head waves, or two row waves)
DIRECT_GRID_LIMIT = 1024        # largest 32-token grid of the two-wave kernels; larger grids use 64-token tiles
# (tile tokens, weight_load, waves) of the prebuilt direct kernels, per head count, as direct_tile picks them.
# One wave holds at most 4 m-tiles (one Q-scale dword), so H128 always splits its heads over two waves.
DIRECT_VARIANTS = {64: ((32, "vector", 1), (32, "vector", 2), (64, "vector", 1)),
                   128: ((32, "vector", 2), (64, "vector", 2), (64, "scalar", 2))}
DIRECT_MIN_WAVES_PER_SIMD = 4   # occupancy the direct kernels are compiled for: <= 512 / 4 VGPRs


@dataclass(frozen=True)
class Direct:
    """Direct-path kernel (D = 128): one CTA = one `tile`-token chunk of one sequence, all next_n rows.

    The chunk lies inside one page (tile <= P). Every wave loads the chunk's KV values and scales straight
    into registers. `waves` = head waves x row waves: with two head waves (H128) each scores half of the
    heads and their per-token partial sums meet in LDS ([wave][row][token] f32, one slot per possible
    next_n row); with one (H64) each wave scores all heads of its rows and stores them.
    """
    heads: int
    page_size: int
    tile: int
    scalar_weights: bool
    head_dim: int = 128
    waves: int = DIRECT_WAVES       # head waves x row waves (see head_waves)

    def __post_init__(self):
        if self.heads not in DIRECT_HEADS or self.head_dim != 128:
            raise ValueError(f"direct path: heads={self.heads}, head_dim={self.head_dim} (needs H64/H128, D128)")
        if self.tile not in (32, 64) or self.page_size % self.tile or self.tile < self.page_size // 4:
            raise ValueError(f"direct path: tile={self.tile} does not fit page_size={self.page_size}")
        if self.waves % self.head_waves or self.waves not in (1, DIRECT_WAVES):
            raise ValueError(f"direct path: waves={self.waves} with heads={self.heads} (1 or {DIRECT_WAVES} waves, "
                             f"a multiple of its {self.head_waves} head waves)")

    @property
    def head_waves(self):
        """Waves that split the heads: a wave holds at most 4 m-tiles (one Q-scale dword). With one head
        wave each wave scores whole rows and stores them itself (no LDS exchange, no barrier); the other
        waves are row waves: wave w scores rows n_first + w, n_first + w + waves, ..."""
        return max(1, self.heads // 64)
    @property
    def row_waves(self): return self.waves // self.head_waves
    @property
    def m_tiles_per_wave(self): return self.heads // 16 // self.head_waves
    @property
    def n_tiles(self): return self.tile // NTILE
    @property
    def qs_pad(self): return layouts.qs_pad(self.heads)
    @property
    def threads(self): return WAVE * self.waves
    @property
    def lds_bytes(self): return 0 if self.head_waves == 1 else self.head_waves * MAX_NEXT_N * self.tile * 4


WALK_SPAN = 256          # tokens of one walk CTA
WALK_STEP = QUAD         # tokens a walk wave scores per step: 4 n-tiles, one KV-scale dword per lane at page 64
WALK_NEXT_N = (3, 4)     # rows the walk kernel serves (one wave each); chosen on the timing model
WALK_MIN_CTAS = 1024     # smallest walk grid it serves: on smaller grids its four dependent steps per wave
                         # lose to the direct kernel's short chains (timing model: 256 CTAs 2.9 vs 1.7 us)
WALK_MIN_WAVES_PER_SIMD = 8     # occupancy the walk kernel is compiled for: <= 512 / 8 VGPRs


@dataclass(frozen=True)
class Walk:
    """Walk kernel (H64, D128): one CTA = one `span`-token chunk of one sequence, one wave per query row.

    A wave holds its row's Q, Q scales and weights in registers and walks the chunk in `steps` steps of
    WALK_STEP tokens, loading each step's KV values and scales straight into registers.
    """
    page_size: int
    heads: int = 64
    head_dim: int = 128
    span: int = WALK_SPAN
    waves: int = max(WALK_NEXT_N)

    def __post_init__(self):
        if self.heads != 64 or self.head_dim != 128:
            raise ValueError(f"walk path: heads={self.heads}, head_dim={self.head_dim} (needs H64, D128)")
        if self.page_size % WALK_STEP or self.span % self.page_size:
            raise ValueError(f"walk path: page_size={self.page_size} does not tile a {self.span}-token chunk")

    @property
    def steps(self): return self.span // WALK_STEP
    @property
    def n_tiles(self): return WALK_STEP // NTILE
    @property
    def qs_pad(self): return layouts.qs_pad(self.heads)
    @property
    def threads(self): return WAVE * self.waves


def symbol(params: dict) -> str:
    name = "mqa_decode_{path}_h{heads}_d{head_dim}_p{page_size}_bk{block_k}_w{num_warps}".format(**params)
    return name + ("_sw" if params["weight_load"] == "scalar" else "")


def block(params: dict, target) -> tuple:
    """Workgroup of every spec: num_warps waves (the direct kernel's are its head and row waves)."""
    return (target.wave(WAVE, "mqa_decode") * params["num_warps"], 1, 1)


def staged_params(heads: int, head_dim: int, page_size: int, block_k: int, num_warps: int) -> dict:
    """The params of one staged spec, from its axes (specs() and the call's plan both build them here)."""
    return {"path": "staged", "heads": heads, "head_dim": head_dim, "page_size": page_size, "block_k": block_k,
            "num_warps": num_warps, "weight_load": "vector"}


def direct_params(heads: int, page_size: int, tile: int, scalar_weights: bool, waves: int = DIRECT_WAVES) -> dict:
    """The params of one direct spec (D128; block_k is its tile, num_warps its waves)."""
    return {"path": "direct", "heads": heads, "head_dim": 128, "page_size": page_size, "block_k": tile,
            "num_warps": waves, "weight_load": "scalar" if scalar_weights else "vector"}


def walk_params(page_size: int) -> dict:
    """The params of one walk spec (block_k is its span, num_warps its row waves)."""
    return {"path": "walk", "heads": 64, "head_dim": 128, "page_size": page_size, "block_k": WALK_SPAN,
            "num_warps": Walk(page_size).waves, "weight_load": "vector"}


def of(params: dict):
    """The Staged, Direct or Walk geometry of a spec's params (the inverse of the *_params builders)."""
    if params["path"] == "staged":
        return Staged(params["heads"], params["head_dim"], params["page_size"], params["block_k"], params["num_warps"])
    if params["path"] == "direct":
        return Direct(params["heads"], params["page_size"], params["block_k"], params["weight_load"] == "scalar",
                      waves=params["num_warps"])
    if params["path"] == "walk":
        return Walk(params["page_size"], params["heads"], params["head_dim"], params["block_k"], params["num_warps"])
    raise ValueError(f"mqa_decode: unknown path {params['path']!r}")


def takes_walk(heads: int, head_dim: int, next_n: int, batch: int, max_seq_len: int) -> bool:
    """The direct path's choice of the walk kernel, from host ints only: H64 D128 with WALK_NEXT_N rows (its
    waves are the rows, so fewer rows idle waves) on a grid of at least WALK_MIN_CTAS 256-token chunks."""
    return (heads == 64 and head_dim == 128 and next_n in WALK_NEXT_N
            and batch * -(-max_seq_len // WALK_SPAN) >= WALK_MIN_CTAS)


def direct_tile(heads: int, batch: int, next_n: int, max_seq_len: int):
    """(tile tokens, scalar weight loads, waves) of the direct path, from host ints only (choices made on the
    timing model, docs/families/mqa_decode.md#performance).

    H64 (one head wave: a wave scores all heads of its rows and stores them, no LDS exchange, no barrier):
    one wave with 32-token tiles for single-row calls (the shortest chain); multi-row calls take two row
    waves (two rows at once on two SIMDs) while the 32-token grid has at most DIRECT_GRID_LIMIT CTAs,
    else one wave with 64-token tiles (the fewest CTAs and scalar instructions per CU). H128 (two head
    waves): 32-token tiles up to DIRECT_GRID_LIMIT CTAs, else 64-token tiles, with scalar weight loads
    when even the 64-token grid exceeds the limit.
    """
    small = batch * -(-max_seq_len // 32) <= DIRECT_GRID_LIMIT
    if heads // 16 <= 4:
        if next_n == 1:
            return 32, False, 1
        return (32, False, DIRECT_WAVES) if small else (64, False, 1)
    if small:
        return 32, False, DIRECT_WAVES
    return 64, batch * -(-max_seq_len // 64) > DIRECT_GRID_LIMIT, DIRECT_WAVES
