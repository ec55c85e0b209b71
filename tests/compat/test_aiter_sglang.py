"""SGLang's FP4 indexer call sequences through flyaot.compat.aiter, on the emulator, against the torch
references: eager decode, graph-pinned decode (a reused cta_info_out buffer, a caller-filled out),
eager prefill, and prefill with a 6-int table built the way SGLang builds it."""
import torch
from engines import PAGE, indexer_problem, row_table, varctx_table

from flyaot import runtime
from flyaot.compat import aiter
from flyaot.kernel_defs.mqa_common.reference import compare, passes
from flyaot.kernel_defs.mqa_decode.reference import pa_mqa_logits_reference, visible_mask
from flyaot.kernel_defs.mqa_prefill import reference as R

COMMON = {"block_k": 256, "kv_block_size": PAGE, "num_warps": 4}


def _recording(monkeypatch):
    """Launch for real and keep every plan (which kernel the op chose)."""
    plans, real = [], runtime.launch
    monkeypatch.setattr(runtime, "launch", lambda plan, stream=None: (plans.append(plan), real(plan, stream=stream)))
    return plans


def _decode(p, msl, **kw):
    t = p["q"].shape[0]
    return aiter.flydsl_pa_mqa_logits_fp4(p["q"].reshape(t, 1, 64, 64), p["qs"].reshape(t, 1, *p["qs"].shape[1:]),
                                          p["kv"], p["ks"], p["table"], p["w"], p["lens"], msl, next_n=1, **kw)


def _decode_ref(p, logical, weight_scale):
    t = p["q"].shape[0]
    msl = logical * PAGE
    ref = pa_mqa_logits_reference(p["q"].reshape(t, 1, 64, 64), p["qs"].reshape(t, 1, *p["qs"].shape[1:]), p["kv"],
                                  p["ks"], p["table"], p["w"], p["lens"], msl, weight_scale=weight_scale)
    return ref, visible_mask(p["lens"], 1, msl)


def test_sglang_decode_runs_the_direct_kernel(monkeypatch):
    p, logical = indexer_problem(1, [130, 1, 64, 190])
    msl = p["table"].shape[1] * PAGE
    plans = _recording(monkeypatch)
    logits = _decode(p, msl, parallel_unit_num=None, weight_scale=0.5, **COMMON)[:, :logical * PAGE].contiguous()
    assert [pl.params["path"] for pl in plans] == ["direct"]       # block_k=256, num_warps=4 are hints
    ref, vis = _decode_ref(p, logical, 0.5)
    m = compare(logits, ref, vis)
    assert passes(m), m


def test_sglang_graph_pinned_decode_reuses_its_buffers(monkeypatch):
    """One workspace for two steps: compute_varctx_schedule refills cta_info_out in place, the op writes
    into the pooled out that the caller pre-filled and never fills it itself."""
    units = 8
    cta_info = torch.empty(units, 4, dtype=torch.int32)
    table_width = 4
    out = torch.empty(3, table_width * PAGE)
    plans = _recording(monkeypatch)
    for step, lens in enumerate(([200, 3, 64], [0, 256, 130])):
        p, logical = indexer_problem(10 + step, lens, table_width=table_width)
        msl = p["table"].shape[1] * PAGE
        safe, info, n = aiter.compute_varctx_schedule(p["lens"], 256, units, msl, next_n=1, cta_info_out=cta_info)
        assert info is cta_info and n == units and safe.shape == (1,) and safe.dtype == torch.int32
        out.fill_(7.0)                                          # the caller's fill (any value stays put)
        got = _decode(p, msl, cta_info=cta_info, total_ctas=n, out=out, weight_scale=1.25, **COMMON)
        assert got is out and plans[-1].params["path"] == "staged" and plans[-1].args["cta_info"] is cta_info
        ref, vis = _decode_ref(p, logical, 1.25)
        assert (out[~vis] == 7.0).all()
        m = compare(out.masked_fill(~vis, float("-inf")), ref, vis)
        assert passes(m), m


