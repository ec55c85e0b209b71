"""FlyDSL source of the FP4 paged MQA logits prefill kernel: four same-batch query rows per CTA
share one LDS-staged KV chunk.

One CTA = 4 waves; wave w scores query row `first_row + w` of its row group (docs/families/mqa_prefill.md).
Per chunk of CHUNK_TOKENS = 256 logical tokens (4 pages at P=64, 2 at P=128) wave w loads the w-th
quarter of the chunk's page values and of its scales (16 bytes, resp. one dword, per lane per KiB; a
quarter lies within one page) and writes them unchanged into one LDS stage, so LDS holds exactly the
chunk in the page layout of docs/families/mqa_decode.md#kv-pages. Every wave then reads B operands from that stage for its own row: for each
32-token tile, v_mfma_scale_f32_32x32x64_f8f6f4 with the 32 heads of an m-tile as rows (A = the wave's
Q, held in VGPRs for the CTA's life) and the 32 tokens as columns, FP4 A and B with E8M0 byte-selected
scales. The weighted ReLU head-sum is done per lane over its 16 accumulator rows, the two lane halves
(rows 4..7 of each 8) are folded with one v_permlane32_swap that also pairs two token tiles, so each lane
ends with one token and a wave stores 64 contiguous logits. The next chunk's global loads are issued
(into the VGPRs that feed the next LDS write) once the current chunk is in LDS at D128, before its
last page at D256 (_prefetch_page). Stores are masked per wave by its own window with a buffer
over the window's cells (based at its start: a cell below it has a wrapped, out-of-range offset), never a branch
per lane. The cells
outside a wave's window get -inf from the kernel too: those of the chunks the CTA computes, then (when
cta_info's field 6 is set, stored first) its share of the chunks outside its group's chunks (_fill_share), so every
output cell is written once and the output needs no fill; with field 6 clear (a converted one-row
table) only window cells are stored, as upstream's kernel does.

Design decisions (docs/families/mqa_prefill.md#decisions):
- Schedule: row groups are maximal runs of consecutive rows with equal `row_to_batch`, cut every
  four rows; a group's chunks are those of the union of its rows' windows, split into equal slices
  over a fixed number of schedule slots (the mqa_prefill_meta family). cta_info is int32 [slots, 8]:
  (first_row, n_rows, batch, chunk_start, chunk_count, last_page, fill, 0); n_rows 0 = idle slot,
  chunk_count 0 with fill 1 = a group of empty windows (only -inf to write).
  Pages are read only up to `last_page` (the union window's last page, further clamped to the block
  table width), so table entries past a sequence's end are never dereferenced. A logical page past
  the table width, or whose entry is not a page of kv_cache, is never read and its tokens score -inf
  (the decode contract, docs/safety.md); cta_info is untrusted (rows and batches outside the launch
  are masked).
- D=128 and D=256 are both built (D=256 stages 34,816 bytes per chunk).
- P=128: the chunk stays 256 tokens (two pages), so the staged bytes are the same as at P=64. KV scale
  slots follow kv_scale_slot of mqa_common.layouts, s(o) = (o % (P/4))*4 + o // (P/4).
- weight_scale multiplies the head sum once per token (the reference's order), not the weights.
- The benchmark reads B x Q x KV as Q tail-causal rows per sequence over a KV of KV tokens (the
  varqlen rule); see benchmarks/mqa_prefill.py.
Padding heads (H % 32 == 16) load a real Q row and their accumulator rows are never read. ReLU is
NaN-propagating: an E8M0 0xFF (NaN) scale makes the logits it reaches NaN, as in the reference.
"""
import flydsl.compiler as flyc
import flydsl.expr as fx
from flydsl._mlir import ir
from flydsl._mlir.dialects import llvm
from flydsl.expr import gpu, range_constexpr, rocdl
from flydsl.expr.typing import Int32, Int64, T, Vector

from ..mqa_common import blocks as B
from .geometry import CHUNK_TOKENS, CTA_INFO_INTS, MFMA_N, THREADS, WAVE_SIZE, WAVES, Geometry
from .specs import FAMILY

_BIG = (1 << 31) - 1
_CHUNK_SHIFT = CHUNK_TOKENS.bit_length() - 1
assert 1 << _CHUNK_SHIFT == CHUNK_TOKENS


# ------------------------------------------------------------------------------------------ small pieces

def _global(ptr, elem):
    return fx.recast_iter(fx.PointerType.get(elem, fx.AddressSpace.Global, 4), ptr)


