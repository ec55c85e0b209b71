"""FlyDSL source of the runs-schedule kernel: one workgroup builds a whole varctx or rows table.

Phases (every lane holds item blk * THREADS + lane of each block; items past the count read as 0):
1. read each length once, keep it and its chunk count in the LDS cache, reduce the longest chunk count;
2. binary search for the run length: each round sums ceil(chunks / mid) over the items (from the
   cache) and reduces it across the workgroup (DPP moves within the wave, then LDS across waves);
   one more sum at the result decides between it and the fit-failure value;
3. per block, a workgroup scan of the run counts (DPP scan within the wave, wave totals through LDS)
   gives each item its first slot; the block's items are staged in LDS and lane k of the block's slot
   range finds its item by a binary search over the inclusive offsets and writes its row(s); finally
   the idle slots get the filler row.
Run counts are capped at cap = slots + 1 (a lane's sum saturates there, sat_add): only "fits or not"
and offsets below `slots` are needed, and with slots <= MAX_SLOTS no workgroup sum of capped values
overflows, whatever the lengths. Every global access is bounded by its buffer resource: inputs to
`items` entries, the table to its slots * rows-per-slot rows, `safe` to one int32.
"""
import flydsl.compiler as flyc
import flydsl.expr as fx
from flydsl.compiler.ast_rewriter import ASTRewriter
from flydsl.expr import arith, const_expr, gpu
from flydsl.expr.primitive import range_constexpr
from flydsl.expr.typing import Int32

from ..mqa_common import blocks as B
from .geometry import (CACHE_ITEMS, FILLER, LDS_BYTES, LDS_CACHE_CHUNKS, LDS_CACHE_RAW, LDS_CHUNKS, LDS_EXCL,
                       LDS_FIELDS, LDS_INCL, LDS_WAVES, THREADS, WAVE, WAVES, WIDTH)
from .specs import FAMILY

ADD, MAX = fx.ReductionOp.ADD, fx.ReductionOp.MAX
_LOG_THREADS = THREADS.bit_length() - 1
_LOG_WAVE = WAVE.bit_length() - 1


