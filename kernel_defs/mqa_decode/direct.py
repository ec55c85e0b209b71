"""Direct-path decode kernel (D128, H64/H128, internal schedule), written in FlyDSL (kernel.py builds it).

Grid (ceil(max_seq_len / tile), B): CTA (x, b) writes every cell of columns [x*tile, (x+1)*tile) (up to
max_seq_len) of sequence b's next_n output rows: the logits of the tokens a row sees, -inf for the others
(the op fills nothing). The CTA reads ctx_b and the chunk's block-table entry together; when the chunk
starts at or past ctx_b or its page is not in the table (past the width) or not a page of kv_cache it
stores -inf and reads nothing more. One or two waves of 64 lanes (geometry.Direct):
- KV: each wave loads the chunk's values (one 16-byte lane load per 16-token n-tile) and scale dwords
  (one per distinct slot group, see `_scale_dwords`) from global memory straight into registers. The
  chunk lies in one page: one scalar block-table read bounded by the table width.
- Head waves (H128: two): wave w owns m-tiles [4w, 4w + 4); a wave never holds more than 4 (one Q-scale
  dword). Row waves (H64 with two waves): wave w scores rows n_top - w, n_top - w - 2, ... with all heads.
  Per row a wave loads its Q fragments, one Q-scale dword and its weights (vector loads, or scalar loads
  + a per-lane-group select), runs n_tiles x m-tiles MFMAs 16x16x128 against the KV registers, applies
  ReLU x weight, and folds the four lane groups with permlane swaps so lane (g, r) holds the wave's sum
  for token 16*(g*n_tiles/4) + r.
- With one head wave that sum is the logit: the wave scales it by weight_scale and stores it where
  t < ctx_b - next_n + 1 + n, -inf elsewhere (the output resource ends at max_seq_len). With two head
  waves the partials meet in LDS [wave][row][token]; after one barrier wave w finishes rows
  n_first + w, n_first + w + 2, ...
Rows are scored last first (n_top = next_n - 1 sees every token of a live chunk); rows
n < n_first = max(0, chunk_start + next_n - ctx_b) see no token of the chunk: they get -inf stores
(issued before the KV loads) and no scoring. The first
row is scored outside the loop, and the next row's Q, Q scales and weights are loaded while a row is
computed.
"""
import flydsl.compiler as flyc
import flydsl.expr as fx
from flydsl.expr import arith, gpu
from flydsl.expr.primitive import range_constexpr
from flydsl.expr.typing import Int32, Int64

from ..mqa_common import blocks as B
from .geometry import MAX_NEXT_N, NTILE, Direct


