"""The timing model: it leaves results bit-identical, and each modeled effect follows the documented
latencies of emu/isa/gfx950/timing.py (asserted from the table's values, not from totals)."""
import dataclasses

import numpy as np
import pytest
import torch

from exec_helpers import EXEC, Operand, c, ins, label, lit, program, s, sp, v
from flyaot.emu import timing
from flyaot.emu.isa.gfx950 import timing as T
from flyaot.emu.machine import Launch, Prepared
from flyaot.emu.memory import Memory
from flyaot.emu.timing import static
from flyaot.emu.timing.trace import Tracer, lds_cycles

END = ins("s_endpgm", enc="SOPP")
# the table's own values, without the fitted scales
TABLE = timing.Params(launch_us=0.0, mem_latency_scale=1.0, bandwidth_efficiency=1.0, valu_scale=1.0)


def _cycles(body, grid=(1, 1, 1), block=(64, 1, 1), mem=None, **facts):
    prog = program(list(body) + [END])
    if facts:
        prog.facts = dataclasses.replace(prog.facts, **facts)
    res = timing.time_launch(Launch(Prepared(prog), grid, block, b"", mem or Memory()), samples=64, params=TABLE)
    return res


def _mfma(dst, acc):
    return ins("v_mfma_f32_16x16x32_bf16", [dst], [v(0, 4), v(4, 4), acc], enc="VOP3P")


def test_dependent_mfma_chain_costs_its_passes():
    per = static.mfma_cycles(_mfma(v(16, 4), v(16, 4)))
    assert per == 2 * 16 * 16 * 32 // T.MFMA_FLOPS_PER_CLK_PER_SIMD["bf16"]
    chain = [_mfma(v(16, 4), v(16, 4)) for _ in range(12)]
    short, long = _cycles(chain[:4]).cycles, _cycles(chain).cycles
    assert long - short == 8 * per
    # a VALU reading the chain's result waits for the last MFMA to finish
    use = ins("v_add_f32", [v(40)], [v(16), v(17)], enc="VOP2")
    free = ins("v_add_f32", [v(40)], [v(41), v(42)], enc="VOP2")
    assert _cycles(chain[:4] + [use]).cycles - _cycles(chain[:4] + [free]).cycles == per - T.ISSUE_CYCLES


def test_fp4_scaled_mfma_runs_at_the_fp4_rate():
    i4 = ins("v_mfma_scale_f32_16x16x128_f8f6f4", [v(16, 4)], [v(0, 8), v(0, 8), v(16, 4)], enc="VOP3P",
             cbsz=4, blgp=4)
    i8 = dataclasses.replace(i4, mods={})
    assert static.mfma_cycles(i4) == 2 * 16 * 16 * 128 // T.MFMA_FLOPS_PER_CLK_PER_SIMD["fp4"]
    assert static.mfma_cycles(i8) == 2 * static.mfma_cycles(i4)


def test_scaled_conversions_cost_their_fitted_cycles():
    # independent instructions of one wave: each holds the SIMD's VALU for its cycles; the MX scaled
    # conversions take the fitted Params.scaled_cvt_cycles, other VALU ops the table's rate
    cvt = ins("v_cvt_scalef32_pk_bf16_fp4", [v(8)], [v(1), v(2)], enc="VOP3", op_sel=1)
    plain = ins("v_cvt_pk_bf16_f32", [v(8)], [v(1), v(2)], enc="VOP3")
    assert static.op_of(cvt, 0).scaled_cvt and not static.op_of(plain, 0).scaled_cvt
    assert _cycles([plain] * 12).cycles - _cycles([plain] * 4).cycles == 8 * T.VALU_CYCLES
    assert _cycles([cvt] * 12).cycles - _cycles([cvt] * 4).cycles == 8 * TABLE.scaled_cvt_cycles
    assert TABLE.scaled_cvt_cycles == T.SCALED_CVT_CYCLES
    # the same traces replayed at another fitted value (what the calibration's fit does)
    full_rate = dataclasses.replace(TABLE, scaled_cvt_cycles=T.VALU_CYCLES)
    replays = []
    for n in (4, 12):
        launch = Launch(Prepared(program([cvt] * n + [END])), (1, 1, 1), (64, 1, 1), b"", Memory())
        timing.time_launch(launch, params=TABLE)
        replays.append(timing.replay(launch))
    assert replays[1](full_rate).cycles - replays[0](full_rate).cycles == 8 * T.VALU_CYCLES


