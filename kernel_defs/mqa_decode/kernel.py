"""FP4 paged MQA logits decode kernels for gfx950, written in FlyDSL.

Design decisions (docs/families/mqa_decode.md#decisions):
- weight_scale multiplies the head sum once per token (after the cross-lane reduction).
- Strides: every stride is a runtime argument: KV value and scale page strides in bytes (Int64), the
  block-table row stride in int32 elements, the output row stride in f32 elements (Int64). Page, row
  and Q/weight bases are folded into 64-bit buffer-resource bases; per-lane offsets stay 32-bit.
- Page-128 scales: slot s(o) = (o % (P/4)) * 4 + o // (P/4) (the upstream test writer's layout,
  "four equal token groups"). A quad of four n-tiles covers tokens {q*P/4 + 16h + r}, so one LDS dword
  holds its four scale bytes; n-tile q shifts it right by 8q (Q scales likewise by 8*(mi % 4), once per
  CTA) and the MFMA reads byte 0.
- Staged-LDS generic kernel: one query row (b, n) per CTA (the upstream cta_info format), a chunk
  of block_k tokens = whole pages copied verbatim into LDS with 16-byte (values) and 4-byte (scales)
  loads whose page id is wave-uniform; the next chunk's loads are in flight while the current chunk
  is computed. next_n is a runtime scalar (it only enters b = row / next_n and the causal limit).
- Direct path (direct.py): taken for D128 with H64 or H128, page 64 or 128, any next_n 1..8, when the
  schedule is internal and the caller overrides nothing (no cta_info/total_ctas, block_k, num_warps or
  parallel_unit_num: those keep their staged meaning). Strides, next_n and max_seq_len are runtime
  arguments as in the staged kernel, so shared-pool pages and strided outputs take the direct path too.
  Variants (compile-time, geometry.DIRECT_VARIANTS): H64: tile 32 with one wave, tile 32 with two row
  waves, tile 64 with one wave; H128 (two head waves): tile 32, tile 64, tile 64 with scalar (SGPR)
  weight loads -> 2 heads x 2 pages x 3 = 12 specs. KV values and scales go from global memory straight
  to registers; LDS holds only the H128 head-reduction partials (2 x 8 x tile f32).
- Walk path (walk.py): D128 H64 with next_n 3..4 on grids of >= 1024 chunks, on the direct path
  (geometry.takes_walk, before the direct variants): one wave per row keeps its Q, Q scales and weights in registers over a 256-token
  chunk of four 64-token steps; <= 64 VGPRs (8 waves per SIMD), no LDS; 2 specs (page 64, 128).
- Direct grid = B x ceil(max_seq_len / tile), 2-D (chunk, sequence); next_n is not in it: the rows of
  a sequence share the CTA (its KV registers serve every row; a runtime row loop prefetches the next
  row's Q, Q scales and weights), so "next_n does not itself create additional waves". The grid is
  sized from max_seq_len (a host int; no sync on context_lens); CTAs past a context exit at once.
  The variant per call (geometry.direct_tile) was chosen on the timing model: a CTA's time is a chain of
  dependent latencies (kernarg -> ctx and table entry -> KV loads -> MFMAs -> store), so one wave that
  scores all 64 heads and stores directly (no LDS exchange, no barrier) is the shortest; two row waves
  score two rows at once for multi-row small grids; large multi-row grids take 64-token one-wave tiles
  (the fewest CTAs and scalar instructions per CU). Compiled for >= 4 waves per SIMD (<= 128 VGPRs, the
  direct budget).
- Block tables: the staged kernel reads an entry only for pages < min(ceil(min(ctx, max_seq_len) / P),
  table width): indices are clamped to that last page and the table resource is bounded to that many
  entries. A page
  past the table's width or whose entry is not a page of kv_cache is never read (zero-sized resources)
  and its visible tokens score -inf (docs/safety.md); a cta_info row outside the launch stores nothing. Chunks past the
  row's visible limit are not computed at all; tokens past it inside a chunk are computed, never stored.
  The direct kernel reads one entry per CTA, t0 // P (the resource bounded by the table width), together
  with ctx; the entry is used only when t0 < ctx, and a chunk whose page is invalid stores -inf and
  reads nothing more. The direct kernel writes every output cell (the -inf ones too): the op fills only
  for the staged kernel.
- ctx > max_seq_len: the output row ends at max_seq_len (a runtime argument of both kernels), so a row's
  visible limit is min(ctx - next_n + 1 + n, max_seq_len), the reference's clipped region. The staged
  kernel clips it once per CTA (the chunk count, page clamp and store predicate all follow, nothing is
  added to the chunk loop); the direct kernel clips it in its store predicate and its grid ends at
  ceil(max_seq_len / tile). Neither ever stores at a column >= max_seq_len.
"""
import flydsl.compiler as flyc
import flydsl.expr as fx
from flydsl.expr import arith, gpu
from flydsl.expr.primitive import range_constexpr
from flydsl.expr.typing import Int32, Int64

