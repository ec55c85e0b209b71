"""Which tile config serves which (N, K, M): the tuned table and the generic fallback (pure Python).

N and K are runtime kernel arguments, so a config is only a tile shape and pipeline order; a tuned
(N, K) entry picks, per M bucket, the tile that fills MI355X's 256 CUs best for that shape, and the
generic entry serves every other N, K divisible by 256. The rows of (1024, 3584) and (3584, 512)
were chosen on the emulator's MI355X timing model (benchmarks/gemm_model_tune.py): up to M = 256
small-M tiles give a 256-CU part its workgroups; from M = 512 tiles of 32-128 rows convert each FP4
weight tile once per 32-128 rows (32 x 64 with sk 4 keeps 256 workgroups on 1024 x 3584 at M = 512);
16-column split-K tiles put 64-224 workgroups on the decode rows. The other rows are first choices
reasoned from grid size, LDS and register budgets. None has been timed on gfx950
(docs/families/gemm_a16wfp4.md#decision-tiles).

M buckets: "d16" M <= 16 and "d32" M <= 32 (decode), "mid" M <= 256, "prefill" M <= 1024, "large"
beyond.
"""
from ... import targets
from .geometry import KBLOCK, lds_limit, tile as make_tile


def _cfg(order, bm, bn, sk, kb, mfma=16):
    return {"order": order, "bm": bm, "bn": bn, "sk": sk, "kb": kb, "mfma": mfma}


BUCKETS = ("d16", "d32", "mid", "prefill", "large")


def _rows(d16, d32, mid, prefill, large=None):
    return {"d16": d16, "d32": d32, "mid": mid, "prefill": prefill, "large": large or prefill}


# (N, K) -> bucket -> params. Decode buckets use the decode order (one B tile live); those with
# sk > 1 reduce K-split partials in LDS. 1536 x 7168 decodes without split-K (no LDS reduction).
# 1024 x 3584 from M = 257 takes 32x32 MFMAs (half the MFMA issue slots; one conversion fits under each
# without stalling the matrix pipe), at M <= 1024 on 32 x 64 tiles with sk 4 (256 workgroups at M = 512).
# 3584 x 512 takes 64 x 128 tiles from M = 257: with kb 2 (two K steps of 256) and 32x32 MFMAs at
# M <= 1024, with kb 1 (four waves per SIMD hide its short K loop's load waits) and 16x16 ones beyond.
# The 128 x 128 tiles take 32x32 MFMAs (8448 x 7168 and 7168 x 768 at M = 4096: 5% less on the model
# than 16x16, once 32x32 tiles stored through LDS).
TUNED = {
    (8448, 7168): _rows(_cfg("decode", 16, 32, 4, 1), _cfg("decode", 32, 32, 4, 1),
                        _cfg("prefill", 64, 64, 1, 1), _cfg("prefill", 128, 128, 1, 1, mfma=32)),
    (1536, 7168): _rows(_cfg("decode", 16, 64, 1, 2), _cfg("decode", 32, 64, 1, 2),
                        _cfg("prefill", 64, 64, 1, 1), _cfg("prefill", 128, 64, 1, 1)),
    (7168, 768): _rows(_cfg("decode", 16, 32, 2, 1), _cfg("decode", 32, 32, 2, 1),
                       _cfg("prefill", 64, 64, 1, 1), _cfg("prefill", 128, 128, 1, 1, mfma=32)),
    (1024, 3584): _rows(_cfg("decode", 16, 16, 4, 1), _cfg("decode", 32, 32, 4, 1),
                        _cfg("prefill", 16, 64, 1, 2), _cfg("prefill", 32, 64, 4, 1, mfma=32),
                        _cfg("prefill", 128, 128, 2, 1, mfma=32)),
    (3584, 512): _rows(_cfg("decode", 16, 16, 4, 1), _cfg("decode", 32, 32, 2, 1),
                       _cfg("prefill", 16, 64, 1, 2), _cfg("prefill", 64, 128, 1, 2, mfma=32),
                       _cfg("prefill", 64, 128, 1, 1)),
}

# Serves any N % 256 == 0, K % 256 == 0 (kstep 256 or 128 divides every such K).
GENERIC = _rows(_cfg("decode", 16, 64, 2, 1), _cfg("decode", 32, 64, 2, 1),
                _cfg("prefill", 64, 128, 1, 1), _cfg("prefill", 128, 128, 1, 1, mfma=32))


def bucket(m: int) -> str:
    if m <= 16:
        return "d16"
    if m <= 32:
        return "d32"
    if m <= 256:
        return "mid"
    if m <= 1024:
        return "prefill"
    return "large"


def choose(n: int, k: int, m: int) -> dict:
    """Params of the spec serving an (M, N, K) problem; N and K must be multiples of 256."""
    return dict((TUNED.get((n, k)) or GENERIC)[bucket(m)])


def all_configs() -> list:
    """Every distinct config the tables name, in a stable order (the family's spec list)."""
    seen = {}
    for table in (*TUNED.values(), GENERIC):
        for b in BUCKETS:
            p = table[b]
            seen.setdefault(tuple(sorted(p.items())), p)
    return [dict(p) for _, p in sorted(seen.items())]


# ------------------------------------------------------------------------------- caller-chosen tiles
# A caller names a tile as (block_m, tile_n, tile_k, k_wave, waves_per_eu): block_m x tile_n outputs per
# workgroup, tile_k K per wave per step, k_wave waves splitting each step. waves_per_eu is an occupancy
# hint these kernels do not take. Small M tiles use the decode pipeline order.
TILE_BM = (16, 32, 48, 64, 96, 128)
TILE_BN = (16, 32, 64, 128, 256)
TILE_K = (128, 256)
DECODE_MAX_BM = 32


def from_tile(n: int, k: int, block_m: int, tile_n: int, tile_k: int, k_wave: int, *, target=None) -> dict:
    """Params of the spec that computes with that tile for an [N, K] weight; ValueError saying why when
    no spec can (the tile does not divide N or K, is outside the supported set, or overflows the LDS of
    `target`, a targets.py row; None: the table's default row, read at the call)."""
    for name, v, allowed in (("block_m", block_m, TILE_BM), ("tile_n", tile_n, TILE_BN),
                             ("tile_k", tile_k, TILE_K), ("k_wave", k_wave, (1, 2, 4))):
        if v not in allowed:
            raise ValueError(f"config: {name}={v!r} is not supported (supported: {list(allowed)})")
    params = _cfg("decode" if block_m <= DECODE_MAX_BM else "prefill", block_m, tile_n, k_wave, tile_k // KBLOCK)
    t = make_tile(params)
    if n % tile_n:
        raise ValueError(f"config: tile_n={tile_n} does not divide N={n}")
    if k % t.kstep:
        raise ValueError(f"config: k_wave * tile_k = {t.kstep} does not divide K={k}")
    limit = lds_limit(t.order, target or targets.get(targets.DEFAULT_TARGET))
    if t.lds_bytes > limit:
        raise ValueError(f"config: needs {t.lds_bytes} bytes of LDS, above {limit}")
    return params


def tile_legal(n: int, k: int, block_m: int, tile_n: int, tile_k: int, k_wave: int) -> bool:
    try:
        from_tile(n, k, block_m, tile_n, tile_k, k_wave)
    except ValueError:
        return False
    return True
