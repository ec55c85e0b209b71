"""mqa_decode on the gfx950 emulator (CPU tensors -> runtime emu driver) against the torch reference.

Each case executes the compiled code object. Staged-LDS kernel: internal and external schedules, every
next_n the issue lists, H16/H64/H128, D128/D256, page 64/128, empty/ragged/short contexts, shared-pool
(strided) pages, strided output, fixed schedule buffers reused graph-style. Direct kernel: every spec
(H64/H128 x page 64/128 x 32-token / 64-token / 64-token scalar-weight variants) with next_n 1..8,
empty/ragged/short contexts, strided pages and output, contexts past max_seq_len, and the grid-size
dispatch through the public op. Walk kernel (H64, next_n 3..4): both page sizes with ragged contexts,
strided pages and output, contexts past max_seq_len.
"""
import pytest
import torch

from flyaot.kernel_defs.mqa_common import layouts
from flyaot.kernel_defs.mqa_common.reference import compare, passes
from flyaot import runtime
from flyaot.kernel_defs.mqa_decode import geometry
from flyaot.kernel_defs.mqa_decode import plan as P
from flyaot.kernel_defs.mqa_decode.reference import pa_mqa_logits_reference, visible_mask
from flyaot.kernel_defs.mqa_runs_schedule.reference import varctx_reference as build_schedule
from flyaot.kernel_defs.mqa_decode.geometry import DIRECT_VARIANTS
from flyaot.ops import pa_mqa_logits_fp4


@pytest.fixture(autouse=True)
def _private_jit_cache(private_jit_cache):
    """Every test here may JIT-build a kernel the prebuilt store lacks (the root conftest's fixture)."""


def _problem(seed, ctx, next_n, heads, head_dim, page, *, pool_gap=None, table_width=None):
    g = torch.Generator().manual_seed(seed)
    kv = layouts.make_paged_kv(ctx, head_dim, page, g, table_width=table_width)
    if pool_gap is not None:
        kv.kv_cache, kv.kv_scale = layouts.shared_pool(kv.kv_cache, kv.kv_scale, gap=pool_gap)
    q, qs = layouts.make_q((len(ctx), next_n), heads, head_dim, g)
    w = (torch.randn(len(ctx) * next_n, heads, generator=g) * 0.5).to(torch.bfloat16)
    return kv, q, qs, w, torch.tensor(ctx, dtype=torch.int32)


def _check(out, kv, q, qs, w, cl, msl, next_n, weight_scale):
    ref = pa_mqa_logits_reference(q, qs, kv.kv_cache, kv.kv_scale, kv.block_tables, w, cl, msl,
                                  weight_scale=weight_scale, next_n=next_n)
    m = compare(out, ref, visible_mask(cl, next_n, msl))
    assert passes(m), m


# (heads, head_dim, page, next_n, contexts, max_seq_len, (block_k, num_warps) or None)
CASES = [
    (16, 128, 64, 1, [100, 0, 257], 320, None),
    (64, 128, 64, 2, [1, 300, 64], 320, (128, 2)),       # next_n > ctx for batch 0; staged by override
    (128, 128, 128, 3, [2, 200], 256, (512, 4)),
    (64, 128, 64, 12, [3, 130], 160, None),              # next_n > 8: staged (direct holds 8 rows)
    (64, 128, 64, 1, [70, 200], 256, (64, 1)),
    (64, 256, 64, 4, [130, 3], 160, None),
    (16, 256, 128, 5, [4, 260], 300, None),
    (128, 256, 64, 8, [7, 90], 96, None),
    (48, 128, 128, 1, [385, 0], 400, (128, 2)),
    (32, 128, 64, 2, [600], 640, (512, 8)),
    (80, 256, 128, 1, [520, 77], 530, (512, 4)),
]


