"""Kernel time on the modeled part: occupancy, workgroup dispatch over the CUs, sampling.

`time_launch(launch)` traces a sample of the launch's workgroups on the functional emulator (all of
them, or only the sampled ones when the results are not needed), replays them on one compute unit
(cu.simulate) and scales to the grid:
- grid <= CUs: every workgroup has a CU to itself, the kernel lasts as long as its slowest
  workgroup (taken over the sampled ones);
- larger grids: the busiest CU runs ceil(grid / CUs) workgroups; it is simulated on a stream of the
  sampled traces that fills its wave slots for at most `rounds` dispatch rounds and the time is
  scaled by the number of rounds it really runs.
The sampling error is the relative difference between the estimates from the even- and odd-numbered
halves of the sample. The time adds the fixed launch overhead.
"""
from dataclasses import dataclass, field

from .. import isa
from . import cu as CU
from . import static
from .trace import Tracer

T = isa.load(isa.ARCH).timing


@dataclass(frozen=True)
class Params:
    """The model's global, fitted parameters (docs/timing-model.md says how they were fitted)."""
    launch_us: float = T.LAUNCH_US
    mem_latency_scale: float = T.MEM_LATENCY_SCALE          # multiplies the L2 / HBM / store latencies
    bandwidth_efficiency: float = T.BANDWIDTH_EFFICIENCY    # multiplies the L1 / L2 / HBM bandwidths
    valu_scale: float = T.VALU_SCALE                        # multiplies the VALU cycle table
    scaled_cvt_cycles: float = T.SCALED_CVT_CYCLES          # VALU cycles of an MX scaled conversion


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


def sample_ids(grid, samples: int) -> list:
    """Evenly spaced workgroup ids (x fastest), at most `samples` of them."""
    gx, gy, gz = grid
    total = gx * gy * gz
    n = min(total, max(1, samples))
    flat = sorted({(k * total) // n for k in range(n)})
    return [(f % gx, (f // gx) % gy, f // (gx * gy)) for f in flat]


def rates_for(params: Params, active_cus: int) -> CU.Rates:
    eff = params.bandwidth_efficiency
    hbm = T.HBM_BYTES_PER_S / T.CLOCK_HZ / max(1, active_cus) * eff
    s = params.mem_latency_scale
    return CU.Rates(l2_lat=T.L2_HIT_CYCLES * s, hbm_lat=T.HBM_CYCLES * s, smem_lat=T.SMEM_HIT_CYCLES,
                    store_lat=T.STORE_ACK_CYCLES * s, l1_bw=T.L1_BYTES_PER_CLK_PER_CU * eff,
                    l2_bw=T.L2_BYTES_PER_CLK_PER_CU * eff, hbm_bw=min(hbm, T.HBM_BYTES_PER_S / T.CLOCK_HZ /
                                                                     max(1, active_cus)),
                    valu_scale=params.valu_scale, scaled_cvt_cycles=params.scaled_cvt_cycles)


def time_launch(launch, *, samples: int = 16, rounds: int = 2, functional: bool = True,
                params: Params = Params()) -> Timing:
    """Run `launch` (machine.Launch) with a sample of its workgroups traced, then model its time.

    functional=True runs every workgroup (results complete and bit-identical to an untimed run);
    False runs only the sampled workgroups (for timing studies where the outputs are not used).
    """
    grid = launch.grid
    ids = sample_ids(grid, samples)
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
    finally:
        launch.probe = None
    launch.timing_trace = (tracer, ids)      # lets a caller re-model the same run with other Params
    return model(launch.prep, grid, launch.nwaves, tracer, ids, rounds=rounds, params=params)


def model(prep, grid, waves_per_wg, tracer, ids, *, rounds=2, params=Params(), error=True) -> Timing:
    ops = static.ops_of(prep)
    facts = prep.program.facts
    total = grid[0] * grid[1] * grid[2]
    wps, limit = occupancy(facts, waves_per_wg)
    slots = CU.Slots(wps, facts.lds_size)
    per_cu = -(-total // T.CUS)
    rates = rates_for(params, min(T.CUS, total))
    traces = [tracer.workgroups[tuple(i)] for i in ids]
    # Lines the sample touched first extrapolate to the grid's HBM traffic only while workgroups do
    # not share data; the grid cannot read more from HBM than the inputs it reads (compulsory misses,
    # caches assumed to hold the rest), so scale first touches down to that footprint.
    new_bytes = len(tracer.lines) * T.CACHE_LINE_BYTES * total / max(1, len(ids))
    footprint = sum((-(-n // T.CACHE_LINE_BYTES) + 1) * T.CACHE_LINE_BYTES for n in tracer.read_allocs.values())
    if footprint and new_bytes > footprint:
        rates.hbm_fraction = footprint / new_bytes
    ninstr = sum(len(tr) for wg in traces for tr in wg)
    concurrent = max(1, (wps * T.SIMDS_PER_CU) // max(1, waves_per_wg))
    if slots.lds_bytes:
        concurrent = min(concurrent, max(1, T.LDS_BYTES_PER_CU // slots.lds_bytes))

    def estimate(sample, stats=None):
        if per_cu == 1:
            return max(CU.simulate(ops, [wg], slots, rates, stats) for wg in sample)
        n_sim = min(per_cu, concurrent * rounds)
        stream = [sample[k % len(sample)] for k in range(n_sim)]
        return CU.simulate(ops, stream, slots, rates, stats) * per_cu / n_sim

    stats = {}
    cycles = estimate(traces, stats)
    err = 0.0
    if error and len(traces) >= 4:
        a, b = estimate(traces[0::2]), estimate(traces[1::2])
        err = abs(a - b) / max(a + b, 1e-9)
    kernel_us = cycles / T.CLOCK_HZ * 1e6
    return Timing(us=kernel_us + params.launch_us, kernel_us=kernel_us, cycles=cycles,
                  sampling_error=err, workgroups=total, sampled=len(ids), waves_per_simd=wps,
                  limit=limit, stalls={k: v / T.CLOCK_HZ * 1e6 for k, v in stats.items()},
                  wave_instructions=ninstr)


__all__ = ["Params", "Timing", "time_launch", "model", "occupancy", "sample_ids"]
