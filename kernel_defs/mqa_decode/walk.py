"""Walk decode kernel (D128, H64, next_n 3..4, internal schedule), written in FlyDSL (kernel.py builds it).

Grid (ceil(max_seq_len / span), B), one wave per query row: wave n of CTA (x, b) writes every cell of
columns [x*span, (x+1)*span) (up to max_seq_len) of row b*next_n + n, the logits of the tokens the row
sees and -inf for the others (the op fills nothing); waves n >= next_n do nothing.
- A wave loads its row's Q fragments, Q-scale dword and weights once and keeps them in registers for
  the chunk's `steps` steps of WALK_STEP tokens: per step it loads the step's KV values (one 16-byte
  lane load per n-tile) and scale dwords straight into registers, runs 4 n-tiles x 4 m-tiles MFMAs
  16x16x128, applies ReLU and sums weight x value over its heads in packed f32 math (pairs of heads),
  folds the four lane groups with permlane swaps and stores one token per lane.
- The chunk's block-table entries (one per page of the chunk) and ctx_b are read by scalar loads; a
  step whose tokens the row does not see, or whose page is past the table or not a page of kv_cache,
  reads nothing (zero-sized resources) and stores -inf. A row that sees no token of the chunk stores
  -inf and reads nothing more.
- <= 64 VGPRs (8 waves per SIMD): the latency of one wave's loads is hidden by the other waves'
  compute, not by prefetching inside the wave (a step's loads are kept below the previous step's
  compute, which would otherwise hoist them and spill). Packed math and the head-pair sums are inline
  asm: LLVM splits some v_pk_fma_f32 into single fmas and gathers the sums into packed adds with moves.
"""
import flydsl.compiler as flyc
import flydsl.expr as fx
from flydsl._mlir import ir
from flydsl._mlir.dialects import llvm
from flydsl.expr import arith, gpu, rocdl
from flydsl.expr.primitive import range_constexpr
from flydsl.expr.typing import Int32, Int64

from ..mqa_common import blocks as B
from .direct import entry_launcher
from .geometry import NTILE, WALK_STEP, Walk


