"""Kernel time on the modeled part: occupancy, workgroup dispatch over the CUs, sampling.

`time_launch(launch)` traces a sample of the launch's workgroups on the functional emulator (all of
them, or only the sampled ones when the results are not needed), replays them on one compute unit
(cu.simulate) and scales to the grid:
- grid <= CUs: every workgroup has a CU to itself, the kernel lasts as long as its slowest
  workgroup (taken over the sampled ones);
- larger grids: the busiest CU runs ceil(grid / CUs) workgroups; it is simulated on a stream of the
  sampled traces (each at least once) that fills its wave slots for at most `rounds` dispatch
  rounds, and the time is scaled by the number of workgroups it really runs.
The sampling error is the relative difference between the estimates from the even- and odd-numbered
halves of the sample. The time adds the fixed launch overhead.
"""
from dataclasses import dataclass, field

from .. import isa
from . import cu as CU
from .trace import Tracer

T = isa.load(isa.ARCH).timing


@dataclass(frozen=True)
class Params:
    """The model's global, fitted parameters (docs/timing-model.md says how they were fitted and what
    bounds each physically)."""
    launch_us: float = T.LAUNCH_US
    mem_latency_scale: float = T.MEM_LATENCY_SCALE          # multiplies the L1 / L2 / MALL / HBM / store latencies
    bandwidth_efficiency: float = T.BANDWIDTH_EFFICIENCY    # achieved share of every level's peak bandwidth
    valu_scale: float = T.VALU_SCALE                        # multiplies the VALU cycle table
    scaled_cvt_cycles: float = T.SCALED_CVT_CYCLES          # VALU cycles of an MX scaled conversion


