"""mqa_prefill code objects executed on the gfx950 emulator through the runtime path (acceptance).

The family is built by the real build CLI into a fresh store that the runtime serves with JIT off, so
the tests run the shipped code objects and read their shipped metadata. Criteria (mqa_common.reference):
cosine >= 0.99999 and max |err| <= 1e-3 max|ref| in-window, every other cell exactly -inf.
"""
import pytest
import torch

from flyaot.kernel_defs.mqa_common import layouts
from flyaot.kernel_defs.mqa_common.reference import compare, passes
from flyaot.kernel_defs.mqa_prefill import geometry, plan, specs
from flyaot.kernel_defs.mqa_prefill import reference as R
from flyaot.kernel_defs.mqa_prefill.geometry import Geometry
from flyaot.ops import pa_mqa_logits_fp4_prefill, pa_mqa_logits_fp4_varqlen
from flyaot.ops import compute_prefill_schedule, compute_varqlen_windows
from tests.support import emulated_store


@pytest.fixture(scope="module", autouse=True)
def store(tmp_path_factory):
    with emulated_store(tmp_path_factory.mktemp("mqa_prefill"), "--family", "mqa_prefill") as (_, manifest):
        yield manifest


def _i32(values):
    return torch.tensor(values, dtype=torch.int32)


def _reference(case, rb, ls, le, weight_scale):
    return R.prefill_logits(case.q_fp4, case.q_scale, case.kv_cache, case.kv_scale, case.block_tables,
                            case.weights, rb, ls, le, case.max_seq_len, weight_scale)


def _check(out, case, rb, ls, le, weight_scale=1.0):
    m = compare(out, _reference(case, rb, ls, le, weight_scale), R.visible(rb, ls, le, case.max_seq_len))
    assert passes(m), m


def _run(case, rb, ls, le, **kw):
    return pa_mqa_logits_fp4_prefill(case.q_fp4, case.q_scale, case.kv_cache, case.kv_scale, case.block_tables,
                                     case.weights, rb, ls, le, case.max_seq_len, **kw)


# (heads, head_dim, page, contexts, row batches, (starts, ends), max_seq_len)
EXPLICIT = [
    # batches interleaved in runs of 3, 2, 5, 1, 1 -> row groups of 3, 2, 4, 1, 1, 1; non-zero lower
    # bounds, empty windows (le = 0, le < ls), windows crossing chunk and page boundaries
    (64, 128, 64, [300, 520, 90], [0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 2, 1],
     ([0, 10, 0, 257, 0, 0, 90, 200, 3, 299, 0, 64], [300, 120, 0, 520, 5, 256, 80, 300, 255, 300, 90, 512]), 530),
    (128, 128, 128, [700, 260], [1, 1, 0, 0, 0, 0, 1],
     ([0, 130, 0, 300, 0, 511, 1], [260, 256, 700, 640, 1, 700, 2]), 704),
    # upstream sweeps: windows per batch [[50,120,200],[40,100]] and [[(10,50),(64,200)],[(0,100),(130,256)]]
    (64, 128, 128, [200, 100], [0, 0, 0, 1, 1], ([0] * 5, [50, 120, 200, 40, 100]), 200),
    (128, 128, 64, [200, 256], [0, 0, 1, 1], ([10, 64, 0, 130], [50, 200, 100, 256]), 256),
    (48, 256, 64, [300, 40], [0, 0, 0, 0, 1], ([0, 5, 70, 0, 0], [300, 261, 200, 7, 40]), 300),
    (16, 128, 128, [129], [0, 0], ([0, 128], [129, 129]), 160),
    (112, 256, 128, [260], [0, 0, 0], ([0, 100, 255], [260, 101, 259]), 260),   # 64-bit q-scale rows, half tile
]


@pytest.mark.parametrize("heads,head_dim,page,ctx,rb,win,msl", EXPLICIT,
                         ids=[f"h{c[0]}-d{c[1]}-p{c[2]}-rows{len(c[4])}" for c in EXPLICIT])
