"""FlyDSL source of the prefill metadata kernels (one launch per table; reference.py states the rules).

groups (one workgroup of GROUP_THREADS lanes, every scalar a runtime argument):
  1. Row pass, blocks of GROUP_THREADS rows: a row starts a group at a batch change or every WAVES rows
     of a run; the run start is an inclusive max-scan of batch-change positions (DPP inside a wave,
     one LDS word per wave across waves, a scalar carried across blocks). A
     group's first row reads the (at most WAVES) rows of its group and keeps its chunk count in LDS
     (at least 1: a group of empty windows gets one slice); every other row keeps 0.
  2. Chunks per slot: a search of fixed length, FIT_POINTS candidates per step (the reference's binary
     search finds the same smallest fit); a step sums ceil(count / s) over the LDS array per candidate
     (exact across lanes and waves, two banks so one barrier per step suffices); each ceil(count / s) is
     a multiplication by an f64 reciprocal of s made once per step (exact here, no integer division).
  3. The LDS array becomes the inclusive prefix sum of slices per row (same scans, carried across blocks).
  4. Slot pass, blocks of GROUP_THREADS slots: slot s < S (the total) holds slice k = S - 1 - s (the
     reference's reverse order), finds the first row whose prefix exceeds k (a lower-bound search in
     LDS), re-reads that group's rows and writes its 8 ints (the group's u slices nearly equal, one
     integer division per lane); slots past the total get zeros. The output resource of each block covers exactly its slots.
windows / convert: one lane per row / slot, 64-bit arithmetic where the reference's int64 matters.
Every global access goes through a buffer resource bounded by its tensor, so index values read from
the inputs can move no access outside them; LDS indices are clamped to the rows held.
"""
import flydsl.compiler as flyc
import flydsl.expr as fx
from flydsl.expr import gpu, range_constexpr
from flydsl.expr.typing import Float32, Float64, Int32, Int64, T

from ..mqa_common import blocks as B
from .geometry import (CHUNK_TOKENS, CTA_INFO_INTS, ELEM_THREADS, FIT_POINTS, GROUP_THREADS, MAX_ROWS, ROW_INFO_INTS,
                       WAVE_SIZE, WAVES, group_lds_bytes)
from .specs import FAMILY

_BIG = (1 << 31) - 1
_CHUNK_SHIFT = CHUNK_TOKENS.bit_length() - 1
GROUP_SHIFT = GROUP_THREADS.bit_length() - 1
assert 1 << _CHUNK_SHIFT == CHUNK_TOKENS and 1 << GROUP_SHIFT == GROUP_THREADS and WAVES & (WAVES - 1) == 0


def _bytes(ptr):
    """`ptr` as a global byte pointer (so offsets added to it count bytes)."""
    return fx.recast_iter(fx.PointerType.get(T.i8, fx.AddressSpace.Global, 4), ptr)


def _rsrc(ptr, n_dwords):
    """Buffer resource over the first n_dwords int32 of `ptr`."""
    return B.buffer_rsrc(_bytes(ptr), None, Int64(n_dwords) * Int64(4))


def _load(rsrc, index):
    """int32 element `index` (>= 0) of a resource; 0 past its end."""
    return Int32(B.buffer_load(rsrc, index * Int32(4), 1))


