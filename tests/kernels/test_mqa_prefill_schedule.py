"""Prefill metadata rules (no kernel launch): the torch window builder against the row-by-row rule, the
row-group schedule against what the kernel must cover, the spec set and the host-side checks."""
import random

import pytest
import torch

from flyaot.kernel_defs.mqa_prefill import reference as R
from flyaot.kernel_defs.mqa_prefill_meta import reference as S
from flyaot.kernel_defs.mqa_prefill import geometry, plan, specs
from flyaot.kernel_defs.mqa_prefill.geometry import CHUNK_TOKENS, CTA_INFO_INTS, WAVES, Geometry
from flyaot.ops import pa_mqa_logits_fp4_prefill, pa_mqa_logits_fp4_varqlen

VARQLEN_CASES = [            # (qlens, context_lens): upstream's sweep, an empty batch, padding rows
    ([3, 1, 2], [512, 320, 768]),
    ([10, 1, 5, 2], [1024, 256, 2048, 512]),
    ([2, 0, 3], [384, 256, 640]),
    ([4, 3], [512, 768]),
    ([0, 5], [100, 3]),
    ([16, 8, 24, 4], [4096, 2048, 4096, 1024]),
]


@pytest.mark.parametrize("qlens,ctx", VARQLEN_CASES)
@pytest.mark.parametrize("padding", [0, 5])
def test_varqlen_windows_match_rule(qlens, ctx, padding):
    cu = torch.tensor([0] + list(torch.tensor(qlens).cumsum(0)), dtype=torch.int32)
    rows = int(cu[-1]) + padding
    got = S.varqlen_windows(cu, torch.tensor(ctx, dtype=torch.int32), rows)
    want = R.varqlen_windows(cu, ctx, rows)
    for g, w in zip(got, want):
        assert g.dtype == torch.int32
        assert torch.equal(g, w)
    if padding:
        assert torch.all(got[2][-padding:] == 0)


def test_varqlen_windows_refill_fixed_buffers():
    cu = torch.tensor([0, 2, 2, 5], dtype=torch.int32)
    ctx = torch.tensor([384, 256, 640], dtype=torch.int32)
    bufs = tuple(torch.full((7,), -7, dtype=torch.int32) for _ in range(3))
    got = S.varqlen_windows(cu, ctx, 7, out=bufs)
    assert all(g is b for g, b in zip(got, bufs))
    assert torch.equal(bufs[2], R.varqlen_windows(cu, ctx, 7)[2])


def _random_rows(rng, rows, n_batch, max_seq_len):
    rb, b = [], rng.randrange(n_batch)
    while len(rb) < rows:                               # runs of random length, batches revisited
        rb += [b] * rng.randint(1, 9)
        b = rng.randrange(n_batch)
    rb = rb[:rows]
    ls, le = [], []
    for _ in range(rows):
        kind = rng.random()
        if kind < 0.15:                                  # empty (also le <= ls)
            lo = rng.randrange(max_seq_len)
            ls.append(lo), le.append(rng.randrange(lo + 1))
        else:
            lo = rng.randrange(max_seq_len) if kind < 0.6 else 0
            ls.append(lo), le.append(rng.randint(lo + 1, max_seq_len))
    return [torch.tensor(v, dtype=torch.int32) for v in (rb, ls, le)]


def _covered(info, rows, max_seq_len):
    """Cells each (row, token) receives from the slots, as the kernel's loops and store masks act."""
    hits = torch.zeros(rows, max_seq_len, dtype=torch.int32)
    for first, n, _b, start, count, _last, _z0, _z1 in info.tolist():
        for c in range(start, start + count):
            hits[first:first + n, c * CHUNK_TOKENS:(c + 1) * CHUNK_TOKENS] += 1
    return hits


