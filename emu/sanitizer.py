"""The emulator's sanitizer: checks, along the executed path, what the emulator's kind execution
model (waves in turn, loads complete at issue, no wait states) would otherwise hide.

It is a probe (machine.py's hook) and raises SanitizerError at the first defect, of one of four
kinds (docs/emulator.md#sanitizer lists every rule and its source):

- wait: a register written by an outstanding memory instruction (VMEM, SMEM, LDS) read or
  overwritten before an s_waitcnt covers it; LDS written by an LDS-DMA buffer load accessed before
  the issuing wave's vmcnt wait covers it.
- race: two accesses of one LDS byte by different waves of a workgroup, at least one a write, with
  no s_barrier between them (LDS atomics against each other excepted); LDS-DMA data read by another
  wave without a barrier after the issuing wave's wait; across workgroups of a launch, a global byte
  written by two workgroups, or written by one and read by another.
- hazard: fewer wait states between two instructions than the ISA requires and hardware does not
  interlock (MFMA results, VALU writes of SGPRs/EXEC, transcendental results, ...).
- uninit: LDS bytes this workgroup never wrote read, or a VGPR/SGPR read (in the lanes that read
  it) that neither the initial-state ABI nor an earlier instruction of the wave wrote.

It never writes wave or memory state, so results are identical with it on.
"""
import re

import numpy as np

from flyaot.formats import env

from .instr import Operand
from .wave import EmuError, LANES, N_SGPR, N_VGPR, SanitizerError



def enabled_by_env() -> bool:
    """FLYAOT_EMU_SANITIZE=1 turns the sanitizer on for every emulator launch."""
    return env.value("FLYAOT_EMU_SANITIZE")


# ----- per-instruction facts, computed once per program -----
VMEM, SMEM, LDS, MFMA, VALU, SALU, WAITCNT, BARRIER, NOP, OTHER = range(10)
_S = 1024                     # register keys: VGPR row r -> r, SGPR i -> _S + i
_TRANS = re.compile(r"v_(exp|log|rcp|rsq|sqrt|sin|cos)(_legacy)?_(f16|f32|f64)$|v_rcp_iflag_f32$")
_ACC_DST = re.compile(r"v_(fmac|mac|pk_fmac|dot2c|dot4c|dot8c)_")     # the destination is also a source
_NO_LDS = ("ds_bpermute_b32", "ds_permute_b32", "ds_swizzle_b32", "ds_nop")


# Dense MFMA FLOPs per clock per SIMD of gfx950 by operand format (MI355X peaks: 2.5 PFLOPs bf16,
# 5 fp8, 10 fp6/fp4 over 256 CUs x 4 SIMDs at 2.4 GHz); an MFMA pass is 4 clocks.
_MFMA_RATE = {"bf16": 1024, "f16": 1024, "fp8": 2048, "fp6": 4096, "fp4": 4096}
_F8F6F4 = {0: "fp8", 1: "fp8", 2: "fp6", 3: "fp6", 4: "fp4"}        # cbsz / blgp codes


