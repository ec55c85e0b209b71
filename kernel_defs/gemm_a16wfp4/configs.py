"""Which tile config serves which (N, K, M): the tuned table and the generic fallback (pure Python).

N and K are runtime kernel arguments, so a config is only a tile shape and pipeline order; a tuned
(N, K) entry picks, per M bucket, the tile that fills MI355X's 256 CUs best for that shape, and the
generic entry serves every other N, K divisible by 256. The numbers are first choices reasoned from
grid size, LDS and register budgets (Q13: upstream publishes none); they have not been timed on
gfx950. The prefill buckets of (1024, 3584) and (3584, 512) were chosen on the emulator's MI355X timing
model (benchmarks/gemm_model_tune.py): 64 x 128 tiles fill more CUs than 128 x 64 / 128 x 128.

M buckets: "d16" M <= 16 and "d32" M <= 32 (decode), "mid" M <= 256, "prefill" beyond.
"""


def _cfg(order, bm, bn, sk, kb):
    return {"order": order, "bm": bm, "bn": bn, "sk": sk, "kb": kb}


BUCKETS = ("d16", "d32", "mid", "prefill")

# (N, K) -> bucket -> params. Decode buckets use the decode order (one B tile live); those with
# sk > 1 reduce K-split partials in LDS. 1536 x 7168 decodes without split-K (no LDS reduction).
TUNED = {
    (8448, 7168): {"d16": _cfg("decode", 16, 32, 4, 1), "d32": _cfg("decode", 32, 32, 4, 1),
                   "mid": _cfg("prefill", 64, 64, 1, 1), "prefill": _cfg("prefill", 128, 128, 1, 1)},
    (1536, 7168): {"d16": _cfg("decode", 16, 64, 1, 2), "d32": _cfg("decode", 32, 64, 1, 2),
                   "mid": _cfg("prefill", 64, 64, 1, 1), "prefill": _cfg("prefill", 128, 64, 1, 1)},
    (7168, 768): {"d16": _cfg("decode", 16, 32, 2, 1), "d32": _cfg("decode", 32, 32, 2, 1),
                  "mid": _cfg("prefill", 64, 64, 1, 1), "prefill": _cfg("prefill", 128, 128, 1, 1)},
    (1024, 3584): {"d16": _cfg("decode", 16, 32, 4, 1), "d32": _cfg("decode", 32, 32, 4, 1),
                   "mid": _cfg("prefill", 64, 64, 1, 1), "prefill": _cfg("prefill", 64, 128, 1, 1)},
    (3584, 512): {"d16": _cfg("decode", 16, 32, 2, 1), "d32": _cfg("decode", 32, 32, 2, 1),
                  "mid": _cfg("prefill", 64, 64, 1, 1), "prefill": _cfg("prefill", 64, 128, 1, 1)},
}

# Serves any N % 256 == 0, K % 256 == 0 (kstep 256 or 128 divides every such K).
GENERIC = {"d16": _cfg("decode", 16, 64, 2, 1), "d32": _cfg("decode", 32, 64, 2, 1),
           "mid": _cfg("prefill", 64, 128, 1, 1), "prefill": _cfg("prefill", 128, 128, 1, 1)}


def bucket(m: int) -> str:
    if m <= 16:
        return "d16"
    if m <= 32:
        return "d32"
    if m <= 256:
        return "mid"
    return "prefill"


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
