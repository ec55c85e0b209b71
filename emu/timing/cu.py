"""One compute unit replaying recorded wave traces: 4 SIMDs, wave slots, issue and dependencies.

Each wave issues its instructions in order. An instruction issues at the earliest time at which
(a) the wave's previous instruction left its issue slot (one per wave per ISSUE_CYCLES, longer
after s_nop or a taken branch), (b) the registers it reads are ready, (c) its unit is free (VALU,
MFMA and SALU per SIMD; vector memory, LDS and scalar memory per CU), and (d) for s_waitcnt, the
wave's outstanding vector-memory / LGKM operations have drained to the requested counts. Among
waves ready at the same time the oldest issues first. Memory results are not scoreboarded (the
code's s_waitcnt orders them, as on the hardware); ALU results are, with their latency.

Vector memory requests pass through per-CU pipes: the L1 return path, the CU's path to its XCD's
L2 (lines that miss L1), its share of the Infinity Cache (MALL) bandwidth (lines that miss L2) and
of HBM bandwidth (lines that miss the MALL). Lines a workgroup reads for the first time are served
by L2, the MALL or HBM in the shares of the allocation they belong to (model.serving_levels); the access completes after
the expected latency of the slowest level serving one of its lines or when the pipes have moved its
bytes, whichever is later, and in issue order (vmcnt counts in order).
"""
import heapq
from dataclasses import dataclass, field

from .. import isa
from . import static as S

T = isa.load(isa.ARCH).timing


@dataclass
class Rates:
    """Memory-system figures as one CU sees them (cycles, bytes per cycle)."""
    l1_lat: float
    l2_lat: float
    mall_lat: float
    hbm_lat: float
    smem_lat: float
    store_lat: float
    l1_bw: float
    l2_bw: float
    mall_bw: float
    hbm_bw: float
    levels: list = field(default_factory=list)   # per allocation read: (L2, MALL, HBM) shares of first reads
    valu_scale: float = 1.0      # multiplies VALU issue/latency cycles (fitted)
    scaled_cvt_cycles: float = T.SCALED_CVT_CYCLES   # VALU cycles of an MX scaled conversion (fitted)

    def shares(self, alloc: int) -> tuple:
        return self.levels[alloc] if 0 <= alloc < len(self.levels) else (1.0, 0.0, 0.0)

    def first_read_latency(self, new: int, alloc: int) -> float:
        """Expected latency of an access whose `new` first-read lines each come from L2, the MALL or
        HBM in their allocation's shares: the slowest of them sets it."""
        _, mall, hbm = self.shares(alloc)
        below_l2 = 1.0 - (1.0 - mall - hbm) ** new
        at_hbm = 1.0 - (1.0 - hbm) ** new
        return (self.l2_lat + (below_l2 - at_hbm) * (self.mall_lat - self.l2_lat)
                + at_hbm * (self.hbm_lat - self.l2_lat))


@dataclass
class Slots:
    """What one workgroup occupies on a CU."""
    waves_per_simd: int          # wave slots per SIMD this kernel's registers allow
    lds_bytes: int


class _Wave:
    __slots__ = ("trace", "pos", "t", "simd", "wg", "ready", "vm", "lgkm", "age", "at_barrier")

    def __init__(self, trace, simd, wg, age, t):
        self.trace, self.simd, self.wg, self.age, self.t = trace, simd, wg, age, t
        self.pos = 0
        self.ready = {}
        self.vm = []
        self.lgkm = []
        self.at_barrier = False


class _WG:
    __slots__ = ("waves", "live", "arrived", "last_arrival", "end")

    def __init__(self):
        self.waves, self.live, self.arrived, self.last_arrival, self.end = [], 0, 0, 0.0, 0.0


def _drain_time(pending: list, n: int) -> float:
    """Earliest time at which at most n of the pending completions are still outstanding."""
    if len(pending) <= n:
        return 0.0
    if n == 0:
        return max(pending)
    return sorted(pending)[len(pending) - n - 1]