def _written(info, ls, le, rows, max_seq_len):
    """Stores each (row, token) receives as the kernel's loops act (kernel.py: the slice's chunks, then
    its share of the group's outside chunks, _fill_share), before the buffer bounds drop those past
    max_seq_len."""
    C = CHUNK_TOKENS
    hits = torch.zeros(rows, -(-max_seq_len // C) * C, dtype=torch.int32)
    for first, n, _b, start, count, _last, fill, _z in info.tolist():
        if n == 0:
            continue
        own = [(max(int(ls[r]), 0), min(int(le[r]), max_seq_len)) for r in range(first, first + n)]
        own = [(a, b) for a, b in own if b > a]
        g0 = min(a for a, _ in own) // C if own else 0
        n_in = -(-max(b for _, b in own) // C) - g0 if own else 0
        outside = -(-max_seq_len // C) - n_in
        per = -(-outside // n_in) if own else outside
        a, b = (start - g0, start + count - g0) if own else (0, 1)
        chunks = list(range(start, start + count)) + [v if v < g0 else v + n_in
                                                       for v in range(min(a * per, outside), min(b * per, outside))]
        for c in chunks:
            hits[first:first + n, c * C:(c + 1) * C] += 1
    return hits[:, :max_seq_len]


@pytest.mark.parametrize("seed", range(6))
def test_schedule_covers_every_visible_cell_once(seed):
    rng = random.Random(seed)
    rows, max_seq_len, page = rng.randint(1, 60), rng.choice([100, 700, 1300]), rng.choice([64, 128])
    rb, ls, le = _random_rows(rng, rows, rng.randint(1, 4), max_seq_len)
    slots = rows + rng.randrange(3 * rows)
    info = S.build_schedule(rb, ls, le, page_size=page, max_seq_len=max_seq_len, slots=slots)
    assert info.shape == (slots, CTA_INFO_INTS) and info.dtype == torch.int32

    vis = R.visible(rb, ls, le, max_seq_len)
    hits = _covered(info, rows, max_seq_len)
    assert torch.all(hits[vis] == 1)                    # every visible cell computed by exactly one CTA
    assert torch.all(_written(info, ls, le, rows, max_seq_len) == 1)     # and every cell stored once
    groups = set()
    for first, n, b, start, count, last, fill, z1 in info.tolist():
        if n == 0:                                      # an idle slot
            assert (first, b, start, count, last, fill, z1) == (0,) * 7
            continue
        assert fill == 1 and z1 == 0                    # the kernel writes the rows' -inf
        if count == 0:                                  # a group whose windows are all empty: one slice
            assert not vis[first:first + n].any() and start == 0 and last == 0
            groups.add((first, n))
            continue
        assert 1 <= n <= WAVES and torch.all(rb[first:first + n] == b)
        starts_group = first == 0 or rb[first - 1] != b or (first - _run_start(rb, first)) % WAVES == 0
        assert starts_group
        window_end = max(int(min(le[r], max_seq_len)) for r in range(first, first + n) if le[r] > ls[r])
        assert last == -(-window_end // page) - 1       # exactly the pages the union window needs
        groups.add((first, n))
    # groups are maximal: consecutive same-batch rows are only cut every WAVES rows, and every row is in
    # a group (the kernel writes the -inf of every row)
    covered_rows = sorted(r for first, n in groups for r in range(first, first + n))
    assert covered_rows == list(range(rows))


def _run_start(rb, r):
    while r > 0 and rb[r - 1] == rb[r]:
        r -= 1
    return r


def test_schedule_groups_four_rows_of_one_batch():
    rb = torch.tensor([0] * 6 + [1] * 3 + [0] * 5, dtype=torch.int32)
    ls = torch.zeros(14, dtype=torch.int32)
    le = torch.full((14,), 300, dtype=torch.int32)
    info = S.build_schedule(rb, ls, le, page_size=64, max_seq_len=300, slots=14)
    live = info[info[:, 4] > 0]
    firsts = sorted({(r[0], r[1], r[2]) for r in live.tolist()})
    assert firsts == [(0, 4, 0), (4, 2, 0), (6, 3, 1), (9, 4, 0), (13, 1, 0)]


def test_schedule_uses_the_slots():
    rows = 8
    rb = torch.zeros(rows, dtype=torch.int32)
    ls = torch.zeros(rows, dtype=torch.int32)
    le = torch.full((rows,), 64 * CHUNK_TOKENS, dtype=torch.int32)
    info = S.build_schedule(rb, ls, le, page_size=64, max_seq_len=64 * CHUNK_TOKENS, slots=16)
    counts = info[:, 4]
    assert int((counts > 0).sum()) == 16                  # 2 groups x 64 chunks cut into 8 slices each
    assert int(counts.sum()) == 2 * 64


def test_schedule_all_empty_windows_writes_only_the_inf():
    """Groups of empty windows get one slice of no chunks each (their CTAs write the rows' -inf)."""
    rb = torch.zeros(5, dtype=torch.int32)
    info = S.build_schedule(rb, torch.full((5,), 9, dtype=torch.int32), torch.full((5,), 3, dtype=torch.int32),
                            page_size=64, max_seq_len=50, slots=6)
    assert info[:2].tolist() == [[4, 1, 0, 0, 0, 0, 1, 0], [0, 4, 0, 0, 0, 0, 1, 0]]
    assert torch.all(info[2:] == 0)


def test_schedule_puts_the_last_slice_first():
    """Slices go to the slots in reverse order, so causal prefill's longest groups (the last rows)
    are dispatched first; the idle slots stay at the end."""
    rows, msl = 12, 12 * CHUNK_TOKENS
    rb = torch.zeros(rows, dtype=torch.int32)
    le = torch.tensor([CHUNK_TOKENS * (r + 1) for r in range(rows)], dtype=torch.int32)
    info = S.build_schedule(rb, torch.zeros(rows, dtype=torch.int32), le, page_size=64, max_seq_len=msl, slots=20)
    live = info[info[:, 1] > 0].tolist()
    # per_slot 2: groups of 4, 8 and 12 chunks cut into 2, 4 and 6 slices, reversed
    assert [(r[0], r[3], r[4]) for r in live] == ([(8, c, 2) for c in (10, 8, 6, 4, 2, 0)]
                                                  + [(4, c, 2) for c in (6, 4, 2, 0)] + [(0, c, 2) for c in (2, 0)])
    assert len(live) == 12 and torch.all(info[12:] == 0)


@pytest.mark.parametrize("seed", range(6))
def test_schedule_slices_a_group_nearly_equally(seed):
    """A group's slices differ by at most one chunk and cover its chunks once, in order (slot order
    reversed, so the group's slices read back to front)."""
    rng = random.Random(100 + seed)
    rows, max_seq_len = rng.randint(1, 60), rng.choice([700, 1300, 9000])
    rb, ls, le = _random_rows(rng, rows, rng.randint(1, 4), max_seq_len)
    slots = rows + rng.randrange(3 * rows)
    info = S.build_schedule(rb, ls, le, page_size=64, max_seq_len=max_seq_len, slots=slots)
    by_group = {}
    for first, n, _b, start, count, *_ in info.tolist():
        if n:
            by_group.setdefault((first, n), []).append((start, count))
    assert by_group
    for (first, n), got in by_group.items():
        got = got[::-1]
        own = [(max(int(ls[r]), 0), min(int(le[r]), max_seq_len)) for r in range(first, first + n)]
        own = [(a, b) for a, b in own if b > a]
        lo, hi = (min(a for a, _ in own) // CHUNK_TOKENS, -(-max(b for _, b in own) // CHUNK_TOKENS)) if own else (0, 0)
        assert got[0][0] == lo and got[-1][0] + got[-1][1] == hi   # the group's chunks, once each
        counts = [c for _, c in got]
        assert max(counts) - min(counts) <= 1
        assert all(a + c == b for (a, c), (b, _) in zip(got, got[1:]))      # consecutive, in order
        assert counts == sorted(counts)                 # the longer slices last: dispatched first


def test_schedule_splits_ten_chunks_four_three_three():
    """per_slot 4 cuts one group of 10 chunks into 3 slices of 3, 3 and 4 (not 4, 4, 2)."""
    rb = torch.zeros(1, dtype=torch.int32)
    info = S.build_schedule(rb, torch.zeros(1, dtype=torch.int32), torch.full((1,), 10 * CHUNK_TOKENS, dtype=torch.int32),
                            page_size=64, max_seq_len=10 * CHUNK_TOKENS, slots=3)
    assert [(r[3], r[4]) for r in info.tolist()] == [(6, 4), (3, 3), (0, 3)]


def test_spec_set_and_budget():
    row = specs.FAMILY.target_rows[0]
    all_specs = specs.FAMILY.specs(row)
    assert len(all_specs) == 8 * 2 * 2
    for p in all_specs:
        specs.FAMILY.validate_params(p)
    b = specs.budget(specs.BUDGET_SPEC, row)
    assert b.max_vgpr == 126 and b.exact_lds == 17408 == Geometry(64, 128, 64).lds_bytes
    assert specs.budget({"heads": 128, "head_dim": 256, "page_size": 128}, row).exact_lds == 256 * (128 + 8)
    assert len({geometry.symbol(p) for p in all_specs}) == len(all_specs)


def _inputs(rows=3, heads=64, page=64):
    case = R.make_case(rows, [130, 70], heads=heads, page_size=page, max_seq_len=140)
    rb = torch.tensor([0, 0, 1][:rows], dtype=torch.int32)
    ls = torch.zeros(rows, dtype=torch.int32)
    le = torch.full((rows,), 60, dtype=torch.int32)
    return case, [case.q_fp4, case.q_scale, case.kv_cache, case.kv_scale, case.block_tables, case.weights,
                  rb, ls, le, case.max_seq_len]


@pytest.mark.parametrize("mutate,exc,needle", [
    (lambda a: a.__setitem__(0, a[0].to(torch.int8)), TypeError, "q_fp4"),
    (lambda a: a.__setitem__(5, a[5].float()), TypeError, "weights"),
    (lambda a: a.__setitem__(6, a[6].long()), TypeError, "row_to_batch"),
    (lambda a: a.__setitem__(8, a[8][:2]), ValueError, "local_ends"),
    (lambda a: a.__setitem__(1, a[1][:, :, :, :, :2].contiguous()), ValueError, "q_scale"),
    (lambda a: a.__setitem__(3, a[3][:, :, :, :32].contiguous()), ValueError, "kv_scale"),
    (lambda a: a.__setitem__(4, a[4].t().contiguous().t()), ValueError, "block_tables"),
    (lambda a: a.__setitem__(9, -1), ValueError, "max_seq_len"),
])
def test_bad_inputs_are_refused_before_launch(mutate, exc, needle):
    _, args = _inputs()
    mutate(args)
    with pytest.raises(exc, match=needle):
        pa_mqa_logits_fp4_prefill(*args)


def test_unsupported_heads_and_knobs():
    case = R.make_case(2, [64], heads=64, max_seq_len=64)
    rb = torch.zeros(2, dtype=torch.int32)
    args = [case.q_fp4[:, :40].contiguous(), case.q_scale, case.kv_cache, case.kv_scale, case.block_tables,
            case.weights, rb, rb, rb, 64]
    with pytest.raises(ValueError, match="heads"):
        pa_mqa_logits_fp4_prefill(*args)
    args[0] = case.q_fp4
    with pytest.raises(ValueError, match="block_k"):
        pa_mqa_logits_fp4_prefill(*args, block_k=96)              # not a multiple of the page size
    with pytest.raises(ValueError, match="kv_block_size"):
        pa_mqa_logits_fp4_prefill(*args, kv_block_size=128)
    with pytest.raises(ValueError, match="cta_info"):
        pa_mqa_logits_fp4_prefill(*args, cta_info=torch.zeros(2, CTA_INFO_INTS, dtype=torch.int32))
    with pytest.raises(ValueError, match="cta_info"):
        pa_mqa_logits_fp4_prefill(*args, cta_info=torch.zeros(1, CTA_INFO_INTS, dtype=torch.int32), n_ctas=1)
    with pytest.raises(ValueError, match="out"):
        pa_mqa_logits_fp4_prefill(*args, out=torch.empty(2, 63))
    with pytest.raises(ValueError, match="parallel_unit_num"):
        pa_mqa_logits_fp4_prefill(*args, parallel_unit_num=1)
    with pytest.raises(ValueError, match="cu_seq_q"):
        pa_mqa_logits_fp4_varqlen(*args[:6], 64, context_lens=torch.tensor([64], dtype=torch.int32))