def _sload(ptr_i32, index, count=1, num_records=None):
    """Wave-uniform int32 load(s) from global int32 memory through SMEM (s_buffer_load); dwords at or
    past `num_records` bytes read 0."""
    return rocdl.s_buffer_load(rocdl.make_buffer_ptr(ptr_i32, num_records_bytes=num_records), index, count=count)


def _mfma32(acc, a, b, scale_a, opsel_a, scale_b, opsel_b):
    """v_mfma_scale_f32_32x32x64_f8f6f4, FP4 x FP4: acc (v16f32) += A(32x64) * B(64x32)."""
    f32 = ir.F32Type.get()
    return rocdl.mfma_scale_f32_32x32x64_f8f6f4(
        B.vec_type(16, f32), [B.ir_of(a), B.ir_of(b), B.ir_of(acc), B.FP4_FORMAT, B.FP4_FORMAT,
                              opsel_a, B.ir_of(scale_a), opsel_b, B.ir_of(scale_b)])


def _asm(result_type, op: str, *srcs, kinds=None, wait_states=0, keep=()):
    """One VALU instruction as inline asm (`kinds`: each source's register class, VGPR by default),
    which LLVM neither splits, merges nor reassociates: it splits the packed FMAs that follow an MFMA
    into two v_fma_f32 each (to co-issue them in its shadow) and merges two tiles' f32 adds into a
    v_pk_add_f32 behind register moves, both costing VALU time here. LLVM does not see the write
    inside: `wait_states` after it cover a reader that needs them (v_permlane*_swap: 2).
    `keep`: VGPR values the instruction does not read but that must stay allocated up to it (extra
    operands the asm text does not name; no instruction)."""
    operands = ", ".join(f"${i + 1}" for i in range(len(srcs)))
    kinds = (kinds or "v" * len(srcs)) + "v" * len(keep)
    nop = f"\n s_nop {wait_states - 1}" if wait_states else ""
    return llvm.inline_asm(result_type, [B.ir_of(v) for v in list(srcs) + list(keep)], f"{op} $0, {operands}{nop}",
                           "=v," + ",".join(kinds), has_side_effects=False)


def _pk(op: str, *srcs, keep=()):
    """v_pk_{op}_f32 on f32 pairs."""
    return Vector(_asm(B.vec_type(2, ir.F32Type.get()), f"v_pk_{op}_f32", *srcs, keep=keep))


def _relu(x, n=2):
    # NaN-propagating (an E8M0 0xFF scale makes its logits NaN, as in the other families)
    return fx.maximumf(x, Vector.filled(n, 0.0, fx.Float32))


def _live_rows(g: Geometry, m: int) -> int:
    """Accumulator elements of m-tile m that hold real heads: rows 8*(j//4) + 4*half + j%4 < 16 are
    exactly j < 8, so a half-padded last tile keeps its first 8 (the padding rows are never read)."""
    return 8 if 32 * (m + 1) > g.heads else 16


# ------------------------------------------------------------------------------------ per-wave operands

