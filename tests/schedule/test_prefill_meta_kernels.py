"""The prefill metadata kernels (mqa_prefill_meta) on the emulator against their torch references, bit for
bit: random and edge-case windows, schedules of any slot count, hostile table values, reused buffers, and
writes that stay inside the output tensors."""
import random

import pytest
import torch

from flyaot import runtime
from flyaot.kernel_defs.mqa_prefill_meta import plan as meta
from flyaot.kernel_defs.mqa_prefill_meta import reference as R
from flyaot.kernel_defs.mqa_prefill_meta.geometry import CTA_INFO_INTS, MAX_ROWS, ROW_INFO_INTS

GUARD = 3           # sentinel rows around every output
SENTINEL = -123457


def i32(values):
    return torch.tensor(values, dtype=torch.int32)


def guarded(rows: int, width: int = None):
    """(the output view, the whole buffer) with GUARD sentinel rows on each side."""
    shape = (rows + 2 * GUARD,) if width is None else (rows + 2 * GUARD, width)
    whole = torch.full(shape, SENTINEL, dtype=torch.int32)
    return whole[GUARD:GUARD + rows], whole


def assert_guards(whole):
    assert torch.all(whole[:GUARD] == SENTINEL) and torch.all(whole[whole.shape[0] - GUARD:] == SENTINEL)


def random_windows(rng, rows, n_batch, max_seq_len):
    """Runs of one batch (often longer than 4 rows), revisited batches, empty and inverted windows,
    negative starts, ends past max_seq_len, negative ends."""
    rb, b = [], rng.randrange(n_batch)
    while len(rb) < rows:
        rb += [b] * rng.choice([1, 2, 3, 4, 5, 7, 9, 13, 40])
        b = rng.randrange(n_batch)
    ls, le = [], []
    for _ in range(rows):
        kind = rng.random()
        lo = rng.randrange(max_seq_len + 1)
        if kind < 0.15:
            ls.append(lo), le.append(rng.randint(lo - 40, lo))                      # empty / inverted
        elif kind < 0.25:
            ls.append(rng.randint(-300, -1)), le.append(rng.randint(-50, max_seq_len))  # negative start
        elif kind < 0.35:
            ls.append(lo), le.append(max_seq_len + rng.randint(1, 1000))             # past max_seq_len
        else:
            ls.append(lo if kind < 0.7 else 0), le.append(rng.randint(lo + 1, max_seq_len + 1))
    return [i32(v) for v in (rb[:rows], ls, le)]


def run_groups(rb, ls, le, *, page_size, max_seq_len, slots):
    out, whole = guarded(slots, CTA_INFO_INTS)
    plan = meta.groups(rb, ls, le, out, page_size=page_size, max_seq_len=max_seq_len)
    runtime.launch(plan)
    assert_guards(whole)
    return out


@pytest.mark.parametrize("seed", range(10))
def test_groups_match_reference(seed):
    rng = random.Random(seed)
    rows = rng.choice([1, 2, 5, 9, 63, 64, 65, 300, 1023, 1025, 2000])
    max_seq_len = rng.choice([1, 255, 256, 700, 5000, 70000])
    page = rng.choice([64, 128, 1, 3])
    slots = rows + rng.choice([0, 1, 7, 2048, 3 * rows])
    rb, ls, le = random_windows(rng, rows, rng.randint(1, 5), max_seq_len)
    got = run_groups(rb, ls, le, page_size=page, max_seq_len=max_seq_len, slots=slots)
    assert torch.equal(got, R.build_schedule(rb, ls, le, page_size=page, max_seq_len=max_seq_len, slots=slots))


