"""Hostile index values on the emulator: every shipped kernel stays inside the tensors it is given.

Each case feeds one wrong index (block-table entries -1 or past kv_cache, contexts or windows past the
table, rows or batches outside the launch, a bad external schedule, a weight whose n/k exceed its
tensors) and asserts the documented result of docs/safety.md. The tensors a wrong index would reach
past sit in guarded pools (bytes of the same storage that belong to no tensor), so a kernel that
regressed would be stopped by the emulator's access fault (EmuError), not pass silently.
"""
import pytest
import torch

from flyaot.kernel_defs.mqa_common import layouts
from flyaot.kernel_defs.mqa_decode import geometry
from flyaot.kernel_defs.mqa_decode.reference import pa_mqa_logits_reference, visible_mask
from flyaot.kernel_defs.mqa_runs_schedule.reference import varctx_reference as build_schedule
from flyaot.kernel_defs.mqa_prefill.reference import prefill_logits, varqlen_windows, visible
from flyaot.ops import (compute_prefill_schedule, gemm_a16wfp4, pa_mqa_logits_fp4, pa_mqa_logits_fp4_prefill,
                        pa_mqa_logits_fp4_varqlen, prepare_mxfp4_weight)
from hostile_helpers import NEG_INF, assert_contract, guard_kv

BAD_PAGE = 0x7FFFFFFF


# ------------------------------------------------------------------------------------------------ decode