def test_explicit_windows(heads, head_dim, page, ctx, rb, win, msl):
    case = R.make_case(len(rb), ctx, heads=heads, head_dim=head_dim, page_size=page, max_seq_len=msl,
                       seed=heads + page)
    rb, ls, le = _i32(rb), _i32(win[0]), _i32(win[1])
    out = _run(case, rb, ls, le, weight_scale=1.5)
    assert out.shape == (len(rb), msl) and out.dtype == torch.float32
    _check(out, case, rb, ls, le, 1.5)


@pytest.mark.parametrize("heads,page,qlens,ctx,padding", [
    (64, 64, [2, 0, 3], [384, 256, 640], 3),      # an empty batch and graph padding rows
    (128, 128, [4, 3], [512, 768], 0),
    (64, 128, [3, 1, 2], [512, 320, 768], 2),
])
def test_varqlen_paths_agree_bit_for_bit(heads, page, qlens, ctx, padding):
    cu = _i32([0] + torch.tensor(qlens).cumsum(0).tolist())
    rows = int(cu[-1]) + padding
    msl = max(ctx)
    case = R.make_case(rows, ctx, heads=heads, page_size=page, max_seq_len=msl, seed=rows)
    cl = _i32(ctx)
    args = (case.q_fp4, case.q_scale, case.kv_cache, case.kv_scale, case.block_tables, case.weights, msl)
    by_cu = pa_mqa_logits_fp4_varqlen(*args, cu_seq_q=cu, context_lens=cl)
    windows = compute_varqlen_windows(cu, cl, rows)
    by_windows = pa_mqa_logits_fp4_varqlen(*args, windows=windows)
    assert torch.equal(by_cu.view(torch.int32), by_windows.view(torch.int32))
    rb, ls, le = R.varqlen_windows(cu, ctx, rows)
    _check(by_cu, case, rb, ls, le)
    if padding:
        assert torch.all(by_cu[-padding:] == float("-inf"))


def test_strided_pages_rows_table_and_output():
    """Shared-pool pages (page stride > page bytes), Q/Q-scale/weight rows and table rows with padding
    between them, output a column window of a wider buffer, and out= refilled with -inf first."""
    heads, page, ctx, msl = 64, 64, [400, 150], 416
    rows = 6
    case = R.make_case(rows, ctx, heads=heads, page_size=page, max_seq_len=msl, seed=3, table_width=9)
    case.kv_cache, case.kv_scale = layouts.shared_pool(case.kv_cache, case.kv_scale, gap=48)
    assert case.kv_cache.stride(0) == 64 * 64 + 256 + 48
    q_wide = torch.zeros(rows, heads + 16, 64, dtype=torch.uint8)
    q_wide[:, :heads] = case.q_fp4
    qs_wide = torch.zeros(rows, case.q_scale[0].numel() + 12, dtype=torch.uint8)
    qs_wide[:, :case.q_scale[0].numel()] = case.q_scale.reshape(rows, -1)
    w_wide = torch.zeros(rows, heads + 6, dtype=torch.bfloat16)
    w_wide[:, 2:2 + heads] = case.weights
    bt_wide = torch.full((2, 13), 0x7FFFFFFF, dtype=torch.int32)
    bt_wide[:, 1:10] = case.block_tables
    case.q_fp4 = q_wide[:, :heads]
    case.q_scale = qs_wide[:, :case.q_scale[0].numel()].unflatten(1, case.q_scale.shape[1:])
    case.weights = w_wide[:, 2:2 + heads]
    case.block_tables = bt_wide[:, 1:10]
    wide = torch.full((rows, msl + 40), 7.0)
    out = wide[:, 8:8 + msl]
    rb, ls, le = _i32([1, 1, 0, 0, 0, 0]), _i32([0, 20, 0, 100, 260, 0]), _i32([150, 149, 400, 356, 400, 1])
    got = _run(case, rb, ls, le, out=out)
    assert got.data_ptr() == out.data_ptr()
    _check(out, case, rb, ls, le)
    assert torch.all(wide[:, :8] == 7.0) and torch.all(wide[:, 8 + msl:] == 7.0)


