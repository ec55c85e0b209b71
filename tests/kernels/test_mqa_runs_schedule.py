"""The runs-schedule kernel (both layouts) on the emulator, bit for bit against the torch references:
random item counts across wave and workgroup widths, next_n 1..16, slot counts from the minimum up,
zero / negative / over-long / int32-max lengths, the fit-failure branch, a reused and an embedded
output buffer, item counts past the LDS cache, and the host checks."""
import random

import pytest
import torch

from flyaot import runtime
from flyaot.kernel_defs.mqa_runs_schedule import plan as RP
from flyaot.kernel_defs.mqa_runs_schedule import reference as R
from flyaot.kernel_defs.mqa_runs_schedule.geometry import CACHE_ITEMS, THREADS, WAVE

ITEM_COUNTS = (1, 2, 5, WAVE - 1, WAVE, WAVE + 1, THREADS - 1, THREADS, THREADS + 1, 300)
INT32_MAX = 2 ** 31 - 1


def _lengths(rng, n, msl, hostile):
    """Lengths around max_seq_len; with `hostile`, also 0, negative, past max_seq_len and up to int32 max."""
    out = []
    for _ in range(n):
        k = rng.random()
        if hostile and k < 0.1:
            out.append(0)
        elif hostile and k < 0.2:
            out.append(-rng.randint(1, 2 ** 31))
        elif hostile and k < 0.26:
            out.append(rng.choice([INT32_MAX, rng.randint(msl, INT32_MAX)]))
        else:
            out.append(rng.randint(1, msl + 64))
    return torch.tensor(out, dtype=torch.int32)


def _varctx(lens, block_k, pgrid, msl, next_n, out=None):
    info, safe, plan = RP.varctx_plan(lens, block_k, pgrid, msl, next_n, out=out)
    runtime.launch(plan)
    return info, safe


def _rows(rb, ls, le, block_k, slots, msl, out=None):
    safe, info, plan = RP.rows_plan(rb, ls, le, block_k=block_k, slots=slots, max_seq_len=msl, out=out)
    runtime.launch(plan)
    return safe, info


def _check_varctx(lens, block_k, pgrid, msl, next_n):
    info, safe = _varctx(lens, block_k, pgrid, msl, next_n)
    want, want_safe = R.varctx_reference(lens, block_k, pgrid, msl, next_n)
    assert torch.equal(info, want) and torch.equal(safe, want_safe), (len(lens), block_k, pgrid, msl, next_n)
    return int(safe)


@pytest.mark.parametrize("seed", range(4))
def test_varctx_matches_reference(seed):
    rng = random.Random(seed)
    for batch in ITEM_COUNTS:
        next_n, block_k, msl = rng.randint(1, 16), rng.choice([1, 16, 64, 100, 256]), rng.randint(1, 4000)
        s_max = RP.longest_run(msl, block_k)
        slots = batch + rng.choice([0, 1, 7, rng.randint(0, 3 * batch * min(s_max, 8))])
        _check_varctx(_lengths(rng, batch, msl, hostile=seed % 2 == 1), block_k, slots * next_n, msl, next_n)


def test_varctx_edges():
    assert _check_varctx(torch.zeros(0, dtype=torch.int32), 256, 12, 512, 3) == 1      # no sequence: all idle
    assert _check_varctx(torch.tensor([0, -5, 0], dtype=torch.int32), 64, 3, 100, 1) == 1
    # one sequence, one chunk per slot (safe 1) through many slots; the same with the slots one short
    assert _check_varctx(torch.tensor([1000], dtype=torch.int32), 1, 1000, 1000, 1) == 1
    assert _check_varctx(torch.tensor([1000], dtype=torch.int32), 1, 999, 1000, 1) == 2
    assert _check_varctx(torch.tensor([INT32_MAX, INT32_MAX], dtype=torch.int32), 1, 2, INT32_MAX, 1) == INT32_MAX