@pytest.mark.parametrize("name,rb,ls,le,max_seq_len,slots", [
    ("one long run", [0] * 37, [0] * 37, list(range(100, 137 * 100, 100))[:37], 4000, 37),
    ("every row its own batch", list(range(11)), [5] * 11, [900] * 11, 1000, 11),
    ("all windows empty", [0] * 6, [9] * 6, [3] * 6, 50, 40),
    ("long windows squeezed into few slots", [0] * 8 + [1] * 8, [0] * 16, [1 << 20] * 16, 1 << 20, 16),
    ("fewer slots than groups", [0, 1, 2, 3, 4, 5], [0] * 6, [300] * 6, 300, 4),
])
def test_groups_edge_cases(name, rb, ls, le, max_seq_len, slots):
    rb, ls, le = i32(rb), i32(ls), i32(le)
    got = run_groups(rb, ls, le, page_size=64, max_seq_len=max_seq_len, slots=slots)
    assert torch.equal(got, R.build_schedule(rb, ls, le, page_size=64, max_seq_len=max_seq_len, slots=slots))


def test_groups_hostile_values_stay_inside():
    """Extreme batches and windows: the table is still the reference's and nothing outside it is written."""
    big = (1 << 31) - 1
    rb = i32([-big - 1, -big - 1, big, big, big, big, big, 0, -5])
    ls = i32([-big - 1, big, 0, -1, 5, big, 0, 0, 3])
    le = i32([big, big, -big - 1, big, 6, big, 1, 2, 4])
    got = run_groups(rb, ls, le, page_size=7, max_seq_len=(1 << 30) - 1, slots=12)
    assert torch.equal(got, R.build_schedule(rb, ls, le, page_size=7, max_seq_len=(1 << 30) - 1, slots=12))


def test_groups_refill_a_reused_buffer():
    rng = random.Random(7)
    out = torch.full((50, CTA_INFO_INTS), 99, dtype=torch.int32)
    for rows in (40, 3):
        rb, ls, le = random_windows(rng, rows, 3, 900)
        runtime.launch(meta.groups(rb, ls, le, out, page_size=64, max_seq_len=900))
        assert torch.equal(out, R.build_schedule(rb, ls, le, page_size=64, max_seq_len=900, slots=50))


def test_groups_past_the_lds_rows_use_the_reference():
    rows = MAX_ROWS + 1
    rb = torch.arange(rows, dtype=torch.int32) // 6
    ls = torch.zeros(rows, dtype=torch.int32)
    le = torch.full((rows,), 300, dtype=torch.int32)
    out = torch.empty(rows, CTA_INFO_INTS, dtype=torch.int32)
    assert meta.groups(rb, ls, le, out, page_size=64, max_seq_len=300) is None
    assert torch.equal(out, R.build_schedule(rb, ls, le, page_size=64, max_seq_len=300, slots=rows))


# --------------------------------------------------------------------------------------------- windows

def run_windows(cu, ctx, rows):
    bufs = [guarded(rows) for _ in range(3)]
    runtime.launch(meta.windows(cu, ctx, tuple(b[0] for b in bufs)))
    for _, whole in bufs:
        assert_guards(whole)
    return tuple(b[0] for b in bufs)


@pytest.mark.parametrize("seed", range(6))
def test_windows_match_reference(seed):
    rng = random.Random(100 + seed)
    n_batch = rng.choice([1, 2, 5, 17, 300])
    qlens = [rng.choice([0, 1, 2, 3, 8, 40]) for _ in range(n_batch)]
    cu = i32([0] + list(torch.tensor(qlens).cumsum(0).tolist()))
    ctx = i32([rng.choice([0, 1, 5, 300, 70000, (1 << 31) - 1]) for _ in range(n_batch)])
    rows = int(cu[-1]) + rng.choice([0, 1, 5, 300])          # graph padding rows past cu[B]
    if rows == 0:
        rows = 1
    got = run_windows(cu, ctx, rows)
    for g, w in zip(got, R.varqlen_windows(cu, ctx, rows)):
        assert torch.equal(g, w)


def test_windows_no_batch_is_all_padding():
    """No batch: every row is padding with an empty window and batch -1, as the reference writes."""
    cu, ctx = i32([0]), torch.zeros(0, dtype=torch.int32)
    rb, ls, le = run_windows(cu, ctx, 5)
    assert torch.all(rb == -1) and torch.all(ls == 0) and torch.all(le == 0)
    for g, w in zip((rb, ls, le), R.varqlen_windows(cu, ctx, 5)):
        assert torch.equal(g, w)