def test_external_schedule_reused_graph_style():
    """One fixed cta_info buffer and one output buffer, refilled for new windows (replay pattern) with
    no -inf fill between the calls (NaN left in it instead): the kernel writes every cell. slots = rows
    forces CTAs through several chunks each."""
    heads, page, ctx, msl = 64, 64, [1100, 300], 1100
    rows = 5
    case = R.make_case(rows, ctx, heads=heads, page_size=page, max_seq_len=msl, seed=11)
    rb = _i32([0, 0, 0, 1, 1])
    info = torch.zeros(rows, 8, dtype=torch.int32)
    out = torch.empty(rows, msl)
    for ls, le in (([0, 300, 0, 0, 10], [1100, 1000, 513, 300, 290]), ([5, 0, 700, 0, 0], [9, 0, 1100, 260, 300])):
        ls, le = _i32(ls), _i32(le)
        compute_prefill_schedule(rb, ls, le, page_size=page, max_seq_len=msl, cta_info_out=info)
        out.fill_(float("nan"))
        _run(case, rb, ls, le, out=out, cta_info=info, n_ctas=rows)
        _check(out, case, rb, ls, le)


# rows (batch, start, end) over a max_seq_len of 1099 (5 chunks, the last one partial): groups whose
# chunks leave outside chunks below them, above them or none; a batch whose windows are all empty (a
# group of no chunks); empty windows inside live groups, a one-cell window, windows past max_seq_len.
# With 11 slots the groups' 12 chunks go two to a slice, with more slots one.
FILL_ROWS = [(0, 300, 1100), (0, 600, 700), (0, 650, 1), (1, 0, 301), (1, 0, 0), (1, 1000, 1200),
             (2, 5, 5), (2, 900, 100), (2, 1100, 1100), (0, 260, 261), (0, 513, 768)]


@pytest.mark.parametrize("slots", [None, 11, 64])
def test_every_cell_written_without_a_fill(slots):
    """The kernel writes every output cell: -inf outside each row's window (the shares of the chunks
    outside a group's chunks included), so an output full of NaN comes back exactly as an output filled
    with -inf would, under the op's own schedule and under external ones of few and of many slots."""
    msl = 1099
    rb, ls, le = (_i32([r[i] for r in FILL_ROWS]) for i in range(3))
    case = R.make_case(len(FILL_ROWS), [msl] * 3, heads=64, page_size=64, max_seq_len=msl, seed=21)
    out = torch.full((len(FILL_ROWS), msl), float("nan"))
    if slots is None:
        _run(case, rb, ls, le, out=out, weight_scale=0.5)
    else:
        info, n = compute_prefill_schedule(rb, ls, le, page_size=64, max_seq_len=msl, parallel_unit_num=slots)
        _run(case, rb, ls, le, out=out, cta_info=info, n_ctas=n, weight_scale=0.5)
    assert not out.isnan().any()
    _check(out, case, rb, ls, le, 0.5)


def test_budget_holds_in_shipped_metadata(store):
    entries = {geometry.symbol(e["params"]): e for e in store["specs"].values()}
    assert set(entries) == {geometry.symbol(p) for p in specs.specs(specs.FAMILY.target_rows[0])}
    for sym, e in entries.items():
        r = e["resources"]
        assert r["scratch"] == 0 and r["vgpr_spill"] == 0 and r["sgpr_spill"] == 0, sym
        p = e["params"]
        assert r["lds"] == Geometry(p["heads"], p["head_dim"], p["page_size"]).lds_bytes, sym
    r = entries[geometry.symbol(specs.BUDGET_SPEC)]["resources"]
    assert r["lds"] == 17408 and r["vgpr"] + r["agpr"] <= 126
