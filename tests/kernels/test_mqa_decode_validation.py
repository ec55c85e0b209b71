"""pa_mqa_logits_fp4 rejects bad inputs with a clear error naming the argument, before any launch."""
import pytest
import torch

from flyaot.kernel_defs.mqa_common import layouts
from flyaot.kernel_defs.mqa_decode import plan as P
from flyaot.kernel_defs.mqa_decode import geometry
from flyaot.kernel_defs.mqa_decode.geometry import DIRECT_VARIANTS, direct_tile, takes_walk
from flyaot.kernel_defs.mqa_runs_schedule.reference import varctx_reference as build_schedule
from flyaot.ops import _mqa_decode as op_module


@pytest.fixture(autouse=True)
def _no_launch(monkeypatch):
    def launch(plan, stream=None):
        raise AssertionError(f"launched {plan.family} {plan.params} although the inputs are invalid")
    monkeypatch.setattr(op_module.runtime, "launch", launch)


def _args(next_n=2, heads=64, head_dim=128, page=64, ctx=(70, 5)):
    g = torch.Generator().manual_seed(0)
    kv = layouts.make_paged_kv(list(ctx), head_dim, page, g)
    q, qs = layouts.make_q((len(ctx), next_n), heads, head_dim, g)
    w = torch.randn(len(ctx) * next_n, heads, generator=g).to(torch.bfloat16)
    a = dict(q_fp4=q, q_scale=qs, kv_cache=kv.kv_cache, kv_scale=kv.kv_scale, block_tables=kv.block_tables,
             weights=w, context_lens=torch.tensor(ctx, dtype=torch.int32), max_seq_len=128)
    return a, dict(next_n=next_n, kv_block_size=page)


def _call(a, kw):
    return op_module.pa_mqa_logits_fp4(*a.values(), **kw)


def _raises(exc, match, **changes):
    a, kw = _args()
    for k, v in changes.items():
        (a if k in a else kw)[k] = v
    with pytest.raises(exc, match=match):
        _call(a, kw)


def test_bad_dtypes():
    a, _ = _args()
    _raises(TypeError, "q_fp4", q_fp4=a["q_fp4"].float())
    _raises(TypeError, "weights", weights=a["weights"].float())
    _raises(TypeError, "block_tables", block_tables=a["block_tables"].long())
    _raises(TypeError, "context_lens", context_lens=torch.tensor([70.0, 5.0]))
    _raises(TypeError, "kv_scale", kv_scale=a["kv_scale"].to(torch.int8))


def test_bad_shapes():
    a, _ = _args()
    _raises(ValueError, "q_scale", q_scale=a["q_scale"][..., :2].contiguous())
    _raises(ValueError, "weights", weights=a["weights"][:3].contiguous())
    _raises(ValueError, "block_tables", block_tables=a["block_tables"][:1])
    _raises(ValueError, "context_lens", context_lens=torch.tensor([1, 2, 3], dtype=torch.int32))
    _raises(ValueError, "kv_cache", kv_cache=torch.zeros(4, 2, 4, 64, 16, dtype=torch.uint8))


def test_bad_strides():
    a, _ = _args()
    cache = a["kv_cache"]
    wide = torch.zeros(*cache.shape[:-1], 32, dtype=torch.uint8)[..., :16]     # inner stride broken
    _raises(ValueError, "kv_cache", kv_cache=wide)
    overlap = cache.as_strided(cache.shape, (1024,) + cache.stride()[1:])
    _raises(ValueError, "page stride", kv_cache=overlap)
    _raises(ValueError, "q_fp4", q_fp4=a["q_fp4"].transpose(2, 3).contiguous().transpose(2, 3))
    _raises(ValueError, "block_tables", block_tables=a["block_tables"].t().contiguous().t())


def test_bad_page_sizes_and_heads():
    _raises(ValueError, "kv_block_size", kv_block_size=32)
    _raises(ValueError, "kv_cache", kv_block_size=128)            # the cache holds 64-token pages
    a, kw = _args(heads=64)
    q = torch.zeros(2, 2, 24, 64, dtype=torch.uint8)
    with pytest.raises(ValueError, match="heads"):
        _call(dict(a, q_fp4=q), kw)
    q = torch.zeros(2, 2, 64, 96, dtype=torch.uint8)
    with pytest.raises(ValueError, match="head_dim"):
        _call(dict(a, q_fp4=q), kw)