def mfma_passes(ins) -> int:
    """Passes of a gfx950 XDL MFMA: its FLOPs over the format's rate, in 4-clock passes (what LLVM's
    scheduling model gives as its latency, which sizes the wait states its results need)."""
    m = re.search(r"_(\d+)x(\d+)x(\d+)_?(bf16|f16|f8f6f4)", ins.op)
    if m is None:
        return 16                       # unknown form: the longest, so nothing is let through
    mn, k, fmt = int(m.group(1)), int(m.group(3)), m.group(4)
    if fmt == "f8f6f4":
        fa, fb = (_F8F6F4.get(int(ins.mods.get(f, 0)), "fp8") for f in ("cbsz", "blgp"))
        rate = min(_MFMA_RATE[fa], _MFMA_RATE[fb])
    else:
        rate = _MFMA_RATE[fmt]
    return max(2, 2 * mn * mn * k // rate // 4)


def _xdl_read(passes: int) -> int:
    """Wait states between a gfx950 XDL MFMA writing a VGPR and a VALU, memory or MFMA SrcA/B read
    of it, or a VALU write of it (gfx940 N + 3; gfx950 one more unless 2 passes)."""
    return passes + 3 + (passes != 2)


class Info:
    """What the sanitizer needs of one instruction."""
    __slots__ = ("unit", "vreads", "sreads", "vwrites", "swrites", "keys_r",
                 "keys_w", "async_q", "lds_dma", "trans", "passes", "srcc", "srcab", "lane_sel",
                 "dpp", "all_lanes", "writelane", "readfirst", "permlane", "writes_exec", "store_ws", "hwreg", "text")


def _unit(ins) -> int:
    op, enc = ins.op, ins.enc
    if enc in ("MUBUF", "MTBUF", "GLOBAL", "FLAT", "SCRATCH"):
        return VMEM
    if enc == "SMEM":
        return SMEM
    if enc == "DS":
        return LDS
    if enc == "MAI" or op.startswith(("v_mfma", "v_smfmac")):
        return MFMA
    if op.startswith("s_waitcnt"):
        return WAITCNT
    if op == "s_barrier":
        return BARRIER
    if op == "s_nop":
        return NOP
    if enc.startswith("VOP"):
        return VALU
    if enc.startswith("SOP"):
        return SALU
    return OTHER


def _regs(ops, agpr_base):
    """(VGPR (row, count) ranges, SGPR (index, count) ranges) of register operands."""
    v, s = [], []
    for o in ops:
        if o.kind == "vgpr":
            v.append((o.index, o.count))
        elif o.kind == "agpr":
            v.append((agpr_base + o.index, o.count))
        elif o.kind == "sgpr" and o.index + o.count <= N_SGPR:
            s.append((o.index, o.count))
    return v, s


def _keys(v, s):
    return tuple(r for b, n in v for r in range(b, b + n)) + \
        tuple(_S + i for b, n in s for i in range(b, b + n))


_PK64 = re.compile(r"v_pk_(fma|mul|add)_f32$|v_pk_mov_b32$")


def _pk_read(ins, i, op):
    """The dwords of 64-bit packed source i that are read: op_sel picks the low lane's, op_sel_hi
    the high lane's (an op_sel_hi of 0 makes both halves read the first dword)."""
    if op.count != 2 or op.kind not in ("vgpr", "agpr", "sgpr"):
        return (op,)
    lo = (int(ins.mods.get("op_sel") or 0) >> i) & 1
    hi = (int(ins.mods.get("op_sel_hi", 0b111)) >> i) & 1
    return tuple(Operand(op.kind, op.index + d, 1) for d in sorted({lo, hi}))


def info_of(ins, agpr_base: int) -> Info:
    f = Info()
    f.unit = u = _unit(ins)
    f.text = f"0x{ins.addr:x} `{ins.text or ins.op}`"
    srcs, dsts = list(ins.src), list(ins.dst)
    if _ACC_DST.match(ins.op):
        srcs.append(dsts[0])
    if ins.op.startswith("v_permlane") and ins.op.endswith("_swap_b32"):
        dsts = dsts + srcs[:1]                  # both operands are swapped
    if _PK64.match(ins.op):
        srcs = [_pk_read(ins, i, o) for i, o in enumerate(srcs)]
        srcs = [o for pair in srcs for o in pair]
    f.vreads, f.sreads = _regs(srcs, agpr_base)
    f.vwrites, f.swrites = _regs(dsts, agpr_base)
    f.keys_r, f.keys_w = _keys(f.vreads, f.sreads), _keys(f.vwrites, f.swrites)
    f.lds_dma = u == VMEM and bool(ins.mods.get("lds"))
    # which counter an instruction's completion is counted on (None: it completes at issue)
    if u == VMEM:
        f.async_q = "vm"
    elif u == SMEM:
        f.async_q = "smem"
    elif u == LDS and ins.op != "ds_nop":
        f.async_q = "lds"
    else:
        f.async_q = None
    f.trans = u == VALU and bool(_TRANS.match(ins.op))
    f.passes = mfma_passes(ins) if u == MFMA else 0
    f.srcc = f.srcab = ()
    if u == MFMA:
        v = [(agpr_base + o.index if o.kind == "agpr" else o.index, o.count) for o in ins.src[:3]
             if o.kind in ("vgpr", "agpr")]
        kinds = [o.kind in ("vgpr", "agpr") for o in ins.src[:3]]
        regs = iter(v)
        ab, c = [], []
        for k, isreg in enumerate(kinds):
            if isreg:
                (c if k == 2 else ab).append(next(regs))
        f.srcab, f.srcc = tuple(ab), tuple(c)
    f.lane_sel = ins.op in ("v_readlane_b32", "v_writelane_b32")
    f.writelane = ins.op == "v_writelane_b32"
    f.readfirst = ins.op == "v_readfirstlane_b32"
    f.permlane = ins.op.startswith("v_permlane")
    f.dpp = bool(ins.mods.get("dpp"))
    f.all_lanes = u == MFMA
    f.writes_exec = ins.op.startswith("v_cmpx") or \
        any(o.kind == "special" and o.name.startswith("exec") for o in ins.dst)
    # s_setreg / s_getreg: the hardware register id (simm16 bits 5:0)
    f.hwreg = int(ins.mods.get("simm16", 0)) & 0x3F if ins.op.startswith(("s_setreg", "s_getreg")) else -1
    # a buffer store of more than 8 bytes holds its data VGPRs for 2 more wait states (1 when its
    # soffset is an SGPR); a VALU write of them sooner corrupts the stored data
    f.store_ws = 0
    if u == VMEM and ins.op.startswith("buffer_store") and ins.src and ins.src[0].count > 2:
        soff = ins.src[-1]
        f.store_ws = 1 if soff.kind == "sgpr" else 2
    return f


def infos(prep) -> list:
    got = prep.cache.get("sanitizer")
    if got is None:
        base = prep.program.facts.accum_offset
        got = prep.cache["sanitizer"] = [info_of(i, base) for i in prep.instrs]
    return got


# ----- outstanding memory operations -----
class _Op:
    __slots__ = ("q", "k", "keys", "retired", "wave", "epoch", "token", "gen")

    def __init__(self, q, k, keys, wave):
        self.q, self.k, self.keys, self.wave = q, k, keys, wave
        self.retired, self.epoch, self.token = False, -1, 0


class _WaveState:
    def __init__(self, nsgpr_init, nvgpr_init):
        self.vm: list = []          # outstanding VMEM ops, issue order
        self.lds: list = []         # outstanding LDS ops, issue order
        self.smem: list = []        # outstanding SMEM ops (may complete in any order)
        self.pend: dict = {}        # register key -> the _Op that will write it
        self.vinit = np.zeros((N_VGPR, LANES), dtype=bool)
        self.vinit[:nvgpr_init] = True
        self.vfull = [r < nvgpr_init for r in range(N_VGPR)]     # rows written in every lane
        self.sinit = [False] * N_SGPR
        for i in nsgpr_init:
            self.sinit[i] = True
        self.vorigin: dict = {}     # VGPR row -> k of the VALU that computed it from unwritten values
        self.t = 0                  # wait states issued so far (hazards)
        self.mfma_def: dict = {}    # VGPR row -> (t, passes, k, (base, count)) of the last MFMA writing it
        self.srcc_read: dict = {}   # VGPR row -> (t, passes, k) of the last MFMA reading it as SrcC
        self.valu_def: dict = {}    # VGPR row -> (t, k, trans) of the last VALU writing it
        self.valu_sdef: dict = {}   # SGPR -> (t, k) of the last VALU writing it
        self.valu_exec = None       # (t, k) of the last VALU writing EXEC
        self.store_data: dict = {}  # VGPR row -> (t, k, wait states) of a wide store reading it
        self.setreg: dict = {}      # hardware register id -> (t, k) of the last s_setreg of it


class Sanitizer:
    """One launch's checks (the probe of machine.Launch)."""

    watches = True

    def __init__(self, launch):
        self.launch = launch
        self.prep = launch.prep
        self.name = launch.prep.program.name
        self.info = infos(launch.prep)
        self.instrs = launch.prep.instrs
        # the kernarg segment and dispatch packet: every workgroup reads them (reads not tracked)
        self.fixed = {launch.mem.containing(a, a + 1) for a in (launch.kernarg_addr, launch.dispatch_addr)}
        self.mem_state: dict = {}   # allocation index -> per-byte global access records
        self.wg = None
        self.epoch = self.gen = 0
        self.l_wwave = None
        self.dma_ops: dict = {}
        self.l_unread: list = []
        self.poison = None          # dwords x lanes of the running VALU's result that are unwritten
        self.cur = None
        launch.mem.watch = self

    # ----- messages -----
    def _where(self, k) -> str:
        return self.info[k].text

    def _fail(self, kind, msg):
        raise SanitizerError(kind, f"{self.name}: {msg} (workgroup {self.wg})")

    # ----- probe: workgroups -----
    def workgroup(self, wg_id, waves):
        self.end_workgroup()
        self.l_unread: list = []    # (bytes, wave, k) of LDS reads of bytes not yet written
        self.wg = tuple(int(g) for g in wg_id)
        sg = self.launch.initial_sgprs(wg_id).keys()
        nv = self.launch.initial_vgprs()
        self.ws = {w.wave_id: _WaveState(sg, nv) for w in waves}
        for w in waves:
            w.watch = self
        # Per-LDS-byte records live for the whole launch: epochs (barrier releases) and generations
        # (workgroups) only grow, so a record of an earlier workgroup never matches the current one.
        self.epoch += 1
        self.gen += 1
        if self.l_wwave is None:
            n = self.launch.lds_size
            self.l_wwave = np.full(n, -1, dtype=np.int16)
            self.l_wepoch = np.full(n, -1, dtype=np.int32)
            self.l_wk = np.zeros(n, dtype=np.int32)
            self.l_watomic = np.zeros(n, dtype=bool)
            self.l_repoch = np.full(n, -1, dtype=np.int32)
            self.l_rmask = np.zeros(n, dtype=np.uint64)
            self.l_rk = np.zeros(n, dtype=np.int32)
            self.l_wgen = np.zeros(n, dtype=np.int32)      # workgroup generation that wrote the byte
            self.l_dma = np.zeros(n, dtype=np.int32)       # token of the LDS-DMA op that last wrote it

    def released(self, waves):
        self._flush_uninit()
        self.epoch += 1

    def _flush_uninit(self):
        """Reads of LDS bytes not written when read, and still unwritten at the end of the epoch."""
        for b, wid, k in self.l_unread:
            never = self.l_wgen[b] != self.gen
            if never.any():
                j = int(b[np.flatnonzero(never)[0]])
                self._fail("uninit", f"wave {wid}: LDS byte 0x{j:x} read at {self._where(k)} was never "
                                     f"written by this workgroup")
            late = self.l_wepoch[b] == self.epoch
            if late.any():              # written after the read, in this epoch, by the reader itself
                j = int(b[np.flatnonzero(late)[0]])
                self._fail("uninit", f"wave {wid}: LDS byte 0x{j:x} read at {self._where(k)} before "
                                     f"this workgroup wrote it (at {self._where(int(self.l_wk[j]))})")
        self.l_unread = []

    def end_workgroup(self):
        if self.wg is not None:
            self._flush_uninit()

    def finish(self):
        self.end_workgroup()
        self.launch.mem.watch = None

    # ----- probe: instructions -----
    def before(self, w, k, ins):
        f = self.info[k]
        st = self.ws[w.wave_id]
        self.cur = (w, k, st, None)
        u = f.unit
        if u == WAITCNT:
            self._waitcnt(w, st, ins)
        if st.pend:
            self._check_pending(w, k, f, st)
        self._check_hazards(w, k, f, st, ins)
        self._check_uninit(w, k, f, st, ins)
        if f.async_q is not None:
            op = _Op(f.async_q, k, f.keys_w, w.wave_id)
            if f.lds_dma:
                op.token = len(self.dma_ops) + 1
                op.gen = self.gen
                self.dma_ops[op.token] = op
            self.cur = (w, k, st, op)

    def after(self, w, k, ins):
        f = self.info[k]
        st = self.ws[w.wave_id]
        op = self.cur[3]
        if op is not None:
            {"vm": st.vm, "lds": st.lds, "smem": st.smem}[op.q].append(op)
            for key in op.keys:
                st.pend[key] = op
        self._mark_written(w, k, f, st, ins)
        self._note_hazards(w, k, f, st, ins)

    # ----- wait -----
    def _waitcnt(self, w, st, ins):
        m = ins.mods
        if ins.op != "s_waitcnt":
            raise EmuError(f"{self.name}: {ins.op} at 0x{ins.addr:x}: the sanitizer models only s_waitcnt's "
                           f"counters")
        vm, lgkm = int(m.get("vmcnt", 63)), int(m.get("lgkmcnt", 15))
        if len(st.vm) > vm:
            done, st.vm = st.vm[:len(st.vm) - vm], st.vm[len(st.vm) - vm:]
            for op in done:
                self._retire(st, op)
        if len(st.lds) > lgkm:
            done, st.lds = st.lds[:len(st.lds) - lgkm], st.lds[len(st.lds) - lgkm:]
            for op in done:
                self._retire(st, op)
        if lgkm == 0 and st.smem:
            for op in st.smem:
                self._retire(st, op)
            st.smem = []

    def _retire(self, st, op):
        op.retired = True
        op.epoch = self.epoch
        for key in op.keys:
            if st.pend.get(key) is op:
                del st.pend[key]

    def _check_pending(self, w, k, f, st):
        pend = st.pend
        for key in f.keys_r:
            op = pend.get(key)
            if op is not None:
                self._pending_fail(w, k, op, key, "read")
        for key in f.keys_w:
            op = pend.get(key)
            if op is not None:
                # loads on one in-order counter land in issue order: a later one may overwrite
                if f.async_q is not None and f.async_q == op.q and op.q != "smem":
                    continue
                self._pending_fail(w, k, op, key, "overwritten")

    def _pending_fail(self, w, k, op, key, how):
        reg = f"v{key}" if key < _S else f"s{key - _S}"
        counter = {"vm": "vmcnt", "lds": "lgkmcnt", "smem": "lgkmcnt(0)"}[op.q]
        self._fail("wait", f"wave {w.wave_id}: {reg} {how} at {self._where(k)} while the load at "
                           f"{self._where(op.k)} that writes it is outstanding (no s_waitcnt "
                           f"{counter} covers it)")

    # ----- LDS accesses (Wave.watch) -----
    def lds(self, w, mode, addr, nbytes):
        _, k, st, op = self.cur
        if addr.size == 0:
            return
        b = (np.asarray(addr, dtype=np.int64)[:, None] + np.arange(nbytes)).reshape(-1)
        wid = w.wave_id
        dma_write = op is not None and op.token and mode == "w"
        toks = self.l_dma[b]
        if toks.any():
            self._check_dma(w, k, b, toks, dma_write)
        ep = self.epoch
        same = self.l_wepoch[b] == ep
        other_w = same & (self.l_wwave[b] != wid)
        if mode == "a":
            other_w &= ~self.l_watomic[b]
        if other_w.any():
            j = int(np.flatnonzero(other_w)[0])
            self._race_lds(w, k, "read" if mode == "r" else "written", b[j], int(self.l_wwave[b[j]]),
                           int(self.l_wk[b[j]]), "written")
        if mode == "r":
            unwritten = self.l_wgen[b] != self.gen
            if unwritten.any():
                # uninit unless another wave writes it before the next barrier (then: a race)
                self.l_unread.append((b[unwritten], wid, k))
            fresh = self.l_repoch[b] != ep
            rm = self.l_rmask[b]
            rm[fresh] = 0
            self.l_rmask[b] = rm | np.uint64(1 << wid)
            self.l_repoch[b] = ep
            self.l_rk[b] = k
            return
        rs = (self.l_repoch[b] == ep) & ((self.l_rmask[b] & ~np.uint64(1 << wid)) != 0)
        if rs.any():
            j = int(np.flatnonzero(rs)[0])
            readers = int(self.l_rmask[b[j]]) & ~(1 << wid)
            self._race_lds(w, k, "written", b[j], (readers & -readers).bit_length() - 1,
                           int(self.l_rk[b[j]]), "read")
        self.l_wwave[b] = wid
        self.l_wepoch[b] = ep
        self.l_wk[b] = k
        self.l_watomic[b] = mode == "a"
        self.l_wgen[b] = self.gen
        self.l_dma[b] = op.token if dma_write else 0

    def _race_lds(self, w, k, how, byte, other, ok, other_how):
        self._fail("race", f"LDS byte 0x{int(byte):x} {how} by wave {w.wave_id} at {self._where(k)} and "
                           f"{other_how} by wave {other} at {self._where(ok)} with no s_barrier between them")

    def _check_dma(self, w, k, b, toks, dma_write):
        for t in np.unique(toks[toks > 0]).tolist():
            op = self.dma_ops[t]
            if op.gen != self.gen:          # a copy of an earlier workgroup
                self.l_dma[b[toks == t]] = 0
                continue
            j = int(b[np.flatnonzero(toks == t)[0]])
            if not op.retired:
                what = "overwritten by another LDS-DMA load" if dma_write else "accessed"
                if dma_write and op.wave == w.wave_id:
                    continue            # DMA loads of one wave land in issue order
                self._fail("wait", f"LDS byte 0x{j:x} written by the LDS-DMA load at {self._where(op.k)} "
                                   f"(wave {op.wave}) {what} by wave {w.wave_id} at {self._where(k)} "
                                   f"before an s_waitcnt vmcnt of wave {op.wave} covers that load")
            if op.wave != w.wave_id and op.epoch >= self.epoch:
                self._fail("race", f"LDS byte 0x{j:x} written by the LDS-DMA load at {self._where(op.k)} "
                                   f"(wave {op.wave}) accessed by wave {w.wave_id} at {self._where(k)} "
                                   f"with no s_barrier after wave {op.wave}'s wait for it")
            sel = toks == t
            self.l_dma[b[sel]] = 0 if op.wave != w.wave_id or op.epoch < self.epoch else t

    # ----- global accesses (Memory.watch) -----
    def mem(self, mode, addr, nbytes):
        w, k, _, _ = self.cur
        m = self.launch.mem
        addr = np.asarray(addr, dtype=np.uint64)
        if addr.size == 0:
            return
        wg = self._wg_index()
        lo, hi = int(addr.min()), int(addr.max()) + nbytes
        a = m.containing(lo, hi)
        if a >= 0:
            if mode == "r" and a in self.fixed:
                return
            self._mem_alloc(w, k, mode, a, addr, nbytes, wg)
            return
        for a in np.unique(m._locate(addr, nbytes, "sanitizer")).tolist():
            lo_a = m._base_list[a]
            sel = (addr >= np.uint64(lo_a)) & (addr < np.uint64(m._end_list[a]))
            self._mem_alloc(w, k, mode, a, addr[sel], nbytes, wg)

    def _wg_index(self) -> int:
        gx, gy, _ = self.launch.grid
        x, y, z = self.wg
        return x + gx * (y + gy * z)

    def _mem_alloc(self, w, k, mode, a, addr, nbytes, wg):
        m = self.launch.mem
        rec = self.mem_state.get(a)
        if rec is None:
            size = m._end_list[a] - m._base_list[a]
            rec = self.mem_state[a] = {
                "w": np.full(size, -1, dtype=np.int32), "wk": np.zeros(size, dtype=np.int32),
                "wa": np.zeros(size, dtype=bool), "r": np.full(size, -1, dtype=np.int32),
                "rk": np.zeros(size, dtype=np.int32)}
        base = m._base_list[a]
        b = ((addr - np.uint64(base)).astype(np.int64)[:, None] + np.arange(nbytes)).reshape(-1)
        wr = rec["w"][b]
        other = (wr >= 0) & (wr != wg)
        if mode == "a":
            other &= ~rec["wa"][b]
        if other.any():
            j = int(np.flatnonzero(other)[0])
            how = "read" if mode == "r" else "written"
            self._race_mem(w, k, how, base + int(b[j]), int(wr[j]), int(rec["wk"][b[j]]), "writes")
        if mode == "r":
            r = rec["r"][b]
            rec["r"][b] = np.where(r == -1, wg, np.where(r == wg, wg, -2))
            rec["rk"][b] = k
            return
        r = rec["r"][b]
        bad = (r != -1) & (r != wg)
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            rwg = int(r[j])
            self._race_mem(w, k, "written", base + int(b[j]), rwg, int(rec["rk"][b[j]]), "reads")
        rec["w"][b] = wg
        rec["wk"][b] = k
        rec["wa"][b] = mode == "a"

    def _race_mem(self, w, k, how, address, other_wg, ok, other_how):
        gx, gy, _ = self.launch.grid
        who = "several other workgroups" if other_wg == -2 else \
            f"workgroup {(other_wg % gx, other_wg // gx % gy, other_wg // (gx * gy))}"
        self._fail("race", f"global byte 0x{address:x} {how} by wave {w.wave_id} at {self._where(k)}, and "
                           f"{who} {other_how} it (at {self._where(ok)}) in the same launch")

    # ----- uninit -----
    def _lanes(self, w, f, ins):
        if f.all_lanes:
            return None
        if f.lane_sel:
            lane = int(w.read_scalar(ins.src[1], 1)[0]) % LANES if not f.writelane else None
            if lane is not None:
                m = np.zeros(LANES, dtype=bool)
                m[lane] = True
                return m
        if f.readfirst:
            m = np.zeros(LANES, dtype=bool)
            act = np.flatnonzero(w.exec)
            m[act[0] if act.size else 0] = True
            return m
        return w.exec

    def _check_uninit(self, w, k, f, st, ins):
        """Reads of registers never written. A VALU result computed from such a value is not yet a
        defect (compilers feed undefined halves into 64-bit arithmetic whose result they discard):
        it is marked unwritten itself, and the defect is reported where such a value is consumed
        by anything else (memory, scalar code, lane reads into SGPRs, MFMAs)."""
        self.poison = None
        propagate = f.unit == VALU and f.vwrites and not f.lane_sel and not f.readfirst
        if f.sreads:
            si = st.sinit
            for b, n in f.sreads:
                if not all(si[b:b + n]):
                    r = b + si[b:b + n].index(False)
                    if propagate:
                        self.poison = np.ones((f.vwrites[0][1], LANES), dtype=bool)
                        continue
                    self._fail("uninit", f"wave {w.wave_id}: s{r} read at {self._where(k)} was never written")
        if f.vreads:
            lanes = self._lanes(w, f, ins)
            vi, vf = st.vinit, st.vfull
            srcs = f.vreads
            if f.writelane:
                srcs = ()               # v_writelane reads only its scalar source
            elif f.unit == MFMA:
                srcs = f.srcab + f.srcc  # scale operands are read in a few lanes only: unchecked
            for b, n in srcs:
                if n == 1 and vf[b] or all(vf[b:b + n]):
                    continue
                blk = vi[b:b + n]
                bad = ~blk if lanes is None else ~blk & lanes
                if not bad.any():
                    continue
                if propagate:
                    self._poison(f, ins, bad)
                    continue
                r, lane = np.argwhere(bad)[0]
                origin = st.vorigin.get(b + int(r))
                why = "was never written" if origin is None else \
                    f"holds a value computed at {self._where(origin)} from a register never written"
                self._fail("uninit", f"wave {w.wave_id}: v{b + int(r)} lane {int(lane)} read at "
                                     f"{self._where(k)} {why}")

    def _poison(self, f, ins, bad):
        """Dwords x lanes of the destination that depend on the unwritten source dwords `bad`:
        dword j of a result depends on source dwords 0..j (additions, multiplies and left shifts
        carry upwards), on all of them for right shifts."""
        n = f.vwrites[0][1]
        dep = np.logical_or.accumulate(bad, axis=0)
        if "shr" in ins.op or "ashr" in ins.op or bad.shape[0] == 1:
            dep = np.broadcast_to(bad.any(axis=0), bad.shape)
        p = np.zeros((n, LANES), dtype=bool)
        m = min(n, dep.shape[0])
        p[:m] = dep[:m]
        p[m:] = dep[-1]
        self.poison = p if self.poison is None else self.poison | p

    def _mark_written(self, w, k, f, st, ins):
        for b, n in f.swrites:
            st.sinit[b:b + n] = [True] * n
        if f.vwrites:
            if f.all_lanes:
                lanes = True
            elif f.writelane:
                lanes = np.zeros(LANES, dtype=bool)
                lanes[int(w.read_scalar(ins.src[1], 1)[0]) % LANES] = True
            else:
                lanes = w.exec
            full = lanes is True or lanes.all()
            for b, n in f.vwrites:
                if full:
                    st.vinit[b:b + n] = True
                    st.vfull[b:b + n] = [True] * n
                else:
                    st.vinit[b:b + n] |= lanes
                if st.vorigin:
                    for r in range(b, b + n):
                        st.vorigin.pop(r, None)
            if self.poison is not None:
                for sb, sn in f.swrites:        # a carry-out of such a value is unwritten too
                    st.sinit[sb:sb + sn] = [False] * sn
                b, n = f.vwrites[0]
                st.vinit[b:b + n] &= ~(self.poison & lanes)
                st.vfull[b:b + n] = [False] * n
                for j in range(n):
                    if self.poison[j].any():
                        st.vorigin[b + j] = k

    # ----- hazards (wait states) -----
    def _hazard(self, w, k, f, need, have, dk, what):
        self._fail("hazard", f"wave {w.wave_id}: {what}: {self._where(dk)} then {self._where(k)} with "
                             f"{have} wait states between them, {need} required")

    def _check_hazards(self, w, k, f, st, ins):
        u, t = f.unit, st.t
        if f.hwreg >= 0 and f.hwreg in st.setreg:
            dt, dk = st.setreg[f.hwreg]
            if t - dt < 2:
                self._hazard(w, k, f, 2, t - dt, dk, f"s_setreg then {ins.op} of the same hardware register")
        if st.mfma_def and u in (VALU, VMEM, LDS, MFMA):
            md = st.mfma_def
            if u == MFMA:
                for group, is_c in ((f.srcab, False), (f.srcc, True)):
                    for b, n in group:
                        for r in range(b, b + n):
                            d = md.get(r)
                            if d is None:
                                continue
                            dt, p, dk, rng = d
                            if is_c:
                                if rng == (b, n) and self.instrs[dk].op == ins.op:
                                    continue    # same-shape accumulation chains forward the result
                                need = p + 2
                                what = "MFMA result read as another MFMA's SrcC"
                            else:
                                need = _xdl_read(p)
                                what = "MFMA result read as an MFMA's SrcA/B"
                            if t - dt < need:
                                self._hazard(w, k, f, need, t - dt, dk, what)
            else:
                for key in f.keys_r:
                    d = md.get(key) if key < _S else None
                    if d is not None and t - d[0] < _xdl_read(d[1]):
                        self._hazard(w, k, f, _xdl_read(d[1]), t - d[0], d[2],
                                     f"MFMA result v{key} read by a {'VALU' if u == VALU else 'memory'} "
                                     f"instruction")
                if u == VALU:
                    for key in f.keys_w:
                        d = md.get(key) if key < _S else None
                        if d is not None and t - d[0] < _xdl_read(d[1]):
                            self._hazard(w, k, f, _xdl_read(d[1]), t - d[0], d[2],
                                         f"MFMA result v{key} overwritten by a VALU instruction")
        if u == VALU and st.srcc_read:
            for key in f.keys_w:
                d = st.srcc_read.get(key) if key < _S else None
                if d is not None:
                    need = {2: 1, 4: 3, 8: 7}.get(d[1], 15)
                    if t - d[0] < need:
                        self._hazard(w, k, f, need, t - d[0], d[2],
                                     f"v{key} read as MFMA SrcC then overwritten by a VALU instruction")
        if u == VALU and st.store_data:
            for key in f.keys_w:
                d = st.store_data.get(key) if key < _S else None
                if d is not None and t - d[0] < d[2]:
                    self._hazard(w, k, f, d[2], t - d[0], d[1],
                                 f"v{key}, data of a wide buffer store, overwritten by a VALU instruction")
        if st.valu_def and u in (VALU, MFMA):
            vd = st.valu_def
            for key in f.keys_r:
                d = vd.get(key) if key < _S else None
                if d is None:
                    continue
                dt, dk, trans = d
                if u == MFMA:
                    need, what = 2, f"VALU write of v{key} read by an MFMA"
                elif f.permlane:
                    need, what = 2, f"VALU write of v{key} read by {ins.op}"
                elif f.dpp and key == f.keys_r[0]:
                    need, what = 2, f"VALU write of v{key} read through DPP"
                elif trans and not f.trans:
                    need, what = 1, f"transcendental result v{key} read by a VALU instruction"
                elif f.lane_sel and not f.writelane:
                    need, what = 1, f"VALU write of v{key} read by v_readlane"
                else:
                    continue
                if t - dt < need:
                    self._hazard(w, k, f, need, t - dt, dk, what)
        if st.valu_sdef and f.sreads and u in (VMEM, VALU):
            sd = st.valu_sdef
            for key in f.keys_r:
                d = sd.get(key) if key >= _S else None
                if d is None:
                    continue
                if u == VMEM:
                    need, what = 5, f"VALU write of s{key - _S} read by a VMEM instruction"
                elif f.lane_sel and key == _S + f.sreads[-1][0]:
                    need, what = 4, f"VALU write of s{key - _S} used as v_readlane/v_writelane lane select"
                else:
                    continue
                if t - d[0] < need:
                    self._hazard(w, k, f, need, t - d[0], d[1], what)
        if st.valu_exec is not None and (f.dpp or u == MFMA):
            dt, dk = st.valu_exec
            need = 5 if f.dpp else 4
            if t - dt < need:
                self._hazard(w, k, f, need, t - dt, dk, "VALU write of EXEC followed by "
                             + ("DPP" if f.dpp else "an MFMA"))

    def _note_hazards(self, w, k, f, st, ins):
        u = f.unit
        st.t += int(ins.mods.get("simm16", 0)) % 16 + 1 if u == NOP else 1
        t = st.t
        if u == MFMA:
            rng = f.vwrites[0] if f.vwrites else None
            for b, n in f.vwrites:
                for r in range(b, b + n):
                    st.mfma_def[r] = (t, f.passes, k, rng)
                    st.valu_def.pop(r, None)
            for b, n in f.srcc:
                for r in range(b, b + n):
                    st.srcc_read[r] = (t, f.passes, k)
        elif u == VALU:
            for b, n in f.vwrites:
                for r in range(b, b + n):
                    st.valu_def[r] = (t, k, f.trans)
                    st.mfma_def.pop(r, None)
            for b, n in f.swrites:
                for i in range(b, b + n):
                    st.valu_sdef[_S + i] = (t, k)
            if f.writes_exec:
                st.valu_exec = (t, k)
        elif f.store_ws:
            for b, n in f.vreads[:1]:
                for r in range(b, b + n):
                    st.store_data[r] = (t, k, f.store_ws)
        elif f.vwrites or f.swrites:
            # a non-VALU write ends any VALU-write hazard on the register it overwrites
            for b, n in f.vwrites:
                for r in range(b, b + n):
                    st.valu_def.pop(r, None)
                    st.mfma_def.pop(r, None)
            for b, n in f.swrites:
                for i in range(b, b + n):
                    st.valu_sdef.pop(_S + i, None)
        if f.hwreg >= 0 and ins.op.startswith("s_setreg"):
            st.setreg[f.hwreg] = (t, k)
        if len(st.valu_def) > 64 or len(st.mfma_def) > 256 or len(st.store_data) > 64:
            self._prune(st)

    @staticmethod
    def _prune(st):
        """Forget writes older than the longest wait-state window (19)."""
        t = st.t
        for d in (st.valu_def, st.mfma_def, st.srcc_read, st.valu_sdef, st.store_data):
            for key in [key for key, v in d.items() if t - v[0] > 20]:
                del d[key]