def _kernel(layout: str, name: str):
    varctx = layout == "varctx"
    width, filler = WIDTH[layout], FILLER[layout]

    def body(cta_info, safe_out, lengths, row_to_batch, local_starts, items, slots, next_n, block_k,
             max_seq_len, rounds):
        tid = Int32(gpu.thread_idx.x)
        lane = tid & Int32(WAVE - 1)
        wave = Int32(B.readfirstlane(tid >> Int32(_LOG_WAVE)))
        lds = B.lds_alloc(LDS_BYTES)
        cap = slots + Int32(1)
        n_blocks = (items + Int32(THREADS - 1)) >> Int32(_LOG_THREADS)
        in_bytes = items * Int32(4)
        len_rs = B.buffer_rsrc(lengths, None, in_bytes)
        rows_per_slot = next_n if const_expr(varctx) else Int32(1)
        out_rs = B.buffer_rsrc(cta_info, None, slots * rows_per_slot * Int32(4 * width))
        clipped = arith.max(max_seq_len, Int32(0))
        s_max = arith.max((clipped > Int32(0)).select((clipped - Int32(1)) // block_k + Int32(1), Int32(0)),
                          Int32(1))

        def sat_add(a, b):
            """min(a + b, cap) for 0 <= a <= cap, b >= 0, without overflow."""
            return (b > slots - a).select(cap, a + b)

        def ceil_div(x, d):
            """ceil(x / d) for x >= 0, d >= 1 (no x + d - 1 overflow)."""
            return (x > Int32(0)).select((x - Int32(1)) // d + Int32(1), Int32(0))

        def chunks_of(raw):
            x = arith.max(raw, Int32(0))
            return ceil_div(arith.min(x, max_seq_len) if const_expr(varctx) else x, block_k)

        def item(first, i):
            """(chunk count, raw length) of item i of the block starting at `first`: from the cache
            (a block-uniform branch: CACHE_ITEMS is a multiple of THREADS), or read again past it."""
            c = Int32(0)
            raw = Int32(0)
            if first < Int32(CACHE_ITEMS):
                c = Int32(B.lds_load(lds, Int32(LDS_CACHE_CHUNKS) + i * Int32(4), 1))
                raw = Int32(B.lds_load(lds, Int32(LDS_CACHE_RAW) + i * Int32(4), 1))
            else:
                raw = Int32(B.buffer_load(len_rs, i * Int32(4), 1))
                c = chunks_of(raw)
            return c, raw

        def workgroup_reduce(v, op, parity):
            """`op` (ADD or MAX) of v over the workgroup, in every lane: DPP within the wave, then one
            LDS slot per wave. Consecutive reductions alternate `parity` (two slot sets), so one barrier
            each suffices: a set is rewritten only after the barrier of the reduction in between."""
            v = fx.coop.warp_reduce(v, op)
            base = Int32(LDS_WAVES) + parity * Int32(4 * WAVES)
            B.lds_store(lds, base + wave * Int32(4), v, 1)       # every lane holds the wave's total
            gpu.barrier()
            total = Int32(B.lds_load(lds, base, 1))
            for w in range_constexpr(1, WAVES):
                t = Int32(B.lds_load(lds, base + Int32(4 * w), 1))
                total = total + t if op is ADD else arith.max(total, t)
            return total

        def runs_needed(s, parity):
            """sum over items of ceil(chunks / s), saturated at cap."""
            acc = Int32(0)
            for blk in range(0, n_blocks, 1):
                first_s = Int32(blk) * Int32(THREADS)
                c, _ = item(first_s, first_s + tid)
                acc = sat_add(acc, ceil_div(c, s))
            return arith.min(workgroup_reduce(acc, ADD, parity), cap)      # lane sums <= cap: no overflow

        def store_row(row, fields):
            for f in range_constexpr(width):
                B.buffer_store(Int32(fields[f]), out_rs, (row * Int32(width) + Int32(f)) * Int32(4))

        # 1. read every length once, cache it, and the longest chunk count
        longest = Int32(0)
        for blk1 in range(0, n_blocks, 1):
            i1 = Int32(blk1) * Int32(THREADS) + tid
            raw1 = Int32(B.buffer_load(len_rs, i1 * Int32(4), 1))
            c1 = chunks_of(raw1)
            if i1 < Int32(CACHE_ITEMS):
                B.lds_store(lds, Int32(LDS_CACHE_CHUNKS) + i1 * Int32(4), c1, 1)
                B.lds_store(lds, Int32(LDS_CACHE_RAW) + i1 * Int32(4), raw1, 1)
            longest = arith.max(longest, c1)
        longest = workgroup_reduce(longest, MAX, Int32(0))

        # 2. the smallest run length in [1, s_max] whose runs fit the slots
        lo = Int32(1)
        hi = s_max
        for rnd in range(0, rounds, 1):
            mid = lo + (hi - lo) // Int32(2)
            fits = runs_needed(mid, (Int32(rnd) + Int32(1)) & Int32(1)) <= slots
            hi = fits.select(mid, hi)
            lo = fits.select(lo, mid + Int32(1))
        safe = (runs_needed(hi, (rounds + Int32(1)) & Int32(1)) <= slots).select(hi, arith.max(longest, Int32(1)))
        if tid == Int32(0):
            B.buffer_store(safe, B.buffer_rsrc(safe_out, None, Int32(4)), Int32(0))

        # 3. runs to slots, block by block
        carry = Int32(0)
        for blk in range(0, n_blocks, 1):
            first = Int32(blk) * Int32(THREADS)
            i = first + tid
            c, raw = item(first, i)
            runs = arith.min(ceil_div(c, safe), cap)
            incl = fx.coop.warp_inclusive_scan(runs, ADD)   # <= WAVE * cap: no overflow
            excl = incl - runs
            if const_expr(varctx):
                fields = [arith.max(raw, Int32(0))]
            else:
                rs = B.buffer_rsrc(row_to_batch, None, in_bytes)
                ss = B.buffer_rsrc(local_starts, None, in_bytes)
                fields = [Int32(B.buffer_load(rs, i * Int32(4), 1)), Int32(B.buffer_load(ss, i * Int32(4), 1)), raw]
            gpu.barrier()                                   # the previous block's rows are written
            B.lds_store(lds, Int32(LDS_WAVES) + wave * Int32(4), B.readlane(incl, Int32(WAVE - 1)), 1)
            B.lds_store(lds, Int32(LDS_CHUNKS) + tid * Int32(4), c, 1)
            for f in range_constexpr(len(fields)):
                B.lds_store(lds, Int32(LDS_FIELDS + 4 * THREADS * f) + tid * Int32(4), fields[f], 1)
            gpu.barrier()
            before = Int32(0)
            total = Int32(0)
            for w in range_constexpr(WAVES):
                t = Int32(B.lds_load(lds, Int32(LDS_WAVES + 4 * w), 1))
                before = (wave > Int32(w)).select(before + t, before)
                total = total + t
            start_slot = arith.min(carry + before + excl, cap)
            B.lds_store(lds, Int32(LDS_EXCL) + tid * Int32(4), start_slot, 1)
            B.lds_store(lds, Int32(LDS_INCL) + tid * Int32(4), arith.min(start_slot + runs, cap), 1)
            end = arith.min(carry + total, slots)
            gpu.barrier()
            for it in range(0, (end - carry + Int32(THREADS - 1)) >> Int32(_LOG_THREADS), 1):
                k = carry + Int32(it) * Int32(THREADS) + tid
                if k < end:
                    pos = Int32(0)                          # first item of the block whose runs end past k
                    for b in range_constexpr(_LOG_THREADS - 1, -1, -1):
                        probe = Int32(B.lds_load(lds, Int32(LDS_INCL) + (pos + Int32((1 << b) - 1)) * Int32(4), 1))
                        pos = (probe <= k).select(pos + Int32(1 << b), pos)
                    chunk0 = (k - Int32(B.lds_load(lds, Int32(LDS_EXCL) + pos * Int32(4), 1))) * safe
                    count = arith.min(safe, Int32(B.lds_load(lds, Int32(LDS_CHUNKS) + pos * Int32(4), 1)) - chunk0)
                    got = [Int32(B.lds_load(lds, Int32(LDS_FIELDS + 4 * THREADS * f) + pos * Int32(4), 1))
                           for f in range_constexpr(len(fields))]
                    if const_expr(varctx):
                        for n in range(0, next_n, 1):
                            ni = Int32(n)
                            store_row(k * next_n + ni, [(first + pos) * next_n + ni, chunk0, count, got[0]])
                    else:
                        store_row(k, [first + pos, got[0], chunk0, count, got[1], got[2]])
            carry = end

        # idle slots
        for it2 in range(0, (slots - carry + Int32(THREADS - 1)) >> Int32(_LOG_THREADS), 1):
            k2 = carry + Int32(it2) * Int32(THREADS) + tid
            if k2 < slots:
                if const_expr(varctx):
                    for n2 in range(0, next_n, 1):
                        store_row(k2 * next_n + Int32(n2), [Int32(v) for v in filler])
                else:
                    store_row(k2, [Int32(v) for v in filler])

    body = ASTRewriter.transform(body)   # its loops and branches become scf ops, as in a kernel body

    if varctx:
        @flyc.kernel(name=name)
        def runs_varctx(cta_info: fx.Pointer, safe: fx.Pointer, context_lens: fx.Pointer, items: Int32,
                        slots: Int32, next_n: Int32, block_k: Int32, max_seq_len: Int32, rounds: Int32):
            body(cta_info, safe, context_lens, None, None, items, slots, next_n, block_k, max_seq_len, rounds)

        return runs_varctx

    @flyc.kernel(name=name)
    def runs_rows(cta_info: fx.Pointer, safe: fx.Pointer, local_ends: fx.Pointer, row_to_batch: fx.Pointer,
                  local_starts: fx.Pointer, items: Int32, slots: Int32, block_k: Int32, max_seq_len: Int32,
                  rounds: Int32):
        body(cta_info, safe, local_ends, row_to_batch, local_starts, items, slots, None, block_k, max_seq_len,
             rounds)

    return runs_rows


def launcher(params: dict, target):
    """The launcher of one spec of the family for a target row (build_tools compiles it)."""
    FAMILY.validate_params(params)
    FAMILY.block(params, target)        # refuses a target whose waves the scans do not fit
    layout = params["layout"]
    kern = _kernel(layout, FAMILY.symbol(params))

    if layout == "varctx":
        @flyc.jit
        def launch(cta_info: fx.Pointer, safe: fx.Pointer, context_lens: fx.Pointer, items: Int32, slots: Int32,
                   next_n: Int32, block_k: Int32, max_seq_len: Int32, rounds: Int32,
                   stream: fx.Stream = fx.Stream(None)):
            kern(cta_info, safe, context_lens, items, slots, next_n, block_k, max_seq_len, rounds).launch(
                grid=(1, 1, 1), block=(THREADS, 1, 1), stream=stream)

        return launch

    @flyc.jit
    def launch(cta_info: fx.Pointer, safe: fx.Pointer, local_ends: fx.Pointer, row_to_batch: fx.Pointer,
               local_starts: fx.Pointer, items: Int32, slots: Int32, block_k: Int32, max_seq_len: Int32,
               rounds: Int32, stream: fx.Stream = fx.Stream(None)):
        kern(cta_info, safe, local_ends, row_to_batch, local_starts, items, slots, block_k, max_seq_len,
             rounds).launch(grid=(1, 1, 1), block=(THREADS, 1, 1), stream=stream)

    return launch
