"""mqa_fp8 paged kernel on the gfx950 emulator against the torch references, through flyaot.ops.

Caches are written the way aiter's test utilities write them (per-token scale amax / 240, then the
in-place (16, 16) shuffle of each page's values for Preshuffle). Every shipped paged spec runs with
next_n 1 and 4, ragged contexts (0, shorter than next_n, page-unaligned), a context past max_model_len,
strided pages / weights / output. Against the dequantized reference the kernel is exact up to f32
rounding; against the unquantized one DeepGEMM's diff metric holds (<= 1e-3 on the long case).
"""
import pytest
import torch

from flyaot.kernel_defs.mqa_fp8 import reference as R
from flyaot.kernel_defs.mqa_fp8.specs import FAMILY
from flyaot.ops import fp8_paged_mqa_logits

D = 128
PAGED = [(p["heads"], p["page_size"], p["layout"] == "preshuffle") for p in FAMILY.specs(FAMILY.target_rows[0])
         if p["path"] == "paged"]


@pytest.fixture(autouse=True)
def _private_jit_cache(private_jit_cache):
    """Every test here may JIT-build a kernel the prebuilt store lacks (the root conftest's fixture)."""


def make_problem(seed, ctx, next_n, heads, page, *, preshuffle=False, width=None, spare_pages=3, page_gap=0):
    """bf16 q / keys and f32 weights as aiter's test draws them; the FP8 cache and a shuffled block table."""
    g = torch.Generator().manual_seed(seed)
    pages = [-(-c // page) for c in ctx]
    n = sum(pages) + spare_pages
    keys = torch.randn(n, page, 1, D, generator=g).to(torch.bfloat16)
    cache = R.write_paged_cache(keys.float())
    if preshuffle:
        cache = R.preshuffle_cache(cache)
    if page_gap:                 # pages of a larger pool: page stride > page bytes
        pool = torch.zeros(n, page * (D + 4) + page_gap, dtype=torch.uint8)
        pool[:, :page * (D + 4)] = cache.reshape(n, -1)
        cache = pool[:, :page * (D + 4)].view(n, page, 1, D + 4)
    w_cols = width if width is not None else max(max(pages), 1)
    perm = torch.randperm(n, generator=g)
    bt = torch.zeros(len(ctx), w_cols, dtype=torch.int32)
    k = 0
    for b, count in enumerate(pages):
        for j in range(min(count, w_cols)):
            bt[b, j] = perm[k]
            k += 1
    q = torch.randn(len(ctx), next_n, heads, D, generator=g).to(torch.bfloat16)
    w = torch.randn(len(ctx) * next_n, heads, generator=g)
    return q, keys, cache, w, torch.tensor(ctx, dtype=torch.int32), bt


def check(out, q, keys, cache, w, cl, bt, msl, preshuffle, *, unquantized_diff=None):
    next_n = q.shape[1]
    vis = R.visible_mask(cl, next_n, msl)
    ref = R.paged_logits_reference(q.to(R.FP8), R.dequant_pages(cache, preshuffle), w, cl, bt, msl)
    assert torch.equal(out == float("-inf"), ref == float("-inf")), "-inf placement differs from the reference"
    live = ref != float("-inf")
    if live.any():
        err = (out[live] - ref[live]).abs().max().item()
        assert err <= 1e-5 * ref[live].abs().max().item(), err
    assert R.diff(out, ref, vis & live) <= 1e-9
    if unquantized_diff is not None:
        ref_u = R.paged_logits_reference(q.float(), keys[:, :, 0].double(), w, cl, bt, msl)
        assert R.diff(out, ref_u, vis & live) <= unquantized_diff


@pytest.mark.parametrize("heads,page,preshuffle", PAGED)
@pytest.mark.parametrize("next_n", [1, 4])
def test_every_paged_spec(heads, page, preshuffle, next_n):
    ctx, msl = [130, 0, 3, 64], 192
    q, keys, cache, w, cl, bt = make_problem(heads + page + next_n, ctx, next_n, heads, page, preshuffle=preshuffle)
    out = torch.full((len(ctx) * next_n, msl), 7.0)          # every cell is written: no fill needed
    got = fp8_paged_mqa_logits(q.to(R.FP8), cache, w, cl, bt, msl, kv_block_size=page, preshuffle=preshuffle,
                               out=out)
    assert got is out
    check(out, q, keys, cache, w, cl, bt, msl, preshuffle)


@pytest.mark.parametrize("page,preshuffle", [(64, True), (1, False)])
def test_long_context_diff_metric(page, preshuffle):
    """DeepGEMM's acceptance: diff <= 1e-3 against the unquantized bf16 reference."""
    ctx, msl = [700, 1100], 1152
    q, keys, cache, w, cl, bt = make_problem(5, ctx, 2, 64, page, preshuffle=preshuffle)
    out = fp8_paged_mqa_logits(q.to(R.FP8), cache, w, cl, bt, msl, kv_block_size=page, preshuffle=preshuffle)
    check(out, q, keys, cache, w, cl, bt, msl, preshuffle, unquantized_diff=1e-3)


@pytest.mark.parametrize("page", [1, 64])
def test_context_past_max_model_len_and_strided_operands(page):
    ctx, msl = [300, 90], 200                                # 300 > max_model_len: the row ends at msl
    q, keys, cache, w, cl, bt = make_problem(7, ctx, 3, 32, page, page_gap=16)
    assert cache.stride(0) > page * (D + 4)
    w_pool = torch.zeros(w.shape[0], 40)
    w_pool[:, :32] = w
    out_pool = torch.full((6, msl + 24), 5.0)
    out = out_pool[:, 8:8 + msl]
    fp8_paged_mqa_logits(q.to(R.FP8), cache, w_pool[:, :32], cl, bt, msl, kv_block_size=page, out=out)
    check(out, q, keys, cache, w, cl, bt, msl, False)
    assert (out_pool[:, :8] == 5.0).all() and (out_pool[:, 8 + msl:] == 5.0).all()


@pytest.mark.parametrize("page", [1, 64])
def test_wild_tables_and_lengths(page):
    """docs/safety.md: invalid pages and pages past the table score -inf; lengths <= 0 leave rows -inf."""
    ctx, msl = [200, -5, 150, 1 << 30], 256
    q, keys, cache, w, cl, bt = make_problem(9, [200, 0, 150, 256], 2, 64, page, width=3 if page == 64 else 180)
    n = cache.shape[0]
    cl = torch.tensor(ctx, dtype=torch.int32)
    bt[0, 1] = -1
    bt[0, 2] = n                     # one past the last page
    bt[2, 0] = 1 << 30
    out = fp8_paged_mqa_logits(q.to(R.FP8), cache, w, cl, bt, msl, kv_block_size=page)
    check(out, q, keys, cache, w, cl, bt, msl, False)
    vis = R.visible_mask(cl, 2, msl)
    assert (out[2:4] == float("-inf")).all()
    assert torch.isfinite(out[vis]).sum() > 0


def test_bad_arguments_are_named():
    q, _, cache, w, cl, bt = make_problem(1, [10], 1, 64, 64)
    qf = q.to(R.FP8)
    with pytest.raises(ValueError, match="KVBlockSize"):
        fp8_paged_mqa_logits(qf, cache, w, cl, bt, 64, kv_block_size=16)
    with pytest.raises(ValueError, match="kv_cache"):
        fp8_paged_mqa_logits(qf, cache, w, cl, bt, 64, kv_block_size=1)
    with pytest.raises(ValueError, match="Preshuffle"):
        fp8_paged_mqa_logits(qf, make_problem(1, [10], 1, 64, 1)[2], w, cl, bt, 64, kv_block_size=1,
                             preshuffle=True)
    with pytest.raises(TypeError, match="q_fp8"):
        fp8_paged_mqa_logits(q, cache, w, cl, bt, 64, kv_block_size=64)
    with pytest.raises(TypeError, match="context_lens"):
        fp8_paged_mqa_logits(qf, cache, w, cl.long(), bt, 64, kv_block_size=64)
    with pytest.raises(ValueError, match="heads"):
        fp8_paged_mqa_logits(qf[:, :, :16], cache, w[:, :16], cl, bt, 64, kv_block_size=64)
    with pytest.raises(ValueError, match="next_n"):
        q5 = make_problem(1, [10], 5, 64, 64)
        fp8_paged_mqa_logits(q5[0].to(R.FP8), cache, q5[3], cl, bt, 64, kv_block_size=64)
    with pytest.raises(ValueError, match="out_logits"):
        fp8_paged_mqa_logits(qf, cache, w, cl, bt, 64, kv_block_size=64, out=torch.empty(1, 63))


@pytest.mark.parametrize("heads,cu_count", [(64, 1), (32, None)])
def test_varctx_schedule_grid(heads, cu_count):
    """The persistent grid over the runs-schedule table: runs of several chunks (1 CU: 32 slots for 36
    chunks) and of one (the default slot count); a caller's garbage in `out` is overwritten."""
    from flyaot.ops import fp8_paged_mqa_logits_schedule
    ctx, msl, next_n = [2000, 5, 0, 130], 2048, 2
    q, keys, cache, w, cl, bt = make_problem(11, ctx, next_n, heads, 64, preshuffle=True)
    table = fp8_paged_mqa_logits_schedule(cl, msl, next_n, cu_count=cu_count)
    assert table.dtype == torch.int32 and table.shape[1] == 4 and table.shape[0] % next_n == 0
    if cu_count == 1:
        assert int(table[:, 2].max()) > 1              # some slot runs several chunks
    out = torch.full((len(ctx) * next_n, msl), 3.0)
    fp8_paged_mqa_logits(q.to(R.FP8), cache, w, cl, bt, msl, kv_block_size=64, preshuffle=True, schedule=table,
                         out=out)
    check(out, q, keys, cache, w, cl, bt, msl, True)


def test_varctx_wild_schedule_rows_are_memory_safe():
    """A schedule naming rows outside the batch runs nothing for them; the other slots still score."""
    from flyaot.ops import fp8_paged_mqa_logits_schedule
    ctx, msl = [200, 70], 256
    q, keys, cache, w, cl, bt = make_problem(12, ctx, 1, 64, 64, preshuffle=True)
    table = fp8_paged_mqa_logits_schedule(cl, msl, 1, cu_count=1).clone()
    first_b1 = int((table[:, 0] == 1).nonzero()[0, 0])
    table[first_b1, 0] = 1 << 20                        # sequence 1's slot: a row past the batch
    table[first_b1 + 1:, 0] = -3
    out = fp8_paged_mqa_logits(q.to(R.FP8), cache, w, cl, bt, msl, kv_block_size=64, preshuffle=True, schedule=table)
    ref = R.paged_logits_reference(q.to(R.FP8), R.dequant_pages(cache, True), w, cl, bt, msl)
    assert torch.allclose(out[0], ref[0], rtol=1e-5, atol=1e-4, equal_nan=False) or torch.equal(out[0], ref[0])
    assert (out[1] == float("-inf")).all()


def _opcheck_cases():
    q, _, cache, w, cl, bt = make_problem(31, [70, 3], 2, 32, 64, preshuffle=True)
    # FP8 as its uint8 bytes (the ops take both): opcheck's schema test multiplies inputs, which torch's
    # CPU kernels cannot do in float8
    paged = (q.to(R.FP8).view(torch.uint8), cache, w, cl, bt, 128, 64, True, None)
    yield "fp8_paged_mqa_logits", paged
    yield "fp8_paged_mqa_logits_out", (*paged, torch.empty(4, 128))
    g = torch.Generator().manual_seed(32)
    qr = torch.randn(9, 32, D, generator=g).to(R.FP8).view(torch.uint8)
    kv = torch.randn(70, D, generator=g).to(R.FP8).view(torch.uint8)
    ragged = (qr, kv, torch.rand(70, generator=g), torch.randn(9, 32, generator=g),
              torch.zeros(9, dtype=torch.int32), torch.arange(62, 71, dtype=torch.int32), True)
    yield "fp8_mqa_logits", ragged
    yield "fp8_mqa_logits_out", (*ragged, torch.empty(9, 70))


@pytest.mark.parametrize("name,args", list(_opcheck_cases()), ids=lambda v: v if isinstance(v, str) else "")
def test_opcheck(name, args):
    """torch's checks of the registered ops: schema, declared mutations, fake vs real metadata."""
    torch.library.opcheck(getattr(torch.ops.flyaot, name).default, args)


def test_checked_mode_refuses_wild_values(monkeypatch):
    """FLYAOT_CHECK=1: a table entry outside kv_cache or a negative length is a ValueError before launch."""
    from flyaot import runtime
    monkeypatch.setenv("FLYAOT_CHECK", "1")
    runtime.reset()
    q, _, cache, w, cl, bt = make_problem(41, [130, 20], 1, 64, 64)
    bt[0, 1] = cache.shape[0]
    with pytest.raises(ValueError, match="block_tables"):
        fp8_paged_mqa_logits(q.to(R.FP8), cache, w, cl, bt, 192, kv_block_size=64)
    with pytest.raises(ValueError, match="context_lens"):
        fp8_paged_mqa_logits(q.to(R.FP8), cache, w, torch.tensor([-1, 20], dtype=torch.int32), bt, 192,
                             kv_block_size=64)
    runtime.reset()