def _decode_problem(ctx, heads, page, *, next_n=1, table_width=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    kv = layouts.make_paged_kv(ctx, 128, page, g, table_width=table_width)
    q, qs = layouts.make_q((len(ctx), next_n), heads, 128, g)
    w = (torch.randn(len(ctx) * next_n, heads, generator=g) * 0.5).to(torch.bfloat16)
    return kv, q, qs, w, torch.tensor(ctx, dtype=torch.int32)


# (heads, next_n) -> the kernel: heads 64 the direct kernel (the walk kernel with 3..4 rows, on these small
# grids only with the walk_anywhere fixture), heads 16 the staged kernel (internal schedule)
@pytest.fixture
def walk_anywhere(monkeypatch):
    monkeypatch.setattr(geometry, "WALK_MIN_CTAS", 1)


def _decode_rows(next_n):
    return [pytest.param(64, next_n, id="direct"), pytest.param(16, next_n, id="staged"),
            pytest.param(64, 4, id="walk")]


def _run_decode(kv, q, qs, w, cl, msl, next_n=1, **kw):
    guard_kv(kv)
    out = pa_mqa_logits_fp4(q, qs, kv.kv_cache, kv.kv_scale, kv.block_tables, w, cl, msl, next_n=next_n,
                            kv_block_size=kv.kv_cache.shape[3], weight_scale=0.75, **kw)
    ref = pa_mqa_logits_reference(q, qs, kv.kv_cache, kv.kv_scale, kv.block_tables, w, cl, msl,
                                  weight_scale=0.75, next_n=next_n)
    return out, ref


@pytest.mark.parametrize("heads,next_n", _decode_rows(2))
@pytest.mark.parametrize("entry", [-1, "num_pages", BAD_PAGE], ids=["minus1", "num_pages", "int32max"])
def test_decode_block_table_entry_outside_kv_cache(heads, next_n, entry, walk_anywhere):
    kv, q, qs, w, cl = _decode_problem([300, 200], heads, 64, next_n=next_n)
    bad = kv.kv_cache.shape[0] if entry == "num_pages" else entry
    kv.block_tables[0, 1] = bad                     # tokens 64..127 of sequence 0
    kv.block_tables[1, 3] = bad                     # tokens 192..199 of sequence 1 (its last page)
    out, ref = _run_decode(kv, q, qs, w, cl, 320, next_n=next_n)
    assert bool((ref[0:next_n, 64:128] == NEG_INF).all()) and bool(torch.isfinite(ref[0, :64]).all())
    assert_contract(out, ref, visible_mask(cl, next_n, 320))


@pytest.mark.parametrize("heads,next_n", _decode_rows(1))
def test_decode_context_past_the_block_table(heads, next_n, walk_anywhere):
    """context_lens[b] needs more pages than the table row has: the tokens past the width are -inf and
    the table is never read past its width (the last row sits at the end of its guarded pool)."""
    kv, q, qs, w, cl = _decode_problem([130, 140], heads, 64, next_n=next_n)
    cl[1] = 64 * kv.block_tables.shape[1] + 150     # 3 pages wide, 5 pages of context
    out, ref = _run_decode(kv, q, qs, w, cl, 448, next_n=next_n)
    assert bool((ref[next_n:, 192:] == NEG_INF).all())
    assert_contract(out, ref, visible_mask(cl, next_n, 448))


def test_decode_bad_external_schedule():
    """Slots naming rows outside the launch store nothing; a slot with negative chunks stores nothing;
    the good slots' results are intact."""
    kv, q, qs, w, cl = _decode_problem([300, 90], 16, 64, next_n=2)
    msl, rows = 320, 4
    good, _ = build_schedule(cl, 256, 8, msl, 2)
    bad = torch.tensor([[-1, 0, 2, 300], [rows, 0, 2, 300], [0x7FFFFFFF, 0, 1, 300], [1, -3, 2, 300],
                        [2, -5, 3, 90]], dtype=torch.int32)
    cta = torch.cat([good, bad]).contiguous()
    out, ref = _run_decode(kv, q, qs, w, cl, msl, next_n=2, block_k=256, num_warps=4, cta_info=cta,
                           total_ctas=cta.shape[0])
    assert_contract(out, ref, visible_mask(cl, 2, msl))


def test_decode_huge_external_context_stays_in_out_row():
    """A slot claiming a context of 2^31 - 1 for a real row: that row is scored up to max_seq_len from
    the pages the table names (-inf past them); no other row and nothing outside `out` is touched."""
    kv, q, qs, w, cl = _decode_problem([100, 90], 16, 64)
    msl = 256
    good, _ = build_schedule(cl, 256, 4, msl, 1)
    cta = torch.cat([good, torch.tensor([[0, 0, 1 << 30, 0x7FFFFFFF]], dtype=torch.int32)]).contiguous()
    out, ref = _run_decode(kv, q, qs, w, cl, msl, block_k=256, num_warps=4, cta_info=cta, total_ctas=cta.shape[0])
    assert_contract(out[1:], ref[1:], visible_mask(cl, 1, msl)[1:])
    row = out[0]
    assert bool((torch.isfinite(row[:128]) | (row[:128] == NEG_INF)).all())
    assert bool((row[128:] == NEG_INF).all())       # table entries past the 2 real pages are invalid


# ------------------------------------------------------------------------------------------------ prefill

def _prefill_problem(rows, ctx, *, heads=32, page=64, table_width=None, seed=1):
    g = torch.Generator().manual_seed(seed)
    q, qs = layouts.make_q((rows,), heads, 128, g)
    kv = layouts.make_paged_kv(ctx, 128, page, g, table_width=table_width)
    w = (torch.rand(rows, heads, generator=g) * 2 - 0.5).to(torch.bfloat16)
    return guard_kv(kv), q, qs, w


def _prefill(kv, q, qs, w, rb, ls, le, msl, **kw):
    out = pa_mqa_logits_fp4_prefill(q, qs, kv.kv_cache, kv.kv_scale, kv.block_tables, w, rb, ls, le, msl,
                                    weight_scale=1.25, **kw)
    ref = prefill_logits(q, qs, kv.kv_cache, kv.kv_scale, kv.block_tables, w, rb, ls, le, msl, weight_scale=1.25)
    return out, ref


def _i32(*v):
    return torch.tensor(v, dtype=torch.int32)


@pytest.mark.parametrize("entry", [-1, "num_pages", BAD_PAGE], ids=["minus1", "num_pages", "int32max"])
def test_prefill_block_table_entry_outside_kv_cache(entry):
    kv, q, qs, w = _prefill_problem(4, [300, 200])
    kv.block_tables[0, 2] = kv.kv_cache.shape[0] if entry == "num_pages" else entry
    rb, ls, le = _i32(0, 0, 1, 1), _i32(0, 100, 0, 50), _i32(300, 280, 200, 199)
    out, ref = _prefill(kv, q, qs, w, rb, ls, le, 320)
    assert bool((ref[0:2, 128:192] == NEG_INF).all())
    assert_contract(out, ref, visible(rb, ls, le, 320))


def test_prefill_window_past_the_block_table():
    """local_ends past the table's pages (the last batch's row at the end of its pool): -inf there."""
    kv, q, qs, w = _prefill_problem(3, [150, 130])
    width = kv.block_tables.shape[1]
    rb, ls, le = _i32(0, 1, 1), _i32(0, 0, 40), _i32(150, 64 * width + 200, 64 * width + 10)
    out, ref = _prefill(kv, q, qs, w, rb, ls, le, 64 * width + 256)
    assert bool((ref[1, 64 * width:64 * width + 200] == NEG_INF).all())
    assert_contract(out, ref, visible(rb, ls, le, 64 * width + 256))


@pytest.mark.parametrize("batch", [-1, 2, 1 << 30])
def test_prefill_row_to_batch_outside_block_tables(batch):
    kv, q, qs, w = _prefill_problem(4, [200, 180])
    rb, ls, le = _i32(0, batch, 1, batch), _i32(0, 0, 10, 5), _i32(200, 150, 180, 100)
    out, ref = _prefill(kv, q, qs, w, rb, ls, le, 256)
    assert bool((ref[1, :150] == NEG_INF).all())
    assert_contract(out, ref, visible(rb, ls, le, 256))


def test_prefill_bad_external_schedule():
    """Slots with rows outside the launch, a batch outside the table, negative chunks or a last page
    past (or before) the table: nothing outside `out` is touched and rows no bad slot names are intact."""
    kv, q, qs, w = _prefill_problem(6, [300, 260])
    rb, ls, le = _i32(0, 0, 0, 1, 1, 1), _i32(0, 10, 20, 0, 30, 60), _i32(300, 290, 280, 260, 250, 240)
    msl = 320
    good, _ = compute_prefill_schedule(rb, ls, le, page_size=64, max_seq_len=msl, parallel_unit_num=6)
    bad = torch.tensor([[-4, 4, 0, 0, 2, 4, 0, 0], [6, 4, 0, 0, 2, 4, 0, 0], [0x7FFFFFF0, 4, 1, 0, 2, 4, 0, 0],
                        [0, 1, -1, 0, 2, 4, 0, 0], [1, 1, 1 << 20, 0, 2, 1 << 30, 0, 0],
                        [2, 1, 0, -3, 4, -7, 0, 0], [3, 1, 1, 0, 8, 1 << 30, 0, 0]], dtype=torch.int32)
    cta = torch.cat([good, bad]).contiguous()
    out = torch.full((6, msl), NEG_INF)
    out = pa_mqa_logits_fp4_prefill(q, qs, kv.kv_cache, kv.kv_scale, kv.block_tables, w, rb, ls, le, msl,
                                    weight_scale=1.25, cta_info=cta, n_ctas=cta.shape[0], out=out)
    ref = prefill_logits(q, qs, kv.kv_cache, kv.kv_scale, kv.block_tables, w, rb, ls, le, msl, weight_scale=1.25)
    assert_contract(out[4:], ref[4:], visible(rb, ls, le, msl)[4:])
    assert not bool(torch.isnan(out).any())


def test_varqlen_context_past_the_block_table():
    kv, q, qs, w = _prefill_problem(5, [100, 120])
    width = kv.block_tables.shape[1]
    cu, cl = _i32(0, 2, 5), _i32(100, 64 * width + 100)
    out = pa_mqa_logits_fp4_varqlen(q, qs, kv.kv_cache, kv.kv_scale, kv.block_tables, w, 64 * width + 128,
                                    cu_seq_q=cu, context_lens=cl, weight_scale=1.25)
    rb, ls, le = varqlen_windows(cu, cl, 5)
    ref = prefill_logits(q, qs, kv.kv_cache, kv.kv_scale, kv.block_tables, w, rb, ls, le, 64 * width + 128,
                         weight_scale=1.25)
    assert bool((ref[4, 64 * width:64 * width + 100] == NEG_INF).all())
    assert_contract(out, ref, visible(rb, ls, le, 64 * width + 128))


# ------------------------------------------------------------------------------------------------ gemm

@pytest.mark.parametrize("field,value", [("n", 512), ("k", 512), ("weight", "short"), ("scales", "short")])
def test_gemm_prepared_weight_larger_than_its_tensors(field, value):
    g = torch.Generator().manual_seed(3)
    w_packed = torch.randint(0, 256, (256, 128), dtype=torch.uint8, generator=g)
    scales = torch.randint(120, 130, (256, 8), dtype=torch.uint8, generator=g)
    weight = prepare_mxfp4_weight(w_packed, scales)
    if value == "short":
        setattr(weight, field, getattr(weight, field)[:128])
    else:
        setattr(weight, field, value)
    x = torch.randn(4, weight.k, dtype=torch.bfloat16, generator=g)
    with pytest.raises(ValueError, match=r"weight\.(weight|scales)"):
        gemm_a16wfp4(x, weight)