@dataclass
class Traced:
    """What the model needs of a traced launch, and nothing of the emulator (so it can be stored and
    re-modeled under other Params)."""
    ops: list                   # static.Op per instruction
    facts: object               # the program's LaunchFacts
    grid: tuple
    waves_per_wg: int
    ids: list                   # the sampled workgroups
    traces: list                # per sampled workgroup: [trace per wave]
    first_reads: list           # per sampled workgroup: {allocation index: distinct lines it read}
    union_lines: list           # per allocation index: distinct lines the sample read
    footprint_lines: list       # per allocation index: its lines

    @classmethod
    def of(cls, launch, tracer, ids) -> "Traced":
        n = len(tracer.alloc_index)
        foot = [0] * n
        for base, k in tracer.alloc_index.items():
            foot[k] = -(-tracer.read_allocs[base] // T.CACHE_LINE_BYTES) + 1
        union = [len(tracer.alloc_lines.get(k, ())) for k in range(n)]
        return cls(tracer.ops, launch.prep.program.facts, launch.grid, launch.nwaves, list(ids),
                   [tracer.workgroups[tuple(i)] for i in ids],
                   [dict(tracer.wg_lines[tuple(i)].first) for i in ids], union, foot)


@dataclass
class Timing:
    us: float                   # modeled kernel time, launch overhead included
    kernel_us: float            # without the launch overhead
    cycles: float
    sampling_error: float       # relative, from the two halves of the sample
    workgroups: int
    sampled: int
    waves_per_simd: int
    limit: str                  # what bounds the wave slots
    stalls: dict = field(default_factory=dict)
    wave_instructions: int = 0  # instructions the sampled workgroups executed

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def occupancy(facts, waves_per_wg: int) -> tuple[int, str]:
    """Wave slots per SIMD allowed by the kernel's VGPR/AGPR, LDS and the hardware maximum."""
    vgprs = (facts.vgpr_granules + 1) * T.VGPR_GRANULE
    by_vgpr = T.VGPRS_PER_SIMD_LANE // max(vgprs, 1)
    limits = {"hardware": T.MAX_WAVES_PER_SIMD, "vgpr": by_vgpr}
    lds = facts.lds_size
    if lds:
        wgs = T.LDS_BYTES_PER_CU // lds
        limits["lds"] = max(1, (wgs * waves_per_wg) // T.SIMDS_PER_CU)
    name = min(limits, key=lambda k: (limits[k], k != "hardware"))
    return max(1, limits[name]), name


_GOLDEN = 0.6180339887498949           # offsets of successive strata: the golden ratio's fraction


def sample_ids(grid, samples: int, phase: float = 0.0) -> list:
    """At most `samples` workgroup ids (x fastest): one per stratum of total / samples consecutive
    workgroups, every one of them when the grid has no more than that. The offset into stratum k is
    the fraction of phase + k x golden ratio: equal offsets would put every sample on the same column
    of a tiled grid whose row length divides the stratum (x = 0 at phase 0), and the work of causal or
    ragged grids changes along the columns. phase (0 <= phase < 1) picks another such sample."""
    if not 0.0 <= phase < 1.0:
        raise ValueError(f"sample_ids: phase must be in [0, 1), got {phase}")
    gx, gy, gz = grid
    total = gx * gy * gz
    n = min(total, max(1, samples))
    flat = [min(total - 1, int((k + (phase + k * _GOLDEN) % 1.0) * total / n)) for k in range(n)]
    return [_xyz(grid, f) for f in sorted(set(flat))]


def refined_ids(grid, ids: list) -> list:
    """The workgroups that double a sample of sample_ids: each stratum split in two halves, and in
    the half without a sample, the id half a stratum away from the stratum's sample (a sample of 2n
    strata, one per stratum). Strata of one workgroup cannot split: [] when none can."""
    gx, gy, gz = grid
    total = gx * gy * gz
    flat = sorted(f[0] + gx * (f[1] + gy * f[2]) for f in ids)
    n = len(flat)
    have, new = set(flat), []
    for k, f in enumerate(flat):
        lo, hi = k * total / n, (k + 1) * total / n
        other = int(lo + ((f - lo) + (hi - lo) / 2) % (hi - lo))
        if hi - lo >= 2 and other not in have:
            have.add(other)
            new.append(other)
    return [_xyz(grid, f) for f in new]


def _xyz(grid, f: int) -> tuple:
    gx, gy, _ = grid
    return (f % gx, (f // gx) % gy, f // (gx * gy))


def serving_levels(traced: Traced) -> list:
    """Per allocation read, the (L2, MALL, HBM) shares of the lines workgroups read from it for the
    first time.

    Over the grid, workgroups first-read `touches` lines of an allocation (the sample's mean,
    extrapolated) of `unique` distinct ones (its lines, at most the touches, at least what the
    sample itself read). A line read by s = touches / unique workgroups on average lands in
    X (1 - (1 - 1/X)^s) of the X XCDs' L2s (workgroups go round-robin over the XCDs; which ones
    share a line is taken as random), and each of those L2s fetches it once; an XCD's further first
    reads of it hit in the share of the allocation's lines its L2 holds. The L2 (and then the MALL)
    holds the most-reused allocations first (reads per distinct line), up to its capacity. Lines
    the L2s miss come from the Infinity Cache (MALL), except the first fetch of each line (HBM) and
    the share of the allocation the MALL cannot hold.
    """
    total = traced.grid[0] * traced.grid[1] * traced.grid[2]
    n = max(1, len(traced.first_reads))
    x = min(T.XCDS, total)
    allocs = []
    for k, (union, foot) in enumerate(zip(traced.union_lines, traced.footprint_lines)):
        touches = sum(wg.get(k, 0) for wg in traced.first_reads) * total / n
        unique = max(min(touches, foot), min(touches, union), 1.0)
        allocs.append((k, touches, unique))
    levels = [(1.0, 0.0, 0.0)] * len(allocs)
    room = T.L2_BYTES_PER_XCD / T.CACHE_LINE_BYTES          # per XCD
    missed = []
    for k, touches, unique in sorted(allocs, key=lambda a: -a[1] / a[2]):
        if touches <= 0:
            continue
        copies = x * (1.0 - (1.0 - 1.0 / x) ** (touches / unique)) if x > 1 else 1.0
        xcd_unique = unique * copies / x
        held = min(xcd_unique, room)
        room -= held
        l2_hits = max(0.0, touches - unique * copies) * held / xcd_unique
        missed.append((k, touches, unique, touches - l2_hits, l2_hits))
    room = T.MALL_BYTES / T.CACHE_LINE_BYTES
    for k, touches, unique, misses, l2_hits in sorted(missed, key=lambda a: -a[3] / a[2]):
        held = min(unique, room)
        room -= held
        mall_hits = max(0.0, misses - unique) * held / unique
        levels[k] = (l2_hits / touches, mall_hits / touches, (misses - mall_hits) / touches)
    return levels


def rates_for(params: Params, active_cus: int, levels=()) -> CU.Rates:
    """One CU's view of the memory system: every level's latency times mem_latency_scale, every
    bandwidth its peak times bandwidth_efficiency (the CU's path for L1 / L2, its share of the
    whole part's bandwidth for the MALL and HBM)."""
    eff, s = params.bandwidth_efficiency, params.mem_latency_scale
    cus = max(1, active_cus)
    return CU.Rates(l1_lat=T.L1_HIT_CYCLES * s, l2_lat=T.L2_HIT_CYCLES * s, mall_lat=T.MALL_CYCLES * s,
                    hbm_lat=T.HBM_CYCLES * s, smem_lat=T.SMEM_HIT_CYCLES, store_lat=T.STORE_ACK_CYCLES * s,
                    l1_bw=T.L1_BYTES_PER_CLK_PER_CU * eff, l2_bw=T.L2_BYTES_PER_CLK_PER_CU * eff,
                    mall_bw=T.MALL_BYTES_PER_S / T.CLOCK_HZ / cus * eff,
                    hbm_bw=T.HBM_BYTES_PER_S / T.CLOCK_HZ / cus * eff,
                    levels=list(levels),
                    valu_scale=params.valu_scale, scaled_cvt_cycles=params.scaled_cvt_cycles)


def time_launch(launch, *, samples: int = 16, rounds: int = 2, functional: bool = True,
                params: Params = Params(), phase: float = 0.0, target_error: float = 0.0,
                max_samples: int = 0) -> Timing:
    """Run `launch` (machine.Launch) with a sample of its workgroups traced, then model its time.

    A grid of at most one workgroup per CU is traced whole: its time is its slowest workgroup's.
    functional=True runs every workgroup (results complete and bit-identical to an untimed run);
    False runs only the sampled workgroups (for timing studies where the outputs are not used), and
    then, while the sampling error is above `target_error` and the sample below `max_samples`, doubles
    the sample (refined_ids: twice the strata) and models again.
    """
    grid = launch.grid
    total = grid[0] * grid[1] * grid[2]
    ids = sample_ids(grid, total if total <= T.CUS else samples, phase)
    if launch.probe is not None:
        raise ValueError("time_launch: the launch already has a probe (the tracer is one)")
    tracer = Tracer(launch.prep, set(ids))
    launch.probe = tracer
    try:
        if functional:
            launch.run()
        else:
            for wg in ids:
                launch.run_workgroup(wg)
        res = _modeled(launch, tracer, ids, rounds, params)
        # the error needs two halves of at least two workgroups each: a smaller sample grows first
        while not functional and (res.sampling_error > target_error or len(ids) < 4) and len(ids) < max_samples:
            more = refined_ids(grid, ids)[:max_samples - len(ids)]
            if not more:
                break
            tracer.traced.update(more)
            for wg in more:
                launch.run_workgroup(wg)
            ids = sorted(ids + more, key=lambda i: (i[2], i[1], i[0]))
            res = _modeled(launch, tracer, ids, rounds, params)
    finally:
        launch.probe = None
    return res


def _modeled(launch, tracer, ids, rounds, params) -> Timing:
    launch.timing_trace = Traced.of(launch, tracer, ids)   # lets a caller re-model it with other Params
    return model(launch.timing_trace, rounds=rounds, params=params)


def model(traced: Traced, *, rounds=2, params=Params(), error=True) -> Timing:
    ops, facts, grid, waves_per_wg = traced.ops, traced.facts, traced.grid, traced.waves_per_wg
    total = grid[0] * grid[1] * grid[2]
    wps, limit = occupancy(facts, waves_per_wg)
    slots = CU.Slots(wps, facts.lds_size)
    per_cu = -(-total // T.CUS)
    rates = rates_for(params, min(T.CUS, total), serving_levels(traced))
    traces = traced.traces
    ninstr = sum(len(tr) for wg in traces for tr in wg)
    concurrent = max(1, (wps * T.SIMDS_PER_CU) // max(1, waves_per_wg))
    if slots.lds_bytes:
        concurrent = min(concurrent, max(1, T.LDS_BYTES_PER_CU // slots.lds_bytes))

    def estimate(sample, stats=None):
        if per_cu == 1:
            # workgroups of equal traces take equal times: simulate each distinct one once
            distinct = {tuple(map(tuple, wg)): wg for wg in sample}
            return max(CU.simulate(ops, [wg], slots, rates, stats) for wg in distinct.values())
        # the busiest CU's stream, at most per_cu workgroups long; a sample longer than that is cut
        # into interleaved streams (every sampled workgroup runs once) whose estimates are averaged
        n_sim = min(per_cu, max(concurrent * rounds, len(sample)))
        groups = -(-len(sample) // n_sim)
        runs = []
        for g in range(groups):
            part = sample[g::groups]
            stream = [part[k % len(part)] for k in range(n_sim)]
            t_n = CU.simulate(ops, stream, slots, rates, stats if g == 0 else None)
            if per_cu == n_sim:
                runs.append(t_n)
                continue
            # a real CU ramps up and drains once per kernel, not once per simulated stream: the rest
            # of its workgroups run at the marginal rate of a stream twice as long
            t_2n = CU.simulate(ops, stream + stream, slots, rates)
            runs.append(t_n + (per_cu - n_sim) * (t_2n - t_n) / n_sim)
        return sum(runs) / groups

    stats = {}
    cycles = estimate(traces, stats)
    err = 0.0
    if error and len(traces) >= 4:
        a, b = estimate(traces[0::2]), estimate(traces[1::2])
        err = abs(a - b) / max(a + b, 1e-9)
    kernel_us = cycles / T.CLOCK_HZ * 1e6
    return Timing(us=kernel_us + params.launch_us, kernel_us=kernel_us, cycles=cycles,
                  sampling_error=err, workgroups=total, sampled=len(traces), waves_per_simd=wps,
                  limit=limit, stalls={k: v / T.CLOCK_HZ * 1e6 for k, v in stats.items()},
                  wave_instructions=ninstr)


__all__ = ["Params", "Timing", "Traced", "time_launch", "model", "occupancy", "sample_ids", "refined_ids",
           "serving_levels"]
