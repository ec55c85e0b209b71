"""Sizes of the runs-schedule kernel, shared by kernel.py (tracing), plan.py and specs.py (pure Python):
the layouts, `symbol`, `block` (a function of the params and the target row) and the LDS layout.

One workgroup of THREADS lanes builds the whole table. Items (decode: sequences; rows table: query
rows) are processed in blocks of THREADS, one item per lane; the first CACHE_ITEMS items' lengths and
chunk counts stay in LDS for every search round (items past it are re-read from global memory each
round, so any item count works).
"""
LAYOUTS = ("varctx", "rows")
WAVE = 64              # lanes per wave the scans below are written for (block() checks the target's)
THREADS = 256
WAVES = THREADS // WAVE
CACHE_ITEMS = 8192



def symbol(params: dict) -> str:
    return f"mqa_runs_schedule_{params['layout']}"


def block(params: dict, target) -> tuple:
    target.wave(WAVE, "mqa_runs_schedule")
    return (THREADS, 1, 1)


# ints per table row, per layout
WIDTH = {"varctx": 4, "rows": 6}
# idle-slot row of each layout: varctx (row 0, chunk 0, count 1, ctx 0) stores nothing (ctx 0);
# rows (row 0, batch 0, chunk 0, count 1, window [0, 0)) is an empty window
FILLER = {"varctx": (0, 0, 1, 0), "rows": (0, 0, 0, 1, 0, 0)}

# LDS layout (bytes): the item cache (chunk counts, raw lengths), the current block's per-item
# exclusive / inclusive run offsets, chunk counts and output fields, and the per-wave reduction slots.
_BLOCK_FIELDS = 3                       # varctx uses one of them (ctx), rows all three (batch, start, end)
LDS_CACHE_CHUNKS = 0
LDS_CACHE_RAW = LDS_CACHE_CHUNKS + 4 * CACHE_ITEMS
LDS_EXCL = LDS_CACHE_RAW + 4 * CACHE_ITEMS
LDS_INCL = LDS_EXCL + 4 * THREADS
LDS_CHUNKS = LDS_INCL + 4 * THREADS
LDS_FIELDS = LDS_CHUNKS + 4 * THREADS   # field f of item j at LDS_FIELDS + 4 * (f * THREADS + j)
LDS_WAVES = LDS_FIELDS + 4 * _BLOCK_FIELDS * THREADS
LDS_BYTES = LDS_WAVES + 2 * 4 * WAVES      # two sets of per-wave slots (alternating reductions)

# Host-side bounds: every table and input byte offset fits a signed 32-bit value, and so does a
# workgroup's sum of run counts capped at slots + 1 (THREADS + 1 of them at most).
MAX_TABLE_BYTES = (1 << 31) - 1
MAX_SLOTS = 1 << 22
