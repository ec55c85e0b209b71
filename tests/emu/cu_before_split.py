"""One compute unit replaying recorded wave traces: 4 SIMDs, wave slots, issue and dependencies.

Each wave issues its instructions in order. An instruction issues at the earliest time at which
(a) the wave's previous instruction left its issue slot (one per wave per ISSUE_CYCLES, longer
after s_nop or a taken branch), (b) the registers it reads are ready, (c) its unit is free (VALU,
MFMA and SALU per SIMD; vector memory, LDS and scalar memory per CU), and (d) for s_waitcnt, the
wave's outstanding vector-memory / LGKM operations have drained to the requested counts. Among
waves ready at the same time the oldest issues first. Memory results are not scoreboarded (the
code's s_waitcnt orders them, as on the hardware); ALU results are, with their latency.

Vector memory requests pass through three per-CU pipes: the L1 return path, the CU's share of
L2 bandwidth and its share of HBM bandwidth (lines this launch had not touched before); a load
completes after the latency of the level that serves it or when the pipes have moved its bytes,
whichever is later, and in issue order (vmcnt counts in order).
"""
import heapq
from dataclasses import dataclass

from flyaot.emu import isa
from flyaot.emu.timing import static as S

T = isa.load(isa.ARCH).timing


@dataclass
class Rates:
    """Memory-system figures as one CU sees them (cycles, bytes per cycle)."""
    l2_lat: float
    hbm_lat: float
    smem_lat: float
    store_lat: float
    l1_bw: float
    l2_bw: float
    hbm_bw: float
    hbm_fraction: float = 1.0    # share of first-touch lines really served by HBM (the rest: caches)
    valu_scale: float = 1.0      # multiplies VALU issue/latency cycles (fitted)
    scaled_cvt_cycles: float = T.SCALED_CVT_CYCLES   # VALU cycles of an MX scaled conversion (fitted)


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