def _udiv(a, b):
    """a // b for a >= 0, b >= 1."""
    return Int32(fx.Uint32(a) // fx.Uint32(b))


def _recip(s):
    """1 / s in f64 to a relative error near 2^-46 (s >= 1): the f32 quotient, then one Newton step in f64."""
    r0 = Float64(Float32(1.0) / Float32(s))
    return r0 * (Float64(2.0) - Float64(s) * r0)


def _ceil_div(c, s, recip):
    """ceil(c / s) for 0 <= c, s <= 2^25 and s >= 1, given recip ~ 1/s in f64: (c + s - 1) = k s + j with
    0 <= j < s, and (k s + j + 1/4) / s lies in [k + 1/(4 s), k + 1 - 3/(4 s)], so its floor is k when the
    product's relative error stays far below 1/(4 (c + s)) (about 2^-46 here; 2^-28 would do). A few f64
    operations instead of an integer division."""
    q = (Float64(c + s - Int32(1)) + Float64(0.25)) * recip
    return Int32(q)


def _words(lds, offset, n: int):
    """n int32 words of LDS at a 16-byte aligned offset (one ds_read_b128 per 4)."""
    out = []
    for i in range_constexpr(n // 4):
        v = fx.Vector(B.lds_load(lds, Int32(offset) + Int32(16 * i), 4))
        out += [Int32(v[j]) for j in range_constexpr(4)]
    return out


# ---------------------------------------------------------------------------------------------- groups

def _group_at(f, n, srcs, max_seq_len, page_size):
    """(n_rows, batch, chunk_lo, n_chunks, last_page) of the group whose first row is f (0 <= f < n): its
    rows are f and the next rows of the same batch, at most WAVES in all."""
    rb_rs, ls_rs, le_rs = srcs
    batch = _load(rb_rs, f)
    lo, hi, n_rows, same = Int32(_BIG), Int32(0), Int32(0), f < n
    for j in range_constexpr(WAVES):
        r = f + Int32(j)
        if j > 0:
            same = same & (r < n) & (_load(rb_rs, r) == batch)
        ls = fx.max(_load(ls_rs, r), Int32(0))
        le = fx.min(_load(le_rs, r), max_seq_len)
        live = same & (le > ls)
        lo = live.select(fx.min(lo, ls), lo)
        hi = live.select(fx.max(hi, le), hi)
        n_rows = n_rows + same.select(Int32(1), Int32(0))
    work = hi > Int32(0)
    chunk_lo = work.select(lo >> Int32(_CHUNK_SHIFT), Int32(0))
    n_chunks = work.select(((hi + Int32(CHUNK_TOKENS - 1)) >> Int32(_CHUNK_SHIFT)) - chunk_lo, Int32(0))
    last_page = work.select(_udiv(hi - Int32(1), page_size), Int32(0))
    return n_rows, batch, chunk_lo, n_chunks, last_page


def _store_slots(cta_info, base, slots, tid, fields):
    """Lane tid's 8 ints at slot base + tid, through a resource over the block's slots only."""
    here = fx.min(slots - Int32(base), Int32(GROUP_THREADS))
    out_rs = B.buffer_rsrc(_bytes(cta_info), Int64(base) * Int64(CTA_INFO_INTS * 4),
                           Int64(here) * Int64(CTA_INFO_INTS * 4))
    for h in range_constexpr(CTA_INFO_INTS // 4):
        vec = fx.Vector.from_elements(fields[4 * h:4 * h + 4], Int32)
        B.buffer_store(vec, out_rs, tid * Int32(CTA_INFO_INTS * 4) + Int32(16 * h))


def _groups_kernel(name: str):
    NW = GROUP_THREADS // WAVE_SIZE
    assert NW == 16 and (2 * FIT_POINTS * NW) % WAVE_SIZE == 0     # the sums' rows of NW lanes
    SCAN = MAX_ROWS * 4                  # byte offsets of the cross-wave scratch in LDS
    SUMS = SCAN + NW * 4
    SUM_BANK = 8 * FIT_POINTS * NW       # per bank: two int32 halves per point per wave
    SPARE = SUMS + 2 * SUM_BANK          # per wave, where lanes past the rows store (no branch around them)

    @flyc.kernel(name=name)
    def prefill_groups(cta_info: fx.Pointer, row_to_batch: fx.Pointer, local_starts: fx.Pointer,
                       local_ends: fx.Pointer, rows: Int32, slots: Int32, page_size: Int32, max_seq_len: Int32,
                       s_max: Int32, fit_rounds: Int32, row_rounds: Int32):
        tid = Int32(gpu.thread_idx.x)
        lane = tid & Int32(WAVE_SIZE - 1)
        wave = Int32(B.readfirstlane(B.ir_of(tid >> Int32(6))))
        n = fx.min(fx.max(rows, Int32(0)), Int32(MAX_ROWS))
        srcs = (_rsrc(row_to_batch, n), _rsrc(local_starts, n), _rsrc(local_ends, n))
        lds = B.lds_alloc(group_lds_bytes())
        spare = Int32(SPARE) + wave * Int32(4)

        def across_waves(value):
            """Every wave's last-lane `value`, through one LDS word per wave."""
            last = B.readlane(B.ir_of(value), B.ir_of(Int32(WAVE_SIZE - 1)))
            B.lds_store(lds, Int32(SCAN) + wave * Int32(4), last, 1)
            gpu.barrier()
            words = _words(lds, SCAN, NW)
            gpu.barrier()                # the words are read before the next block writes them
            return words

        # 1. group starts and their chunk counts
        carry = Int32(0)                 # start of the run holding the last row of the previous blocks
        for base in range(Int32(0), n, Int32(GROUP_THREADS)):
            r = Int32(base) + tid
            row_in = r < n
            b_r = _load(srcs[0], r)
            b_p = _load(srcs[0], fx.max(r - Int32(1), Int32(0)))
            change = (r == Int32(0)) | (b_r != b_p)
            mark = (change & row_in).select(r, Int32(-1))
            mark = fx.coop.warp_inclusive_scan(mark, fx.ReductionOp.MAX)
            words = across_waves(mark)
            before, every = carry, carry
            for w in range_constexpr(NW):
                before = (Int32(w) < wave).select(fx.max(before, words[w]), before)
                every = fx.max(every, words[w])
            run_start = fx.max(mark, before)
            starts = change | (((r - run_start) & Int32(WAVES - 1)) == Int32(0))
            count = fx.max(_group_at(r, n, srcs, max_seq_len, page_size)[3], Int32(1))   # an empty group: one slice
            B.lds_store(lds, row_in.select(r * Int32(4), spare), starts.select(count, Int32(0)), 1)
            carry = every
        gpu.barrier()

        # 2. chunks per slot: the smallest s in [1, s_max] whose slice count fits the slots (s_max when
        # none does). The answer stays in [lo_s, hi_s]; each step tests FIT_POINTS points that cut the
        # range into FIT_POINTS + 1 parts (the slice count does not grow with s) and keeps the part
        # holding the first point that fits.
        lo_s, hi_s = Int32(1), s_max
        for it in range(Int32(0), fit_rounds, Int32(1)):
            span = hi_s - lo_s
            pts = [lo_s + _udiv(span * Int32(j + 1), Int32(FIT_POINTS + 1)) for j in range_constexpr(FIT_POINTS)]
            parts = [Int32(0)] * FIT_POINTS
            recips = [_recip(pts[j]) for j in range_constexpr(FIT_POINTS)]
            for base in range(Int32(0), n, Int32(GROUP_THREADS)):
                r = Int32(base) + tid
                c = Int32(B.lds_load(lds, fx.min(r, n - Int32(1)) * Int32(4), 1))
                c = (r < n).select(c, Int32(0))
                parts = [parts[j] + _ceil_div(c, pts[j], recips[j]) for j in range_constexpr(FIT_POINTS)]
            # a part is < 2^27 (at most MAX_ROWS / GROUP_THREADS terms below 2^22): its 16-bit halves
            # sum exactly in int32 over the wave and the waves, the total is rebuilt in int64
            bank = Int32(SUMS) + (Int32(it) & Int32(1)) * Int32(SUM_BANK)     # two banks: one barrier a step
            for j in range_constexpr(FIT_POINTS):
                for half, value in ((0, parts[j] & Int32(0xFFFF)), (1, parts[j] >> Int32(16))):
                    B.lds_store(lds, bank + Int32(4 * (2 * j + half) * NW) + wave * Int32(4),
                                fx.coop.warp_sum(value), 1)
            gpu.barrier()
            # lane l holds wave l % NW's word of one (point, half); a scan over each NW-lane row sums
            # the waves, and its last lane is read out
            halves = []
            for q in range_constexpr(2 * FIT_POINTS * NW // WAVE_SIZE):
                word = Int32(B.lds_load(lds, bank + (Int32(q * WAVE_SIZE) + lane) * Int32(4), 1))
                rows_sum = fx.coop.warp_inclusive_scan(word, fx.ReductionOp.ADD, width=NW)
                halves += [Int32(B.readlane(B.ir_of(rows_sum), B.ir_of(Int32(NW * g + NW - 1))))
                           for g in range_constexpr(WAVE_SIZE // NW)]
            below = [lo_s] + [pts[j] + Int32(1) for j in range_constexpr(FIT_POINTS)]   # part j is [below[j], pts[j]]
            new_lo, new_hi = below[FIT_POINTS], hi_s
            for j in range_constexpr(FIT_POINTS - 1, -1, -1):
                fits = (Int64(halves[2 * j + 1]) << Int64(16)) + Int64(halves[2 * j]) <= Int64(slots)
                new_lo = fits.select(below[j], new_lo)
                new_hi = fits.select(pts[j], new_hi)
            open_ = lo_s < hi_s
            lo_s = open_.select(new_lo, lo_s)
            hi_s = open_.select(new_hi, hi_s)
        per_slot = hi_s

        # 3. inclusive prefix sum of slices per row, in place
        done = Int32(0)
        per_slot_recip = _recip(per_slot)
        for base in range(Int32(0), n, Int32(GROUP_THREADS)):
            r = Int32(base) + tid
            row_in = r < n
            c = Int32(B.lds_load(lds, fx.min(r, n - Int32(1)) * Int32(4), 1))
            units = row_in.select(_ceil_div(c, per_slot, per_slot_recip), Int32(0))
            incl = fx.coop.warp_inclusive_scan(units, fx.ReductionOp.ADD)
            words = across_waves(incl)
            before, every = done, done
            for w in range_constexpr(NW):
                before = before + (Int32(w) < wave).select(words[w], Int32(0))
                every = every + words[w]
            B.lds_store(lds, row_in.select(r * Int32(4), spare), before + incl, 1)
            done = every
        gpu.barrier()

        # 4. one slot per lane: blocks holding a slice, then the idle rest (zeros only)
        top = fx.max(n - Int32(1), Int32(0))
        busy = fx.max(fx.min(slots, ((done + Int32(GROUP_THREADS - 1)) >> Int32(GROUP_SHIFT)) << Int32(GROUP_SHIFT)),
                      Int32(0))
        for base in range(Int32(0), busy, Int32(GROUP_THREADS)):
            slot = Int32(base) + tid
            k = done - Int32(1) - slot                  # the slice of this slot: the last one first
            lo_r, hi_r = Int32(0), n
            for it in range(Int32(0), row_rounds, Int32(1)):
                mid = (lo_r + hi_r) >> Int32(1)
                x = Int32(B.lds_load(lds, fx.min(mid, top) * Int32(4), 1))
                open_ = lo_r < hi_r
                hi_r = (open_ & (x > k)).select(mid, hi_r)
                lo_r = (open_ & (x <= k)).select(mid + Int32(1), lo_r)
            f = fx.min(lo_r, top)
            n_rows, batch, chunk_lo, n_chunks, last_page = _group_at(f, n, srcs, max_seq_len, page_size)
            prev = (f > Int32(0)).select(Int32(B.lds_load(lds, fx.max(f - Int32(1), Int32(0)) * Int32(4), 1)),
                                         Int32(0))
            part = k - prev
            # nearly equal slices: c // u chunks each, one more from slice `big` on (u >= 1 kept for idle lanes)
            u = fx.max(Int32(B.lds_load(lds, f * Int32(4), 1)) - prev, Int32(1))
            q = _udiv(n_chunks, u)
            big = u - (n_chunks - q * u)
            valid = slot < done
            zero = Int32(0)
            fields = [f, n_rows, batch, chunk_lo + part * q + fx.max(part - big, zero),
                      q + (part >= big).select(Int32(1), zero), last_page, Int32(1), zero]
            _store_slots(cta_info, base, slots, tid, [valid.select(v, zero) for v in fields])
        for base in range(busy, slots, Int32(GROUP_THREADS)):
            _store_slots(cta_info, base, slots, tid, [Int32(0)] * CTA_INFO_INTS)

    return prefill_groups


# --------------------------------------------------------------------------------------------- windows

def _windows_kernel(name: str):
    @flyc.kernel(name=name)
    def prefill_windows(row_to_batch: fx.Pointer, local_starts: fx.Pointer, local_ends: fx.Pointer,
                        cu_seq_q: fx.Pointer, context_lens: fx.Pointer, rows: Int32, batches: Int32,
                        search_rounds: Int32):
        r = Int32(gpu.block_idx.x) * Int32(ELEM_THREADS) + Int32(gpu.thread_idx.x)
        nb = fx.max(batches, Int32(0))
        cu_rs = _rsrc(cu_seq_q, nb + Int32(1))
        ctx_rs = _rsrc(context_lens, nb)
        # batch = number of cu[1..B] entries <= r (searchsorted right), clamped to B - 1
        lo, hi = Int32(0), nb
        for it in range(Int32(0), search_rounds, Int32(1)):
            mid = (lo + hi) >> Int32(1)
            x = _load(cu_rs, mid + Int32(1))
            open_ = lo < hi
            hi = (open_ & (x > r)).select(mid, hi)
            lo = (open_ & (x <= r)).select(mid + Int32(1), lo)
        b = fx.max(fx.min(lo, nb - Int32(1)), Int32(0))
        start = Int64(_load(cu_rs, b))
        qlen = Int64(_load(cu_rs, b + Int32(1))) - start
        end = Int64(_load(ctx_rs, b)) - qlen + (Int64(r) - start) + Int64(1)
        end = fx.max(end, Int64(0))
        inside = (r < _load(cu_rs, nb)) & (nb > Int32(0))
        end = inside.select(Int32(end), Int32(0))
        b = (nb > Int32(0)).select(b, Int32(-1))          # no batch: the reference's searchsorted - 1
        off = r * Int32(4)
        for ptr, v in ((row_to_batch, b), (local_starts, Int32(0)), (local_ends, end)):
            B.buffer_store(v, _rsrc(ptr, rows), off)

    return prefill_windows


# --------------------------------------------------------------------------------------------- convert

def _convert_kernel(name: str):
    @flyc.kernel(name=name)
    def prefill_convert(cta_info: fx.Pointer, table: fx.Pointer, n_ctas: Int32, block_k: Int32, rows: Int32,
                        page_size: Int32, max_seq_len: Int32):
        # the workgroup's slots [first, first + here): resources rebased per workgroup (wave-uniform)
        first_k = Int32(gpu.block_idx.x) * Int32(ELEM_THREADS)
        tid = Int32(gpu.thread_idx.x)
        here = fx.max(fx.min(n_ctas - first_k, Int32(ELEM_THREADS)), Int32(0))
        src = B.buffer_rsrc(_bytes(table), Int64(first_k) * Int64(ROW_INFO_INTS * 4),
                            Int64(here) * Int64(ROW_INFO_INTS * 4))
        row, batch, start, count, ls, le = [_load(src, tid * Int32(ROW_INFO_INTS) + Int32(i))
                                            for i in range_constexpr(ROW_INFO_INTS)]
        bk = Int64(block_k)
        lo = fx.max(Int64(start) * bk, Int64(fx.max(ls, Int32(0))))
        end = fx.min(le, max_seq_len)
        hi = fx.min((Int64(start) + Int64(count)) * bk, Int64(end))
        live = (hi > lo) & (row >= Int32(0)) & (row < rows)
        lo32, hi32 = Int32(lo), Int32(hi)          # live: 0 <= lo < hi <= max_seq_len
        first = live.select(lo32 >> Int32(_CHUNK_SHIFT), Int32(0))
        chunks = live.select(((hi32 + Int32(CHUNK_TOKENS - 1)) >> Int32(_CHUNK_SHIFT)) - first, Int32(0))
        last_page = live.select(_udiv(end - Int32(1), page_size), Int32(0))
        zero = Int32(0)
        fields = [live.select(row, zero), Int32(1), live.select(batch, zero), first, chunks, last_page, zero, zero]
        dst = B.buffer_rsrc(_bytes(cta_info), Int64(first_k) * Int64(CTA_INFO_INTS * 4),
                            Int64(here) * Int64(CTA_INFO_INTS * 4))
        for h in range_constexpr(CTA_INFO_INTS // 4):
            B.buffer_store(fx.Vector.from_elements(fields[4 * h:4 * h + 4], Int32), dst,
                           tid * Int32(CTA_INFO_INTS * 4) + Int32(16 * h))

    return prefill_convert


_KERNELS = {"groups": _groups_kernel, "windows": _windows_kernel, "convert": _convert_kernel}


def launcher(params: dict, target):
    layout = params["layout"]
    kern = _KERNELS[layout](FAMILY.symbol(params))
    threads = FAMILY.block(params, target)[0]
    if layout == "groups":
        @flyc.jit
        def launch(cta_info: fx.Pointer, row_to_batch: fx.Pointer, local_starts: fx.Pointer, local_ends: fx.Pointer,
                   rows: Int32, slots: Int32, page_size: Int32, max_seq_len: Int32, s_max: Int32, fit_rounds: Int32,
                   row_rounds: Int32, stream: fx.Stream = fx.Stream(None)):
            kern(cta_info, row_to_batch, local_starts, local_ends, rows, slots, page_size, max_seq_len, s_max,
                 fit_rounds, row_rounds).launch(grid=(1, 1, 1), block=(threads, 1, 1), stream=stream)
    elif layout == "windows":
        @flyc.jit
        def launch(row_to_batch: fx.Pointer, local_starts: fx.Pointer, local_ends: fx.Pointer, cu_seq_q: fx.Pointer,
                   context_lens: fx.Pointer, rows: Int32, batches: Int32, search_rounds: Int32,
                   stream: fx.Stream = fx.Stream(None)):
            kern(row_to_batch, local_starts, local_ends, cu_seq_q, context_lens, rows, batches,
                 search_rounds).launch(grid=(1, 1, 1), block=(threads, 1, 1), stream=stream)
    else:
        @flyc.jit
        def launch(cta_info: fx.Pointer, table: fx.Pointer, n_ctas: Int32, block_k: Int32, rows: Int32,
                   page_size: Int32, max_seq_len: Int32, stream: fx.Stream = fx.Stream(None)):
            kern(cta_info, table, n_ctas, block_k, rows, page_size, max_seq_len).launch(
                grid=(1, 1, 1), block=(threads, 1, 1), stream=stream)
    return launch