def test_decode_table_built_by_upstream_semantics():
    """A table as upstream's builder writes it (chunks over the whole context, even past max_seq_len;
    next_n = 2) is served as is; the caller-filled out keeps its fill outside the visible cells."""
    from flyaot.kernel_defs.mqa_common import layouts
    g = torch.Generator().manual_seed(6)
    lens, next_n, msl, units = [700, 3, 260], 2, 512, 12
    kv = layouts.make_paged_kv([min(c, msl) for c in lens], 128, PAGE, g)
    q, qs = layouts.make_q((3, next_n), 64, 128, g)
    w = (torch.randn(3 * next_n, 64, generator=g) * 0.5).to(torch.bfloat16)
    ctx = torch.tensor(lens, dtype=torch.int32)
    table = varctx_table(lens, 256, units, msl, next_n)
    out = torch.full((3 * next_n, msl), 7.0)
    aiter.flydsl_pa_mqa_logits_fp4(q, qs, kv.kv_cache, kv.kv_scale, kv.block_tables, w, ctx, msl, next_n=next_n,
                                   cta_info=table, total_ctas=units, out=out, **COMMON)
    ref = pa_mqa_logits_reference(q, qs, kv.kv_cache, kv.kv_scale, kv.block_tables, w, ctx, msl, next_n=next_n)
    vis = visible_mask(ctx, next_n, msl)
    assert (out[~vis] == 7.0).all()
    m = compare(out.masked_fill(~vis, float("-inf")), ref, vis)
    assert passes(m), m


def _prefill_args(p):
    return (p["q"], p["qs"], p["kv"], p["ks"], p["table"], p["w"])


def _prefill_ref(p, rb, ls, le, msl, weight_scale):
    ref = R.prefill_logits(*_prefill_args(p), rb, ls, le, msl, weight_scale)
    return ref, R.visible(rb, ls, le, msl)


def test_sglang_prefill():
    p, logical = indexer_problem(3, [300, 40, 0, 257, 64])
    t = p["q"].shape[0]
    msl = p["table"].shape[1] * PAGE
    rb, ls = torch.arange(t, dtype=torch.int32), torch.zeros(t, dtype=torch.int32)
    logits = aiter.flydsl_pa_mqa_logits_fp4_prefill(*_prefill_args(p), rb, ls, p["lens"], msl,
                                                    parallel_unit_num=max(512, t), weight_scale=0.75, **COMMON)
    ref, vis = _prefill_ref(p, rb, ls, p["lens"], msl, 0.75)
    m = compare(logits[:, :logical * PAGE], ref[:, :logical * PAGE], vis[:, :logical * PAGE])
    assert passes(m), m


def test_sglang_prefill_with_its_own_6_int_table():
    """The table SGLang's builder writes (row_table, plain Python) runs as given; compat's
    compute_prefill_schedule builds the same table; the caller's out is not filled by the op."""
    p, _ = indexer_problem(4, [600, 5, 260, 0])
    t = p["q"].shape[0]
    msl = p["table"].shape[1] * PAGE
    rb, ls, le = torch.arange(t, dtype=torch.int32), torch.zeros(t, dtype=torch.int32), p["lens"]
    units = 5                                  # fewer slots than chunks: runs of two chunks
    table = row_table(le, 256, units, msl)
    buf = torch.full((units, aiter.CTA_INFO_WIDTH), -1, dtype=torch.int32)
    safe, info, n = aiter.compute_prefill_schedule(rb, ls, le, 256, units, msl, cta_info_out=buf)
    assert info is buf and n == units and int(safe) == 2 and torch.equal(buf, table)
    ref, vis = _prefill_ref(p, rb, ls, le, msl, 1.0)
    out = torch.full((t, msl), 7.0)
    pooled = torch.cat([table, torch.full((3, aiter.CTA_INFO_WIDTH), -1, dtype=torch.int32)])   # a larger buffer
    got = aiter.flydsl_pa_mqa_logits_fp4_prefill(*_prefill_args(p), rb, ls, le, msl, cta_info=pooled, n_ctas=units,
                                                 out=out, **COMMON)
    assert got is out and (out[~vis] == 7.0).all()
    m = compare(out.masked_fill(~vis, float("-inf")), ref, vis)
    assert passes(m), m


