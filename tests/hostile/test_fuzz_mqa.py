"""Hypothesis fuzz of decode and prefill inputs on the emulator: shapes, strides and index values
(block-table entries inside and outside kv_cache, contexts and windows past the table, batches
outside the table), plus a few malformed arguments.

Every example either raises a clear ValueError/TypeError (malformed arguments only), or returns the
reference result under the documented contract (docs/safety.md: -inf for the tokens of invalid pages);
an emulator access fault (EmuError) is never acceptable and fails the example. Derandomized and
bounded (max_examples, no per-example deadline: the emulator's speed depends on the shared CPU).
"""
import pytest
import torch
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from flyaot.kernel_defs.mqa_common import layouts
from flyaot.kernel_defs.mqa_decode.reference import pa_mqa_logits_reference, visible_mask
from flyaot.kernel_defs.mqa_prefill.reference import prefill_logits, visible
from flyaot.ops import pa_mqa_logits_fp4, pa_mqa_logits_fp4_prefill

from hostile_helpers import assert_contract, guarded

# no shrink phase: one emulator launch per example makes shrinking take minutes; the failing example
# is printed draw by draw and reproduces (derandomized)
FUZZ = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
ODD_ENTRIES = (-1, -(1 << 31), (1 << 31) - 1)


@pytest.fixture(autouse=True)
def _no_jit(monkeypatch):
    """Every fuzzed shape is prebuilt: a miss would be a test bug, not a slow JIT build."""
    monkeypatch.setenv("FLYAOT_DISABLE_JIT", "1")


def _pages(num_pages, page, gen):
    kv = layouts.make_paged_kv([num_pages * page], 128, page, gen, spare_pages=0)
    return kv.kv_cache, kv.kv_scale


def _table(draw, rows, width, num_pages, extra):
    """int32 [rows, width] (a column slice of a wider table when extra > 0) of page ids, some invalid."""
    entry = st.one_of(st.integers(0, num_pages - 1), st.sampled_from(ODD_ENTRIES + (num_pages,)))
    values = draw(st.lists(entry, min_size=rows * width, max_size=rows * width))
    wide = torch.full((rows, width + extra), 0x7FFFFFFF, dtype=torch.int32)
    wide[:, :width] = torch.tensor(values, dtype=torch.int32).view(rows, width)
    return guarded(wide, 64)[:, :width]


def _place_kv(draw, kv_cache, kv_scale):
    """Guarded dense pages, or values and scales as views of one shared pool (page stride > page bytes)."""
    gap = draw(st.sampled_from([None, None, 0, 48]))
    if gap is None:
        return guarded(kv_cache, 2 * kv_cache[0].numel()), guarded(kv_scale, 2 * kv_scale[0].numel())
    return layouts.shared_pool(kv_cache, kv_scale, gap=gap)


def _outcome(call, reference, shown, malformed):
    """call() raises a clear error (malformed inputs only) or matches reference() on the cells shown()."""
    try:
        out = call()
    except (ValueError, TypeError):
        if malformed:
            return
        raise
    assert_contract(out, reference(), shown())


@FUZZ
@given(st.data())
def test_fuzz_decode(data):
    draw = data.draw
    heads = draw(st.sampled_from([16, 64]), label="heads")
    page = draw(st.sampled_from([64, 128]), label="page")
    batch, next_n = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    width, num_pages = draw(st.integers(1, 4)), draw(st.integers(1, 5))
    ctx = draw(st.lists(st.integers(-3, page * width + 96), min_size=batch, max_size=batch), label="ctx")
    msl = draw(st.integers(1, 320), label="max_seq_len")
    staged = draw(st.booleans(), label="staged override")
    malformed = draw(st.sampled_from([None] * 6 + ["ctx_float", "bt_int64", "q_scale_shape", "page_size",
                                                   "overlapping_out", "next_n"]), label="malformed")
    gen = torch.Generator().manual_seed(draw(st.integers(0, 1 << 16)))
    q, qs = layouts.make_q((batch, next_n), heads, 128, gen)
    w = (torch.randn(batch * next_n, heads, generator=gen) * 0.5).to(torch.bfloat16)
    kv_cache, kv_scale = _place_kv(draw, *_pages(num_pages, page, gen))
    bt = _table(draw, batch, width, num_pages, draw(st.integers(0, 2)))
    cl = torch.tensor(ctx, dtype=torch.int32)
    rows = batch * next_n
    out = None
    if draw(st.booleans(), label="strided out"):
        out = torch.zeros(rows, msl + 8)[:, :msl]
    kw = dict(next_n=next_n, kv_block_size=page, weight_scale=0.5)
    if staged:
        kw.update(block_k=256, num_warps=4)
    if malformed == "ctx_float":
        cl = cl.float()
    elif malformed == "bt_int64":
        bt = bt.long()
    elif malformed == "q_scale_shape":
        qs = qs[..., :2, :, :, :]
    elif malformed == "page_size":
        kw["kv_block_size"] = 192 - page
    elif malformed == "overlapping_out":
        out = torch.zeros(1, msl).expand(rows, msl)
    elif malformed == "next_n":
        kw["next_n"] = next_n + 1

    def call():
        return pa_mqa_logits_fp4(q, qs, kv_cache, kv_scale, bt, w, cl, msl, out=out, **kw)

    def reference():
        return pa_mqa_logits_reference(q, qs, kv_cache, kv_scale, bt, w, cl, msl, weight_scale=0.5, next_n=next_n)

    _outcome(call, reference, lambda: visible_mask(cl, next_n, msl), malformed)


