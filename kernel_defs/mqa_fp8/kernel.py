"""FP8 MQA logits kernels for gfx950, written in FlyDSL (docs/families/mqa_fp8.md#kernels).

Both kernels score with v_mfma_scale_f32_16x16x128_f8f6f4 on E4M3 operands with a neutral E8M0 scale
(byte 127 = 1.0): A = 16 heads x 128 dims of Q, B = 128 dims x 16 tokens of K. Lane (g, r) holds dims
[32g, 32g + 32) of head / token r for both operands (the K order inside an MFMA only has to agree
between A and B), so every operand is two 16-byte loads. The per-token f32 K scale multiplies the MFMA
result before the ReLU (it may be negative), then the weight folds it into the lane's head sum; the
four lane groups' sums meet through permlane swaps (mqa_common.blocks.sum_over_lane_groups), after
which lane (g, r) holds token 16g + r of the CTA's 64-token tile.

Paged kernel, grid (ceil(max_model_len / 64), B), one wave: CTA (x, b) writes every cell of columns
[64x, 64x + 64) below max_model_len of the next_n rows of sequence b: the logit where the token is
visible (t < context_lens[b] - next_n + 1 + n) and its page valid, -inf elsewhere. So the op needs no
-inf fill and a caller's buffer needs none either.
- page 64: the tile is one page; its table entry is read with the context length (one scalar round
  trip, bounded by the table width). A tile past the context, past the table or whose entry is not a
  page of kv_cache loads nothing and writes -inf.
- page 1: each lane reads the entry of each of its four tokens (a vector load bounded by the table
  width); an entry outside [0, num_pages) makes that token -inf and its loads read page 0 (inside
  kv_cache, result discarded). Token offsets are 32-bit: the plan bounds the cache span below 2**31.
  Pages are 132 bytes apart, so values are read in dwords.
- preshuffled pages: values of a 16-token tile stored [dim / 16][token][dim % 16] (aiter's
  shuffle_weight (16, 16) of the page's [P, D] values), so a lane's two loads are 256 bytes apart.
- varctx grid: CTA s reads row s * next_n of the runs-schedule table (first row of the sequence, first
  chunk, chunk count, context) and runs the same tile body over its chunks, storing nothing for dead
  chunks (the op's -inf fill stands; idle slots name chunk 0 of row 0 with context 0).

Ragged kernel, grid (ceil(S_kv / 64), ceil(S / 8)): the CTA loads its 64 keys once (bounded by S_kv)
and scores 8 query rows; a row whose window misses the tile stores -inf (clean_logits) or nothing.
"""
import flydsl.compiler as flyc
import flydsl.expr as fx
from flydsl._mlir import ir
from flydsl.expr import arith, gpu, rocdl
from flydsl.expr.primitive import const_expr, range_constexpr
from flydsl.expr.typing import Int32, Int64

from ..mqa_common import blocks as B
from . import geometry as G
from .specs import FAMILY

FP8_FORMAT = 0          # cbsz / blgp value selecting E4M3 operands
NEUTRAL_SCALE = 127     # E8M0 2**0
NEG_INF = float("-inf")


def _load32(rsrc, off_lo, off_hi):
    """32 bytes of one operand lane as v8i32: two 16-byte loads (16-byte aligned offsets)."""
    lo = fx.Vector(B.buffer_load(rsrc, off_lo, 4))
    return lo.shuffle(fx.Vector(B.buffer_load(rsrc, off_hi, 4)), list(range(8)))


def _load32_dwords(rsrc, off):
    """32 contiguous bytes at a dword-aligned offset as v8i32: eight dword loads (a 1-token page of
    D + 4 = 132 bytes puts token values only 4 bytes apart from 16-byte alignment)."""
    d = [fx.Vector.from_elements([Int32(B.buffer_load(rsrc, off + Int32(4 * i), 1))], Int32) for i in range(8)]
    pairs = [d[2 * i].shuffle(d[2 * i + 1], [0, 1]) for i in range(4)]
    quads = [pairs[0].shuffle(pairs[1], [0, 1, 2, 3]), pairs[2].shuffle(pairs[3], [0, 1, 2, 3])]
    return quads[0].shuffle(quads[1], list(range(8)))


