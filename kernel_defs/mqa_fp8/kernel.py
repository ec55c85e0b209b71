"""FP8 MQA logits kernels for gfx950, written in FlyDSL (docs/families/mqa_fp8.md#kernels).

Both kernels score with v_mfma_scale_f32_16x16x128_f8f6f4 on E4M3 operands with a neutral E8M0 scale
(byte 127 = 1.0): A = 16 heads x 128 dims of Q, B = 128 dims x 16 tokens of K. Lane (g, r) holds the
16-byte chunks g and g + 4 (dims [16g, 16g + 16) and [64 + 16g, 80 + 16g)) of head / token r for both
operands (the K order inside an MFMA only has to agree between A and B). A row-major operand (Q, plain
K) is read as two loads of 8 whole rows each, so no 128-byte line is read twice, and put in place with
one row_ror:8 DPP move and one select per dword (_load_rows); a preshuffled K tile is read directly.
relu(x * s) for the per-token f32 K scale s (it may be negative) is s * med3(x, 0, +-inf), so the
scale multiplies each token's head sum once; the weights fold in by FMAs in pairs (two chains, packed
into v_pk_fma_f32). The four lane groups' sums meet through permlane swaps
(mqa_common.blocks.sum_over_lane_groups), after which lane (g, r) holds token 16g + r of the CTA's
64-token tile.

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
  shuffle_weight (16, 16) of the page's [P, D] values), so a lane's two loads are 1024 bytes apart
  and each reads whole lines.
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


ROW_ROR8 = 0x128        # dpp_ctrl row_ror:8: lane r of each 16-lane row reads lane r ^ 8


def _join(lo, hi):
    return fx.Vector(lo).shuffle(fx.Vector(hi), list(range(8)))


def _load32(rsrc, off_lo, off_hi):
    """32 bytes of one operand lane as v8i32: two 16-byte loads (16-byte aligned offsets)."""
    return _join(B.buffer_load(rsrc, off_lo, 4), B.buffer_load(rsrc, off_hi, 4))


def _ror8(v):
    return Int32(rocdl.update_dpp(B.i32_type(), B.ir_of(v), B.ir_of(v), ROW_ROR8, 0xF, 0xF, False))


def _load_rows(rsrc, base, stride, r, grp):
    """The operand of 16 rows of 128 bytes (row i at byte base + i * stride, 16-byte aligned) as v8i32
    in the lane layout of the module docstring: lane (g, r) holds chunks g and g + 4 of row r.

    Each of the two loads reads 8 whole rows, so every 128-byte line it touches is read once (the
    direct layout reads each line half by two loads): lane (g, r) loads chunk g + 4 (r >> 3) of row
    r & 7, then of row 8 + (r & 7); a row_ror:8 lane move (r <-> r ^ 8) and a select per dword put
    the chunks in place."""
    off = base + (r & Int32(7)) * stride + (grp + ((r >> Int32(3)) << Int32(2))) * Int32(16)
    first = fx.Vector(B.buffer_load(rsrc, off, 4))
    second = fx.Vector(B.buffer_load(rsrc, off + stride * Int32(8), 4))
    low = r < Int32(8)
    lo = [low.select(Int32(first[k]), _ror8(Int32(second[k]))) for k in range(4)]
    hi = [low.select(_ror8(Int32(first[k])), Int32(second[k])) for k in range(4)]
    return fx.Vector.from_elements(lo + hi, Int32)


def _load32_dwords(rsrc, off):
    """Chunks g and g + 4 of a token (lane group g, `off` = the token's dword-aligned base + 16 g) as
    v8i32: eight dword loads (a 1-token page of D + 4 = 132 bytes puts token values only 4 bytes apart
    from 16-byte alignment)."""
    d = [Int32(B.buffer_load(rsrc, off + Int32(4 * i + (48 if i >= 4 else 0)), 1)) for i in range(8)]
    return fx.Vector.from_elements(d, Int32)


def _mfma_fp8(a, b):
    f32 = ir.F32Type.get()
    zero = fx.Vector.filled(4, 0.0, fx.Float32)
    one = Int32(NEUTRAL_SCALE)
    return fx.Vector(rocdl.mfma_scale_f32_16x16x128_f8f6f4(
        B.vec_type(4, f32), [B.ir_of(a), B.ir_of(b), B.ir_of(zero), FP8_FORMAT, FP8_FORMAT,
                             0, B.ir_of(one), 0, B.ir_of(one)]))


def _relu_bounds(ks):
    """Per n-tile, the med3 bound that makes med3(x, 0, bound) * k_scale == relu(x * k_scale): +inf for a
    non-negative scale (max(x, 0)), -inf for a negative one (min(x, 0))."""
    return [(k >= fx.Float32(0.0)).select(fx.Float32(float("inf")), fx.Float32(NEG_INF)) for k in ks]


def _head_sums(q_tile, kv, ks, bounds, wv, m_tiles, n_tiles):
    """Per n-tile j, the lane's sum over its heads of w * relu(q . k * k_scale), as k_scale * sum of
    w * med3(q . k, 0, bound) (one VALU op per product for the ReLU, the weight FMAs in pairs); then the
    sum over the lane groups: lane (g, r) gets token 16g + r. Q m-tile u is loaded (q_tile(u)) just
    before its four MFMAs, so one m-tile of Q is live at a time."""
    # per n-tile, even / odd heads: two chains that pack into v_pk_fma_f32
    s = [[fx.Float32(0.0), fx.Float32(0.0)] for _ in range(n_tiles)]
    for u in range_constexpr(m_tiles):
        qa = q_tile(u)
        for j in range_constexpr(n_tiles):
            acc = _mfma_fp8(qa, kv[j])
            for i in range_constexpr(4):
                x = fx.Float32(rocdl.fmed3(ir.F32Type.get(), B.ir_of(fx.Float32(acc[i])),
                                           B.ir_of(fx.Float32(0.0)), B.ir_of(bounds[j])))
                s[j][i % 2] = fx.Float32(fx.fma(x, fx.Float32(wv[u][i]), s[j][i % 2]))
    return B.sum_over_lane_groups([(s[j][0] + s[j][1]) * ks[j] for j in range(n_tiles)])


def _row_operands(q, weights, row, stride_w, r, grp, heads, m_tiles):
    """The loader of query row `row`'s (Int64) Q m-tiles (u -> v8i32) and its f32 weights (4 per m-tile)."""
    q_row = heads * G.HEAD_DIM
    q_rs = B.buffer_rsrc(q, row * Int64(q_row), Int32(q_row))

    def q_tile(u):
        return _load_rows(q_rs, Int32(16 * u * G.HEAD_DIM), Int32(G.HEAD_DIM), r, grp)
    w_rs = B.buffer_rsrc(weights, row * Int64(stride_w) * Int64(4), Int32(4 * heads))
    wv = [fx.Vector(B.buffer_load(w_rs, (Int32(16 * u) + grp * Int32(4)) * Int32(4), 4)).bitcast(fx.Float32)
          for u in range_constexpr(m_tiles)]
    return q_tile, wv


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
                            off = Int32(j * G.NTILE * D) + grp * Int32(256) + r * Int32(16)
                            kv.append(_load32(kv_rs, off, off + Int32(1024)))
                        else:
                            kv.append(_load_rows(kv_rs, Int32(j * G.NTILE * D), Int32(D), r, grp))
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
                        kv.append(_load32_dwords(kv_rs, base + grp * Int32(16)))
                        ks.append(Int32(B.buffer_load(kv_rs, base + Int32(D), 1)).bitcast(fx.Float32))
                        oks.append(okj)
                    # lane (g, r) stores token 16g + r: its page test is that of n-tile g
                    ok = (grp == Int32(1)).select(oks[1], oks[0])
                    ok = (grp == Int32(2)).select(oks[2], ok)
                    ok = (grp == Int32(3)).select(oks[3], ok)
                bounds = _relu_bounds(ks)
                for n in range(Int32(0), next_n, 1):
                    ni = Int32(n)
                    row = Int64(b_row + ni)
                    qa, wv = _row_operands(q, weights, row, stride_w, r, grp, H, MT)
                    total = _head_sums(qa, kv, ks, bounds, wv, MT, NT)
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
            kvv.append(_load_rows(kv_rs, (t0 + Int32(G.NTILE * j)) * stride_kv, stride_kv, r, grp))
            ks.append(Int32(B.buffer_load(ks_rs, t * Int32(4), 1)).bitcast(fx.Float32))
        bounds = _relu_bounds(ks)
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
                total = _head_sums(qa, kvv, ks, bounds, wv, MT, NT)
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