def _scale_dwords(g: Direct):
    """Where each n-tile's KV scale byte lives, for a chunk starting at a multiple of the tile in its page.

    Slot s(o) = (o % (P/4)) * 4 + o // (P/4), so token o = tin + 16j + r (tin % (P/4) == 0 because
    tile >= P/4) has its byte in the dword of x = (16j) % (P/4) + r at byte tin/(P/4) + (16j)//(P/4).
    Returns (dword x-offsets to load, [(dword index, opsel) per n-tile]); the runtime part tin/(P/4) of
    the byte index is removed by one shift per dword.
    """
    quarter = g.page_size // 4
    offsets = sorted({(NTILE * j) % quarter for j in range(g.n_tiles)})
    return offsets, [(offsets.index((NTILE * j) % quarter), (NTILE * j) // quarter) for j in range(g.n_tiles)]


def _vector_weights(weights, byte_base, nbytes, grp, m_tiles):
    """Per lane, the bf16 pairs of heads 16u + 4*grp + {0,1} and {2,3} (u < m_tiles): one 8-byte load per u.

    weights + byte_base is the wave's first head of the row; nbytes bounds the loads (0: none)."""
    rs = B.buffer_rsrc(weights, byte_base, nbytes)
    w = []
    for u in range_constexpr(m_tiles):
        pair = fx.Vector(B.buffer_load(rs, (Int32(16 * u) + grp * Int32(4)) * Int32(2), 2))
        w += [Int32(pair[0]), Int32(pair[1])]
    return w


def _scalar_weights(weights, byte_base, nbytes, grp, m_tiles):
    """The wave's 16*m_tiles weights of the row through scalar loads: 8*m_tiles SGPR dwords, no vector-memory
    traffic. They stay scalar until `_lane_weights` picks each lane group's dwords right before use."""
    sw = []
    for k in range_constexpr(m_tiles * 2):
        sw += B.scalar_load(weights, Int32(4 * k), 4, byte_base, nbytes)
    return sw


def _lane_weights(sw, grp, m_tiles):
    """Per lane, from the scalar dwords: the pairs _vector_weights would load (dword 8u + 2*grp + p holds
    heads 16u + 4*grp + 2p and 2p + 1)."""
    w = []
    for u in range_constexpr(m_tiles):
        for p in range_constexpr(2):
            c = [sw[8 * u + 2 * k + p] for k in range(4)]
            pick = (grp == Int32(1)).select(c[1], c[0])
            pick = (grp == Int32(2)).select(c[2], pick)
            w.append((grp == Int32(3)).select(c[3], pick))
    return w


def direct_kernel(g: Direct, name: str):
    H, P, T, MH, NT = g.heads, g.page_size, g.tile, g.m_tiles_per_wave, g.n_tiles
    QS_PAD = g.qs_pad
    Q_ROW, QS_ROW, W_ROW = H * 64, 64 * QS_PAD, 2 * H
    WAVE_Q, WAVE_W = MH * 16 * 64, MH * 16 * 2          # bytes of one wave's heads in a Q / weight row
    SC_OFFS, SC_SEL = _scale_dwords(g)
    load_weights = _scalar_weights if g.scalar_weights else _vector_weights
    ROW_LDS = T * 4
    PEEL = MH * NT < 16
    ONE_WAVE = g.head_waves == 1        # each wave scores whole rows and stores them
    RW = g.row_waves
    # ReLU x weight folds into the row sum with one fused multiply-add per value (a shorter chain after the
    # MFMAs); the scalar-weight kernel keeps a separate multiply and add: fused, its 64-token H128 build
    # spills past the VGPR budget.
    FUSED = not g.scalar_weights

    @flyc.kernel(name=name)
    def direct(out: fx.Pointer, q: fx.Pointer, q_scale: fx.Pointer, kv_cache: fx.Pointer,
               kv_scale: fx.Pointer, block_tables: fx.Pointer, weights: fx.Pointer, context_lens: fx.Pointer,
               next_n: Int32, max_seq_len: Int32, stride_out: Int64, stride_kv: Int64, stride_ks: Int64,
               stride_bt: Int32, weight_scale: fx.Float32, num_pages: Int32, bt_width: Int32):
        tid = Int32(gpu.thread_idx.x)
        wave = Int32(B.readfirstlane(tid >> Int32(6)))
        hw = Int32(0) if ONE_WAVE else wave         # head wave: which heads
        rw = wave if ONE_WAVE else Int32(0)         # row wave: which rows
        lane = tid & Int32(63)
        r = lane & Int32(15)
        grp = lane >> Int32(4)
        b = Int32(gpu.block_idx.y)
        t0 = Int32(gpu.block_idx.x) * Int32(T)
        # The context length and the chunk's table entry are read together (the branch needs both), one
        # scalar round trip before the KV loads. The table read is bounded by the width; a chunk whose
        # page is past the width or not a page of kv_cache reads nothing more and stores nothing: its
        # cells keep the op's -inf fill.
        ctx = B.scalar_load(context_lens, b, 1)[0]
        col = t0 >> Int32(P.bit_length() - 1)           # t0 >= 0: a shift, not a signed division
        page = B.scalar_load(block_tables, col, 1, Int64(b) * Int64(stride_bt) * Int64(4), bt_width * Int32(4))[0]
        lds = B.lds_alloc(g.lds_bytes) if g.lds_bytes else None
        b_row = b * next_n

        def row_inputs(n, live=None):
            """Row n's Q fragments, Q-scale dword (m-tile u at byte u) and weights of this wave's heads.

            With `live` false every load is out of range (zero-sized resources): nothing is read."""
            def size(nbytes):
                return nbytes if live is None else live.select(Int32(nbytes), Int32(0))
            row = Int64(b_row + n)
            q_rs = B.buffer_rsrc(q, row * Int64(Q_ROW) + Int64(hw * Int32(WAVE_Q)), size(WAVE_Q))
            qa = [B.buffer_load(q_rs, (Int32(16 * u) + r) * Int32(64) + grp * Int32(16), 4)
                  for u in range_constexpr(MH)]
            qs_rs = B.buffer_rsrc(q_scale, row * Int64(QS_ROW), size(QS_ROW))
            first = hw * Int32(MH)
            qs_off = (grp * Int32(16) + r) * Int32(QS_PAD) + (first >> Int32(2)) * Int32(4)
            qs = Int32(B.buffer_load(qs_rs, qs_off, 1))
            qs = qs >> ((first & Int32(3)) * Int32(8)) if MH < 4 else qs
            w = load_weights(weights, row * Int64(W_ROW) + Int64(hw * Int32(WAVE_W)), size(WAVE_W), grp, MH)
            return qa + [qs] + w

        # Rows are scored last first: the last row sees every token of a live chunk, so the address of a
        # wave's first row (n_top) needs no ctx, and its loads can go out before the KV loads.
        n_top = next_n - Int32(1) - rw
        early = row_inputs(n_top, None if RW == 1 else n_top >= Int32(0))
        # One scalar test for the whole branch: every term is >= 0 exactly when the chunk starts before
        # ctx, its column is inside the table, its page is a page of kv_cache (a negative page fails its
        # own term) and the wave has a row.
        live = arith.min(arith.min(ctx - Int32(1) - t0, bt_width - Int32(1) - col),
                         arith.min(arith.min(num_pages - Int32(1) - page, page), n_top))
        # Rows n < n_first see no token of the chunk; a dead chunk (or an invalid page) shows none to any
        # row. The kernel writes those cells -inf itself (the op fills nothing), wave w rows w, w + waves,
        # ...; the stores go out before the KV loads and overlap their latency. The output resource ends
        # at max_seq_len, so no store lands past it.
        out_bytes = Int64(max_seq_len) * Int64(4)
        n_first = arith.max(t0 + next_n - ctx, Int32(0))
        n_dead = (live >= Int32(0)).select(n_first, next_n)
        for n in range(wave, n_dead, g.waves):
            dead_rs = B.buffer_rsrc(out, Int64(b_row + Int32(n)) * stride_out * Int64(4), out_bytes)
            if lane < Int32(T):
                B.buffer_store(fx.Float32(float("-inf")), dead_rs, (t0 + lane) * Int32(4))
        if live >= Int32(0):
            tin = t0 & Int32(P - 1)
            kv_rs = B.buffer_rsrc(kv_cache, Int64(page) * stride_kv, Int32(P * 64))
            kv = [B.buffer_load(kv_rs, grp * Int32(P * 16) + (tin + Int32(NTILE * j) + r) * Int32(16), 4)
                  for j in range_constexpr(NT)]
            ks_rs = B.buffer_rsrc(kv_scale, Int64(page) * stride_ks, Int32(P * 4))
            ks = []
            for xo in SC_OFFS:
                dw = Int32(B.buffer_load(ks_rs, grp * Int32(P) + (Int32(xo) + r) * Int32(4), 1))
                ks.append(dw if T == P else dw >> ((tin // Int32(P // 4)) * Int32(8)))

            def score(n, inputs):
                """Write this wave's per-token partial sums of row n to LDS."""
                qa, qs, wd = inputs[:MH], inputs[MH], inputs[MH + 1:]
                wf = []
                for d in (_lane_weights(wd, grp, MH) if g.scalar_weights else wd):
                    wf += list(B.bf16x2_to_f32(d))
                parts = []
                for j in range_constexpr(NT):
                    dw, sel = SC_SEL[j]
                    s = fx.Float32(0.0)
                    for u in range_constexpr(MH):
                        acc = B.mfma_fp4(fx.Vector.filled(4, 0.0, fx.Float32), qa[u], kv[j], qs, u, ks[dw], sel)
                        av = fx.Vector(acc)
                        for i in range_constexpr(4):
                            x = arith.max(fx.Float32(av[i]), fx.Float32(0.0))
                            s = fx.Float32(fx.fma(x, wf[4 * u + i], s)) if FUSED else s + x * wf[4 * u + i]
                    parts.append(s)
                total = B.sum_over_lane_groups(parts)
                tok = (grp if NT == 4 else grp >> Int32(1)) * Int32(NTILE) + r
                if ONE_WAVE:
                    # the wave holds every head: lane (g, r) has token tok's logit (tile 32: twice, the
                    # even group stores it); the cells the row does not see get -inf
                    limit = ctx - next_n + Int32(1) + n
                    out_rs = B.buffer_rsrc(out, Int64(b_row + n) * stride_out * Int64(4), out_bytes)
                    v = (t0 + tok < limit).select(total * weight_scale, fx.Float32(float("-inf")))
                    if NT == 4:
                        B.buffer_store(v, out_rs, (t0 + tok) * Int32(4))
                    else:
                        if (grp & Int32(1)) == Int32(0):
                            B.buffer_store(v, out_rs, (t0 + tok) * Int32(4))
                else:
                    B.lds_store(lds, (hw * Int32(MAX_NEXT_N) + n) * Int32(ROW_LDS) + tok * Int32(4),
                                total.bitcast(Int32), 1)

            # The first row is scored outside the loop: its inputs are not loop-carried, so waiting for
            # them never waits for a prefetch (the loop's carried copy of a prefetch waits for it at the
            # end of each iteration), and a single-row call issues no load for a second row. With 16
            # MFMAs a row (H128 or one wave, 64-token tile) every row stays in the loop: the peeled copy
            # spills past 128 VGPRs there.
            i0 = Int32(0)
            init = early
            if PEEL:
                score(n_top, early)
                i0 = Int32(RW)
                init = row_inputs(n_top - Int32(RW), n_top - Int32(RW) >= n_first)
            for i, state in range(i0, n_top - n_first + Int32(1), RW, init=init):
                ni = n_top - Int32(i)
                nxt = row_inputs(ni - Int32(RW), ni - Int32(RW) >= n_first)
                score(ni, list(state))
                yield nxt
            if not ONE_WAVE:
                gpu.barrier()
                t_lane = lane & Int32(T - 1)
                for n in range(n_first + wave, next_n, 2):
                    ni = Int32(n)
                    p0 = B.lds_load(lds, ni * Int32(ROW_LDS) + t_lane * Int32(4), 1)
                    p1 = B.lds_load(lds, (Int32(MAX_NEXT_N) + ni) * Int32(ROW_LDS) + t_lane * Int32(4), 1)
                    v = (Int32(p0).bitcast(fx.Float32) + Int32(p1).bitcast(fx.Float32)) * weight_scale
                    tok = t0 + lane
                    v = (tok < ctx - next_n + Int32(1) + ni).select(v, fx.Float32(float("-inf")))
                    out_rs = B.buffer_rsrc(out, Int64(b_row + ni) * stride_out * Int64(4), out_bytes)
                    if lane < Int32(T):
                        B.buffer_store(v, out_rs, tok * Int32(4))

    return direct


def direct_launcher(g: Direct, name: str):
    return entry_launcher(direct_kernel(g, name), g.threads)


def entry_launcher(kern, threads: int):
    """The jit entry that compiles a decode kernel taking the direct kernels' arguments (the walk kernel
    shares them); its grid is the compile's only, the runtime launches the real one."""

    @flyc.jit
    def launch(out: fx.Pointer, q: fx.Pointer, q_scale: fx.Pointer, kv_cache: fx.Pointer,
               kv_scale: fx.Pointer, block_tables: fx.Pointer, weights: fx.Pointer, context_lens: fx.Pointer,
               next_n: Int32, max_seq_len: Int32, stride_out: Int64, stride_kv: Int64, stride_ks: Int64,
               stride_bt: Int32, weight_scale: fx.Float32, num_pages: Int32, bt_width: Int32,
               stream: fx.Stream = fx.Stream(None)):
        kern(out, q, q_scale, kv_cache, kv_scale, block_tables, weights, context_lens, next_n, max_seq_len,
             stride_out, stride_kv, stride_ks, stride_bt, weight_scale, num_pages, bt_width).launch(
            grid=(1, 1, 1), block=(threads, 1, 1), stream=stream)

    return launch