@pytest.mark.parametrize("heads,head_dim,page,next_n,ctx,msl,tile", CASES,
                         ids=[f"h{c[0]}-d{c[1]}-p{c[2]}-n{c[3]}" + (f"-bk{c[6][0]}w{c[6][1]}" if c[6] else "")
                              for c in CASES])
def test_internal_schedule(heads, head_dim, page, next_n, ctx, msl, tile):
    kv, q, qs, w, cl = _problem(heads + next_n, ctx, next_n, heads, head_dim, page)
    bk, nw = tile or (None, None)
    out = pa_mqa_logits_fp4(q, qs, kv.kv_cache, kv.kv_scale, kv.block_tables, w, cl, msl,
                            weight_scale=1.5, next_n=next_n, kv_block_size=page, block_k=bk, num_warps=nw)
    assert out.shape == (len(ctx) * next_n, msl)
    _check(out, kv, q, qs, w, cl, msl, next_n, 1.5)


def test_strided_pool_strided_out_and_multi_chunk_ctas():
    """Values and scales are views into one pool (page stride > page bytes); the output is a column
    slice of a wider buffer; parallel_unit_num = rows forces every CTA through all of its chunks."""
    ctx, next_n, msl = [700, 0, 260], 2, 704
    kv, q, qs, w, cl = _problem(7, ctx, next_n, 64, 128, 64, pool_gap=96, table_width=12)
    assert kv.kv_cache.stride(0) == 64 * 64 + 256 + 96
    wide = torch.full((len(ctx) * next_n, msl + 40), 7.0)
    out = wide[:, 8:8 + msl]
    got = pa_mqa_logits_fp4(q, qs, kv.kv_cache, kv.kv_scale, kv.block_tables, w, cl, msl, next_n=next_n,
                            out=out, parallel_unit_num=len(ctx) * next_n)
    assert got.data_ptr() == out.data_ptr()
    _check(out, kv, q, qs, w, cl, msl, next_n, 1.0)
    assert (wide[:, :8] == 7.0).all() and (wide[:, 8 + msl:] == 7.0).all()


def test_external_schedule_graph_style_reuse():
    """A fixed cta_info buffer is filled once per step (in place) and handed to the kernel; the caller
    pre-fills -inf. Two steps with different contexts and data reuse the same buffers."""
    next_n, msl, pgrid = 2, 384, 12
    cta_info = torch.empty(pgrid, 4, dtype=torch.int32)
    out = torch.empty(3 * next_n, msl)
    for step, ctx in enumerate(([300, 5, 129], [0, 384, 64])):
        kv, q, qs, w, cl = _problem(20 + step, ctx, next_n, 16, 128, 128, table_width=3)
        buf, _ = build_schedule(cl, 256, pgrid, msl, next_n, out=cta_info)
        assert buf.data_ptr() == cta_info.data_ptr()
        out.fill_(float("-inf"))
        pa_mqa_logits_fp4(q, qs, kv.kv_cache, kv.kv_scale, kv.block_tables, w, cl, msl, next_n=next_n,
                          kv_block_size=128, out=out, cta_info=cta_info, total_ctas=pgrid, weight_scale=0.75)
        _check(out, kv, q, qs, w, cl, msl, next_n, 0.75)


def test_external_schedule_is_not_prefilled():
    """With an external schedule the op leaves invisible cells alone (the caller's -inf contract)."""
    ctx, msl = [40], 128
    kv, q, qs, w, cl = _problem(3, ctx, 1, 16, 128, 64)
    cta_info, _ = build_schedule(cl, 256, 1, msl, 1)
    out = torch.full((1, msl), 5.0)
    pa_mqa_logits_fp4(q, qs, kv.kv_cache, kv.kv_scale, kv.block_tables, w, cl, msl, out=out,
                      cta_info=cta_info, total_ctas=1)
    assert (out[0, 40:] == 5.0).all()
    ref = pa_mqa_logits_reference(q, qs, kv.kv_cache, kv.kv_scale, kv.block_tables, w, cl, msl)
    m = compare(out[:, :40], ref[:, :40], torch.ones(1, 40, dtype=torch.bool))
    assert passes(m), m