def _load_body(arr, wait, loads=1):
    a = arr.ctypes.data
    body = [ins("v_lshlrev_b32", [v(4)], [c(2), v(0)], enc="VOP2"),
            ins("v_mov_b32", [v(3)], [lit(a >> 32)], enc="VOP1"),
            ins("v_add_co_u32", [v(2), sp("vcc")], [lit(a & 0xFFFFFFFF), v(4)], enc="VOP3"),
            ins("v_mov_b32", [v(3)], [lit(a >> 32)], enc="VOP1")]
    for _ in range(loads):
        body.append(ins("global_load_dword", [v(1)], [v(2, 2), sp("off")], enc="GLOBAL", offset=0))
        if wait:
            body.append(ins("s_waitcnt", enc="SOPP", vmcnt=0, lgkmcnt=15, expcnt=7))
    return body


def test_waitcnt_waits_for_the_outstanding_load():
    arr = np.arange(64, dtype=np.uint32)
    work = [ins("v_add_u32", [v(9)], [v(9), v(0)], enc="VOP2") for _ in range(100)]
    wait = ins("s_waitcnt", enc="SOPP", vmcnt=0, lgkmcnt=15, expcnt=7)

    def run(body):
        mem = Memory()
        mem.register_array(arr)
        return _cycles(body, mem=mem).cycles
    load = _load_body(arr, False)
    before = run(load + [wait] + work)          # the wave sleeps through the HBM latency first
    after = run(load + work + [wait])           # the 100 VALUs hide under the load
    assert before >= T.HBM_CYCLES + 100 * T.VALU_CYCLES
    assert before - after == pytest.approx(100 * T.VALU_CYCLES, abs=2 * T.ISSUE_CYCLES)
    # a second load of the same lines hits the workgroup's L1
    twice = run(_load_body(arr, True, loads=2))
    once = run(_load_body(arr, True, loads=1))
    assert twice - once == pytest.approx(T.L1_HIT_CYCLES + T.ISSUE_CYCLES, abs=T.ISSUE_CYCLES)


def test_waitcnt_counts_allow_later_loads_outstanding():
    arr = np.arange(64, dtype=np.uint32)
    mem = Memory()
    mem.register_array(arr)
    body = _load_body(arr, False, loads=2) + [ins("s_waitcnt", enc="SOPP", vmcnt=1, lgkmcnt=15, expcnt=7),
                                              ins("v_add_u32", [v(9)], [v(1), v(1)], enc="VOP2")]
    res = timing.time_launch(Launch(Prepared(program(body + [END])), (1, 1, 1), (64, 1, 1), b"", mem),
                             params=TABLE)
    assert res.stalls["wait"] * 1e-6 * T.CLOCK_HZ >= T.HBM_CYCLES - 8 * T.ISSUE_CYCLES


