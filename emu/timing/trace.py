"""Recording what each wave executes, for the timing model to replay.

A Tracer is the launch's probe (machine.Launch.probe): the interpreter's own loop runs every traced
workgroup and calls `before` ahead of each instruction, which appends the instruction's index to the
wave's trace and, for memory instructions, what the timing of that access depends on (read from the
operands before the instruction runs, through the memory handlers' own address functions):
- vector memory: bytes moved, distinct cache lines, how many of those lines the workgroup read
  within its last L1-sized window of distinct lines (L1 hits), how many it had never read (served
  by L2, the Infinity Cache or HBM, in the shares the model derives from how the launch's
  workgroups share that allocation) and which allocation it reads; addresses are taken relative
  to their allocation's line alignment (device allocations are line-aligned; host ones need not be);
- LDS: the pipe cycles the access takes, bank conflicts included;
- scalar memory: whether its line is new (also relative to its allocation's line alignment, so
  that where the host happened to place the kernarg array does not change the time).
Nothing here writes wave state, so traced and untraced runs compute the same results; workgroups
outside the sample run the plain loop.
"""
from collections import OrderedDict

import numpy as np

from .. import isa
from ..semantics import lds_ops, smem_ops, vmem_ops
from . import static

T = isa.load(isa.ARCH).timing

U64 = np.uint64
_LINE_SHIFT = U64(T.CACHE_LINE_BYTES.bit_length() - 1)
_L1_LINES = T.L1_BYTES_PER_CU // T.CACHE_LINE_BYTES


class _WGLines:
    """The lines one traced workgroup has read: all of them, how many per allocation, and its L1
    window (LRU)."""
    __slots__ = ("seen", "first", "l1")

    def __init__(self):
        self.seen: set = set()
        self.first: dict = {}           # allocation index -> lines first read
        self.l1: OrderedDict = OrderedDict()

    def read(self, lines, alloc: int) -> tuple:
        """(L1 hits, first reads) among `lines` of allocation `alloc`, updating the window."""
        seen, l1 = self.seen, self.l1
        hits = new = 0
        for ln in lines:
            if ln in l1:
                hits += 1
                l1.move_to_end(ln)
                continue
            if ln not in seen:
                seen.add(ln)
                new += 1
            l1[ln] = None
            if len(l1) > _L1_LINES:
                l1.popitem(last=False)
        if new:
            self.first[alloc] = self.first.get(alloc, 0) + new
        return hits, new