def _sentinel_view(rows, msl, *, left=8, right=24, value=7.0):
    """A [rows, msl] view into a buffer with `value` sentinels around it: `left`/`right` columns on every
    row and one whole row above and below (a store past the last row's end lands in the row below)."""
    wide = torch.full((rows + 2, left + msl + right), value)
    return wide, wide[1:1 + rows, left:left + msl]


def _assert_sentinels(wide, rows, msl, *, left=8, right=24, value=7.0):
    inner = torch.zeros_like(wide, dtype=torch.bool)
    inner[1:1 + rows, left:left + msl] = True
    assert (wide[~inner] == value).all(), "a store landed outside the [rows, max_seq_len] output view"


def _clip_tables_at(kv, msl, page):
    """Poison table entries of pages past max_seq_len: dereferencing one is an emulator fault."""
    kv.block_tables[:, -(-msl // page):] = 0x7FFFFFFF


def test_staged_context_past_max_seq_len_tile_override():
    """Contexts longer than max_seq_len, staged kernel forced by block_k/num_warps on an H64/D128 problem
    (otherwise direct): a 128-token chunk straddles max_seq_len; nothing is stored past the row end and
    no page past max_seq_len is read."""
    ctx, next_n, msl, page = [600, 0, 330, 2, 321], 3, 320, 64
    kv, q, qs, w, cl = _problem(31, ctx, next_n, 64, 128, page)
    _clip_tables_at(kv, msl, page)
    rows = len(ctx) * next_n
    wide, out = _sentinel_view(rows, msl)
    got = pa_mqa_logits_fp4(q, qs, kv.kv_cache, kv.kv_scale, kv.block_tables, w, cl, msl, next_n=next_n,
                            kv_block_size=page, out=out, block_k=128, num_warps=2, weight_scale=1.25)
    assert got.data_ptr() == out.data_ptr()
    _assert_sentinels(wide, rows, msl)
    _check(out, kv, q, qs, w, cl, msl, next_n, 1.25)


def test_staged_context_past_max_seq_len_external_schedule():
    """An external upstream-style cta_info whose chunks follow the full contexts (ceil(ctx / block_k)
    chunks, two per CTA, so some CTAs hold only chunks past max_seq_len); the caller pre-fills -inf."""
    ctx, next_n, msl, page, bk = [700, 260, 0], 2, 300, 128, 256
    kv, q, qs, w, cl = _problem(32, ctx, next_n, 16, 256, page)
    _clip_tables_at(kv, msl, page)
    info = [(b * next_n + n, c0, 2, c) for b, c in enumerate(ctx) for c0 in range(0, -(-c // bk), 2)
            for n in range(next_n)]
    assert any(c0 * bk >= msl for _, c0, _, _ in info)
    cta_info = torch.tensor(info, dtype=torch.int32)
    rows = len(ctx) * next_n
    wide, out = _sentinel_view(rows, msl)
    out.fill_(float("-inf"))
    pa_mqa_logits_fp4(q, qs, kv.kv_cache, kv.kv_scale, kv.block_tables, w, cl, msl, next_n=next_n,
                      kv_block_size=page, out=out, cta_info=cta_info, total_ctas=len(info))
    _assert_sentinels(wide, rows, msl)
    _check(out, kv, q, qs, w, cl, msl, next_n, 1.0)


# ------------------------------------------------------------------------------------------ direct path

def _direct(kv, q, qs, w, cl, msl, next_n, variant, *, out=None, weight_scale=1.5):
    """Launch one direct-path spec (variant forced) through the runtime, as the op would. The output starts
    as NaN: the direct kernel writes every cell, the -inf ones too (the op fills nothing for it)."""
    s = P.check_inputs(q, qs, kv.kv_cache, kv.kv_scale, kv.block_tables, w, cl, msl, next_n,
                       kv.kv_cache.shape[3], weight_scale)
    assert P.takes_direct_path(s)
    if out is None:
        out = torch.full((len(cl) * next_n, msl), float("nan"))
    plan = P.direct_plan(s, msl, out=out, q_fp4=q, q_scale=qs, kv_cache=kv.kv_cache, kv_scale=kv.kv_scale,
                         block_tables=kv.block_tables, weights=w, context_lens=cl, weight_scale=weight_scale,
                         variant=variant)
    assert (plan.params["block_k"], plan.params["weight_load"], plan.params["num_warps"]) == variant
    runtime.launch(plan)
    return out


# (heads, page, next_n, contexts, max_seq_len): one case per direct spec, each variant with several next_n.
DIRECT_CASES = [
    (64, 64, 1, [100, 0, 257], 320), (64, 128, 3, [2, 200, 129], 256),
    (128, 64, 8, [7, 90], 96), (128, 128, 2, [1, 300, 64], 320),
]


@pytest.mark.parametrize("k", range(3), ids=lambda k: f"variant{k}")
@pytest.mark.parametrize("heads,page,next_n,ctx,msl", DIRECT_CASES,
                         ids=[f"h{c[0]}-p{c[1]}-n{c[2]}" for c in DIRECT_CASES])
def test_direct_every_spec(heads, page, next_n, ctx, msl, k):
    variant = DIRECT_VARIANTS[heads][k]
    next_n = next_n if variant[0] == 32 else {1: 4, 3: 5, 8: 8, 2: 2}[next_n]     # spread next_n over variants
    kv, q, qs, w, cl = _problem(heads * 3 + next_n + variant[0], ctx, next_n, heads, 128, page)
    out = _direct(kv, q, qs, w, cl, msl, next_n, variant)
    _check(out, kv, q, qs, w, cl, msl, next_n, 1.5)


@pytest.fixture
def walk_on_small_grids(monkeypatch):
    """The walk kernel on the small grids of these tests (the op picks it from 1024 chunks)."""
    monkeypatch.setattr(geometry, "WALK_MIN_CTAS", 1)


@pytest.mark.parametrize("next_n,path", [(2, "direct"), (4, "walk")])
def test_direct_path_fills_nothing_and_writes_every_cell(next_n, path, walk_on_small_grids):
    """The op leaves a given `out` untouched before the direct or walk launch (no -inf fill); the kernel
    alone then writes every cell: logits, the -inf of rows that see part of a chunk, of rows that see
    none of it (next_n > ctx) and of whole dead chunks (an empty sequence, columns past a context)."""
    ctx, msl = [70, 0, 130, 2], 192
    kv, q, qs, w, cl = _problem(3, ctx, next_n, 64, 128, 64)
    out = torch.full((len(ctx) * next_n, msl), float("nan"))
    got, plans = P.plan_call(q, qs, kv.kv_cache, kv.kv_scale, kv.block_tables, w, cl, msl, weight_scale=1.25,
                             next_n=next_n, block_k=None, kv_block_size=64, num_warps=None, parallel_unit_num=None,
                             out=out, cta_info=None, total_ctas=None)
    assert got is out and bool(out.isnan().all())
    assert [p.params["path"] for p in plans] == [path]
    runtime.launch(plans[0])
    _check(out, kv, q, qs, w, cl, msl, next_n, 1.25)


# (seed, contexts, next_n, max_seq_len, heads, pool gap, table width) per kernel
_STRIDED = {"direct": (11, [150, 0, 200], 3, 160, 128, 160, 5), "walk": (13, [700, 0, 300], 4, 600, 64, 96, 12)}


@pytest.mark.parametrize("kernel", sorted(_STRIDED))
def test_strided_pool_strided_out_and_context_past_max_seq_len(kernel, request):
    """Shared-pool pages with a gap, a column slice of a wider output, and a context longer than
    max_seq_len through the public op (the kernel stores no cell at or past max_seq_len)."""
    if kernel == "walk":
        request.getfixturevalue("walk_on_small_grids")
    seed, ctx, next_n, msl, heads, gap, width = _STRIDED[kernel]
    kv, q, qs, w, cl = _problem(seed, ctx, next_n, heads, 128, 64, pool_gap=gap, table_width=width)
    wide = torch.full((len(ctx) * next_n, msl + 24), 7.0)
    out = wide[:, 8:8 + msl]
    got = pa_mqa_logits_fp4(q, qs, kv.kv_cache, kv.kv_scale, kv.block_tables, w, cl, msl, next_n=next_n,
                            out=out, weight_scale=0.5)
    assert got.data_ptr() == out.data_ptr()
    _check(out, kv, q, qs, w, cl, msl, next_n, 0.5)
    assert (wide[:, :8] == 7.0).all() and (wide[:, 8 + msl:] == 7.0).all()


@pytest.mark.parametrize("heads,variant", [(128, (64, "scalar", 2)), (64, (64, "vector", 1))])
def test_direct_grid_dispatch_through_the_op(monkeypatch, heads, variant):
    """17 sequences x 4096 columns, 2 rows: 2176 32-token CTAs > 1024 and 1088 64-token CTAs > 1024, so the
    op picks the 64-token kernels (H128: two waves, scalar weights; H64: one wave); most CTAs start past
    their context and exit at once."""
    plans = []
    real = runtime.launch
    monkeypatch.setattr(runtime, "launch", lambda plan, stream=None: (plans.append(plan), real(plan))[1])
    ctx = [0, 70, 5, 130, 64, 1, 33, 96, 200, 2, 65, 128, 3, 150, 31, 80, 4]
    kv, q, qs, w, cl = _problem(5, ctx, 2, heads, 128, 128)
    out = pa_mqa_logits_fp4(q, qs, kv.kv_cache, kv.kv_scale, kv.block_tables, w, cl, 4096, next_n=2,
                            kv_block_size=128)
    (plan,) = plans
    assert plan.params["path"] == "direct" and plan.grid == (64, 17, 1)
    assert (plan.params["block_k"], plan.params["weight_load"], plan.params["num_warps"]) == variant
    _check(out, kv, q, qs, w, cl, 4096, 2, 1.0)


# ------------------------------------------------------------------------------------------ walk kernel

# (page, next_n, contexts, max_seq_len): ragged contexts, none a multiple of 256 but one, an empty one,
# contexts shorter than next_n, a context past max_seq_len, max_seq_len not a multiple of 256.
WALK_CASES = [
    (64, 4, [100, 0, 257, 600, 3], 640),
    (64, 3, [256, 1, 513, 77], 520),
    (128, 4, [1000, 2, 129], 768),
    (128, 3, [300, 0, 640, 900], 700),
]


@pytest.mark.parametrize("page,next_n,ctx,msl", WALK_CASES, ids=[f"p{c[0]}-n{c[1]}" for c in WALK_CASES])
def test_walk_kernel(page, next_n, ctx, msl, walk_on_small_grids):
    """The walk kernel for H64 with next_n 3..4; it writes every cell (the output starts NaN)."""
    kv, q, qs, w, cl = _problem(page + next_n, ctx, next_n, 64, 128, page)
    out = torch.full((len(ctx) * next_n, msl), float("nan"))
    got, plans = P.plan_call(q, qs, kv.kv_cache, kv.kv_scale, kv.block_tables, w, cl, msl, weight_scale=0.75,
                             next_n=next_n, block_k=None, kv_block_size=page, num_warps=None,
                             parallel_unit_num=None, out=out, cta_info=None, total_ctas=None)
    (plan,) = plans
    assert plan.params["path"] == "walk" and plan.grid == (-(-msl // 256), len(ctx), 1)
    runtime.launch(plan)
    _check(out, kv, q, qs, w, cl, msl, next_n, 0.75)