def test_next_n_mismatch_and_range():
    _raises(ValueError, "next_n", next_n=3)
    a, kw = _args(next_n=1)
    with pytest.raises(ValueError, match="next_n"):
        _call(a, dict(kw, next_n=17))


def test_schedule_and_out_arguments():
    a, kw = _args()
    ci, _ = build_schedule(a["context_lens"], 256, 4, 128, 2)
    with pytest.raises(ValueError, match="together"):
        _call(a, dict(kw, cta_info=ci))
    with pytest.raises(ValueError, match="total_ctas"):
        _call(a, dict(kw, cta_info=ci, total_ctas=5))
    with pytest.raises(TypeError, match="cta_info"):
        _call(a, dict(kw, cta_info=ci.long(), total_ctas=4))
    with pytest.raises(ValueError, match="parallel_unit_num"):
        _call(a, dict(kw, parallel_unit_num=3))
    with pytest.raises(ValueError, match="parallel_unit_num"):
        _call(a, dict(kw, parallel_unit_num=2))                   # 2 // next_n < batch
    with pytest.raises(ValueError, match="out"):
        _call(a, dict(kw, out=torch.empty(4, 100)))
    with pytest.raises(TypeError, match="out"):
        _call(a, dict(kw, out=torch.empty(4, 128, dtype=torch.float16)))
    with pytest.raises(ValueError, match="block_k"):
        _call(a, dict(kw, block_k=96, num_warps=1))                # not a multiple of the page size
    with pytest.raises(ValueError, match="num_warps"):
        _call(a, dict(kw, block_k=64, num_warps=3))                # 4 tiles do not split over 3 waves
    with pytest.raises(ValueError, match="max_seq_len"):
        _call(dict(a, max_seq_len=0), kw)


