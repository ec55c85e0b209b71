"""FlyDSL source of the BF16 x MXFP4 GEMM (A16WFP4) for gfx950: Y[M, N] = X[M, K] @ W[N, K]^T.

Per workgroup (4 waves, tile bm x bn, see geometry.py):
- A (bf16 activations) is copied global -> LDS by buffer loads with the LDS bit (no VGPR staging),
  double-buffered across the K loop; the LDS rows are XOR-swizzled at 16-byte granularity
  (chunk ^ (row % 8), applied on the global side) so the rows an MFMA reads hit different banks.
  The next step's copy goes into the other stage; the copies carry an alias scope that the fragment
  reads exclude, so LLVM does not make each LDS read wait for the copies in flight (vmcnt).
- B (preshuffled packed E2M1, layout in layout.py) is loaded straight to VGPRs, 16-byte loads of
  the preshuffled layout (plus the scale bytes they need, so every weight and scale byte is read once
  per M block), and decoded into BF16 fragments with v_cvt_scalef32_pk_bf16_fp4 (the E8M0 scale is
  applied by the conversion) one n-tile ahead, between the MFMAs of the n-tile before.
- MFMAs (`mfma`): v_mfma_f32_16x16x32_bf16 or v_mfma_f32_32x32x16_bf16, fp32 accumulators. An
  operand gives lane l row / column r = l % mfma of its tile and 8 K of K group kg = l // mfma. Load u
  of a lane holds K [32 (kg L + u), +32) of column r (L = mfma / 16 loads per 128-K block), and its
  dword d feeds MFMA 4u + d of the block, which contracts real K 32 (kg L + u) + 8d + e through the
  lane's slot e: the A fragment is read from LDS with the same permutation, which leaves the dot
  product unchanged. The weight is the MFMA's first operand, so an accumulator holds Y^T: per 4-float
  unit, 4 adjacent output columns of one row. 16x16 tiles store each unit directly (8 bytes); 32x32
  tiles write their units into an LDS copy of the output tile and store it in 16-byte row pieces.
- "prefill" order spreads the next step's A copies and B loads over the step's MFMAs, reading the A
  fragments one 32-K slice ahead (two B tiles live); "decode" order reads the step's A fragments,
  issues the next A before and the next B after the MFMAs (one B tile live, fewer VGPRs). The last
  K step is peeled, so no tile is loaded twice; with sk = 1 the first is peeled too, its MFMAs taking
  an inline 0 as the accumulator (no zeroing movs), which the timing model prefers there only. With
  sk > 1 the sk waves of a group split each K step, then each sums its share of the accumulators
  from every wave's partials through LDS, in wave order (deterministic), and stores it.
- Output rows >= M and activation rows >= M are handled by buffer-descriptor bounds (loads return 0,
  stores are dropped), so any M works; the grid is (ceil(M / bm), N / bn): x-adjacent workgroups are
  the M blocks of one N block and share its B tiles in cache.

Design decisions (docs/families/gemm_a16wfp4.md#decisions):
- Scale edge cases: the E8M0 byte e becomes the f32 scale 2^(e-127) exactly: in sk 1 tiles as
  ldexp(2^-127, e) (the denormal 0x00400000 itself for e = 0), with e = 0xFF, which that makes +inf,
  turned into NaN by fma(s, 0, s) (inf * 0); in the others as e << 23 with selects for 0x00400000 (e = 0)
  and a quiet NaN (e = 0xFF). Either way the whole 32-group of a 0xFF scale decodes to NaN. Products
  are exact in f32 and in bf16 (E2M1 has 2 significant bits), so the decode equals the canonical
  reference, including bf16 subnormals for e = 0 and +-inf for 6 * 2^(e-127) >= 2^128. The kernels
  run with f32 and f16/f64 denormals preserved (FLOAT_DENORM_MODE = 3 in the descriptor, tested);
  that the conversion honours it for e = 0 is checked on the emulator only, not on hardware.
  -0 codes sum to +0 in the GEMM, as in the reference matmul.
- Layout: aiter's canonical 16x16 weight shuffle and e8m0 scale shuffle (layout.py), so weights prepared
  for aiter/FlyDSL MXFP4 kernels are accepted unchanged. Host API in ops/_gemm_a16wfp4.py.
- Tiles: chosen in configs.py (partly on the emulator's timing model), not timed on gfx950.
- Shapes: the TP2 benchmark shapes get their own table rows; nothing assumes a model role.
N, K, M and both row strides are runtime arguments; a spec is only a tile config.
"""
import functools