class _CU:
    """The state of one CU during a replay: its units' free times, wave slots, LDS, the ready waves."""

    def __init__(self, ops, workgroups, slots: Slots, rates: Rates):
        nsimd = T.SIMDS_PER_CU
        self.ops, self.slots, self.rates = ops, slots, rates
        self.valu_free = [0.0] * nsimd
        self.mfma_free = [0.0] * nsimd
        self.salu_free = [0.0] * nsimd
        self.simd_waves = [0] * nsimd
        self.pipe = {"vmem": 0.0, "lds": 0.0, "smem": 0.0, "l1": 0.0, "l2": 0.0, "mall": 0.0, "hbm": 0.0}
        self.lds_used = 0
        self.heap = []
        self.queue = list(workgroups)
        self.qpos = 0
        self.age = 0
        self.end_time = 0.0
        self.stalls = {"dep": 0.0, "wait": 0.0, "unit": 0.0, "barrier": 0.0}
        self.busy = {"mfma": [0.0] * nsimd, "valu": [0.0] * nsimd, "l1": 0.0, "l2": 0.0, "mall": 0.0, "hbm": 0.0,
                     "lds": 0.0}

    # ----- workgroups in and out -----
    def _placement(self, traces):
        """SIMD of each wave of a workgroup (least-loaded first), or None when its waves do not fit."""
        free = [self.slots.waves_per_simd - c for c in self.simd_waves]
        if sum(free) < len(traces):
            return None
        counts = self.simd_waves[:]
        place = []
        for _ in traces:
            k = min(range(T.SIMDS_PER_CU), key=lambda j: counts[j])
            if counts[k] >= self.slots.waves_per_simd:
                return None
            counts[k] += 1
            place.append(k)
        return place

    def dispatch(self, t):
        """Start queued workgroups at time t while wave slots and LDS allow, in order."""
        slots = self.slots
        while self.qpos < len(self.queue):
            traces = self.queue[self.qpos]
            if self.lds_used + slots.lds_bytes > T.LDS_BYTES_PER_CU and self.lds_used:
                return
            place = self._placement(traces)
            if place is None:
                return
            for k in place:
                self.simd_waves[k] += 1
            self.lds_used += slots.lds_bytes
            self.qpos += 1
            wg = _WG()
            for tr, k in zip(traces, place):
                w = _Wave(tr, k, wg, self.age, t)
                self.age += 1
                wg.waves.append(w)
                if tr:
                    wg.live += 1
                    heapq.heappush(self.heap, (t, w.age, w))
            if wg.live == 0:
                self._free(wg)

    def _free(self, wg):
        for w in wg.waves:
            self.simd_waves[w.simd] -= 1
        self.lds_used -= self.slots.lds_bytes

    def release_barrier(self, wg, t):
        """Once every live wave of `wg` arrived, let them all go after the barrier's cost."""
        if wg.live and wg.arrived == wg.live:
            rt = max(t, wg.last_arrival) + T.BARRIER_CYCLES
            wg.arrived = 0
            for w in wg.waves:
                if w.at_barrier:
                    w.at_barrier = False
                    self.stalls["barrier"] += rt - w.t
                    w.t = rt
                    heapq.heappush(self.heap, (rt, w.age, w))

    # ----- one instruction -----
    def unit_free(self, w, op) -> float:
        """When the unit `op` issues to (or, for s_waitcnt, the counters it waits for) allows it."""
        u = op.unit
        simd = w.simd
        if u == S.VALU:
            return self.valu_free[simd]
        if u == S.MFMA:
            return max(self.mfma_free[simd], self.valu_free[simd])
        if u == S.VMEM:
            return self.pipe["vmem"]
        if u == S.LDS:
            return self.pipe["lds"]
        if u == S.SMEM:
            return self.pipe["smem"]
        if u == S.WAITCNT:
            vmn, lgn = op.wait
            return max(_drain_time(w.vm, vmn), _drain_time(w.lgkm, lgn))
        if u in (S.NOP, S.BARRIER, S.END):
            return 0.0
        return self.salu_free[simd]

    def _pipe(self, name, t, cycles) -> float:
        """Occupy memory pipe `name` for `cycles` from t (or when it frees); when it is done."""
        self.busy[name] += cycles
        end = self.pipe[name] = max(t, self.pipe[name]) + cycles
        return end

    def vmem(self, w, op, info, t) -> float:
        """Issue a vector memory access at t through the CU's memory pipes; its completion time."""
        rates = self.rates
        line = T.CACHE_LINE_BYTES
        nbytes, lines, hits, new, alloc = info
        self.pipe["vmem"] = t + max(T.ISSUE_CYCLES, nbytes / rates.l1_bw)
        l1 = self._pipe("l1", t, nbytes / rates.l1_bw)
        l2 = self._pipe("l2", t, (lines - hits) * line / rates.l2_bw)
        if op.store:
            self._pipe("hbm", t, nbytes / rates.hbm_bw)
            done = max(t + rates.store_lat, l1, l2)
        else:
            _, mall_share, hbm_share = rates.shares(alloc)
            mall = self._pipe("mall", t, new * line * (mall_share + hbm_share) / rates.mall_bw)
            hbm = self._pipe("hbm", t, new * line * hbm_share / rates.hbm_bw)
            lat = (rates.first_read_latency(new, alloc) if new else rates.l2_lat if lines > hits else rates.l1_lat)
            done = max(t + lat, l1, l2, mall, hbm)
        if w.vm and w.vm[-1] > done:
            done = w.vm[-1]
        w.vm.append(done)
        if len(w.vm) > 64:
            del w.vm[:len(w.vm) - 64]
        return done

    def execute(self, w, i, op, info, t) -> float:
        """Issue instruction i of wave w at t: occupy its unit, set its results' ready times;
        returns when the wave may issue again."""
        u = op.unit
        simd = w.simd
        issue = T.ISSUE_CYCLES
        nxt_t = t + issue
        done = None
        if u == S.VALU:
            c = self.rates.scaled_cvt_cycles if op.scaled_cvt else op.cycles * self.rates.valu_scale
            self.valu_free[simd] = t + c
            self.busy["valu"][simd] += c
            done = t + c
        elif u == S.MFMA:
            self.mfma_free[simd] = t + op.cycles
            self.busy["mfma"][simd] += op.cycles
            self.valu_free[simd] = t + issue
            done = t + op.latency
        elif u == S.SALU or u == S.OTHER:
            self.salu_free[simd] = t + op.cycles
            done = t + op.latency
        elif u == S.BRANCH:
            self.salu_free[simd] = t + op.cycles
            nxt = w.trace[w.pos + 1] if w.pos + 1 < len(w.trace) else None
            nxt = nxt[0] if type(nxt) is tuple else nxt
            if nxt is not None and nxt != i + 1:
                nxt_t = t + T.BRANCH_TAKEN_CYCLES
        elif u == S.VMEM:
            done = self.vmem(w, op, info, t)
        elif u == S.LDS:
            cyc = info or T.LDS_MIN_CYCLES
            self.pipe["lds"] = t + cyc
            self.busy["lds"] += cyc
            done = t + T.LDS_CYCLES + cyc
            w.lgkm.append(done)
        elif u == S.SMEM:
            self.pipe["smem"] = t + issue
            done = t + (self.rates.l2_lat if info else self.rates.smem_lat)
            w.lgkm.append(done)
        elif u == S.WAITCNT:
            if w.vm:
                w.vm = [c for c in w.vm if c > t]
            if w.lgkm:
                w.lgkm = [c for c in w.lgkm if c > t]
        elif u == S.NOP:
            nxt_t = t + op.cycles
        if done is not None:
            for k in op.writes:
                w.ready[k] = done
        return nxt_t

    def step(self, t0, w):
        """Try to issue wave w's next instruction at t0: issue it, or requeue the wave for later."""
        e = w.trace[w.pos]
        if type(e) is tuple:
            i, info = e
        else:
            i, info = e, None
        op = self.ops[i]
        t = w.t
        ready = w.ready
        for k in op.reads:
            r = ready.get(k)
            if r is not None and r > t:
                t = r
        tdep = t
        f = self.unit_free(w, op)
        if f > t:
            t = f
        if t > t0:
            heapq.heappush(self.heap, (t, w.age, w))
            return
        self.stalls["wait" if op.unit == S.WAITCNT else "unit"] += t - tdep
        self.stalls["dep"] += tdep - w.t
        nxt_t = self.execute(w, i, op, info, t)
        w.pos += 1
        w.t = nxt_t
        self.advance(w, op.unit, nxt_t)

    def advance(self, w, u, nxt_t):
        """After an issue: the wave waits at a barrier, ends (freeing its workgroup's resources
        once the last wave ends), or is ready again at nxt_t."""
        wg = w.wg
        if u == S.BARRIER:
            w.at_barrier = True
            wg.arrived += 1
            wg.last_arrival = max(wg.last_arrival, nxt_t)
            self.release_barrier(wg, nxt_t)
            return
        if u == S.END or w.pos >= len(w.trace):
            fin = max([nxt_t] + w.vm)
            wg.live -= 1
            wg.end = max(wg.end, fin)
            self.end_time = max(self.end_time, fin)
            if wg.live == 0:
                self._free(wg)
                self.dispatch(wg.end + T.WORKGROUP_DISPATCH_CYCLES)
            else:
                self.release_barrier(wg, nxt_t)
            return
        heapq.heappush(self.heap, (nxt_t, w.age, w))

    def run(self) -> float:
        self.dispatch(0.0)
        heap = self.heap
        while heap:
            t0, _, w = heapq.heappop(heap)
            self.step(t0, w)
        return self.end_time

    def report(self, stats: dict) -> None:
        """Stall totals, the busiest SIMD's matrix / vector time and the CU memory pipes' busy times."""
        busy = self.busy
        stats.update(self.stalls)
        stats.update({"busy_mfma": max(busy["mfma"]), "busy_valu": max(busy["valu"]),
                      **{"busy_" + k: busy[k] for k in ("l1", "l2", "mall", "hbm", "lds")}})


def simulate(ops, workgroups, slots: Slots, rates: Rates, stats: dict | None = None) -> float:
    """Cycles for one CU to run `workgroups` (each a list of per-wave traces) in order."""
    cu = _CU(ops, workgroups, slots, rates)
    end = cu.run()
    if stats is not None:
        cu.report(stats)
    return end