def _mfma_fp8(a, b):
    f32 = ir.F32Type.get()
    zero = fx.Vector.filled(4, 0.0, fx.Float32)
    one = Int32(NEUTRAL_SCALE)
    return fx.Vector(rocdl.mfma_scale_f32_16x16x128_f8f6f4(
        B.vec_type(4, f32), [B.ir_of(a), B.ir_of(b), B.ir_of(zero), FP8_FORMAT, FP8_FORMAT,
                             0, B.ir_of(one), 0, B.ir_of(one)]))


def _head_sums(qa, kv, ks, wv, m_tiles, n_tiles):
    """Per n-tile j, the lane's sum over its heads of w * relu(q . k * k_scale); then the sum over the
    lane groups: lane (g, r) gets token 16g + r."""
    parts = []
    for j in range_constexpr(n_tiles):
        s = fx.Float32(0.0)
        for u in range_constexpr(m_tiles):
            acc = _mfma_fp8(qa[u], kv[j])
            for i in range_constexpr(4):
                x = arith.max(fx.Float32(acc[i]) * ks[j], fx.Float32(0.0))
                s = fx.Float32(fx.fma(x, fx.Float32(wv[u][i]), s))
        parts.append(s)
    return B.sum_over_lane_groups(parts)


def _row_operands(q, weights, row, stride_w, r, grp, heads, m_tiles):
    """Q fragments (v8i32 per m-tile) and f32 weights (4 per m-tile) of query row `row` (Int64)."""
    q_row = heads * G.HEAD_DIM
    q_rs = B.buffer_rsrc(q, row * Int64(q_row), Int32(q_row))
    qa = []
    for u in range_constexpr(m_tiles):
        off = (Int32(16 * u) + r) * Int32(G.HEAD_DIM) + grp * Int32(32)
        qa.append(_load32(q_rs, off, off + Int32(16)))
    w_rs = B.buffer_rsrc(weights, row * Int64(stride_w) * Int64(4), Int32(4 * heads))
    wv = [fx.Vector(B.buffer_load(w_rs, (Int32(16 * u) + grp * Int32(4)) * Int32(4), 4)).bitcast(fx.Float32)
          for u in range_constexpr(m_tiles)]
    return qa, wv