import flydsl.compiler as flyc
import flydsl.expr as fx
from flydsl._mlir import ir
from flydsl._mlir.dialects import llvm
from flydsl.expr import gpu, range_constexpr, rocdl
from flydsl.expr.typing import Int32, Int64, T
from flydsl.expr.typing import Vector as Vec

from . import geometry
from .geometry import A_CHUNK, KBLOCK, WAVE, WAVES

_SCALE_E0 = 0x00400000      # f32 bits of 2^-127 (E8M0 0x00)
_SCALE_NAN = 0x7FC00000     # E8M0 0xFF


def _ir(v):
    return v if not hasattr(v, "ir_value") else v.ir_value()


def _rsrc(addr, nbytes):
    """Buffer resource over [addr, addr + nbytes): loads past the end read 0, stores are dropped."""
    p = fx.inttoptr(fx.PointerType.get(T.i8, fx.AddressSpace.Global, 16), addr)
    return rocdl.get_buffer_rsrc(rocdl.make_buffer_ptr(p, num_records_bytes=nbytes))


def _load(rsrc, vty, voffset, soffset):
    return rocdl.raw_ptr_buffer_load(vty, rsrc, Int32(voffset), Int32(soffset), 0)


def _bitcast_f32(bits):
    return Vec.from_elements([bits], Int32).bitcast(fx.Float32)[0]


def _e8m0_scale(packed, shift, by_ldexp):
    """f32 value of the E8M0 byte at bit `shift` of a loaded i8/i16 (scale edge cases in the module doc).

    by_ldexp: ldexp(2^-127, e) is 2^(e-127) exactly for every e < 255 (2^-127 is a denormal, kept), and
    +inf for e = 0xFF; fma(s, 0, s) leaves a finite s unchanged and turns inf into NaN (inf * 0): three
    VALU ops (byte extract, v_ldexp_f32, v_fma_f32). Otherwise the exponent bits e << 23 with two
    selects for e = 0 and e = 0xFF (the same values)."""
    e = (Int32(fx.arith.extui(T.i32, _ir(packed))) >> shift) & 0xFF
    if by_ldexp:
        s = llvm.intr_ldexp(T.f32, _ir(_bitcast_f32(Int32(_SCALE_E0))), _ir(e))
        return fx.Float32(fx.math.fma(s, _ir(fx.Float32(0.0)), s))
    bits = (e == 0).select(Int32(_SCALE_E0), e << 23)
    return _bitcast_f32((e == 0xFF).select(Int32(_SCALE_NAN), bits))


def _cvt_pair(word, scale, s):
    """E2M1 codes of byte s of a dword -> vector<2 x bf16> (elements 2s, 2s+1)."""
    return Vec(rocdl.cvt_scalef32_pk_bf16_fp4(T.vec(2, T.bf16), word, scale, s))


def _join8(pairs):
    """The 4 pairs of one dword -> vector<8 x bf16>."""
    lo = pairs[0].shuffle(pairs[1], [0, 1, 2, 3])
    hi = pairs[2].shuffle(pairs[3], [0, 1, 2, 3])
    return lo.shuffle(hi, list(range(8)))


def _div(x, c):
    """x // c for a power of two c and x >= 0 (a shift: Int32 division would add sign fix-ups)."""
    return x // c if isinstance(x, int) else x >> (c.bit_length() - 1)


def _mod(x, c):
    """x % c for a power of two c and x >= 0."""
    return x % c if isinstance(x, int) else x & (c - 1)