from ..mqa_common import blocks as B
from .direct import direct_launcher
from .walk import walk_launcher
from . import geometry
from .geometry import DIRECT_MIN_WAVES_PER_SIMD, QUAD, WALK_MIN_WAVES_PER_SIMD, Staged, Walk
from .specs import FAMILY


def _staged_kernel(g: Staged, name: str):
    H, D, P, BK, W = g.heads, g.head_dim, g.page_size, g.block_k, g.num_warps
    MT, KT, QS_DW = g.m_tiles, g.k_tiles, g.qs_pad // 4
    NP, PV, PS = g.pages_per_chunk, g.page_value_bytes, g.page_scale_bytes
    SC_BASE, LV, LS, QPW = g.lds_scale_base, g.value_loads, g.scale_loads, g.quads_per_wave
    Q_ROW, QS_ROW, W_ROW = H * D // 2, KT * 4 * 16 * g.qs_pad, 2 * H

    @flyc.kernel(name=name)
    def staged(out: fx.Pointer, q: fx.Pointer, q_scale: fx.Pointer, kv_cache: fx.Pointer,
               kv_scale: fx.Pointer, block_tables: fx.Pointer, weights: fx.Pointer, cta_info: fx.Pointer,
               next_n: Int32, max_seq_len: Int32, stride_out: Int64, stride_kv: Int64, stride_ks: Int64,
               stride_bt: Int32, weight_scale: fx.Float32, rows: Int32, num_pages: Int32, bt_width: Int32):
        tid = Int32(gpu.thread_idx.x)
        wave = Int32(B.readfirstlane(tid >> Int32(6)))
        lane = tid & Int32(63)
        r = lane & Int32(15)
        grp = lane >> Int32(4)
        row_in, chunk0, count, ctx = B.scalar_load(cta_info, Int32(gpu.block_idx.x) * Int32(4), 4)
        # A slot naming no row of the launch does nothing (its loads read row 0, none is stored).
        row_ok = (row_in >= Int32(0)) & (row_in < rows)
        row = row_ok.select(row_in, Int32(0))
        b = row // next_n
        # The row sees tokens t < ctx - (next_n - 1 - n); the output row ends at max_seq_len. Clipping the
        # limit here bounds the chunks computed, the pages read and the stores (hot-loop predicate unchanged).
        span = arith.min(ctx, max_seq_len)
        limit = arith.min(ctx - (next_n - Int32(1) - (row - b * next_n)), max_seq_len)
        vis_chunks = (arith.max(limit, Int32(0)) + Int32(BK - 1)) // Int32(BK)
        n_chunks = row_ok.select(arith.max(arith.min(chunk0 + count, vis_chunks) - chunk0, Int32(0)), Int32(0))
        seq_pages = arith.min((arith.max(span, Int32(1)) + Int32(P - 1)) // Int32(P), bt_width)
        lds = B.lds_alloc(g.lds_bytes)

        # Q fragments, Q scale dwords and weights live in registers for the CTA's lifetime.
        q_rs = B.buffer_rsrc(q, Int64(row) * Int64(Q_ROW))
        qa = [[B.buffer_load(q_rs, (Int32(16 * mi) + r) * Int32(D // 2) + Int32(64 * kt) + grp * Int32(16), 4)
               for mi in range_constexpr(MT)] for kt in range_constexpr(KT)]
        qs_rs = B.buffer_rsrc(q_scale, Int64(row) * Int64(QS_ROW))
        qs = []
        for kt in range_constexpr(KT):
            v = B.buffer_load(qs_rs, ((Int32(4 * kt) + grp) * Int32(16) + r) * Int32(g.qs_pad), QS_DW)
            dws = [Int32(v)] if QS_DW == 1 else [Int32(fx.Vector(v)[i]) for i in range(QS_DW)]
            qs.append([dws[mi // 4] >> Int32(8 * (mi % 4)) for mi in range(MT)])
        w_rs = B.buffer_rsrc(weights, Int64(row) * Int64(W_ROW))
        wf = []
        for mi in range_constexpr(MT):
            pair = fx.Vector(B.buffer_load(w_rs, (Int32(16 * mi) + grp * Int32(4)) * Int32(2), 2))
            w0, w1 = B.bf16x2_to_f32(pair[0])
            w2, w3 = B.bf16x2_to_f32(pair[1])
            wf.append([w0, w1, w2, w3])

        bt_rs = B.buffer_rsrc(block_tables, Int64(b) * Int64(stride_bt) * Int64(4),
                              arith.max(seq_pages, Int32(0)) * Int32(4))
        out_rs = B.buffer_rsrc(out, Int64(row) * stride_out * Int64(4), Int64(max_seq_len) * Int64(4))

        def page_ok(page, logical):
            """Page `logical` of the sequence exists: a table column and an entry naming a page of kv_cache."""
            return ((logical >= Int32(0)) & (logical < bt_width) & (page >= Int32(0))) & (page < num_pages)

        def table(c):
            """Lane k < NP holds the page id of page k of chunk c (clamped to the sequence's pages)."""
            idx = arith.min((chunk0 + c) * Int32(NP) + arith.min(lane, Int32(NP - 1)), seq_pages - Int32(1))
            return B.buffer_load(bt_rs, idx * Int32(4), 1)

        def fetch(c, tbl):
            """Issue chunk c's value and scale loads (all zero-length when c is past the last chunk).

            Wave w copies the contiguous chunk bytes [w*L, (w+1)*L) of each plane, so its loads touch
            max(1, L / page bytes) pages, each addressed through one 64-bit rebased resource."""
            live = c < n_chunks
            regs = []
            for plane, n_loads, step, page_bytes, stride, src in (
                    (0, LV, 1024, PV, stride_kv, kv_cache), (1, LS, 256, PS, stride_ks, kv_scale)):
                span = n_loads * step
                per_page = page_bytes // step                    # loads per page
                n_pages = max(1, span // page_bytes)
                first = (wave * Int32(span)) // Int32(page_bytes)
                within = wave * Int32(span) - first * Int32(page_bytes)   # nonzero only if n_pages == 1
                for k in range_constexpr(n_pages):
                    page = Int32(B.readlane(tbl, first + Int32(k)))
                    ok = live & (page >= Int32(0)) & (page < num_pages)
                    rs = B.buffer_rsrc(src, Int64(page) * stride, ok.select(Int32(page_bytes), Int32(0)))
                    for i in range_constexpr(min(n_loads, per_page)):
                        voff = within + Int32(i * step) + lane * Int32(step // 64)
                        regs.append(B.buffer_load(rs, voff, step // 256))
            return regs

        def stage(regs):
            for i in range_constexpr(LV):
                B.lds_store(lds, (wave * Int32(LV) + Int32(i)) * Int32(1024) + lane * Int32(16), regs[i], 4)
            for i in range_constexpr(LS):
                B.lds_store(lds, Int32(SC_BASE) + (wave * Int32(LS) + Int32(i)) * Int32(256) + lane * Int32(4),
                            regs[LV + i], 1)

        def compute(c):
            base_tok = (chunk0 + c) * Int32(BK)
            for u in range_constexpr(QPW):
                quad = wave + Int32(u * W)
                j = quad // Int32(P // QUAD)
                # tokens of a page the table does not name (past its width, or an entry outside
                # kv_cache) score -inf; their staged bytes are zeros. The entry is re-read as a scalar
                # (SMEM, no VGPR) from the same bounded table row the chunk's loads used.
                lp = (chunk0 + c) * Int32(NP) + j
                entry = B.scalar_load(block_tables, arith.max(arith.min(lp, seq_pages - Int32(1)), Int32(0)), 1,
                                      Int64(b) * Int64(stride_bt) * Int64(4), arith.max(seq_pages, Int32(0)) * Int32(4))[0]
                valid = page_ok(entry, lp)
                x = (quad - j * Int32(P // QUAD)) * Int32(16) + r              # 16h + r
                ks = [B.lds_load(lds, Int32(SC_BASE) + j * Int32(PS) + Int32(kt * 4 * P) + grp * Int32(P)
                                 + x * Int32(4), 1) for kt in range_constexpr(KT)]
                for qn in range_constexpr(4):
                    slot = x + Int32(qn * P // 4)
                    acc = [fx.Vector.filled(4, 0.0, fx.Float32) for _ in range(MT)]
                    for kt in range_constexpr(KT):
                        ksq = Int32(ks[kt]) >> Int32(8 * qn)
                        bv = B.lds_load(lds, j * Int32(PV) + Int32(kt * 4 * P * 16) + grp * Int32(P * 16)
                                        + slot * Int32(16), 4)
                        for mi in range_constexpr(MT):
                            acc[mi] = B.mfma_fp4(acc[mi], qa[kt][mi], bv, qs[kt][mi], 0, ksq, 0)
                    s = fx.Float32(0.0)
                    for mi in range_constexpr(MT):
                        av = fx.Vector(acc[mi])
                        for i in range_constexpr(4):
                            s = s + arith.max(fx.Float32(av[i]), fx.Float32(0.0)) * wf[mi][i]
                    s = B.lane_xor_add_f32(s, lane, 16)
                    s = B.lane_xor_add_f32(s, lane, 32)
                    tok = base_tok + j * Int32(P) + slot
                    if (grp == Int32(0)) & (tok < limit):
                        B.buffer_store(valid.select(s * weight_scale, fx.Float32(float("-inf"))), out_rs,
                                       tok * Int32(4))

        tbl0 = table(Int32(0))
        init = fetch(Int32(0), tbl0) + [table(Int32(1))]
        for c, state in range(0, n_chunks, 1, init=init):
            ci = Int32(c)
            gpu.barrier()
            stage(list(state[:LV + LS]))
            gpu.barrier()
            nxt = fetch(ci + Int32(1), state[LV + LS])
            tbl2 = table(ci + Int32(2))
            compute(ci)
            yield nxt + [tbl2]

    return staged


def _staged_launcher(g: Staged, name: str):
    kern = _staged_kernel(g, name)
    threads = g.threads

    @flyc.jit
    def launch(out: fx.Pointer, q: fx.Pointer, q_scale: fx.Pointer, kv_cache: fx.Pointer,
               kv_scale: fx.Pointer, block_tables: fx.Pointer, weights: fx.Pointer, cta_info: fx.Pointer,
               next_n: Int32, max_seq_len: Int32, stride_out: Int64, stride_kv: Int64, stride_ks: Int64,
               stride_bt: Int32, weight_scale: fx.Float32, rows: Int32, num_pages: Int32, bt_width: Int32,
               stream: fx.Stream = fx.Stream(None)):
        kern(out, q, q_scale, kv_cache, kv_scale, block_tables, weights, cta_info, next_n, max_seq_len,
             stride_out, stride_kv, stride_ks, stride_bt, weight_scale, rows, num_pages, bt_width).launch(
            grid=(1, 1, 1), block=(threads, 1, 1), stream=stream)

    return launch


def launcher(params: dict, target):
    """The launcher of one spec of the family for a target row (build_tools compiles it)."""
    FAMILY.validate_params(params)
    FAMILY.block(params, target)        # refuses a target whose waves the lane layouts do not fit
    name = FAMILY.symbol(params)
    g = geometry.of(params)
    if isinstance(g, Staged):
        return _staged_launcher(g, name)
    return walk_launcher(g, name) if isinstance(g, Walk) else direct_launcher(g, name)


def compile_hints(params: dict) -> dict:
    # Direct: at least 4 waves per SIMD (<= 128 VGPRs), the 64-token tiles serve grids of thousands of
    # CTAs; walk: 8 (<= 64 VGPRs), its waves do not prefetch and rely on the others to hide their loads.
    waves = {"direct": DIRECT_MIN_WAVES_PER_SIMD, "walk": WALK_MIN_WAVES_PER_SIMD}.get(params["path"])
    return {"waves_per_eu": waves} if waves else {}