def _load_q(g: Geometry, q8, row, stride_q, l32, half):
    """A operands: per (m-tile, k-step) 32 FP4 of head 32m + l32, dims [64ks + 32half, +32)."""
    rsrc = B.buffer_rsrc(q8, Int64(row) * Int64(stride_q))
    frags = []
    for m in range_constexpr(g.m_tiles):
        head = l32 if 32 * (m + 1) <= g.heads else (l32 & Int32(15))   # padding lanes read a real row
        base = (Int32(32 * m) + head) * Int32(g.head_dim // 2) + half * Int32(16)
        frags.append([B.buffer_load(rsrc, base + Int32(32 * ks), 4) for ks in range_constexpr(g.k_steps)])
    return frags


def _load_q_scales(g: Geometry, qs8, row, stride_qs, l32, half):
    """Per k-step the dwords whose byte 2m (after a per-lane shift) is the scale of (head 32m + l32,
    group 2ks + half); returns [ks] -> list of dwords (one per two m-tiles)."""
    rsrc = B.buffer_rsrc(qs8, Int64(row) * Int64(stride_qs))
    shift = (l32 >> Int32(4)) * Int32(8)          # head 32m + l32 is m16 = 2m + l32 // 16
    out = []
    for ks in range_constexpr(g.k_steps):
        kt, grp = ks // 2, 2 * (ks % 2)
        off = ((Int32(4 * kt + grp) + half) * Int32(16) + (l32 & Int32(15))) * Int32(g.qs_pad)
        if g.qs_pad == 4:
            d = Int32(B.buffer_load(rsrc, off, 1))
            out.append([fx.shrui(d, shift)])
        else:
            v = Vector(B.buffer_load(rsrc, off, 2))
            both = (Int64(v[0]) & Int64(0xFFFFFFFF)) | (Int64(v[1]) << Int64(32))
            both = fx.shrui(both, Int64(shift))
            out.append([Int32(both), Int32(fx.shrui(both, Int64(32)))])
    return out


def _load_weights(g: Geometry, w8, row, stride_w, half):
    """Per m-tile the f32 weights of the lane's accumulator rows 32m + 8(j//4) + 4half + j%4, as pairs
    (j, j+1) so the head sum runs on v_pk_fma_f32."""
    rsrc = B.buffer_rsrc(w8, Int64(row) * Int64(stride_w) * Int64(2))
    out = []
    for m in range_constexpr(g.m_tiles):
        ws = []
        for qd in range_constexpr(_live_rows(g, m) // 4):
            v = Vector(B.buffer_load(rsrc, (Int32(32 * m + 8 * qd) + half * Int32(4)) * Int32(2), 2))
            for d in range_constexpr(2):
                ws.append(Vector.from_elements(list(B.bf16x2_to_f32(v[d])), fx.Float32))
        out.append(ws)
    return out


# ------------------------------------------------------------------------------------------ KV staging

def _udiv(a, b):
    """a // b for a >= 0, b >= 1."""
    return Int32(fx.Uint32(a) // fx.Uint32(b))


def _below(x, n):
    """0 <= x < n (n >= 0) as one unsigned compare."""
    return fx.Uint32(x) < fx.Uint32(n)


def _load_chunk(g: Geometry, kv8, kvs8, table, chunk, stride_kv, stride_kvs, tid, wave):
    """Global loads of one chunk into this thread's staging registers, followed by the chunk's
    page-validity bits.

    table = (row pointer, cap, batch_ok, num_pages), plain IR values (it is loop state): the chunk's
    page entries come from one four-dword scalar load through a resource that ends after column cap
    (the last page needed, within the width), so no entry past it is read (those read 0). Page j is
    valid when it is at most cap and its entry names a page of kv_cache; a page that is not is never
    read and its tokens score -inf. Wave w stages the w-th quarter of the chunk's values and of its
    scales, which lies within one page (w * pages / 4), so a wave builds one page's resources, not
    every page's (scalar work per chunk; the staged layout is the same)."""
    npg = g.pages_per_chunk
    bt32, cap, batch_ok, num_pages = table
    first = chunk * Int32(npg)
    words = Vector(_sload(bt32, first, 4, num_records=fx.max(cap + Int32(1), Int32(0)) * Int32(4)))
    entries = [Int32(words[j]) for j in range_constexpr(npg)]
    in_pool = Int32(0)
    for j in range_constexpr(npg):
        in_pool = in_pool | _below(entries[j], num_pages).select(Int32(1 << j), Int32(0))
    below_cap = fx.min(fx.max(cap + Int32(1) - first, Int32(0)), Int32(npg))     # pages j < this are <= cap
    valid = batch_ok.select(in_pool & ((Int32(1) << below_cap) - Int32(1)), Int32(0))
    jw = (wave * Int32(npg)) >> Int32(2)              # the page of this wave's quarter (WAVES = 4)
    page = entries[0]
    for j in range_constexpr(1, npg):
        page = (jw == Int32(j)).select(entries[j], page)
    ok = ((valid >> jw) & Int32(1)) != Int32(0)
    lane = tid & Int32(WAVE_SIZE - 1)
    nv, ns = g.value_pieces_per_thread, g.scale_dwords_per_thread
    regs = []
    rsrc = B.buffer_rsrc(kv8, Int64(page) * Int64(stride_kv), ok.select(Int32(g.page_value_bytes), Int32(0)))
    base = lane * Int32(16) + (wave * Int32(nv * WAVE_SIZE * 16) - jw * Int32(g.page_value_bytes))
    for i in range_constexpr(nv):
        regs.append(Vector(B.buffer_load(rsrc, base + Int32(i * WAVE_SIZE * 16), 4)))
    rsrc = B.buffer_rsrc(kvs8, Int64(page) * Int64(stride_kvs), ok.select(Int32(g.page_scale_bytes), Int32(0)))
    base = lane * Int32(4) + (wave * Int32(ns * WAVE_SIZE * 4) - jw * Int32(g.page_scale_bytes))
    for i in range_constexpr(ns):
        regs.append(Int32(B.buffer_load(rsrc, base + Int32(i * WAVE_SIZE * 4), 1)))
    return regs + [valid]


def _prefetch_page(g: Geometry) -> int:
    """Page of the staged chunk before whose compute the next chunk's global loads are issued. The
    staging registers are free once the chunk is in LDS, so at D128 the loads go out before the first
    page (they then have the whole chunk's compute to arrive; the 17 registers they hold keep the
    reference spec within its budget); at D256 they are 34 registers, which would push the large-H
    specs past the VGPR file, so they wait for the last page."""
    return 0 if g.head_dim == 128 else g.pages_per_chunk - 1


def _zero_regs(g: Geometry):
    return ([Vector.filled(4, 0, Int32) for _ in range_constexpr(g.value_pieces_per_thread)]
            + [Int32(0) for _ in range_constexpr(g.scale_dwords_per_thread)] + [Int32(0)])


def _stage_chunk(g: Geometry, lds, regs, tid, wave):
    """Write the staging registers into LDS: values [page][PAGE_V] then scales [page][PAGE_S]; wave
    w's registers hold the w-th quarter of each (_load_chunk)."""
    nv, ns = g.value_pieces_per_thread, g.scale_dwords_per_thread
    lane = tid & Int32(WAVE_SIZE - 1)
    for i in range_constexpr(nv):
        B.lds_store(lds, lane * Int32(16) + wave * Int32(nv * WAVE_SIZE * 16) + Int32(i * WAVE_SIZE * 16), regs[i], 4)
    for i in range_constexpr(ns):
        B.lds_store(lds, lane * Int32(4) + wave * Int32(ns * WAVE_SIZE * 4) + Int32(g.lds_value_bytes + i * WAVE_SIZE * 4),
                    regs[nv + i], 1)


# ------------------------------------------------------------------------------------------ compute

def _unit_logits(g: Geometry, lds, pages, qa, qs, w, lane_v, lane_s, shift_s, on_pair, last_tiles=None):
    """Weighted ReLU head sums of the staged chunk's pages `pages` (of the last one only its first
    `last_tiles` tiles when given), one f32 per lane per 32-token tile; on_pair(j, pr, a, b) takes
    tiles 2pr and 2pr + 1 of page j as soon as both are summed (a last tile without its pair is passed
    as both: the caller's cells of the tile after it are outside the window)."""
    P = g.page_size
    bscale, bv = {}, {}                       # per page / per tile: read from LDS when first needed

    def scales(j):
        if j not in bscale:
            bscale[j] = []
            for ks in range_constexpr(g.k_steps):
                kt, c = ks // 2, 2 * (ks % 2)
                d = Int32(B.lds_load(lds, lane_s + Int32(g.lds_value_bytes + j * g.page_scale_bytes
                                                          + kt * 4 * P + c * P), 1))
                bscale[j].append(fx.shrui(d, shift_s) if shift_s is not None else d)
        return bscale[j]

    def operands(u):
        """Issue the LDS reads of unit u's B operands and scales (once per tile / page)."""
        j, tt, _ = units[u]
        scales(j)
        if (j, tt) not in bv:
            bv[(j, tt)] = []
            for ks in range_constexpr(g.k_steps):
                kt, c = ks // 2, 2 * (ks % 2)
                const = j * g.page_value_bytes + kt * 64 * P + c * 16 * P + 32 * tt * 16
                bv[(j, tt)].append(B.lds_load(lds, lane_v + Int32(const), 4))

    def step(u, ks, acc):
        """MFMA ks of unit u (page j, token tile tt, m-tile m): its 32x32 f32 dot products so far."""
        j, tt, m = units[u]
        # byte of token 32tt + l32 in the (pre-shifted) scale dword; see docs/families/mqa_decode.md#kv-scales
        opsel_b = 2 * tt if P == 64 else tt
        return _mfma32(acc, qa[m][ks], bv[(j, tt)][ks], qs[ks][(2 * m) // 4], (2 * m) % 4, bscale[j][ks], opsel_b)

    # Software pipelined over the units of all the pages, also across a page boundary: the next unit's
    # MFMAs are issued inside this unit's head sum, one per k-step between equal slices of it (fenced:
    # LLVM would gather them, and the wave would wait on its own MFMA chain instead of summing), so
    # the VALU waits neither on their results nor on the wait states before reading them; the next
    # tile's LDS reads go out right after the last MFMA that reads the previous tile.
    tiles = {j: g.tiles_per_page for j in pages}
    if last_tiles is not None:
        tiles[pages[-1]] = last_tiles
    units = [(j, tt, m) for j in pages for tt in range_constexpr(tiles[j]) for m in range_constexpr(g.m_tiles)]
    zero = Vector.filled(16, 0.0, fx.Float32)
    operands(0)
    acc = zero
    for ks in range_constexpr(g.k_steps):
        acc = step(0, ks, acc)
    total, first = None, None
    for u in range_constexpr(len(units)):
        j, tt, m = units[u]
        cur, acc = Vector(acc), zero
        live = _live_rows(g, m)
        # the accumulator rows of padding heads are never read, so LLVM would hand their registers
        # to the inline-asm FMAs below while the MFMA still writes them, and it does not check an asm
        # write against an MFMA in flight: the first FMA (behind the ReLU that waits for the MFMA)
        # keeps them allocated up to it
        dead = [cur[k] for k in range_constexpr(live, 16)]
        per = -(-(live // 2) // g.k_steps)          # row pairs per slice
        for ks in range_constexpr(g.k_steps):
            if u + 1 < len(units):
                if ks == 0:
                    operands(u + 1)
                acc = step(u + 1, ks, acc)
            rocdl.sched_barrier(0)
            for e in range_constexpr(ks * per, min((ks + 1) * per, live // 2)):
                pair = Vector(_relu(Vector.from_elements([cur[2 * e], cur[2 * e + 1]], fx.Float32)))
                if total is None:
                    total = _pk("mul", pair, w[m][e], keep=dead if e == 0 else ())
                else:
                    total = _pk("fma", pair, w[m][e], total, keep=dead if e == 0 else ())
            rocdl.sched_barrier(0)
        if m == g.m_tiles - 1:
            # the wait states cover the v_permlane32_swap that reads an odd tile's sum next (an even
            # tile's is read a unit later)
            tile_sum = fx.Float32(_asm(ir.F32Type.get(), "v_add_f32", total[0], total[1],
                                       wait_states=2 if tt % 2 == 1 else 0))
            total = None
            if tt % 2 == 0:
                first = tile_sum
                if u == len(units) - 1:
                    on_pair(j, tt // 2, first, first)
            else:
                on_pair(j, tt // 2, first, tile_sum)


def _fold_pair(a, b):
    """Lane x < 32 gets a[x] + a[x+32] (tile 0, token x); lane x >= 32 gets b[x-32] + b[x] (tile 1): one
    v_permlane32_swap (VALU, no LDS round trip)."""
    x, y = B.permlane32_swap(fx.Float32(a).bitcast(Int32), fx.Float32(b).bitcast(Int32))
    return x.bitcast(fx.Float32) + y.bitcast(fx.Float32)


def _fill_share(cta_info_rows, windows, rows, max_seq_len):
    """(v_lo, v_hi, g0, n): this CTA's share [v_lo, v_hi) of the chunks outside its group's chunk
    range, in which it writes -inf for its rows.

    The group's chunks [g0, g1) are those of the union of its rows' non-empty windows, the rule of the
    schedule builder (mqa_prefill_meta), recomputed here from the windows; every cell outside them is
    outside every row's window. The M - N outside chunks (M = chunks of max_seq_len, N = g1 - g0),
    taken in order (those below g0, then those from g1), are shared out R = ceil((M - N) / N) per group
    chunk: the slice of group chunks [a, b) writes outside chunks [a R, b R), so the slices of a group
    write each outside chunk exactly once. A group with no chunks (N = 0) has one slice, which writes
    them all. `windows`: the group's rows' (starts, ends), _group_words each."""
    first_row, n_rows, chunk_start, chunk_count = cta_info_rows
    ls4, le4 = windows
    lo, hi = Int32(_BIG), Int32(0)
    for j in range_constexpr(WAVES):
        r = first_row + Int32(j)
        mine = (Int32(j) < n_rows) & _below(r, rows)
        ls = fx.max(ls4[j], Int32(0))
        le = fx.min(le4[j], max_seq_len)
        live = mine & (le > ls)
        lo = live.select(fx.min(lo, ls), lo)
        hi = live.select(fx.max(hi, le), hi)
    work = hi > Int32(0)
    g0 = work.select(lo >> Int32(_CHUNK_SHIFT), Int32(0))
    n = work.select(((hi + Int32(CHUNK_TOKENS - 1)) >> Int32(_CHUNK_SHIFT)) - g0, Int32(0))
    m = (max_seq_len + Int32(CHUNK_TOKENS - 1)) >> Int32(_CHUNK_SHIFT)
    outside = fx.max(m - n, Int32(0))
    per = work.select(_udiv(outside + n - Int32(1), fx.max(n, Int32(1))), outside)    # R; N = 0: all of them
    a = work.select(fx.min(fx.max(chunk_start - g0, Int32(0)), n), Int32(0))
    b = work.select(fx.min(fx.max(chunk_start + chunk_count - g0, a), n), Int32(1))
    return fx.min(a * per, outside), fx.min(b * per, outside), g0, n


def _group_words(ptr_i32, first_row, rows):
    """The int32 of rows first_row .. first_row + WAVES - 1 of a [rows] tensor, as a list: one scalar
    load through a resource over the tensor (a row past its end reads 0; the callers mask such rows)."""
    words = Vector(_sload(ptr_i32, first_row, WAVES, num_records=rows * Int32(4)))
    return [Int32(words[j]) for j in range_constexpr(WAVES)]


def _of_wave(words, wave):
    """words[wave] for a wave-uniform wave in [0, WAVES) (scalar selects)."""
    v = words[0]
    for j in range_constexpr(1, WAVES):
        v = (wave == Int32(j)).select(words[j], v)
    return v


def _fill_chunk(v, g0, n, out_rsrc, lane, neg_inf4):
    """-inf into outside chunk v (in the order of _fill_share) of the wave's row: one 16-byte store
    per lane covers the chunk (a quarter of the instructions of dword stores; the range check is per
    dword, so a chunk past max_seq_len's end keeps only its cells below it)."""
    assert CHUNK_TOKENS == 4 * WAVE_SIZE
    tok = ((v < g0).select(v, v + n) << Int32(_CHUNK_SHIFT)) + lane * Int32(4)
    B.buffer_store(neg_inf4, out_rsrc, tok * Int32(4))


# ------------------------------------------------------------------------------------------ the kernel

def launcher(params: dict, target):
    FAMILY.block(params, target)        # refuses a target whose waves the lane layouts do not fit
    g = Geometry.of(params)
    name = FAMILY.symbol(params)
    npg = g.pages_per_chunk

    @flyc.kernel(name=name)
    def mqa_prefill(out: fx.Pointer, q: fx.Pointer, q_scale: fx.Pointer, kv_cache: fx.Pointer,
                    kv_scale: fx.Pointer, block_tables: fx.Pointer, weights: fx.Pointer,
                    local_starts: fx.Pointer, local_ends: fx.Pointer, cta_info: fx.Pointer,
                    stride_out: Int32, stride_q: Int32, stride_qs: Int32, stride_w: Int32,
                    stride_kv_page: Int32, stride_kvs_page: Int32, stride_bt: Int32, bt_width: Int32,
                    max_seq_len: Int32, weight_scale: fx.Float32, rows: Int32, bt_rows: Int32, num_pages: Int32):
        tid = Int32(gpu.thread_idx.x)
        lane = tid & Int32(WAVE_SIZE - 1)
        wave = Int32(B.readfirstlane(B.ir_of(tid >> Int32(6))))
        l32 = lane & Int32(31)
        half = lane >> Int32(5)
        info_ptr = _global(cta_info, T.i32)
        slot = Int32(gpu.block_idx.x) * Int32(CTA_INFO_INTS)
        info = _sload(info_ptr, slot, 4)
        more = _sload(info_ptr, slot + Int32(4), 4)
        first_row, n_rows, batch, chunk_start = info[0], info[1], info[2], info[3]
        chunk_count, last_page, fill = more[0], more[1], more[2]
        if (chunk_count > Int32(0)) | ((fill != Int32(0)) & (n_rows > Int32(0))):
            # cta_info fields are not trusted: a row outside the launch stores nothing (its loads
            # read row 0), a batch outside block_tables makes every page invalid
            row_in = first_row + fx.min(wave, n_rows - Int32(1))
            active = (wave < n_rows) & _below(row_in, rows)
            row = active.select(row_in, Int32(0))
            # the windows of the group's WAVES rows in one scalar round trip (rows past the launch
            # read 0 and are masked): the fill share and every wave's own window come from them
            windows = (_group_words(_global(local_starts, T.i32), first_row, rows),
                       _group_words(_global(local_ends, T.i32), first_row, rows))
            ls_raw, le_raw = (_of_wave(ws, wave) for ws in windows)
            win_lo = active.select(fx.max(ls_raw, Int32(0)), Int32(0))
            win_hi = active.select(fx.max(fx.min(le_raw, max_seq_len), Int32(0)), Int32(0))
            # logits go through a resource over the window's cells, based at its start: the offset of a
            # cell below it wraps to an unsigned 32-bit value past the bound and is dropped, as is one
            # past its end (one VALU add per store); -inf through a resource bounded by the row's
            # max_seq_len cells; an inactive wave stores nothing
            row_base = Int64(row) * Int64(stride_out) * Int64(4)
            out_rsrc = B.buffer_rsrc(_global(out, T.i8), row_base + Int64(win_lo) * Int64(4),
                                     num_records=Int64(fx.max(win_hi - win_lo, Int32(0))) * Int64(4))
            lane_bytes = lane * Int32(4)
            msl_bytes = active.select(max_seq_len, Int32(0)) * Int32(4)
            inf_rsrc = B.buffer_rsrc(_global(out, T.i8), row_base, num_records=Int64(msl_bytes))
            neg_inf = fx.Float32(float("-inf"))
            # the CTA's share of the outside chunks first: its stores then drain under the chunks'
            # loads and compute instead of ending the CTA, and the short groups' CTAs, which carry
            # the largest shares and run last, no longer end the launch on them
            if fill != Int32(0):
                v_lo, v_hi, g0, n_in = _fill_share((first_row, n_rows, chunk_start, chunk_count), windows,
                                                   rows, max_seq_len)
                for v in range(v_lo, v_hi, Int32(1), unroll=1):
                    _fill_chunk(v, g0, n_in, inf_rsrc, lane, Vector.filled(4, float("-inf"), fx.Float32))

            if chunk_count > Int32(0):
                kv8 = _global(kv_cache, T.i8)
                kvs8 = _global(kv_scale, T.i8)
                batch_ok = _below(batch, bt_rows)
                bt32 = fx.add_offset(_global(block_tables, T.i32),
                                     Int64(batch_ok.select(batch, Int32(0))) * Int64(stride_bt))
                table = (bt32, fx.min(last_page, bt_width - Int32(1)), batch_ok, num_pages)
                lds = B.lds_alloc(g.lds_bytes)
                lane_v = half * Int32(16 * g.page_size) + l32 * Int32(16)
                lane_s = half * Int32(g.page_size) + (l32 % Int32(g.page_size // 4)) * Int32(4)
                shift_s = (l32 >> Int32(4)) * Int32(8) if g.page_size == 64 else None

                # the first chunk's loads ahead of the row's operands: its staging (and the barrier
                # every wave waits at) needs only them, and the operands arrive behind them
                regs = _load_chunk(g, kv8, kvs8, table, chunk_start, stride_kv_page, stride_kvs_page, tid, wave)
                qa = _load_q(g, _global(q, T.i8), row, stride_q, l32, half)
                qs = _load_q_scales(g, _global(q_scale, T.i8), row, stride_qs, l32, half)
                w = _load_weights(g, _global(weights, T.i8), row, stride_w, half)
                for c in range(Int32(0), chunk_count, Int32(1), unroll=1):
                    gpu.barrier()                             # every wave is done reading the previous chunk
                    _stage_chunk(g, lds, regs, tid, wave)
                    valid = regs[-1]
                    gpu.barrier()
                    tok0 = (chunk_start + c) * Int32(CHUNK_TOKENS)

                    def store_pair(j, pr, a, b):
                        val = _fold_pair(a, b) * weight_scale
                        val = ((valid & Int32(1 << j)) != Int32(0)).select(val, neg_inf)
                        # one add whose constant LLVM cannot move into the instruction
                        # offset (voffset and offset are range-checked as one sum, unwrapped)
                        rel = (tok0 + Int32(j * g.page_size + 64 * pr) - win_lo) * Int32(4)
                        voff = Int32(_asm(T.i32, "v_add_u32", rel, lane_bytes, kinds="sv"))
                        B.buffer_store(val, out_rsrc, voff)

                    def inf_pages():
                        for j in range_constexpr(npg):        # -inf into the cells of pages not inside the window
                            page0 = tok0 + Int32(j * g.page_size)
                            # (fill 0, a converted one-row table: the caller's pre-fill stays put)
                            if (fill != Int32(0)) & ((page0 < win_lo) | (page0 + Int32(g.page_size) > win_hi)):
                                for pr in range_constexpr(g.page_size // 64):
                                    tok = page0 + Int32(64 * pr) + lane
                                    seen = (tok >= win_lo) & (tok < win_hi)
                                    B.buffer_store(neg_inf, inf_rsrc, seen.select(msl_bytes, tok * Int32(4)))

                    pf = _prefetch_page(g)
                    if pf == 0:                               # the next chunk's loads, under this chunk's pages
                        if c + Int32(1) < chunk_count:
                            regs = _load_chunk(g, kv8, kvs8, table, chunk_start + c + Int32(1),
                                               stride_kv_page, stride_kvs_page, tid, wave)
                        else:                                 # keeps the staged registers dead after the LDS write
                            regs = _zero_regs(g)
                    # a chunk inside the wave's window (most of them): every page computed, none with
                    # -inf cells, so no per-page tests, and one pipeline over all its pages' units
                    if (tok0 >= win_lo) & (tok0 + Int32(CHUNK_TOKENS) <= win_hi):
                        if pf == 0:
                            _unit_logits(g, lds, list(range(npg)), qa, qs, w, lane_v, lane_s, shift_s, store_pair)
                        else:
                            _unit_logits(g, lds, list(range(pf)), qa, qs, w, lane_v, lane_s, shift_s, store_pair)
                            if c + Int32(1) < chunk_count:
                                regs = _load_chunk(g, kv8, kvs8, table, chunk_start + c + Int32(1),
                                                   stride_kv_page, stride_kvs_page, tid, wave)
                            else:
                                regs = _zero_regs(g)
                            _unit_logits(g, lds, list(range(pf, npg)), qa, qs, w, lane_v, lane_s, shift_s,
                                         store_pair)
                    elif pf == 0 and (tok0 >= win_lo):
                        # an edge chunk that starts inside the window (a causal row's last chunk): its
                        # first 32-token tiles up to the window's end in one pipeline, as an inner
                        # chunk's (the out-of-window cells of the last one fall outside the store
                        # resource); no tile past the window's end is computed
                        tpp = g.tiles_per_page
                        ntc = (win_hi - tok0 + Int32(MFMA_N - 1)) >> Int32(MFMA_N.bit_length() - 1)
                        for n in range_constexpr(1, npg * tpp + 1):
                            if ntc == Int32(n):
                                n_pages = -(-n // tpp)
                                _unit_logits(g, lds, list(range(n_pages)), qa, qs, w, lane_v, lane_s, shift_s,
                                             store_pair, last_tiles=n - (n_pages - 1) * tpp)
                        inf_pages()
                    else:
                        for j in range_constexpr(npg):
                            if pf != 0 and j == pf:
                                if c + Int32(1) < chunk_count:
                                    regs = _load_chunk(g, kv8, kvs8, table, chunk_start + c + Int32(1),
                                                       stride_kv_page, stride_kvs_page, tid, wave)
                                else:
                                    regs = _zero_regs(g)
                            page0 = tok0 + Int32(j * g.page_size)
                            if (page0 < win_hi) & (page0 + Int32(g.page_size) > win_lo):
                                _unit_logits(g, lds, [j], qa, qs, w, lane_v, lane_s, shift_s, store_pair)
                        inf_pages()

    @flyc.jit
    def launch(out: fx.Pointer, q: fx.Pointer, q_scale: fx.Pointer, kv_cache: fx.Pointer,
               kv_scale: fx.Pointer, block_tables: fx.Pointer, weights: fx.Pointer,
               local_starts: fx.Pointer, local_ends: fx.Pointer, cta_info: fx.Pointer,
               stride_out: Int32, stride_q: Int32, stride_qs: Int32, stride_w: Int32,
               stride_kv_page: Int32, stride_kvs_page: Int32, stride_bt: Int32, bt_width: Int32,
               max_seq_len: Int32, weight_scale: fx.Float32, rows: Int32, bt_rows: Int32, num_pages: Int32,
               stream: fx.Stream = fx.Stream(None)):
        mqa_prefill(out, q, q_scale, kv_cache, kv_scale, block_tables, weights, local_starts, local_ends,
                    cta_info, stride_out, stride_q, stride_qs, stride_w, stride_kv_page, stride_kvs_page,
                    stride_bt, bt_width, max_seq_len, weight_scale, rows, bt_rows, num_pages).launch(
            grid=(1, 1, 1), block=(THREADS, 1, 1), stream=stream)

    return launch