def make_launcher(params: dict):
    t = geometry.tile(params)
    name = geometry.symbol(params)
    BM, BN, SK, KB, KSTEP = t.bm, t.bn, t.sk, t.kb, t.kstep
    NT, MT = t.n_tiles, t.m_tiles
    NACC = MT * NT                        # MFMA accumulators per lane (4 or 16 floats each)
    NUNIT = t.accumulators                # their 4-float units (what a store or a split-K partial moves)
    MN, MK = t.mfma, t.mfma_k
    UPA = NUNIT // NACC                   # units per accumulator: 1 (16x16) or 4 (32x32)
    LOADS = MN // 16                      # 16-byte weight loads per lane per n-tile per 128-K block
    QS = KBLOCK // MK                     # MFMAs per (m-tile, n-tile) per 128-K block
    mfma_op = rocdl.mfma_f32_16x16x32_bf16 if MN == 16 else rocdl.mfma_f32_32x32x16_bf16
    KPS = KSTEP // KBLOCK                 # 128-K blocks per step (all waves)
    CPR = KSTEP * 2 // A_CHUNK            # A chunks per LDS row
    CPT = t.a_chunks_per_thread
    A_STAGE = t.a_stage_bytes
    ROW_B = KSTEP * 2
    PAIRS = max(1, NT // 2)               # 16x16: scale loads per block, one per 32 columns (or 16 if NT == 1)
    SCALE_LOADS = PAIRS if MN == 16 else NT * LOADS   # 32x32: one byte per weight load
    STAGED, OUT_PITCH, OUT_BASE = t.staged_out, t.out_pitch, t.out_base
    OUT_CPR = BN * 2 // A_CHUNK           # 16-byte chunks per output row
    OUT_CHUNKS = BM * OUT_CPR
    prefill = t.order == "prefill"
    # sk 1 peels the first K step (its MFMAs take an inline 0 as C), issues the prologue's B before its A,
    # fences the A copies ahead of the conversions and decodes scales by ldexp; the timing model prefers
    # each for sk 1 only (docs/families/gemm_a16wfp4.md#kernel).
    peel = SK == 1
    threads = WAVES * WAVE

    @flyc.kernel(name=name)
    def gemm_kernel(out: fx.Pointer, x: fx.Pointer, w: fx.Pointer, w_scale: fx.Pointer,
                    m: Int32, n: Int32, k: Int32, stride_x: Int32, stride_out: Int32):
        tid = Int32(gpu.thread_idx.x)
        lane = _mod(tid, WAVE)
        wave = Int32(rocdl.readfirstlane(T.i32, _ir(_div(tid, WAVE))))
        # The operands' lane layout (module doc): row / column r of a tile, K group kg; w_lane[u] is the
        # byte offset of the lane's weight load u from its n-tile's first 16-column group and 128-K block.
        r = _mod(lane, MN)
        kg = _div(lane, MN)
        w_lane = [((kg * LOADS + u) * 16 + _mod(r, 16)) * 16 + (0 if MN == 16 else _div(r, 16) * k * 8)
                  for u in range_constexpr(LOADS)]
        kw = _mod(wave, SK)
        nw = _div(wave, SK)
        bid_m = Int32(gpu.block_idx.x)
        bid_n = Int32(gpu.block_idx.y)

        m0 = bid_m * BM
        rows = fx.min(m - m0, Int32(BM))
        x_rsrc = _rsrc(Int64(fx.ptrtoint(x)) + Int64(m0) * Int64(stride_x) * 2,
                       (Int64(rows - 1) * Int64(stride_x) + Int64(k)) * 2)
        # One 16-row group of W is 16 * K/2 = 8K bytes; one 32-row group of scales is K bytes.
        w_rsrc = _rsrc(Int64(fx.ptrtoint(w)) + Int64(bid_n) * (BN // 16) * Int64(k) * 8,
                       Int64(k) * (BN // 16) * 8)
        # A 16-column tile is one half of a 32-row scale group: the group of bid_n // 2, byte bid_n % 2.
        s_rsrc = _rsrc(Int64(fx.ptrtoint(w_scale)) + (Int64(_div(bid_n, 2)) if BN == 16 else
                                                     Int64(bid_n) * (BN // 32)) * Int64(k),
                       Int64(k) * max(1, BN // 32))
        half16 = _mod(bid_n, 2) if BN == 16 else None
        n_steps = _div(k, KSTEP)

        lds = fx.SharedAllocator().allocate(fx.Array[fx.Int8, t.lds_bytes, 16]).peek().ptr
        lds32 = fx.recast_iter(fx.PointerType.get(T.i32, fx.AddressSpace.Shared, 16), lds)

        def lds_load(byte_off):
            return fx.ptr_load(fx.add_offset(lds32, _div(byte_off, 4)), T.vec(4, T.i32))

        # The A copies into LDS and the A fragment reads carry one alias scope (copies) and its negation
        # (reads): a step's reads and its copies touch different stages, and without the scopes LLVM makes
        # every LDS read wait for every copy in flight (vmcnt) before it. The stage a read's data came
        # from is published by each wave's own wait for its copies and the barrier at the end of a step.
        copy_scope = ir.ArrayAttr.get([ir.Attribute.parse(
            '#llvm.alias_scope<id = "a_copy", domain = #llvm.alias_scope_domain<id = "gemm_a16wfp4_lds">>')])

        def frag_load(byte_off):
            ptr = fx.to_llvm_ptr(fx.add_offset(lds32, _div(byte_off, 4)))
            return llvm.load(T.vec(4, T.i32), ptr, alignment=16, noalias_scopes=copy_scope)

        def lds_store(value, byte_off):
            fx.ptr_store(value, fx.add_offset(lds32, _div(byte_off, 4)))

        # Cooperative A chunks: a buffer load with the LDS bit writes lane L of a wave at the wave's LDS
        # base + 16 L, so LDS is filled linearly and the swizzle is applied on the global side: the
        # 16 bytes at LDS chunk `slot` of a row come from global chunk slot ^ (row % 8).
        lds_i32 = Int32(fx.ptrtoint(lds))
        a_src = []
        for c in range_constexpr(CPT):
            q = tid + c * threads
            row = _div(q, CPR)
            a_src.append(row * stride_x * 2 + (_mod(q, CPR) ^ _mod(row, 8)) * A_CHUNK)
        # LDS offsets of this lane's A fragment for MFMA j of a 128-K block (row r of an m-tile).
        a_frag = [r * ROW_B + (((kg * (MN // 4) + j) ^ _mod(r, 8)) * A_CHUNK) for j in range_constexpr(QS)]

        def dma_chunk(step, stage, c):
            dst = lds_i32 + stage * A_STAGE + (c * threads + wave * WAVE) * A_CHUNK
            ptr = fx.to_llvm_ptr(fx.inttoptr(fx.PointerType.get(T.i8, fx.AddressSpace.Shared), Int64(dst)))
            rocdl.raw_ptr_buffer_load_lds(x_rsrc, ptr, Int32(A_CHUNK), Int32(a_src[c]),
                                          Int32(step * (KSTEP * 2)), Int32(0), Int32(0), alias_scopes=copy_scope)

        def dma_a(step, stage):
            for c in range_constexpr(CPT):
                dma_chunk(step, stage, c)

        def read_frag(stage, i, j, mt):  # the A fragment of m-tile mt of MFMA j of block i
            return Vec(frag_load(stage * A_STAGE + (kw * KB + i) * (KBLOCK * 2) + mt * MN * ROW_B
                                 + a_frag[j])).bitcast(fx.BFloat16)

        def read_frags(stage, i, j):  # the A fragments of MFMA j of block i, one per m-tile
            return [read_frag(stage, i, j, mt) for mt in range_constexpr(MT)]

        def read_a(stage):          # every A fragment of a step: [block][j][m-tile]
            return [[read_frags(stage, i, j) for j in range_constexpr(QS)]
                    for i in range_constexpr(KB)]

        def block_of(step, i):      # global 128-K block index of this wave's block i in a step
            return step * KPS + kw * KB + i

        def n16_of(nt):             # first 16-column group (within the workgroup) of the wave's n-tile nt
            return (nw * NT + nt) * LOADS

        def b_loads(step):
            """The loads of one B tile as (is_scale, thunk) in issue order (weights of a block, then its
            scales); thunk() emits the load and returns its value."""
            ops = []
            for i in range_constexpr(KB):
                b = block_of(step, i)
                for nt in range_constexpr(NT):
                    for u in range_constexpr(LOADS):
                        ops.append((False, lambda b=b, nt=nt, u=u: _load(w_rsrc, T.vec(4, T.i32), w_lane[u],
                                                                         n16_of(nt) * k * 8 + b * 1024)))
                if fx.const_expr(MN == 32):
                    # The scale of (column r, lane row kg * LOADS + u): byte r // 16 of its dword.
                    for nt in range_constexpr(NT):
                        for u in range_constexpr(LOADS):
                            ops.append((True, lambda b=b, nt=nt, u=u: _load(
                                s_rsrc, T.i8, (kg * LOADS + u) * 64 + _mod(r, 16) * 4 + _div(r, 16) + (b & 1) * 2,
                                (nw * NT + nt) * k + (b >> 1) * 256)))
                    continue
                for p in range_constexpr(PAIRS):
                    # The 2 bytes of this block's (lane row, 32-column pair) are adjacent; a wave with
                    # one n-tile needs only the byte of its 16-column half.
                    n16 = n16_of(2 * p)
                    soff = _div(n16, 2) * k + (b >> 1) * 256
                    if fx.const_expr(NT == 1):
                        half = _mod(n16, 2) if half16 is None else half16
                        ops.append((True, lambda b=b, half=half, soff=soff: _load(
                            s_rsrc, T.i8, lane * 4 + (b & 1) * 2 + half, soff)))
                    else:
                        ops.append((True, lambda b=b, soff=soff: _load(s_rsrc, T.i16, lane * 4 + (b & 1) * 2, soff)))
            return ops

        def load_b(step):
            bq, sc = [], []
            ops = b_loads(step)
            for q in range_constexpr(len(ops)):
                (sc if ops[q][0] else bq).append(ops[q][1]())
            return bq, sc

        def block_scale(sc, i, nt, u):
            if fx.const_expr(MN == 32):
                return _e8m0_scale(sc[(i * NT + nt) * LOADS + u], 0, by_ldexp=peel)
            return _e8m0_scale(sc[i * PAIRS + nt // 2], (nt % 2) * 8, by_ldexp=peel)

        def scale_of(scales, sc, i, nt, j):  # the scale of MFMA j's load of n-tile nt of block i, on first use
            key = (i, nt, j // 4)
            if fx.const_expr(key not in scales):
                scales[key] = block_scale(sc, *key)
            return scales[key]

        def pair_of(bq, sc, scales, i, j, nt, q):   # conversion q of n-tile nt of MFMA j of block i
            return _cvt_pair(Vec(bq[(i * NT + nt) * LOADS + j // 4])[j % 4], scale_of(scales, sc, i, nt, j), q)

        def mfma_group(afrags, bq, sc, scales, i, j, accs, first, nxt, side=()):
            """The MFMAs of MFMA j of block i, n-tile by n-tile, decoding the next n-tile (of group `nxt`
            = (i, j) after the last) under them: one conversion after every MT/4-th MFMA, the thunks
            `side` (B loads) spread over the MFMAs without one. A wave that issues in order runs VALU
            work in an MFMA's shadow only when it sits between two MFMAs, so in the prefill order (one
            wave per SIMD) a scheduling fence after each MFMA keeps that placement; the decode order's
            waves overlap each other instead. `first`: this group's first n-tile, decoded already (or
            [] when not); returns `nxt`'s first n-tile."""
            pairs = first if first else [pair_of(bq, sc, scales, i, j, 0, q) for q in range_constexpr(4)]
            cvt_at = [(p % MT) * 4 // MT != (p % MT + 1) * 4 // MT for p in range_constexpr(MT * NT)]
            free = [p for p in range_constexpr(MT * NT) if not cvt_at[p]] or list(range_constexpr(MT * NT))
            side_at = {}
            for q in range_constexpr(len(side)):
                side_at.setdefault(free[q * len(free) // len(side)], []).append(side[q])
            for nt in range_constexpr(NT):
                src = (i, j, nt + 1) if nt + 1 < NT else (None if nxt is None else (*nxt, 0))
                bf = _join8(pairs)
                pairs = []
                for mt in range_constexpr(MT):
                    a = mt * NT + nt
                    if fx.const_expr(prefill and MN == 32):
                        rocdl.sched_barrier(0)       # the conversions stay between the MFMAs (two per 32x32)
                    accs[a] = mfma_op(T.vec(MN * MN // WAVE, T.f32), [_ir(bf), _ir(afrags[mt]), accs[a]])
                    if fx.const_expr(prefill):
                        rocdl.sched_barrier(0)
                    for op in side_at.get(nt * MT + mt, ()):
                        op()
                    if fx.const_expr(mt == 0 and src is not None):
                        scale_of(scales, sc, src[0], src[2], src[1])     # before the conversions that need it
                    if fx.const_expr(src is not None):
                        for q in range_constexpr(mt * 4 // MT, (mt + 1) * 4 // MT):
                            pairs.append(pair_of(bq, sc, scales, *src, q))
            return pairs

        def compute(afs, bq, sc, accs):
            accs = list(accs)
            scales = {}
            pairs = []
            for g in range_constexpr(len(GROUPS)):
                i, j = GROUPS[g]
                pairs = mfma_group(afs[i][j], bq, sc, scales, i, j, accs, pairs,
                                   GROUPS[g + 1] if g + 1 < len(GROUPS) else None)
            return accs

        GROUPS = [(i, j) for i in range_constexpr(KB) for j in range_constexpr(QS)]

        def prefill_step(step, stage, bq, sc, accs, prefetch=True):
            """One K step of the prefill order with the next step's loads spread over its MFMAs.

            A wave's loads wait for the CU's load pipe (one at a time, at the L1 rate): issued in a burst
            they stall the wave before its MFMAs, and an LDS read issued behind a copy into LDS cannot
            move ahead of it (the compiler cannot tell the stages apart). So the step is emitted group by
            group (the MFMAs of one 32-K slice): the A fragments of the next group are read and a share
            of the next step's A copies is issued, then the group's MFMAs run with the next n-tiles'
            conversions and the share of B loads between them (mfma_group). The loads go to all groups
            but the last, whose MFMAs hide the last loads' latency. Only two groups' A fragments are
            live, which lets 128 x 128 tiles fit the registers."""
            accs = list(accs)
            loads = []
            if fx.const_expr(prefetch):
                loads = [(None, functools.partial(dma_chunk, step + 1, stage ^ 1, c)) for c in range_constexpr(CPT)]
                loads += b_loads(step + 1)
            bq_next, sc_next = [], []
            spread = max(1, len(GROUPS) - 1)
            share = [len(loads) * (g + 1) // spread - len(loads) * g // spread if g < spread else 0
                     for g in range_constexpr(len(GROUPS))]
            frags = read_frags(stage, *GROUPS[0])
            scales = {}
            pairs = []
            pos = 0
            for g in range_constexpr(len(GROUPS)):
                i, j = GROUPS[g]
                nxt = read_frags(stage, *GROUPS[g + 1]) if g + 1 < len(GROUPS) else None
                side = []
                for q in range_constexpr(pos, pos + share[g]):
                    kind, thunk = loads[q]
                    if fx.const_expr(kind is None):
                        thunk()
                    else:
                        dst = sc_next if kind else bq_next
                        side.append(functools.partial(lambda thunk, dst: dst.append(thunk()), thunk, dst))
                pos += share[g]
                if fx.const_expr(peel and any(loads[q][0] is None for q in range(pos - share[g], pos))):
                    rocdl.sched_barrier(0)       # the A copies go out before the scale decode's wait
                pairs = mfma_group(frags, bq, sc, scales, i, j, accs, pairs,
                                   GROUPS[g + 1] if g + 1 < len(GROUPS) else None, side)
                frags = nxt
            return accs, bq_next, sc_next

        zero = Vec.filled(MN * MN // WAVE, 0.0, fx.Float32).ir_value()
        n_b_loads = KB * (NT * LOADS + SCALE_LOADS)    # load instructions of one B tile

        if fx.const_expr(peel):
            bq0, sc0 = load_b(Int32(0))
            dma_a(Int32(0), Int32(0))
        else:
            dma_a(Int32(0), Int32(0))
            bq0, sc0 = load_b(Int32(0))
        rocdl.s_waitcnt(vmcnt=0)
        gpu.barrier()
        n_bq = len(bq0)

        def k_step(step, bq, sc, accs):
            """One K step that prefetches the next: its accumulators and the next step's B tile."""
            stage = step & 1
            if fx.const_expr(prefill):
                accs, bq_next, sc_next = prefill_step(step, stage, bq, sc, accs)
                rocdl.sched_barrier(0)           # the wait stays behind the MFMAs
                rocdl.s_waitcnt(vmcnt=n_b_loads)  # the A copies (issued before the B loads) are done
            else:
                afs = read_a(stage)
                dma_a(step + 1, stage ^ 1)
                rocdl.sched_barrier(0)           # the copy is issued before the next B (vmcnt below)
                accs = compute(afs, bq, sc, accs)
                rocdl.sched_barrier(0)           # keep the next B behind the MFMAs: one B tile live
                bq_next, sc_next = load_b(step + 1)
                rocdl.sched_barrier(0)
                rocdl.s_waitcnt(vmcnt=n_b_loads)  # this wave's A copy is done, its next B may fly
            gpu.barrier()
            return [_ir(v) for v in accs] + [_ir(v) for v in bq_next] + [_ir(v) for v in sc_next]

        # Every step but the last prefetches the next one; the last is peeled so nothing is read twice.
        # The next A goes into the other stage; each wave drains its copy before the barrier, and every
        # LDS read of a step has fed an MFMA before it (so the next step may overwrite that stage).
        # With `peel` the first step is peeled too: no accumulator is zeroed (one step: the zeros).
        results = [zero] * NACC + [_ir(v) for v in bq0] + [_ir(v) for v in sc0]
        if fx.const_expr(peel):
            if n_steps > 1:
                init = k_step(Int32(0), bq0, sc0, [zero] * NACC)
                for iv, state in range(fx.Index(1), fx.Index(n_steps - 1), fx.Index(1), init=init):
                    results = yield k_step(Int32(iv), list(state[NACC:NACC + n_bq]), list(state[NACC + n_bq:]),
                                           list(state[:NACC]))
        else:
            for iv, state in range(fx.Index(0), fx.Index(n_steps - 1), fx.Index(1), init=results):
                results = yield k_step(Int32(iv), list(state[NACC:NACC + n_bq]), list(state[NACC + n_bq:]),
                                       list(state[:NACC]))
        last = (n_steps - 1) & 1, results[NACC:NACC + n_bq], results[NACC + n_bq:], results[:NACC]
        if fx.const_expr(prefill):
            accs = prefill_step(n_steps - 1, *last, prefetch=False)[0]
        else:
            accs = compute(read_a(last[0]), *last[1:])

        # A 32x32 accumulator is 4 units of 4 floats (unit b: columns 8 b + 4 kg .. + 3 of the tile); a
        # 16x16 one is one unit (columns 4 kg .. + 3). Stores and split-K partials move units.
        units = []
        for a in range_constexpr(NACC):
            for b in range_constexpr(UPA):
                units.append(accs[a] if UPA == 1 else
                             _ir(Vec(accs[a]).shuffle(Vec(accs[a]), [4 * b + e for e in range(4)])))

        def unit_place(u):         # unit u's m-tile and its first column among the wave's columns
            return u // UPA // NT, (u // UPA % NT) * MN + 8 * (u % UPA)

        def store_direct(units):
            # A unit is one 8-byte store. Each m-tile gets its own buffer resource (base at its first
            # row, bounds at its last real row), so one voffset serves every m-tile and the units differ
            # by the instruction offset. The row stays in the voffset, which the bounds check covers
            # (soffset is not checked). `units`: unit index -> value, the ones this wave stores.
            voff = r * (stride_out * 2) + (bid_n * BN + n16_of(0) * 16 + kg * 4) * 2
            for mt in range_constexpr(MT):
                mine = [u for u in range(NUNIT) if unit_place(u)[0] == mt and u in units]
                if fx.const_expr(not mine):
                    continue
                nb = fx.max(Int32(0), (rows - (mt * MN + 1)) * stride_out * 2 + n * 2)
                rsrc = _rsrc(Int64(fx.ptrtoint(out)) + Int64(m0 + mt * MN) * Int64(stride_out) * 2, Int64(nb))
                for u in range_constexpr(len(mine)):
                    o = Vec(units[mine[u]]).to(fx.BFloat16).bitcast(Int32)
                    rocdl.raw_ptr_buffer_store(_ir(o), rsrc, _ir(Int32(voff + unit_place(mine[u])[1] * 2)),
                                               _ir(Int32(0)))

        def stage_out(units):
            # The units go to an LDS copy of the output tile, rows padded by 16 bytes so the 16 rows one
            # write serves per clock meet at most two to a bank, and write_out stores it row-contiguous.
            # `units`: unit index -> value, the ones this wave holds.
            for u in range_constexpr(NUNIT):
                if fx.const_expr(u in units):
                    mt, col = unit_place(u)
                    o = Vec(units[u]).to(fx.BFloat16).bitcast(Int32)
                    off = OUT_BASE + (mt * MN + r) * OUT_PITCH + (n16_of(0) * 16 + col + kg * 4) * 2
                    ptr = fx.to_llvm_ptr(fx.add_offset(lds32, _div(off, 4)))
                    llvm.store(_ir(o), ptr, alignment=8)

        def write_out():
            # Each thread stores 16-byte chunks of the staged tile, consecutive threads along a row, so
            # a wave's store covers whole 128-byte lines. One buffer resource based at the tile's first
            # row ends at the last real row (rows >= M are dropped by its bounds check, N % bn == 0).
            rsrc = _rsrc(Int64(fx.ptrtoint(out)) + Int64(m0) * Int64(stride_out) * 2,
                         Int64((rows - 1) * stride_out * 2 + n * 2))

            def store_chunk(q):
                row, ch = _div(q, OUT_CPR), _mod(q, OUT_CPR)
                v = lds_load(OUT_BASE + row * OUT_PITCH + ch * A_CHUNK)
                voff = row * (stride_out * 2) + (bid_n * BN + ch * 8) * 2
                rocdl.raw_ptr_buffer_store(_ir(v), rsrc, _ir(Int32(voff)), _ir(Int32(0)))

            for c in range_constexpr(-(-OUT_CHUNKS // threads)):
                if fx.const_expr((c + 1) * threads <= OUT_CHUNKS):
                    store_chunk(tid + c * threads)
                else:
                    if tid < OUT_CHUNKS - c * threads:     # a small tile has fewer chunks than threads
                        store_chunk(tid + c * threads)

        # The MFMAs take the weight as their first operand, so a tile's accumulator is Y^T: a lane holds 4
        # consecutive columns of row r per unit (8 bytes of bf16). Stored directly, one wave's unit
        # writes 16 bytes to each of 32 rows of a 32x32 tile (32 bytes to 16 rows of a 16x16 one), so
        # 32x32 tiles stage the output in LDS and store whole lines (geometry.Tile.staged_out).
        emit = stage_out if STAGED else store_direct
        if fx.const_expr(SK == 1):
            if fx.const_expr(STAGED):
                gpu.barrier()                    # the output tile reuses LDS the last step may still read
            emit(dict(enumerate(units)))
        else:
            # The sk waves of a group share the reduction: of the first n_own = min(sk, NUNIT) waves,
            # wave s owns units [s NUNIT / n_own, (s + 1) NUNIT / n_own); every wave writes its partials
            # of the units it does not own to LDS (one 16-byte entry per lane per partial), and each
            # owner sums all sk partials of its own in wave order (deterministic, the same sum whichever
            # wave owns it) and emits them (a staged output goes past the partials, which other owners
            # may still read), so the adds and stores are spread over the group instead of waiting on
            # one wave. Waves past n_own own nothing and share one path.
            n_own = min(SK, NUNIT)
            owner = [a * n_own // NUNIT for a in range(NUNIT)]

            def entry(a, s):                 # LDS byte offset of wave s's partial of unit a
                rank = s if isinstance(s, int) and s < owner[a] else s - 1     # a runtime s is past every owner
                return ((nw * NUNIT + a) * (SK - 1) + rank) * (WAVE * 16) + lane * 16

            def write(s):                    # wave s's partials of the units it does not own
                for a in range_constexpr(NUNIT):
                    if fx.const_expr(not isinstance(s, int) or owner[a] != s):
                        lds_store(Vec(units[a]).bitcast(Int32).ir_value(), entry(a, s))

            gpu.barrier()                        # the partials reuse LDS the last step may still read
            for s in range_constexpr(n_own):
                if fx.const_expr(any(o != s for o in owner)):
                    if kw == s:
                        write(s)
            if fx.const_expr(n_own < SK):
                if kw >= n_own:
                    write(kw)
            gpu.barrier()
            for s in range_constexpr(n_own):
                if kw == s:
                    mine = {}
                    for a in range_constexpr(NUNIT):
                        if fx.const_expr(owner[a] == s):
                            total = None
                            for src in range_constexpr(SK):
                                part = (Vec(units[a]) if src == s else
                                        Vec(lds_load(entry(a, src))).bitcast(fx.Float32))
                                total = part if total is None else total + part
                            mine[a] = total.ir_value()
                    emit(mine)
        if fx.const_expr(STAGED):
            gpu.barrier()                        # the output tile is complete
            write_out()

    @flyc.jit
    def launch(out: fx.Pointer, x: fx.Pointer, w: fx.Pointer, w_scale: fx.Pointer,
               m: Int32, n: Int32, k: Int32, stride_x: Int32, stride_out: Int32,
               stream: fx.Stream = fx.Stream(None)):
        gemm_kernel(out, x, w, w_scale, m, n, k, stride_x, stride_out).launch(
            grid=(1, 1, 1), block=(threads, 1, 1), stream=stream)

    return launch, name


def launcher(params: dict, target):
    geometry.block(params, target)      # refuses a target whose waves the fragment layouts do not fit
    return make_launcher(params)[0]