@FUZZ
@given(st.data())
def test_fuzz_prefill(data):
    draw = data.draw
    heads = draw(st.sampled_from([16, 32, 64]), label="heads")
    page = draw(st.sampled_from([64, 128]), label="page")
    rows, n_batches = draw(st.integers(1, 5)), draw(st.integers(1, 3))
    width, num_pages = draw(st.integers(1, 4)), draw(st.integers(1, 5))
    span = page * width + 80
    rb = draw(st.lists(st.one_of(st.integers(0, n_batches - 1), st.sampled_from([-1, n_batches, 1 << 30])),
                       min_size=rows, max_size=rows), label="row_to_batch")
    ls = draw(st.lists(st.integers(-5, span), min_size=rows, max_size=rows), label="local_starts")
    le = draw(st.lists(st.integers(-5, span), min_size=rows, max_size=rows), label="local_ends")
    msl = draw(st.integers(0, 320), label="max_seq_len")
    malformed = draw(st.sampled_from([None] * 6 + ["rb_int64", "le_short", "bt_float", "q_scale_shape",
                                                   "weights_dtype", "overlapping_out"]), label="malformed")
    gen = torch.Generator().manual_seed(draw(st.integers(0, 1 << 16)))
    q, qs = layouts.make_q((rows,), heads, 128, gen)
    if draw(st.booleans(), label="strided q rows"):
        wide = torch.zeros(rows, heads + 16, 64, dtype=q.dtype)
        wide[:, :heads] = q
        q = wide[:, :heads]
    w = torch.zeros(rows, heads + 8, dtype=torch.bfloat16)
    w[:, :heads] = (torch.rand(rows, heads, generator=gen) * 2 - 0.5).to(torch.bfloat16)
    w = w[:, :heads]
    kv_cache, kv_scale = _place_kv(draw, *_pages(num_pages, page, gen))
    bt = _table(draw, n_batches, width, num_pages, draw(st.integers(0, 2)))
    rb_t, ls_t, le_t = (torch.tensor(v, dtype=torch.int32) for v in (rb, ls, le))
    slots = draw(st.sampled_from([None, rows, rows + 3]), label="parallel_unit_num")
    if malformed == "rb_int64":
        rb_t = rb_t.long()
    elif malformed == "le_short":
        le_t = le_t[:-1]
    elif malformed == "bt_float":
        bt = bt.float()
    elif malformed == "q_scale_shape":
        qs = qs[:, :, :, :, :2]
    elif malformed == "weights_dtype":
        w = w.float()
    out = None
    if malformed == "overlapping_out" and msl:      # (an empty `out` overlaps nothing)
        out = torch.zeros(rows, msl)
        le_t = out.view(-1).view(torch.int32)[:rows].copy_(le_t)       # the windows live inside `out`

    def call():
        return pa_mqa_logits_fp4_prefill(q, qs, kv_cache, kv_scale, bt, w, rb_t, ls_t, le_t, msl,
                                         weight_scale=1.5, parallel_unit_num=slots, out=out)

    if out is not None:
        with pytest.raises(ValueError, match="out: its memory overlaps local_ends"):
            call()
        return

    def reference():
        return prefill_logits(q, qs, kv_cache, kv_scale, bt, w, rb_t, ls_t, le_t, msl, weight_scale=1.5)

    _outcome(call, reference, lambda: visible(rb_t, ls_t, le_t, msl), malformed)