def test_lds_bank_conflicts():
    lanes = np.arange(64)
    assert lds_cycles(lanes * 4, 4) == T.LDS_MIN_CYCLES              # one dword per bank per clock
    assert lds_cycles(np.zeros(64, np.int64), 4) == T.LDS_MIN_CYCLES  # broadcast
    same_bank = lanes * 4 * T.LDS_BANKS
    assert lds_cycles(same_bank, 4) == 64                              # every lane on bank 0
    body = lambda stride: [ins("v_lshlrev_b32", [v(1)], [c(stride), v(0)], enc="VOP2"),  # noqa: E731
                           ins("ds_read_b32", [v(2)], [v(1)], enc="DS", offset=0),
                           ins("s_waitcnt", enc="SOPP", vmcnt=63, lgkmcnt=0, expcnt=7)]
    free = _cycles(body(2), lds_size=64 * 4 * T.LDS_BANKS).cycles
    conflicted = _cycles(body(2 + int(np.log2(T.LDS_BANKS))), lds_size=64 * 4 * T.LDS_BANKS).cycles
    assert conflicted - free == 64 - T.LDS_MIN_CYCLES


def test_vgprs_limit_occupancy():
    prog = program([END])
    for vgprs, want in ((64, T.MAX_WAVES_PER_SIMD), (128, 4), (256, 2), (512, 1)):
        facts = dataclasses.replace(prog.facts, vgpr_granules=vgprs // T.VGPR_GRANULE - 1)
        assert timing.occupancy(facts, 1) == (want, "vgpr" if want < T.MAX_WAVES_PER_SIMD else "hardware")
    # latency-bound single-wave workgroups: with one wave slot per SIMD they run one after another
    arr = np.arange(64, dtype=np.uint32)
    def run(vgprs):
        mem = Memory()
        mem.register_array(arr)
        return _cycles(_load_body(arr, True, loads=4), grid=(8, 1, 1), mem=mem,
                       vgpr_granules=vgprs // T.VGPR_GRANULE - 1)
    wide, narrow = run(512), run(64)
    assert wide.waves_per_simd == 1 and narrow.waves_per_simd == 8
    assert wide.cycles == narrow.cycles        # 8 workgroups on 256 CUs: one per CU either way


def test_occupancy_limits_a_crowded_cu():
    arr = np.arange(256, dtype=np.uint32)
    def run(vgprs):
        mem = Memory()
        mem.register_array(arr)
        return _cycles(_load_body(arr, True, loads=4), grid=(T.CUS * 8, 1, 1), block=(256, 1, 1), mem=mem,
                       vgpr_granules=vgprs // T.VGPR_GRANULE - 1).cycles
    # 8 four-wave workgroups per CU: 2 resident at 2 waves/SIMD, all 8 at 8 waves/SIMD
    assert run(256) > 2.5 * run(64)


def test_timing_leaves_results_bit_identical(emu_samples_store, tmp_path, monkeypatch):
    pytest.importorskip("flydsl")
    from flyaot.kernel_defs.emu_samples import plan, reference
    from flyaot.runtime.config import Config
    from flyaot.runtime.dispatch import Runtime
    from flyaot.runtime.drivers import emu as emu_driver
    cfg = dataclasses.replace(Config.from_env(), package_dir=tmp_path / "none",
                              extra_stores=(emu_samples_store,), cache_dir=tmp_path / "cache",
                              disable_jit=True, record_misses="", device="emu")
    rt = Runtime(cfg)
    for kernel in plan.KERNELS:
        plain, timed, by_env = (reference.make_case(kernel) for _ in range(3))
        rt.launch(plan.plan(kernel, plain), None)
        with emu_driver.recording() as rec:
            rt.launch(plan.plan(kernel, timed), None)
        with monkeypatch.context() as mp:
            mp.setenv("FLYAOT_EMU_TIMING", "1")
            rt.launch(plan.plan(kernel, by_env), None)
        assert rec.launches and rec.launches[0][1].us > T.LAUNCH_US
        assert rec.launches[0][2](timing.Params()).cycles == rec.launches[0][1].cycles
        for name in reference.expected(kernel, plain):
            for other in (timed, by_env):
                a, b = plain[name], other[name]
                assert torch.equal(a.view(torch.uint8) if a.is_floating_point() else a,
                                   b.view(torch.uint8) if b.is_floating_point() else b), (kernel, name)


class _Touched:
    """A probe that records the cache lines of every global access the memory handlers make."""
    watches = True

    def __init__(self, mem):
        self.lines: set = set()
        self.memory = mem
        mem.watch = self

    def mem(self, mode, addr, nbytes):
        shift = T.CACHE_LINE_BYTES.bit_length() - 1
        for a in addr.tolist():
            # as on the device, every allocation starts a line (the launch's own kernarg array need not)
            a -= self.memory.dword_view(a, a + 1)[1] % T.CACHE_LINE_BYTES
            self.lines.update(range(a >> shift, ((a + nbytes - 1) >> shift) + 1))

    def workgroup(self, wg_id, waves):
        return True

    def before(self, w, k, ins):
        pass

    after = lds = before

    def released(self, waves):
        pass

    def finish(self):
        pass


def _line_aligned(values):
    raw = np.zeros(values.size + T.CACHE_LINE_BYTES // 4, dtype=np.uint32)
    k = (-raw.ctypes.data % T.CACHE_LINE_BYTES) // 4
    out = raw[k:k + values.size]
    out[:] = values
    return out


def test_the_tracer_counts_the_lines_the_memory_handlers_touch():
    # scalar loads at offsets lines apart, a global load through an SGPR base, a buffer load whose
    # upper lanes are out of range (they move no data): the tracer's lines are the handlers' lines
    # line-aligned arrays: the tracer counts lines relative to their allocation's alignment
    a, b = _line_aligned(np.arange(64, dtype=np.uint32)), _line_aligned(np.arange(64, dtype=np.uint32) + 100)
    mem = Memory()
    for arr in (a, b):
        mem.register_array(arr)
    far = 3 * T.CACHE_LINE_BYTES
    kernarg = np.zeros(far // 8 + 1, dtype=np.uint64)
    kernarg[0], kernarg[far // 8] = a.ctypes.data, b.ctypes.data
    smem = lambda dst, off: ins("s_load_dwordx2", [s(dst, 2)], [s(0, 2)], enc="SMEM", offset=off,  # noqa: E731
                                soffset=None)
    body = [smem(4, 0), smem(6, far),
            ins("s_waitcnt", enc="SOPP", vmcnt=63, lgkmcnt=0, expcnt=7),
            ins("v_lshlrev_b32", [v(4)], [c(2), v(0)], enc="VOP2"),
            ins("global_load_dword", [v(1)], [v(4), s(4, 2)], enc="GLOBAL", offset=0),
            ins("s_mov_b32", [s(8)], [s(6)], enc="SOP1"),
            ins("s_and_b32", [s(9)], [s(7), lit(0xFFFF)], enc="SOP2"),
            ins("s_mov_b32", [s(10)], [lit(a.nbytes // 2)], enc="SOP1"),
            ins("s_mov_b32", [s(11)], [c(0)], enc="SOP1"),
            ins("buffer_load_dword", [v(2)], [v(4), s(8, 4), c(0)], enc="MUBUF", offen=1, offset=0),
            ins("s_waitcnt", enc="SOPP", vmcnt=0, lgkmcnt=15, expcnt=7)]
    launch = Launch(Prepared(program(body + [END])), (1, 1, 1), (64, 1, 1), kernarg.tobytes(), mem)
    launch.probe = tracer = Tracer(launch.prep)
    launch.run()
    launch.probe = touched = _Touched(mem)
    launch.run()
    assert len(touched.lines) >= 4 and tracer.lines == touched.lines


def test_scalar_loads_count_lines_from_their_allocations_start():
    # the same data at a line boundary and 64 bytes past one: a device allocation starts a line, so
    # the second s_load (64 bytes further) is on the first one's line in both placements
    raw = np.zeros(3 * T.CACHE_LINE_BYTES // 4, dtype=np.uint32)
    first = (-raw.ctypes.data % T.CACHE_LINE_BYTES) // 4
    new_lines = []
    for skew in (0, 64):
        arr = raw[first + skew // 4:first + skew // 4 + T.CACHE_LINE_BYTES // 4]
        mem = Memory()
        mem.register_array(arr)
        kernarg = np.array([arr.ctypes.data], dtype=np.uint64).tobytes()
        body = [ins("s_load_dwordx2", [s(4, 2)], [s(0, 2)], enc="SMEM", offset=0, soffset=None),
                ins("s_waitcnt", enc="SOPP", vmcnt=63, lgkmcnt=0, expcnt=7),
                ins("s_load_dwordx16", [s(8, 16)], [s(4, 2)], enc="SMEM", offset=0, soffset=None),
                ins("s_load_dwordx16", [s(24, 16)], [s(4, 2)], enc="SMEM", offset=64, soffset=None),
                ins("s_waitcnt", enc="SOPP", vmcnt=63, lgkmcnt=0, expcnt=7)]
        launch = Launch(Prepared(program(body + [END])), (1, 1, 1), (64, 1, 1), kernarg, mem)
        launch.probe = tracer = Tracer(launch.prep)
        launch.run()
        new_lines.append([e[1] for e in tracer.workgroups[(0, 0, 0)][0] if isinstance(e, tuple)])   # (index, probe)
    assert new_lines[0] == new_lines[1] == [1, 1, 0]


def _levels_of(grid, per_wg_lines):
    """serving_levels of a real traced launch: every workgroup loads 64 dwords, all from one array
    (per_wg_lines=False: the same lines) or each from its own slice."""
    arr = np.arange(64 * (grid[0] if per_wg_lines else 1), dtype=np.uint32)
    mem = Memory()
    mem.register_array(arr)
    a = arr.ctypes.data
    body = [ins("v_lshlrev_b32", [v(4)], [c(2), v(0)], enc="VOP2")]
    if per_wg_lines:        # + 256 bytes x workgroup id (s2 holds the workgroup id x)
        body.append(ins("s_lshl_b32", [s(3)], [s(2), c(8)], enc="SOP2"))
        body.append(ins("v_add_u32", [v(4)], [s(3), v(4)], enc="VOP2"))
    body += [ins("v_mov_b32", [v(3)], [lit(a >> 32)], enc="VOP1"),
             ins("v_add_co_u32", [v(2), sp("vcc")], [lit(a & 0xFFFFFFFF), v(4)], enc="VOP3"),
             ins("v_addc_co_u32", [v(3), sp("vcc")], [v(3), c(0), sp("vcc")], enc="VOP3"),
             ins("global_load_dword", [v(1)], [v(2, 2), sp("off")], enc="GLOBAL", offset=0),
             ins("s_waitcnt", enc="SOPP", vmcnt=0, lgkmcnt=15, expcnt=7)]
    launch = Launch(Prepared(program(body + [END])), grid, (64, 1, 1), b"", mem)
    timing.time_launch(launch, samples=16, params=TABLE)
    traced = launch.timing_trace
    assert len(traced.footprint_lines) == 1                 # one allocation read
    return traced, timing.serving_levels(traced)[0]


def test_lines_every_workgroup_reads_are_fetched_once_per_xcd():
    wgs = T.CUS * 4
    traced, (l2, mall, hbm) = _levels_of((wgs, 1, 1), per_wg_lines=False)
    assert l2 + mall + hbm == pytest.approx(1.0)
    touches = sum(wg[0] for wg in traced.first_reads) / len(traced.first_reads) * wgs
    unique = traced.footprint_lines[0]     # the whole array: fewer lines than the grid's first reads
    assert unique < touches
    # each XCD's L2 fetches every line once: the first fetch from HBM, the other XCDs' from the MALL
    assert hbm * touches == pytest.approx(unique)
    assert mall * touches == pytest.approx((T.XCDS - 1) * unique)


def test_lines_no_two_workgroups_share_come_from_hbm():
    traced, (l2, mall, hbm) = _levels_of((T.CUS * 2, 1, 1), per_wg_lines=True)
    assert traced.union_lines[0] == sum(wg[0] for wg in traced.first_reads)   # the sample shares no line
    assert (l2, mall, hbm) == pytest.approx((0.0, 0.0, 1.0))


def test_capacities_bound_the_cache_levels():
    # the same sharing with a footprint beyond the L2 of an XCD and then beyond the MALL: what no
    # level can hold comes from the next one
    traced, _ = _levels_of((T.CUS * 4, 1, 1), per_wg_lines=False)
    line, n = T.CACHE_LINE_BYTES, len(traced.first_reads)
    big = dataclasses.replace(traced, first_reads=[{0: 4 * T.L2_BYTES_PER_XCD // line}] * n,
                              footprint_lines=[2 * T.L2_BYTES_PER_XCD // line])
    huge = dataclasses.replace(big, footprint_lines=[2 * T.MALL_BYTES // line],
                               first_reads=[{0: 4 * T.MALL_BYTES // line}] * n)
    l2_small = timing.serving_levels(traced)[0][0]
    l2_big, _, hbm_big = timing.serving_levels(big)[0]
    l2_huge, mall_huge, hbm_huge = timing.serving_levels(huge)[0]
    assert l2_huge < l2_big < l2_small and hbm_huge > hbm_big
    assert l2_huge + mall_huge + hbm_huge == pytest.approx(1.0)
    # beside a cold allocation larger than the L2, a small one every workgroup reads keeps its place
    hot_lines = traced.footprint_lines[0]
    cold = {0: traced.first_reads[0][0], 1: 4 * T.L2_BYTES_PER_XCD // line}
    mixed = dataclasses.replace(big, first_reads=[cold] * n, union_lines=[0, 0],
                                footprint_lines=[hot_lines, 16 * T.L2_BYTES_PER_XCD // line])
    hot, cold = timing.serving_levels(mixed)
    assert hot == pytest.approx(timing.serving_levels(traced)[0]) and cold[0] < hot[0]
    assert cold[0] < 1.1 * T.L2_BYTES_PER_XCD / (16 * T.L2_BYTES_PER_XCD)   # each L2 holds what room is left


# ----- sampling: which workgroups are traced, and how the sample grows -----
def _flat(grid, ids):
    return sorted(x + grid[0] * (y + grid[1] * z) for x, y, z in ids)


def test_samples_are_one_per_stratum_on_varying_columns():
    grid = (32, 64, 1)                  # a row-major tiling whose row length divides the stratum (128)
    total, n = 32 * 64, 16
    for phase in (0.0, 0.5):
        ids = timing.sample_ids(grid, n, phase)
        assert [f * n // total for f in _flat(grid, ids)] == list(range(n))
        assert len({x for x, _, _ in ids}) > n // 2      # equal offsets would give x = 0 sixteen times
    assert not set(timing.sample_ids(grid, n, 0.0)) & set(timing.sample_ids(grid, n, 0.5))
    assert _flat((5, 1, 1), timing.sample_ids((5, 1, 1), 9)) == [0, 1, 2, 3, 4]


def test_refined_sample_has_one_workgroup_per_half_stratum():
    grid = (1000, 3, 1)
    ids = timing.sample_ids(grid, 12, 0.25)
    for _ in range(3):
        more = timing.refined_ids(grid, ids)
        assert len(more) == len(ids) and not set(more) & set(ids)
        ids = ids + more
        n = len(ids)
        assert [f * n // 3000 for f in _flat(grid, ids)] == list(range(n))
    tiny = timing.sample_ids((4, 1, 1), 4)
    assert timing.refined_ids((4, 1, 1), tiny) == []       # strata of one workgroup cannot split


def _uneven_launch(grid):
    """Odd workgroups (s2 = workgroup id x) run 40 more VALU instructions than even ones."""
    skip = 0x100 + 4 * (3 + 40)
    body = [ins("s_and_b32", [s(3)], [s(2), c(1)], enc="SOP2"),
            ins("s_cmp_eq_u32", [], [s(3), c(0)], enc="SOPC"),
            ins("s_cbranch_scc1", [], [label(skip)], enc="SOPP")]
    body += [ins("v_add_f32", [v(1)], [v(1), v(0)], enc="VOP2")] * 40
    return Launch(Prepared(program(body + [END])), grid, (64, 1, 1), b"", Memory())


def test_a_grid_of_at_most_one_workgroup_per_cu_is_traced_whole():
    res = timing.time_launch(_uneven_launch((T.CUS, 1, 1)), samples=2, functional=False, params=TABLE)
    assert res.sampled == T.CUS
    # the slowest workgroup sets the time: an odd one, which a 2-sample (x = 0, x = 128) would miss
    odd = timing.time_launch(_uneven_launch((1, 1, 1)), params=TABLE)
    assert res.cycles > odd.cycles * 0.99 and res.cycles > timing.time_launch(
        _uneven_launch((2, 1, 1)), params=TABLE).cycles * 0.99


def test_sample_doubles_while_its_error_is_above_the_target():
    grid = (T.CUS * 64, 1, 1)
    first = timing.time_launch(_uneven_launch(grid), samples=3, functional=False, params=TABLE)
    assert first.sampled == 3                                       # no target: the sample as asked
    grown = timing.time_launch(_uneven_launch(grid), samples=3, functional=False, params=TABLE,
                               target_error=0.0, max_samples=24)
    assert grown.sampled == 24                                      # 3 -> 6 -> 12 -> 24, the cap
    done = timing.time_launch(_uneven_launch(grid), samples=3, functional=False, params=TABLE,
                              target_error=1.0, max_samples=24)
    assert done.sampled == 6                                        # the error needs 4: 3 -> 6, then within



def _traced_load(grid, samples=4):
    """The traces of four-wave workgroups that load, wait and add (a latency-bound body)."""
    arr = np.arange(256, dtype=np.uint32)
    mem = Memory()
    mem.register_array(arr)
    launch = Launch(Prepared(program(_load_body(arr, True, loads=4) + [END])), grid, (256, 1, 1), b"", mem)
    timing.time_launch(launch, samples=samples, functional=False, params=TABLE)
    return launch.timing_trace


def test_a_long_stream_pays_its_ramp_up_and_drain_once():
    traced = _traced_load((T.CUS * 8, 1, 1))
    cycles = {per_cu: timing.model(dataclasses.replace(traced, grid=(T.CUS * per_cu, 1, 1)), params=TABLE).cycles
              for per_cu in (64, 128, 256)}
    # beyond the simulated stream every further workgroup adds the same marginal time...
    step = cycles[128] - cycles[64]
    assert cycles[256] - cycles[128] == pytest.approx(2 * step, rel=1e-3)   # (the levels' shares vary a little)
    # ...below a short stream's time per workgroup, which carries a ramp-up and a drain
    assert step / 64 < cycles[64] / 64


def test_a_grid_traced_whole_simulates_each_distinct_workgroup_once():
    from flyaot.emu.timing import cu as CU
    from flyaot.emu.timing.model import rates_for
    launch = _uneven_launch((T.CUS, 1, 1))
    timing.time_launch(launch, samples=2, functional=False, params=TABLE)
    traced = launch.timing_trace
    assert len(traced.traces) == T.CUS
    res = timing.model(traced, params=TABLE)
    slots = CU.Slots(res.waves_per_simd, traced.facts.lds_size)
    rates = rates_for(TABLE, T.CUS, timing.serving_levels(traced))
    alone = [CU.simulate(traced.ops, [wg], slots, rates) for wg in traced.traces]
    assert len(set(alone)) == 2 and res.cycles == max(alone)     # even and odd workgroups differ