def test_varctx_refills_a_reused_buffer():
    rng = random.Random(7)
    buf = torch.full((48, 4), -9, dtype=torch.int32)
    for batch, next_n in ((3, 4), (12, 2), (1, 16)):
        lens = _lengths(rng, batch, 700, hostile=True)
        pgrid = (48 // next_n) * next_n
        info, safe = _varctx(lens, 64, pgrid, 700, next_n, out=buf[:pgrid])
        assert info.data_ptr() == buf.data_ptr()
        assert torch.equal(buf[:pgrid], R.varctx_reference(lens, 64, pgrid, 700, next_n)[0])


@pytest.mark.parametrize("seed", range(4))
def test_rows_match_reference(seed):
    rng = random.Random(100 + seed)
    for rows in ITEM_COUNTS:
        block_k, msl = rng.choice([1, 16, 64, 100, 256]), rng.randint(0, 4000)
        le = _lengths(rng, rows, max(msl, 1), hostile=seed % 2 == 1)
        ls = torch.tensor([rng.randint(-5, 3000) for _ in range(rows)], dtype=torch.int32)
        rb = torch.tensor([rng.randint(-2, 40) for _ in range(rows)], dtype=torch.int32)
        slots = rng.choice([1, rows, rows + 3, max(512, rows), rng.randint(1, 4 * rows + 20)])
        safe, info = _rows(rb, ls, le, block_k, slots, msl)
        want_safe, want = R.rows_reference(rb, ls, le, block_k=block_k, slots=slots, max_seq_len=msl)
        assert torch.equal(info, want) and torch.equal(safe, want_safe), (rows, block_k, slots, msl)


def test_rows_fit_failure_takes_the_longest_row():
    # max_seq_len 256 at block_k 256 allows runs of one chunk; rows of 2000 tokens need 8: nothing fits 5 slots
    le = torch.tensor([2000, 10, 0, 700], dtype=torch.int32)
    rb, ls = torch.tensor([0, 1, 1, 2], dtype=torch.int32), torch.zeros(4, dtype=torch.int32)
    safe, info = _rows(rb, ls, le, 256, 5, 256)
    want_safe, want = R.rows_reference(rb, ls, le, block_k=256, slots=5, max_seq_len=256)
    assert int(safe) == 8 and torch.equal(safe, want_safe) and torch.equal(info, want)


def test_writes_stay_inside_the_table():
    """The table is a view inside a larger buffer: nothing around it changes, whatever the lengths."""
    rng = random.Random(3)
    big = torch.full((70, 6), -7, dtype=torch.int32)
    le = _lengths(rng, 40, 300, hostile=True)
    rb, ls = torch.randint(-3, 9, (40,), dtype=torch.int32), torch.randint(-3, 90, (40,), dtype=torch.int32)
    _rows(rb, ls, le, 16, 50, 300, out=big[10:60])
    assert torch.equal(big[10:60], R.rows_reference(rb, ls, le, block_k=16, slots=50, max_seq_len=300)[1])
    assert bool((big[:10] == -7).all()) and bool((big[60:] == -7).all())
    big4 = torch.full((30, 4), -7, dtype=torch.int32)
    _varctx(le[:5], 16, 15, 300, 3, out=big4[5:20])
    assert bool((big4[:5] == -7).all()) and bool((big4[20:] == -7).all())


def test_items_past_the_lds_cache():
    rng = random.Random(11)
    n = CACHE_ITEMS + THREADS + 3
    le = _lengths(rng, n, 600, hostile=False)
    rb, ls = torch.zeros(n, dtype=torch.int32), torch.zeros(n, dtype=torch.int32)
    safe, info = _rows(rb, ls, le, 64, 2 * n, 600)
    want_safe, want = R.rows_reference(rb, ls, le, block_k=64, slots=2 * n, max_seq_len=600)
    assert int(safe) > 1 and torch.equal(safe, want_safe) and torch.equal(info, want)


def test_host_checks():
    lens = torch.tensor([5, 6], dtype=torch.int32)
    with pytest.raises(ValueError, match="multiple of next_n"):
        RP.varctx_plan(lens, 64, 5, 128, 2)
    with pytest.raises(ValueError, match="batch size"):
        RP.varctx_plan(lens, 64, 2, 128, 2)
    with pytest.raises(TypeError):
        RP.varctx_plan(lens.long(), 64, 4, 128, 1)
    with pytest.raises(ValueError):
        RP.varctx_plan(lens, 64, 4, 128, 1, out=torch.empty(3, 4, dtype=torch.int32))
    with pytest.raises(ValueError, match="overlap"):
        buf = torch.zeros(16, dtype=torch.int32)
        RP.varctx_plan(buf[:2], 64, 2, 128, 1, out=buf[:8].view(2, 4))
    with pytest.raises(ValueError, match="local_ends"):
        RP.rows_plan(lens[:1], lens, lens, block_k=64, slots=4, max_seq_len=128)
    with pytest.raises(ValueError, match="slots is more than"):
        RP.rows_plan(lens, lens, lens, block_k=64, slots=2 ** 23, max_seq_len=128)
    with pytest.raises(ValueError, match="2 GiB"):
        RP.varctx_plan(torch.zeros(1, dtype=torch.int32).expand(2 ** 29), 64, 2 ** 29, 128, 1)