def _paged_kernel(g: G.Kernel, name: str):
    H, P, MT, NT, D = g.heads, g.page_size, g.m_tiles, g.n_tiles, g.head_dim
    PRE = g.layout == "preshuffle"
    VARCTX = g.grid == "varctx"
    PAGE_BYTES, VALUE_BYTES = g.page_bytes, g.value_bytes

    @flyc.kernel(name=name)
    def paged(out: fx.Pointer, q: fx.Pointer, kv_cache: fx.Pointer, weights: fx.Pointer,
              context_lens: fx.Pointer, block_tables: fx.Pointer, schedule: fx.Pointer, next_n: Int32,
              max_model_len: Int32, stride_out: Int64, stride_kv: Int64, stride_w: Int32, stride_bt: Int32,
              num_pages: Int32, bt_width: Int32, batch: Int32):
        lane = Int32(gpu.thread_idx.x)
        r = lane & Int32(15)
        grp = lane >> Int32(4)
        in_tile = Int32(G.NTILE) * grp + r          # == lane: the lane's column after the head reduction

        def tile(b, ctx, t0):
            """Columns [t0, t0 + 64) of the next_n rows of sequence b: logits or -inf."""
            tok = t0 + in_tile
            bt_base = Int64(b) * Int64(stride_bt) * Int64(4)
            if const_expr(P == G.TILE):
                col = t0 >> Int32(6)
                page = B.scalar_load(block_tables, col, 1, bt_base, bt_width * Int32(4))[0]
                live = arith.min(arith.min(ctx - Int32(1) - t0, bt_width - Int32(1) - col),
                                 arith.min(num_pages - Int32(1) - page, arith.min(page, t0)))
            else:
                live = arith.min(ctx - Int32(1) - t0, t0)
            b_row = b * next_n
            in_out = (tok < max_model_len) & (tok >= Int32(0))
            if live >= Int32(0):
                kv, ks = [], []
                if const_expr(P == G.TILE):
                    ok = None
                    kv_rs = B.buffer_rsrc(kv_cache, Int64(page) * stride_kv, Int32(PAGE_BYTES))
                    for j in range_constexpr(NT):
                        if const_expr(PRE):
                            off = Int32(j * G.NTILE * D) + grp * Int32(512) + r * Int32(16)
                            kv.append(_load32(kv_rs, off, off + Int32(256)))
                        else:
                            off = (Int32(G.NTILE * j) + r) * Int32(D) + grp * Int32(32)
                            kv.append(_load32(kv_rs, off, off + Int32(16)))
                        ks.append(Int32(B.buffer_load(kv_rs, Int32(VALUE_BYTES) + (Int32(G.NTILE * j) + r) * Int32(4),
                                                      1)).bitcast(fx.Float32))
                else:
                    bt_rs = B.buffer_rsrc(block_tables, bt_base, bt_width * Int32(4))
                    span = (num_pages > Int32(0)).select(
                        (Int64(num_pages) - Int64(1)) * stride_kv + Int64(PAGE_BYTES), Int64(0))
                    kv_rs = B.buffer_rsrc(kv_cache, None, span)
                    stride = Int32(stride_kv)
                    oks = []
                    for j in range_constexpr(NT):
                        t = t0 + Int32(G.NTILE * j) + r
                        pg = Int32(B.buffer_load(bt_rs, t * Int32(4), 1))
                        okj = (t < bt_width) & (pg >= Int32(0)) & (pg < num_pages)
                        base = okj.select(pg, Int32(0)) * stride
                        kv.append(_load32_dwords(kv_rs, base + grp * Int32(32)))
                        ks.append(Int32(B.buffer_load(kv_rs, base + Int32(D), 1)).bitcast(fx.Float32))
                        oks.append(okj)
                    # lane (g, r) stores token 16g + r: its page test is that of n-tile g
                    ok = (grp == Int32(1)).select(oks[1], oks[0])
                    ok = (grp == Int32(2)).select(oks[2], ok)
                    ok = (grp == Int32(3)).select(oks[3], ok)
                for n in range(Int32(0), next_n, 1):
                    ni = Int32(n)
                    row = Int64(b_row + ni)
                    qa, wv = _row_operands(q, weights, row, stride_w, r, grp, H, MT)
                    total = _head_sums(qa, kv, ks, wv, MT, NT)
                    seen = tok < arith.min(ctx - next_n + Int32(1) + ni, max_model_len)
                    if const_expr(P == 1):
                        seen = seen & ok
                    out_rs = B.buffer_rsrc(out, row * stride_out * Int64(4), max_model_len * Int32(4))
                    if in_out:
                        B.buffer_store(seen.select(total, fx.Float32(NEG_INF)), out_rs, tok * Int32(4))
            # varctx: the op's fill stands for dead chunks (idle slots name chunk 0 of row 0 with ctx 0)
            if const_expr(not VARCTX):
                if live < Int32(0):
                    for n in range(Int32(0), next_n, 1):
                        row = Int64(b_row + Int32(n))
                        out_rs = B.buffer_rsrc(out, row * stride_out * Int64(4), max_model_len * Int32(4))
                        if in_out:
                            B.buffer_store(fx.Float32(NEG_INF), out_rs, tok * Int32(4))

        if const_expr(VARCTX):
            # slot s: table row s * next_n = (b * next_n, first chunk, chunk count, ctx_b); a row outside
            # the batch runs no chunk
            row0, first, count, ctx = B.scalar_load(schedule, Int32(gpu.block_idx.x) * next_n * Int32(4), 4)
            b = row0 // next_n
            ok_row = (row0 >= Int32(0)) & (b < batch)
            b = ok_row.select(b, Int32(0))
            count = ok_row.select(count, Int32(0))
            for c in range(first, first + count, 1):
                tile(b, ctx, Int32(c) * Int32(G.TILE))
        else:
            b = Int32(gpu.block_idx.y)
            tile(b, B.scalar_load(context_lens, b, 1)[0], Int32(gpu.block_idx.x) * Int32(G.TILE))

    return paged


def _paged_launcher(g: G.Kernel, name: str):
    kern = _paged_kernel(g, name)

    @flyc.jit
    def launch(out: fx.Pointer, q: fx.Pointer, kv_cache: fx.Pointer, weights: fx.Pointer,
               context_lens: fx.Pointer, block_tables: fx.Pointer, schedule: fx.Pointer, next_n: Int32,
               max_model_len: Int32, stride_out: Int64, stride_kv: Int64, stride_w: Int32, stride_bt: Int32,
               num_pages: Int32, bt_width: Int32, batch: Int32, stream: fx.Stream = fx.Stream(None)):
        kern(out, q, kv_cache, weights, context_lens, block_tables, schedule, next_n, max_model_len, stride_out,
             stride_kv, stride_w, stride_bt, num_pages, bt_width, batch).launch(
            grid=(1, 1, 1), block=(G.WAVE, 1, 1), stream=stream)

    return launch