def _step_scales(page_size: int, tin: int, n_tiles: int):
    """Where the KV scale bytes of a step starting at token `tin` of its page live (tin is a compile-time
    multiple of WALK_STEP): slot s(o) = (o % (P/4)) * 4 + o // (P/4), so token o = tin + 16j + r has its
    byte in the dword of x = (tin + 16j) % (P/4) + r at byte (tin + 16j) // (P/4). Returns (dword
    x-offsets to load, [(dword index, byte) per n-tile])."""
    quarter = page_size // 4
    offsets = sorted({(tin + NTILE * j) % quarter for j in range(n_tiles)})
    return offsets, [(offsets.index((tin + NTILE * j) % quarter), (tin + NTILE * j) // quarter)
                     for j in range(n_tiles)]


def _perm_b32(hi, lo, selector: int):
    """v_perm_b32: byte k of the result is byte (selector >> 8k) & 0xff of the 8 bytes {hi: 7..4, lo: 3..0}."""
    return Int32(rocdl.perm_b32(B.ir_of(hi), B.ir_of(lo), B.ir_of(selector)))


def _asm(ty, operands, text):
    """One inline-asm VALU instruction: result `ty` in a VGPR (pair), operands in VGPRs."""
    return llvm.inline_asm(ty, [B.ir_of(v) for v in operands], text, "=v" + ",v" * len(operands),
                           has_side_effects=False)


def _pk_fma(x, w, acc=None):
    """acc + x * w on f32 pairs (acc None: the product alone): one v_pk_fma_f32 / v_pk_mul_f32 (LLVM splits
    some of these into single fmas when it allocates the pairs itself)."""
    ty = B.vec_type(2, ir.F32Type.get())
    if acc is None:
        return fx.Vector(_asm(ty, [x, w], "v_pk_mul_f32 $0, $1, $2"))
    return fx.Vector(_asm(ty, [x, w, acc], "v_pk_fma_f32 $0, $1, $2, $3"))


def _add_halves(pair):
    """pair[0] + pair[1] in one v_add_f32 (LLVM would gather these sums into packed adds with moves). The
    sum feeds a permlane swap, which needs 2 wait states after a VALU write: LLVM's hazard recognizer
    does not see into inline asm, so the s_nop is part of it."""
    return fx.Float32(_asm(ir.F32Type.get(), [pair[0], pair[1]], "v_add_f32 $0, $1, $2\n s_nop 1"))


def walk_kernel(g: Walk, name: str):
    P, SPAN, NT, MT = g.page_size, g.span, g.n_tiles, g.heads // 16
    QS_PAD = g.qs_pad
    Q_ROW, QS_ROW, W_ROW = g.heads * 64, 64 * QS_PAD, 2 * g.heads
    STEPS_PER_PAGE = P // WALK_STEP
    # per step of a page: the scale dwords to load and the v_perm_b32 selector gathering n-tile j's byte
    # into byte j (None: the one dword already has them in order)
    STEP_SCALES = []
    for k in range(STEPS_PER_PAGE):
        offs, sel = _step_scales(P, k * WALK_STEP, NT)
        in_order = len(offs) == 1 and [byte for _, byte in sel] == list(range(NT))
        perm = sum((4 * dw + byte) << (8 * j) for j, (dw, byte) in enumerate(sel))
        STEP_SCALES.append((offs, None if in_order else perm))

    @flyc.kernel(name=name)
    def walk(out: fx.Pointer, q: fx.Pointer, q_scale: fx.Pointer, kv_cache: fx.Pointer,
             kv_scale: fx.Pointer, block_tables: fx.Pointer, weights: fx.Pointer, context_lens: fx.Pointer,
             next_n: Int32, max_seq_len: Int32, stride_out: Int64, stride_kv: Int64, stride_ks: Int64,
             stride_bt: Int32, weight_scale: fx.Float32, num_pages: Int32, bt_width: Int32):
        tid = Int32(gpu.thread_idx.x)
        n = Int32(B.readfirstlane(tid >> Int32(6)))      # the wave's row: wave-uniform
        lane = tid & Int32(63)
        r = lane & Int32(15)
        grp = lane >> Int32(4)
        b = Int32(gpu.block_idx.y)
        t0 = Int32(gpu.block_idx.x) * Int32(SPAN)
        # ctx and the chunk's table entries in one scalar round trip (one dwordx4, bounded by the table
        # width: a column past it reads 0 and is refused by its step's test below)
        ctx = B.scalar_load(context_lens, b, 1)[0]
        col0 = t0 >> Int32(P.bit_length() - 1)
        pages = B.scalar_load(block_tables, col0, 4, Int64(b) * Int64(stride_bt) * Int64(4), bt_width * Int32(4))
        if n < next_n:
            row = b * next_n + n
            out_rs = B.buffer_rsrc(out, Int64(row) * stride_out * Int64(4), Int64(max_seq_len) * Int64(4))
            # the row sees tokens t < limit; the output row ends at max_seq_len
            limit = arith.min(ctx - next_n + Int32(1) + n, max_seq_len)
            if limit > t0:
                q_rs = B.buffer_rsrc(q, Int64(row) * Int64(Q_ROW), Q_ROW)
                qa = [B.buffer_load(q_rs, (Int32(16 * u) + r) * Int32(64) + grp * Int32(16), 4)
                      for u in range_constexpr(MT)]
                qs_rs = B.buffer_rsrc(q_scale, Int64(row) * Int64(QS_ROW), QS_ROW)
                qs = Int32(B.buffer_load(qs_rs, (grp * Int32(16) + r) * Int32(QS_PAD), 1))
                w_rs = B.buffer_rsrc(weights, Int64(row) * Int64(W_ROW), W_ROW)
                # the lane's weights of heads 16u + 4*grp + {2k, 2k + 1} as f32 pairs, at wp[2u + k]
                wp = []
                for u in range_constexpr(MT):
                    dws = fx.Vector(B.buffer_load(w_rs, (Int32(16 * u) + grp * Int32(4)) * Int32(2), 2))
                    for k in range_constexpr(2):
                        wp.append(fx.Vector.from_elements(list(B.bf16x2_to_f32(dws[k])), fx.Float32))
                zero = fx.Vector.filled(2, 0.0, fx.Float32)
                # the lane's KV value and scale offsets in a page; each step adds a constant (soffset)
                kv_lane = grp * Int32(P * 16) + r * Int32(16)
                lane4 = lane * Int32(4)
                ks_lane = grp * Int32(P) + r * Int32(4)

                def step_ok(s):
                    """Every term >= 0 exactly when the row sees step s's first token, its column is in the
                    table and its entry is a page of kv_cache (scalar)."""
                    ts = t0 + Int32(s * WALK_STEP)
                    col = col0 + Int32(s // STEPS_PER_PAGE)
                    page = pages[s // STEPS_PER_PAGE]
                    return page, arith.min(arith.min(limit - Int32(1) - ts, bt_width - Int32(1) - col),
                                           arith.min(num_pages - Int32(1) - page, page)) >= Int32(0)

                def kv_loads(s):
                    """Step s's KV value fragments, one per n-tile (nothing read when the step is not ok)."""
                    page, ok = step_ok(s)
                    rs = B.buffer_rsrc(kv_cache, Int64(page) * stride_kv, ok.select(Int32(P * 64), Int32(0)))
                    tin = (s % STEPS_PER_PAGE) * WALK_STEP
                    return [B.buffer_load(rs, kv_lane, 4, (tin + NTILE * j) * 16) for j in range(NT)]

                def ks_load(s):
                    """Step s's KV scales as one dword whose byte j is n-tile j's (page 128: two gathered)."""
                    page, ok = step_ok(s)
                    rs = B.buffer_rsrc(kv_scale, Int64(page) * stride_ks, ok.select(Int32(P * 4), Int32(0)))
                    offs, perm = STEP_SCALES[s % STEPS_PER_PAGE]
                    ks = [B.buffer_load(rs, ks_lane, 1, 4 * xo) for xo in offs]
                    return ks[0] if perm is None else _perm_b32(ks[1], ks[0], perm)

                for s in range_constexpr(g.steps):
                    ts = t0 + Int32(s * WALK_STEP)
                    _, ok = step_ok(s)
                    rocdl.sched_barrier(0)      # step s + 1's loads stay below step s (VGPR budget)
                    ksj = ks_load(s)
                    kv = kv_loads(s)
                    # per n-tile j: ReLU x weight over the lane's heads as pairs of heads (one v_pk_fma_f32
                    # per pair), the pair's halves added once
                    parts = []
                    for j in range_constexpr(NT):
                        acc = None
                        for u in range_constexpr(MT):
                            d = fx.Vector(B.mfma_fp4(fx.Vector.filled(4, 0.0, fx.Float32), qa[u], kv[j], qs, u, ksj, j))
                            for h in range_constexpr(2):
                                x = arith.max(d.shuffle(d, [2 * h, 2 * h + 1]), zero)
                                acc = _pk_fma(x, wp[2 * u + h], acc)
                        parts.append(_add_halves(acc))
                    # the four lane groups folded: n-tile 0 with 2 and 1 with 3 across the 32-lane halves,
                    # whose sums land as one pair (one v_pk_add_f32), then across the 16-lane rows
                    pi = [p.bitcast(Int32) for p in parts]
                    t0_, t2_ = B.permlane32_swap(pi[0], pi[2])
                    t1_, t3_ = B.permlane32_swap(pi[1], pi[3])
                    tu = (fx.Vector.from_elements([t0_, t1_], Int32).bitcast(fx.Float32)
                          + fx.Vector.from_elements([t2_, t3_], Int32).bitcast(fx.Float32))
                    t, u_ = B.permlane16_swap(tu.bitcast(Int32)[0], tu.bitcast(Int32)[1])
                    total = t.bitcast(fx.Float32) + u_.bitcast(fx.Float32)     # lane (g, r): token 16g + r
                    v = (ok & (lane4 < (limit - ts) * Int32(4))).select(total * weight_scale,
                                                                         fx.Float32(float("-inf")))
                    B.buffer_store(v, out_rs, lane4 + ts * Int32(4))     # (soffset would escape the bound)
            else:
                for s in range_constexpr(g.steps):
                    B.buffer_store(fx.Float32(float("-inf")), out_rs, (t0 + Int32(s * WALK_STEP) + lane) * Int32(4))

    return walk


def walk_launcher(g: Walk, name: str):
    return entry_launcher(walk_kernel(g, name), g.threads)