@pytest.mark.parametrize("next_n,pgrid", [(1, None), (2, None), (3, 18), (1, 7)])
def test_schedule_covers_each_rows_chunks_up_to_max_seq_len_once(next_n, pgrid):
    """Every row's chunks below ceil(min(ctx, max_seq_len) / block_k) are served by exactly one CTA and no
    CTA is given a chunk past that (contexts longer than max_seq_len included); the ctx field is the true
    context, which the kernel's causal rule needs."""
    ctx, bk, msl = [0, 700, 5, 256, 257, 1000], 256, 600
    pgrid = pgrid or len(ctx) * next_n * -(-msl // bk)
    info, _ = build_schedule(torch.tensor(ctx, dtype=torch.int32), bk, pgrid, msl, next_n)
    served = {}
    for row, start, count, c in info.tolist():
        if c == 0:                                         # an unused slot or an empty sequence: no stores
            continue
        assert c == ctx[row // next_n]
        for k in range(start, start + count):
            served[(row, k)] = served.get((row, k), 0) + 1
    want = {(b * next_n + n, k) for b, c in enumerate(ctx) for n in range(next_n)
            for k in range(-(-min(c, msl) // bk))}
    assert set(served) == want and set(served.values()) == {1}


# ------------------------------------------------------------------------------------------ dispatch

def _plan_of(monkeypatch, a, kw):
    plans = []
    monkeypatch.setattr(op_module.runtime, "launch", lambda plan, stream=None: plans.append(plan))
    _call(a, kw)
    *schedule, plan = plans           # the staged kernel's internal schedule is launched before it
    assert [p.family for p in schedule] == ([] if plan.params["path"] in ("direct", "walk") or "cta_info" in kw
                                            else ["mqa_runs_schedule"])
    return plan


def test_dispatch_direct_only_for_internal_d128_h64_h128(monkeypatch):
    for heads, page in ((64, 64), (128, 128)):
        a, kw = _args(heads=heads, page=page)
        plan = _plan_of(monkeypatch, a, kw)
        assert plan.params["path"] == "direct" and plan.params["page_size"] == page
        assert plan.grid == (-(-128 // 32), 2, 1) and plan.block == (128, 1, 1)
        assert plan.args["next_n"] == 2 and plan.args["max_seq_len"] == 128
    a, kw = _args()
    ci, _ = build_schedule(a["context_lens"], 256, 4, 128, 2)
    for hint in (dict(block_k=256), dict(num_warps=4), dict(block_k=256, num_warps=4)):
        assert _plan_of(monkeypatch, a, dict(kw, **hint)).params["path"] == "direct", hint
    staged = [dict(cta_info=ci, total_ctas=4), dict(block_k=128, num_warps=2), dict(block_k=512),
              dict(num_warps=2), dict(parallel_unit_num=4)]
    for extra in staged:
        plan = _plan_of(monkeypatch, a, dict(kw, **extra))
        assert plan.params["path"] == "staged" and plan.args["max_seq_len"] == 128, extra
    for heads, head_dim in ((32, 128), (96, 128), (64, 256)):
        a, kw = _args(heads=heads, head_dim=head_dim)
        assert _plan_of(monkeypatch, a, kw).params["path"] == "staged", (heads, head_dim)


def test_direct_tile_follows_heads_rows_and_grid_size():
    # H64: one wave and 32-token tiles for single-row calls; multi-row calls take two waves while
    # B * ceil(max_seq_len / 32) <= 1024 CTAs, else one wave with 64-token tiles. H128: two waves, 32-token
    # tiles up to 1024 CTAs, then 64-token tiles, scalar weight loads once even that grid exceeds 1024.
    assert direct_tile(64, 2, 1, 512) == (32, False, 1)
    assert direct_tile(64, 1, 1, 131072) == (32, False, 1)
    assert direct_tile(64, 2, 2, 512) == (32, False, 2)
    assert direct_tile(64, 32, 2, 1024) == (32, False, 2)
    assert direct_tile(64, 33, 2, 1024) == (64, False, 1)
    assert direct_tile(64, 32, 4, 32768) == (64, False, 1)
    assert direct_tile(128, 2, 1, 768) == (32, False, 2)
    assert direct_tile(128, 1, 1, 32769) == (64, False, 2)
    assert direct_tile(128, 1, 1, 65537) == (64, True, 2)
    assert direct_tile(128, 16, 1, 4352) == (64, True, 2)
    for heads in (64, 128):
        for shape in ((1, 1, 100), (40, 3, 4096), (3, 8, 70000)):
            tile, scalar, waves = direct_tile(heads, *shape)
            assert (tile, "scalar" if scalar else "vector", waves) in DIRECT_VARIANTS[heads]


def test_walk_kernel_for_h64_with_three_or_four_rows_on_large_grids(monkeypatch):
    # the walk kernel serves H64 D128 with next_n 3..4 on grids of >= 1024 256-token chunks (before the
    # direct_tile rule); other row counts, H128 and smaller grids keep the direct kernel, a forced direct
    # variant keeps it too
    assert [n for n in range(1, 9) if takes_walk(64, 128, n, 32, 32768)] == [3, 4]
    assert not takes_walk(128, 128, 4, 32, 32768) and not takes_walk(64, 256, 4, 32, 32768)
    assert takes_walk(64, 128, 4, 4, 65536) and not takes_walk(64, 128, 4, 4, 65536 - 256)
    monkeypatch.setattr(geometry, "WALK_MIN_CTAS", 1)           # the small calls below take it too
    for next_n, page in ((3, 64), (4, 128)):
        a, kw = _args(page=page, next_n=next_n)
        plan = _plan_of(monkeypatch, a, kw)
        assert plan.params["path"] == "walk" and plan.params["page_size"] == page
        assert plan.grid == (1, 2, 1) and plan.block == (256, 1, 1) and plan.args["next_n"] == next_n
        s = P.check_inputs(*a.values(), next_n, page, 1.0)
        forced = P.direct_plan(s, 128, out=torch.empty(2 * next_n, 128), q_fp4=a["q_fp4"], q_scale=a["q_scale"],
                               kv_cache=a["kv_cache"], kv_scale=a["kv_scale"], block_tables=a["block_tables"],
                               weights=a["weights"], context_lens=a["context_lens"], weight_scale=1.0,
                               variant=(64, "vector", 1))
        assert forced.params["path"] == "direct"
    for next_n in (2, 5):
        a, kw = _args(next_n=next_n)
        assert _plan_of(monkeypatch, a, kw).params["path"] == "direct", next_n


def test_direct_variant_override_is_checked():
    a, kw = _args()
    s = P.check_inputs(*a.values(), kw["next_n"], kw["kv_block_size"], 1.0)
    out = torch.empty(4, 128)
    with pytest.raises(ValueError, match="variant"):
        P.direct_plan(s, 128, out=out, q_fp4=a["q_fp4"], q_scale=a["q_scale"], kv_cache=a["kv_cache"],
                      kv_scale=a["kv_scale"], block_tables=a["block_tables"], weights=a["weights"],
                      context_lens=a["context_lens"], weight_scale=1.0, variant=(32, "scalar", 2))