def test_windows_hostile_offsets_stay_inside():
    """cu_seq_q that is not a prefix sum (the caller's contract, checked only in checked mode): any row's
    batch is still one of the batches and nothing outside the outputs is written."""
    cu = i32([5, -7, 1 << 30, 3, -(1 << 31)])
    ctx = i32([-(1 << 31), (1 << 31) - 1, 7, 0])
    rb, ls, le = run_windows(cu, ctx, 9)
    assert torch.all((rb >= 0) & (rb < 4)) and torch.all(ls == 0)


# --------------------------------------------------------------------------------------------- convert

def random_table(rng, slots, rows, block_k, max_seq_len):
    """One-row-per-CTA entries, many of them hostile: rows outside [0, rows), runs outside the window,
    negative counts, extreme values."""
    big = (1 << 31) - 1
    entries = []
    for _ in range(slots):
        kind = rng.random()
        if kind < 0.2:
            entries.append([rng.choice([-big - 1, -1, big, rng.randint(-3 * rows, 3 * rows)]) for _ in range(6)])
            continue
        row = rng.randrange(rows) if kind < 0.9 else rng.choice([-1, rows, rows + 5])
        ls = rng.choice([0, 0, rng.randint(-50, max_seq_len)])
        le = rng.randint(ls - 10, max_seq_len + 600)
        start = rng.randint(-2, max(0, le // block_k) + 2)
        entries.append([row, rng.randrange(4), start, rng.randint(-1, 5), ls, le])
    return i32(entries).reshape(slots, ROW_INFO_INTS)


@pytest.mark.parametrize("seed", range(6))
def test_convert_matches_reference(seed):
    rng = random.Random(200 + seed)
    rows, block_k = rng.choice([1, 7, 64, 500]), rng.choice([64, 128, 256, 512, 1024])
    max_seq_len, page = rng.choice([1, 300, 5000]), rng.choice([64, 128])
    slots = rng.choice([1, 5, 300, 700])
    n_ctas = rng.randint(1, slots)
    table = random_table(rng, slots, rows, block_k, max_seq_len)
    info, plan = meta.convert(table, n_ctas, block_k=block_k, rows=rows, page_size=page, max_seq_len=max_seq_len)
    runtime.launch(plan)
    want = R.from_row_schedule(table, n_ctas, block_k=block_k, rows=rows, page_size=page, max_seq_len=max_seq_len)
    assert info.shape == (n_ctas, CTA_INFO_INTS) and torch.equal(info, want)



# ------------------------------------------------------------------------------------------ via the ops

@pytest.fixture
def launches(monkeypatch):
    """The plans each op launches, run for real (on the emulator)."""
    seen, real = [], runtime.launch

    def record(plan, stream=None):
        seen.append(plan)
        real(plan, stream=stream)
    monkeypatch.setattr(runtime, "launch", record)
    return seen


def test_ops_build_each_table_with_one_launch(launches):
    from flyaot.ops import compute_prefill_schedule, compute_varqlen_windows
    cu, ctx = i32([0, 3, 3, 9]), i32([700, 5, 1500])
    bufs = tuple(torch.full((11,), 7, dtype=torch.int32) for _ in range(3))
    got = compute_varqlen_windows(cu, ctx, 11, out=bufs)
    assert all(g is b for g, b in zip(got, bufs))
    assert all(torch.equal(g, w) for g, w in zip(got, R.varqlen_windows(cu, ctx, 11)))
    info_out = torch.full((40, CTA_INFO_INTS), 5, dtype=torch.int32)
    info, n = compute_prefill_schedule(*got, page_size=64, max_seq_len=1500, cta_info_out=info_out)
    assert info is info_out and n == 40
    assert torch.equal(info, R.build_schedule(*got, page_size=64, max_seq_len=1500, slots=40))
    assert [p.params["layout"] for p in launches] == ["windows", "groups"]