class Tracer:
    """Per launch: which workgroups to trace, their traces, and the set of lines already touched."""

    def __init__(self, prep, traced=None):
        self.prep = prep
        self.ops = static.ops_of(prep)
        self.traced = traced            # set of workgroup ids to trace; None = all
        self.lines: set = set()
        self.read_allocs: dict = {}     # base address -> bytes of each allocation vector loads read
        self.alloc_index: dict = {}     # base address -> index of that allocation (order of first read)
        self.alloc_lines: dict = {}     # allocation index -> distinct lines the traced workgroups read
        self.workgroups: dict = {}      # wg id -> [trace per wave]
        self.wg_lines: dict = {}        # wg id -> _WGLines
        self._cur = None                # _WGLines of the workgroup whose wave runs now
        self.probes = [self._probe_for(i, o) for i, o in zip(prep.instrs, self.ops)]
        self._traces: list = []         # the running workgroup's traces

    # ----- the probe protocol of machine.Launch -----
    watches = False                     # the address functions suffice: memory handlers stay fast

    def workgroup(self, wg_id, waves):
        if self.traced is not None and tuple(wg_id) not in self.traced:
            return False
        self._traces = self.workgroups[tuple(wg_id)] = [[] for _ in waves]
        # the interpreter runs one workgroup's waves before the next workgroup's
        self._cur = self.wg_lines[tuple(wg_id)] = _WGLines()
        return True

    def before(self, w, k, ins):
        p = self.probes[k]
        self._traces[w.wave_id].append(k if p is None else (k, p(w, ins)))

    def after(self, w, k, ins):
        pass

    def released(self, waves):
        pass

    def finish(self):
        pass

    # ----- probes -----
    def _probe_for(self, ins, op):
        if op.unit == static.VMEM:
            return self._vmem_probe(ins, op)
        if op.unit == static.LDS:
            return self._lds_probe(ins, op)
        if op.unit == static.SMEM:
            return self._smem_probe(ins)
        return None

    def _new_lines(self, lines) -> int:
        seen = self.lines
        new = 0
        for ln in lines:
            if ln not in seen:
                seen.add(ln)
                new += 1
        return new

    def _vmem_probe(self, ins, op):
        nb = op.nbytes
        if ins.enc in ("MUBUF", "MTBUF"):
            def addr_of(w):
                _, vaddr, srsrc, soff = vmem_ops.buffer_operands(ins, op.store)
                base, a, inside = vmem_ops.buffer_addr(w, ins, vaddr, srsrc, soff, (0,), 1)
                # out-of-range lanes move no data; park them on one line so they cost at most one
                return np.where(inside[:, 0], a[:, 0], U64(base))
        else:
            def addr_of(w):
                vaddr, _, saddr = vmem_ops.global_operands(ins, op.store)
                return vmem_ops.global_addr(w, ins, vaddr, saddr)

        def probe(w, ins):
            # (bytes, distinct lines, L1 hits, lines the workgroup reads for the first time, index of
            # the allocation read, -1 for stores)
            m = w.exec
            n = int(m.sum())
            if n == 0:
                return (0, 0, 0, 0, -1)
            try:
                a = addr_of(w)[m]
            except Exception:           # an address the model cannot form: count bytes only
                return (n * nb, -(-n * nb // T.CACHE_LINE_BYTES), 0, 0, -1)
            skew, alloc = self._alloc_of(w.mem, int(a[0]), not op.store)
            a = a - U64(skew)
            lines = np.unique(np.concatenate([a >> _LINE_SHIFT, (a + U64(nb - 1)) >> _LINE_SHIFT]))
            if op.store or alloc < 0:
                return (n * nb, int(lines.size), 0, 0, -1)
            ls = lines.tolist()
            self._new_lines(ls)
            self.alloc_lines.setdefault(alloc, set()).update(ls)
            hits, new = self._cur.read(ls, alloc)
            return (n * nb, len(ls), hits, new, alloc)
        return probe

    def _alloc_of(self, mem, addr, read) -> tuple:
        """(how far the allocation holding addr starts past a line boundary, its index; -1 when
        unknown or not read)."""
        dv = mem.dword_view(addr, addr + 1)
        if dv is None:
            return 0, -1
        base = dv[1]
        if not read:
            return base % T.CACHE_LINE_BYTES, -1
        k = self.alloc_index.get(base)
        if k is None:
            k = self.alloc_index[base] = len(self.alloc_index)
            self.read_allocs[base] = dv[0].nbytes
        return base % T.CACHE_LINE_BYTES, k

    def _lds_probe(self, ins, op):
        name = ins.op
        if name in ("ds_bpermute_b32", "ds_permute_b32", "ds_swizzle_b32", "ds_nop") or not ins.src:
            return lambda w, ins: T.LDS_MIN_CYCLES
        if name.startswith(("ds_read2", "ds_write2")):
            nb, unit = lds_ops.pair_scale(name)
            offs = (lds_ops.imm_offset(ins, "offset0") * unit, lds_ops.imm_offset(ins, "offset1") * unit)
        else:
            nb = op.nbytes
            offs = (lds_ops.imm_offset(ins),)

        def probe(w, ins):
            m = w.exec
            if not m.any():
                return 1
            base = lds_ops.vaddr(w, ins)[m]
            return sum(lds_cycles(base + o, nb) for o in offs)
        return probe

    def _smem_probe(self, ins):
        def probe(w, ins):
            try:
                addr = smem_ops.scalar_addr(w, ins)
            except Exception:
                return 0
            skew, _ = self._alloc_of(w.mem, addr, False)
            return self._new_lines([(addr - skew) >> int(_LINE_SHIFT)])
        return probe


def lds_cycles(addr: np.ndarray, nbytes: int) -> int:
    """LDS pipe cycles of one access: lanes are served in groups that fit the bank width per clock;
    a group takes as many cycles as its most loaded bank has distinct dwords (same dword: broadcast)."""
    dw = max(1, nbytes // 4)
    per_clk = max(1, T.LDS_BANKS // dw)
    words = (addr[:, None] // 4 + np.arange(dw)[None, :]) & 0x3FFFFFFF
    total = 0
    for g in range(0, words.shape[0], per_clk):
        grp = np.unique(words[g:g + per_clk].reshape(-1))
        total += int(np.bincount(grp % T.LDS_BANKS, minlength=1).max())
    return max(total, 1)