def simulate(ops, workgroups, slots: Slots, rates: Rates, stats: dict | None = None) -> float:
    """Cycles for one CU to run `workgroups` (each a list of per-wave traces) in order."""
    nsimd = T.SIMDS_PER_CU
    valu_free = [0.0] * nsimd
    mfma_free = [0.0] * nsimd
    salu_free = [0.0] * nsimd
    simd_waves = [0] * nsimd
    cu = {"vmem": 0.0, "lds": 0.0, "smem": 0.0, "l1": 0.0, "l2": 0.0, "hbm": 0.0}
    lds_used = 0
    heap = []
    queue = list(workgroups)
    qpos = 0
    age = 0
    end_time = 0.0
    issue = T.ISSUE_CYCLES
    vscale = rates.valu_scale
    cvt = rates.scaled_cvt_cycles
    stalls = {"dep": 0.0, "wait": 0.0, "unit": 0.0, "barrier": 0.0}
    busy = {"mfma": [0.0] * nsimd, "valu": [0.0] * nsimd, "l1": 0.0, "l2": 0.0, "hbm": 0.0, "lds": 0.0}

    def dispatch(t):
        nonlocal qpos, lds_used, age
        while qpos < len(queue):
            traces = queue[qpos]
            if lds_used + slots.lds_bytes > T.LDS_BYTES_PER_CU and lds_used:
                return
            free = [slots.waves_per_simd - c for c in simd_waves]
            if sum(free) < len(traces):
                return
            # place waves one by one on the least-loaded SIMD
            counts = simd_waves[:]
            place = []
            for _ in traces:
                k = min(range(nsimd), key=lambda j: counts[j])
                if counts[k] >= slots.waves_per_simd:
                    return
                counts[k] += 1
                place.append(k)
            simd_waves[:] = counts
            lds_used += slots.lds_bytes
            qpos += 1
            wg = _WG()
            for tr, k in zip(traces, place):
                w = _Wave(tr, k, wg, age, t)
                age += 1
                wg.waves.append(w)
                if tr:
                    wg.live += 1
                    heapq.heappush(heap, (t, w.age, w))
            if wg.live == 0:
                for w in wg.waves:
                    simd_waves[w.simd] -= 1
                lds_used -= slots.lds_bytes

    def release_barrier(wg, t):
        if wg.live and wg.arrived == wg.live:
            rt = max(t, wg.last_arrival) + T.BARRIER_CYCLES
            wg.arrived = 0
            for w in wg.waves:
                if w.at_barrier:
                    w.at_barrier = False
                    stalls["barrier"] += rt - w.t
                    w.t = rt
                    heapq.heappush(heap, (rt, w.age, w))

    dispatch(0.0)
    while heap:
        t0, _, w = heapq.heappop(heap)
        e = w.trace[w.pos]
        if type(e) is tuple:
            i, info = e
        else:
            i, info = e, None
        op = ops[i]
        u = op.unit
        t = w.t
        ready = w.ready
        for k in op.reads:
            r = ready.get(k)
            if r is not None and r > t:
                t = r
        tdep = t
        simd = w.simd
        if u == S.VALU:
            f = valu_free[simd]
        elif u == S.MFMA:
            f = max(mfma_free[simd], valu_free[simd])
        elif u == S.VMEM:
            f = cu["vmem"]
        elif u == S.LDS:
            f = cu["lds"]
        elif u == S.SMEM:
            f = cu["smem"]
        elif u == S.WAITCNT:
            vmn, lgn = op.wait
            f = max(_drain_time(w.vm, vmn), _drain_time(w.lgkm, lgn))
        elif u in (S.NOP, S.BARRIER, S.END):
            f = 0.0
        else:
            f = salu_free[simd]
        if f > t:
            t = f
        if t > t0:
            heapq.heappush(heap, (t, w.age, w))
            continue
        # ---- issue at t ----
        if u == S.WAITCNT:
            stalls["wait"] += t - tdep
        else:
            stalls["unit"] += t - tdep
        stalls["dep"] += tdep - w.t
        nxt_t = t + issue
        if u == S.VALU:
            c = cvt if op.scaled_cvt else op.cycles * vscale
            valu_free[simd] = t + c
            busy["valu"][simd] += c
            done = t + c
            for k in op.writes:
                ready[k] = done
        elif u == S.MFMA:
            mfma_free[simd] = t + op.cycles
            busy["mfma"][simd] += op.cycles
            valu_free[simd] = t + issue
            done = t + op.latency
            for k in op.writes:
                ready[k] = done
        elif u == S.SALU or u == S.OTHER:
            salu_free[simd] = t + op.cycles
            done = t + op.latency
            for k in op.writes:
                ready[k] = done
        elif u == S.BRANCH:
            salu_free[simd] = t + op.cycles
            nxt = w.trace[w.pos + 1] if w.pos + 1 < len(w.trace) else None
            nxt = nxt[0] if type(nxt) is tuple else nxt
            if nxt is not None and nxt != i + 1:
                nxt_t = t + T.BRANCH_TAKEN_CYCLES
        elif u == S.VMEM:
            nbytes, lines, new = info
            cu["vmem"] = t + max(issue, nbytes / rates.l1_bw)
            l1 = cu["l1"] = max(t, cu["l1"]) + nbytes / rates.l1_bw
            l2 = cu["l2"] = max(t, cu["l2"]) + lines * T.CACHE_LINE_BYTES / rates.l2_bw
            hb = nbytes if op.store else new * T.CACHE_LINE_BYTES * rates.hbm_fraction
            hbm = cu["hbm"] = max(t, cu["hbm"]) + hb / rates.hbm_bw
            busy["l1"] += nbytes / rates.l1_bw
            busy["l2"] += lines * T.CACHE_LINE_BYTES / rates.l2_bw
            busy["hbm"] += hb / rates.hbm_bw
            if op.store:
                done = max(t + rates.store_lat, l1, l2)
            else:
                lat = rates.l2_lat + (rates.hbm_lat - rates.l2_lat) * rates.hbm_fraction if new else rates.l2_lat
                done = max(t + lat, l1, l2, hbm)
            if w.vm and w.vm[-1] > done:
                done = w.vm[-1]
            w.vm.append(done)
            if len(w.vm) > 64:
                del w.vm[:len(w.vm) - 64]
            for k in op.writes:
                ready[k] = done
        elif u == S.LDS:
            cyc = info or T.LDS_MIN_CYCLES
            cu["lds"] = t + cyc
            busy["lds"] += cyc
            done = t + T.LDS_CYCLES + cyc
            w.lgkm.append(done)
            for k in op.writes:
                ready[k] = done
        elif u == S.SMEM:
            cu["smem"] = t + issue
            done = t + (rates.l2_lat if info else rates.smem_lat)
            w.lgkm.append(done)
            for k in op.writes:
                ready[k] = done
        elif u == S.WAITCNT:
            if w.vm:
                w.vm = [c for c in w.vm if c > t]
            if w.lgkm:
                w.lgkm = [c for c in w.lgkm if c > t]
        elif u == S.NOP:
            nxt_t = t + op.cycles
        w.pos += 1
        w.t = nxt_t
        wg = w.wg
        if u == S.BARRIER:
            w.at_barrier = True
            wg.arrived += 1
            wg.last_arrival = max(wg.last_arrival, nxt_t)
            release_barrier(wg, nxt_t)
            continue
        if u == S.END or w.pos >= len(w.trace):
            fin = max([nxt_t] + w.vm)
            wg.live -= 1
            wg.end = max(wg.end, fin)
            end_time = max(end_time, fin)
            if wg.live == 0:
                for x in wg.waves:
                    simd_waves[x.simd] -= 1
                lds_used -= slots.lds_bytes
                dispatch(wg.end + T.WORKGROUP_DISPATCH_CYCLES)
            else:
                release_barrier(wg, nxt_t)
            continue
        heapq.heappush(heap, (nxt_t, w.age, w))
    if stats is not None:
        stats.update(stalls)
        # busiest SIMD's matrix / vector time and the CU memory pipes' busy times (diagnostics)
        stats.update({"busy_mfma": max(busy["mfma"]), "busy_valu": max(busy["valu"]),
                      **{"busy_" + k: busy[k] for k in ("l1", "l2", "hbm", "lds")}})
    return end_time