def test_6_int_table_with_128_token_chunks_and_unequal_windows():
    """block_k names the table's chunk size: 128-token runs (two slots may share one 256-token chunk),
    windows with non-zero starts, rows of one batch."""
    p, _ = indexer_problem(5, [400, 400, 400])
    msl = p["table"].shape[1] * PAGE
    rb = torch.tensor([1, 1, 2], dtype=torch.int32)
    ls = torch.tensor([0, 130, 10], dtype=torch.int32)
    le = torch.tensor([390, 300, 400], dtype=torch.int32)
    _, table, n = aiter.compute_prefill_schedule(rb, ls, le, 128, 16, msl)
    out = aiter.flydsl_pa_mqa_logits_fp4_prefill(*_prefill_args(p), rb, ls, le, msl, cta_info=table, n_ctas=n,
                                                 block_k=128, kv_block_size=PAGE, num_warps=2)
    ref, vis = _prefill_ref(p, rb, ls, le, msl, 1.0)
    m = compare(out, ref, vis)
    assert passes(m), m


def test_varqlen_with_pooled_window_buffers():
    """MTP-style variable qlen: windows refilled into pooled buffers longer than total_q (upstream's
    contract: at least total_q entries), then the varqlen op with windows= and with cu_seq_q."""
    p, _ = indexer_problem(7, [200, 200, 200, 200])
    msl = p["table"].shape[1] * PAGE
    cu = torch.tensor([0, 1, 3, 4, 4], dtype=torch.int32)              # qlens 1, 2, 1, 0 over 4 rows
    lens = torch.tensor([150, 200, 90, 10], dtype=torch.int32)
    pooled = tuple(torch.full((7,), -5, dtype=torch.int32) for _ in range(3))
    got = aiter.compute_varqlen_windows(cu, lens, 4, out=pooled)
    assert all(g is b for g, b in zip(got, pooled)) and all((b[4:] == -5).all() for b in pooled)
    want = R.varqlen_windows(cu, lens, 4)
    assert all(torch.equal(g[:4], w) for g, w in zip(got, want))
    windows = tuple(b[:4] for b in pooled)
    ref, vis = _prefill_ref(p, *want, msl, 1.0)
    for kw in ({"windows": windows}, {"cu_seq_q": cu, "context_lens": lens}):
        out = aiter.flydsl_pa_mqa_logits_fp4_varqlen(*_prefill_args(p), msl, **kw, **COMMON)
        m = compare(out, ref, vis)
        assert passes(m), (kw.keys(), m)


def test_schedule_builders_are_one_kernel_each(monkeypatch):
    """compute_varctx_schedule / compute_prefill_schedule: one launch of the runs-schedule kernel each,
    the table of upstream's semantics in the first P rows of a larger pooled buffer, the rows past P
    untouched."""
    plans = _recording(monkeypatch)
    lens = torch.tensor([500, 0, 3, 260], dtype=torch.int32)
    pool = torch.full((20, 4), -3, dtype=torch.int32)
    safe, info, n = aiter.compute_varctx_schedule(lens, 256, 12, 512, next_n=3, cta_info_out=pool)
    assert info is pool and n == 12 and torch.equal(pool[:12], varctx_table(lens, 256, 12, 512, 3))
    assert bool((pool[12:] == -3).all())
    rb, ls = torch.arange(4, dtype=torch.int32), torch.zeros(4, dtype=torch.int32)
    pool6 = torch.full((9, aiter.CTA_INFO_WIDTH), -3, dtype=torch.int32)
    safe6, info6, n6 = aiter.compute_prefill_schedule(rb, ls, lens, 256, 6, 512, cta_info_out=pool6)
    assert info6 is pool6 and n6 == 6 and torch.equal(pool6[:6], row_table(lens, 256, 6, 512))
    assert bool((pool6[6:] == -3).all())
    assert [(p.family, p.params["layout"]) for p in plans] == [("mqa_runs_schedule", "varctx"),
                                                              ("mqa_runs_schedule", "rows")]
