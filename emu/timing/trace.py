"""Recording what each wave executes, for the timing model to replay.

A Tracer is the launch's probe (machine.Launch.probe): the interpreter's own loop runs every traced
workgroup and calls `before` ahead of each instruction, which appends the instruction's index to the
wave's trace and, for memory instructions, what the timing of that access depends on (read from the
operands before the instruction runs, through the memory handlers' own address functions):
- vector memory: bytes moved, distinct cache lines, and how many of those lines this launch had not
  touched before (they come from HBM; a line touched again is served by the caches);
- LDS: the pipe cycles the access takes, bank conflicts included;
- scalar memory: whether its line is new.
Nothing here writes wave state, so traced and untraced runs compute the same results; workgroups
outside the sample run the plain loop.
"""
import numpy as np

from .. import isa
from ..semantics import lds_ops, smem_ops, vmem_ops
from . import static

T = isa.load(isa.ARCH).timing

U64 = np.uint64
_LINE_SHIFT = U64(T.CACHE_LINE_BYTES.bit_length() - 1)


class Tracer:
    """Per launch: which workgroups to trace, their traces, and the set of lines already touched."""

    def __init__(self, prep, traced=None):
        self.prep = prep
        self.ops = static.ops_of(prep)
        self.traced = traced            # set of workgroup ids to trace; None = all
        self.lines: set = set()
        self.read_allocs: dict = {}     # base address -> bytes of each allocation vector loads read
        self.workgroups: dict = {}      # wg id -> [trace per wave]
        self.probes = [self._probe_for(i, o) for i, o in zip(prep.instrs, self.ops)]
        self._traces: list = []         # the running workgroup's traces

    # ----- the probe protocol of machine.Launch -----
    watches = False                     # the address functions suffice: memory handlers stay fast

    def workgroup(self, wg_id, waves):
        if self.traced is not None and tuple(wg_id) not in self.traced:
            return False
        self._traces = self.workgroups[tuple(wg_id)] = [[] for _ in waves]
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
            m = w.exec
            n = int(m.sum())
            if n == 0:
                return (0, 0, 0)
            try:
                a = addr_of(w)[m]
            except Exception:           # an address the model cannot form: count bytes only
                return (n * nb, -(-n * nb // T.CACHE_LINE_BYTES), 0)
            lines = np.unique(np.concatenate([a >> _LINE_SHIFT, (a + U64(nb - 1)) >> _LINE_SHIFT]))
            if not op.store:
                self._note_alloc(w.mem, int(a[0]))
            return (n * nb, int(lines.size), self._new_lines(lines.tolist()))
        return probe

    def _note_alloc(self, mem, addr):
        dv = mem.dword_view(addr, addr + 1)
        if dv is not None and dv[1] not in self.read_allocs:
            self.read_allocs[dv[1]] = dv[0].nbytes

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
            return self._new_lines([addr >> int(_LINE_SHIFT)])
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