def _ragged_kernel(g: G.Kernel, name: str):
    H, MT, NT, D = g.heads, g.m_tiles, g.n_tiles, g.head_dim

    @flyc.kernel(name=name)
    def ragged(out: fx.Pointer, q: fx.Pointer, kv: fx.Pointer, kv_scales: fx.Pointer, weights: fx.Pointer,
               cu_starts: fx.Pointer, cu_ends: fx.Pointer, seq_len: Int32, seq_len_kv: Int32, stride_out: Int64,
               stride_kv: Int32, stride_w: Int32, clean: Int32):
        lane = Int32(gpu.thread_idx.x)
        r = lane & Int32(15)
        grp = lane >> Int32(4)
        t0 = Int32(gpu.block_idx.x) * Int32(G.TILE)
        tok = t0 + Int32(G.NTILE) * grp + r
        in_out = tok < seq_len_kv
        # keys past seq_len_kv read 0 (bounded resources) and are never stored
        kv_rs = B.buffer_rsrc(kv, None, seq_len_kv * stride_kv)
        ks_rs = B.buffer_rsrc(kv_scales, None, seq_len_kv * Int32(4))
        kvv, ks = [], []
        for j in range_constexpr(NT):
            t = t0 + Int32(G.NTILE * j) + r
            off = t * stride_kv + grp * Int32(32)
            kvv.append(_load32(kv_rs, off, off + Int32(16)))
            ks.append(Int32(B.buffer_load(ks_rs, t * Int32(4), 1)).bitcast(fx.Float32))
        first = Int32(gpu.block_idx.y) * Int32(G.ROWS)
        last = arith.min(first + Int32(G.ROWS), seq_len)
        bound = seq_len * Int32(4)
        for i in range(first, last, 1):
            row = Int32(i)
            start = B.scalar_load(cu_starts, row, 1, None, bound)[0]
            end = arith.min(B.scalar_load(cu_ends, row, 1, None, bound)[0], seq_len_kv)
            out_rs = B.buffer_rsrc(out, Int64(row) * stride_out * Int64(4), seq_len_kv * Int32(4))
            seen = (tok >= start) & (tok < end)
            hit = arith.min(arith.min(end - Int32(1) - t0, t0 + Int32(G.TILE - 1) - start), end - Int32(1) - start)
            if hit >= Int32(0):
                qa, wv = _row_operands(q, weights, Int64(row), stride_w, r, grp, H, MT)
                total = _head_sums(qa, kvv, ks, wv, MT, NT)
                if in_out & (seen | (clean != Int32(0))):
                    B.buffer_store(seen.select(total, fx.Float32(NEG_INF)), out_rs, tok * Int32(4))
            if hit < Int32(0):
                if in_out & (clean != Int32(0)):
                    B.buffer_store(fx.Float32(NEG_INF), out_rs, tok * Int32(4))

    return ragged


def _ragged_launcher(g: G.Kernel, name: str):
    kern = _ragged_kernel(g, name)

    @flyc.jit
    def launch(out: fx.Pointer, q: fx.Pointer, kv: fx.Pointer, kv_scales: fx.Pointer, weights: fx.Pointer,
               cu_starts: fx.Pointer, cu_ends: fx.Pointer, seq_len: Int32, seq_len_kv: Int32, stride_out: Int64,
               stride_kv: Int32, stride_w: Int32, clean: Int32, stream: fx.Stream = fx.Stream(None)):
        kern(out, q, kv, kv_scales, weights, cu_starts, cu_ends, seq_len, seq_len_kv, stride_out, stride_kv,
             stride_w, clean).launch(grid=(1, 1, 1), block=(G.WAVE, 1, 1), stream=stream)

    return launch


def launcher(params: dict, target):
    """The launcher of one spec of the family for a target row (build_tools compiles it)."""
    FAMILY.validate_params(params)
    FAMILY.block(params, target)        # refuses a target whose waves the lane layouts do not fit
    g = G.of(params)
    name = FAMILY.symbol(params)
    if g.path == "paged":
        return _paged_launcher(g, name)
    return _ragged_launcher(g, name)


def compile_hints(params: dict) -> dict:
    return {"waves_per_eu": G.MIN_WAVES_PER_SIMD}
