"""flyaot.compat.aiter accepts exactly the knob combinations aiter's FP4 MQA logits functions accept
(aiter cae82635, aiter/ops/flydsl/kernels/mqa_logits/), refuses the others with aiter's exception
type, and logs what it ignores where aiter ignores it. aiter's keyword defaults and rules are restated
here once (CI has no aiter checkout); test_aiter_upstream.py checks them against a checkout when
AITER_DIR names one. Launches are recorded, not run: acceptance is decided before any launch."""
import itertools
import logging

import pytest
import torch

from flyaot import runtime
from flyaot.compat import aiter
from flyaot.kernel_defs.mqa_common import layouts
from flyaot.kernel_defs.mqa_prefill import reference as R
from flyaot.ops import pa_mqa_logits_fp4

MSL = 256

# aiter's keyword-only defaults, function by function (its signatures).
UPSTREAM_DEFAULTS = {
    "flydsl_pa_mqa_logits_fp4": dict(weight_scale=1.0, next_n=1, block_k=256, kv_block_size=64, num_warps=4,
                                     parallel_unit_num=None, out=None, cta_info=None, total_ctas=None, stream=None),
    "flydsl_pa_mqa_logits_fp4_prefill": dict(weight_scale=1.0, block_k=256, kv_block_size=64, num_warps=4,
                                             parallel_unit_num=512, out=None, cta_info=None, n_ctas=None,
                                             stream=None),
    "flydsl_pa_mqa_logits_fp4_varqlen": dict(cu_seq_q=None, context_lens=None, windows=None, weight_scale=1.0,
                                             block_k=256, kv_block_size=64, num_warps=4, parallel_unit_num=None,
                                             out=None, cta_info=None, n_ctas=None, stream=None),
}

# The knob values enumerated: aiter's defaults, the tiles its kernels compile, and neighbours that break
# each of its rules (tiles that do not split over the waves, that are not a page multiple, that give a
# wave more or fewer than four 16-token tiles, grids that are not a next_n multiple or drop rows).
BLOCK_K = (64, 96, 100, 128, 192, 256, 320, 512, 1024)
NUM_WARPS = (1, 2, 3, 4, 5, 8, 16)
PAGES = (64, 128)


# ------------------------------------------------------------------------ aiter's rules, restated

def tile_verdict(block_k, num_warps, page):
    """aiter's kernel builder asserts that block_k // 16 splits over num_warps, that the page is a
    multiple of 16 and divides block_k; its tracer then needs a wave's tiles inside one page (else its
    page-vector indexing raises ValueError) and asserts exactly four tiles per wave."""
    tiles = block_k // 16
    if tiles % num_warps or page % 16 or block_k % page:
        return AssertionError
    per_wave = tiles // num_warps
    if per_wave > page // 16:
        return ValueError
    return AssertionError if per_wave != 4 else None


def decode_verdict(batch, next_n, block_k, num_warps, page, units, external):
    """aiter's decode: the internal schedule (grid units, default batch * next_n * ceil(MSL / block_k))
    must be a next_n multiple with units // next_n >= batch (ValueError), before the kernel is built;
    an external schedule ignores units."""
    if not external:
        units = batch * next_n * max(1, -(-MSL // block_k)) if units is None else units
        if units % next_n or units // next_n < batch:
            return ValueError
    return tile_verdict(block_k, num_warps, page)


def prefill_verdict(rows, block_k, num_warps, page, units, external):
    """aiter's prefill: the internal schedule asserts units >= rows (None cannot be compared: TypeError),
    before the kernel is built; an external schedule ignores units."""
    if not external:
        if units is None:
            return TypeError
        if units < rows:
            return AssertionError
    return tile_verdict(block_k, num_warps, page)


def varqlen_verdict(rows, block_k, num_warps, page, units, external):
    """aiter's varqlen: units None becomes rows * ceil(MSL / block_k) (never below rows), then the
    prefill rules."""
    units = rows * max(1, -(-MSL // block_k)) if units is None else units
    return prefill_verdict(rows, block_k, num_warps, page, units, external)


# ------------------------------------------------------------------------ the calls

@pytest.fixture
def recorded(monkeypatch):
    """Launches are recorded (no code object is looked up or JIT-compiled): each verdict here is taken
    before any launch."""
    plans = []
    monkeypatch.setattr(runtime, "launch", lambda plan, stream=None: plans.append(plan))
    monkeypatch.setattr(runtime, "launch_all", lambda ps, stream=None: plans.extend(ps))
    return plans


def decode_args(next_n, page, batch=2):
    g = torch.Generator().manual_seed(next_n + page)
    ctx = [200, 90][:batch]
    kv = layouts.make_paged_kv(ctx, 128, page, g)
    q, qs = layouts.make_q((batch, next_n), 64, 128, g)
    w = torch.randn(batch * next_n, 64, generator=g).to(torch.bfloat16)
    return (q, qs, kv.kv_cache, kv.kv_scale, kv.block_tables, w, torch.tensor(ctx, dtype=torch.int32), MSL)


def prefill_args(page, rows=3):
    c = R.make_case(rows, [200, 90], heads=64, page_size=page, max_seq_len=MSL, seed=page)
    windows = (torch.tensor([0, 0, 1], dtype=torch.int32), torch.zeros(rows, dtype=torch.int32),
               torch.tensor([200, 150, 90], dtype=torch.int32))
    return (c.q_fp4, c.q_scale, c.kv_cache, c.kv_scale, c.block_tables, c.weights), windows


def verdict_of(call):
    """None when the call is accepted, else the type of what it raised."""
    try:
        call()
    except Exception as e:           # noqa: BLE001 - the type is the verdict
        return e
    return None


def _mismatches(cases, expect, call):
    bad = []
    for case in cases:
        want, got = expect(*case), verdict_of(lambda: call(*case))
        ok = got is None if want is None else isinstance(got, want)
        if not ok:
            bad.append((case, want, repr(got)))
    return bad


# ------------------------------------------------------------------------ tests

@pytest.mark.parametrize("name", sorted(UPSTREAM_DEFAULTS))
def test_keyword_defaults_are_upstreams(name):
    import inspect
    params = inspect.signature(getattr(aiter, name)).parameters
    got = {n: p.default for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert got == UPSTREAM_DEFAULTS[name]


@pytest.mark.parametrize("next_n", [1, 2])
def test_decode_knobs_follow_upstream(recorded, next_n):
    schedule = torch.zeros(64, 4, dtype=torch.int32)           # values are not read: nothing launches
    args = {page: decode_args(next_n, page) for page in PAGES}

    def call(block_k, num_warps, page, units, external):
        ext = dict(cta_info=schedule, total_ctas=4 * next_n) if external else {}
        aiter.flydsl_pa_mqa_logits_fp4(*args[page], next_n=next_n, block_k=block_k, kv_block_size=page,
                                       num_warps=num_warps, parallel_unit_num=units, **ext)

    cases = list(itertools.product(BLOCK_K, NUM_WARPS, PAGES, (None, 1, 3, 4, 64), (False, True)))
    bad = _mismatches(cases, lambda *c: decode_verdict(2, next_n, *c), call)
    assert not bad, f"{len(bad)} of {len(cases)} differ from upstream, e.g. {bad[:5]}"
    accepted = sum(decode_verdict(2, next_n, *c) is None for c in cases)
    assert 0 < accepted < len(cases)           # both verdicts occur


def test_prefill_knobs_follow_upstream(recorded):
    table = torch.zeros(8, aiter.CTA_INFO_WIDTH, dtype=torch.int32)
    args = {page: prefill_args(page) for page in PAGES}

    def call(block_k, num_warps, page, units, external):
        tensors, windows = args[page]
        ext = dict(cta_info=table, n_ctas=8) if external else {}
        aiter.flydsl_pa_mqa_logits_fp4_prefill(*tensors, *windows, MSL, block_k=block_k, kv_block_size=page,
                                               num_warps=num_warps, parallel_unit_num=units, **ext)

    cases = list(itertools.product(BLOCK_K, NUM_WARPS, PAGES, (None, 0, 2, 3, 512), (False, True)))
    bad = _mismatches(cases, lambda *c: prefill_verdict(3, *c), call)
    assert not bad, f"{len(bad)} of {len(cases)} differ from upstream, e.g. {bad[:5]}"


def test_varqlen_knobs_follow_upstream(recorded):
    table = torch.zeros(8, aiter.CTA_INFO_WIDTH, dtype=torch.int32)
    cu, ctx = torch.tensor([0, 2, 3], dtype=torch.int32), torch.tensor([200, 90], dtype=torch.int32)
    args = {page: prefill_args(page) for page in PAGES}

    def call(block_k, num_warps, page, units, external, rows_from):
        tensors, windows = args[page]
        ext = dict(cta_info=table, n_ctas=8) if external else {}
        given = {"windows": dict(windows=windows), "cu": dict(cu_seq_q=cu, context_lens=ctx),
                 "both": dict(windows=windows, cu_seq_q=cu, context_lens=ctx)}[rows_from]
        aiter.flydsl_pa_mqa_logits_fp4_varqlen(*tensors, MSL, block_k=block_k, kv_block_size=page,
                                               num_warps=num_warps, parallel_unit_num=units, **given, **ext)

    cases = list(itertools.product((64, 128, 256, 512), (1, 2, 4, 8), PAGES, (None, 2, 3), (False, True),
                                   ("windows", "cu", "both")))
    bad = _mismatches(cases, lambda *c: varqlen_verdict(3, *c[:-1]), call)
    assert not bad, f"{len(bad)} of {len(cases)} differ from upstream, e.g. {bad[:5]}"


def test_decode_rules_upstream_states_outside_the_knobs(recorded):
    a = decode_args(2, 64)
    with pytest.raises(ValueError, match="next_n"):                   # q_fp4's next_n dim is 2
        aiter.flydsl_pa_mqa_logits_fp4(*a, next_n=1)
    for half in (dict(cta_info=torch.zeros(4, 4, dtype=torch.int32)), dict(total_ctas=4)):
        with pytest.raises(ValueError, match="cta_info"):
            aiter.flydsl_pa_mqa_logits_fp4(*a, next_n=2, **half)


def test_what_upstream_ignores_is_ignored_with_a_debug_line(recorded, caplog):
    caplog.set_level(logging.DEBUG, logger="flyaot.compat.aiter")
    a = decode_args(1, 64)
    aiter.flydsl_pa_mqa_logits_fp4(*a, parallel_unit_num=7, cta_info=torch.zeros(4, 4, dtype=torch.int32),
                                   total_ctas=4)
    tensors, windows = prefill_args(64)
    table = torch.zeros(8, aiter.CTA_INFO_WIDTH, dtype=torch.int32)
    aiter.flydsl_pa_mqa_logits_fp4_prefill(*tensors, *windows, MSL, parallel_unit_num=1, cta_info=table, n_ctas=8)
    cu, ctx = torch.tensor([0, 2, 3], dtype=torch.int32), torch.tensor([200, 90], dtype=torch.int32)
    aiter.flydsl_pa_mqa_logits_fp4_varqlen(*tensors, MSL, windows=windows, cu_seq_q=cu, context_lens=ctx)
    text = caplog.text
    assert "flydsl_pa_mqa_logits_fp4: parallel_unit_num=7 ignored" in text
    assert "flydsl_pa_mqa_logits_fp4_prefill: parallel_unit_num=1 ignored" in text
    assert "flydsl_pa_mqa_logits_fp4_varqlen: cu_seq_q / context_lens ignored" in text
    # the ignored cu_seq_q built no windows: one plan, the prefill kernel's (its own schedule first)
    assert [p.family for p in recorded[-2:]] == ["mqa_prefill_meta", "mqa_prefill"]
    assert recorded[-2].params == {"layout": "groups"}


def test_upstreams_assert_is_both_exception_types(recorded):
    a = decode_args(1, 64)
    with pytest.raises(AssertionError) as e:
        aiter.flydsl_pa_mqa_logits_fp4(*a, block_k=256, num_warps=8)
    assert isinstance(e.value, ValueError) and "num_warps=8" in str(e.value)


def test_flyaot_ops_stay_strict(recorded):
    """The leniency lives in compat: the flyaot op still refuses a grid size with an external schedule,
    and still runs tiles upstream cannot compile (512 x 4 is prebuilt)."""
    a = decode_args(1, 64)
    with pytest.raises(ValueError, match="parallel_unit_num applies to the internal schedule only"):
        pa_mqa_logits_fp4(*a, parallel_unit_num=4, cta_info=torch.zeros(4, 4, dtype=torch.int32), total_ctas=4)
    pa_mqa_logits_fp4(*a, block_k=512, num_warps=4)
    assert recorded[-1].params["block_k"] == 512 and recorded[-1].params["num_warps"] == 4


# ------------------------------------------------------------------------ stream= and out=

class _HandleOwner:
    """A stream object of another library: upstream's launcher takes anything with an int cuda_stream."""
    cuda_stream = 7


@pytest.mark.parametrize("stream", ["0", object(), 1.5, -1, True], ids=["str", "object", "float", "-1", "bool"])
def test_mqa_ops_refuse_what_upstreams_launcher_refuses(recorded, stream):
    a = decode_args(1, 64)
    tensors, windows = prefill_args(64)
    with pytest.raises(ValueError, match="^stream: expected None, a torch stream"):
        aiter.flydsl_pa_mqa_logits_fp4(*a, stream=stream)
    with pytest.raises(ValueError, match="^stream: expected None, a torch stream"):
        aiter.flydsl_pa_mqa_logits_fp4_prefill(*tensors, *windows, MSL, stream=stream)
    with pytest.raises(ValueError, match="^stream: expected None, a torch stream"):
        aiter.flydsl_pa_mqa_logits_fp4_varqlen(*tensors, MSL, windows=windows, stream=stream)


@pytest.mark.parametrize("stream", [0, 12345, _HandleOwner()], ids=["0", "handle", "cuda_stream"])
def test_mqa_ops_take_a_raw_handle_as_upstream(recorded, caplog, stream):
    """A raw handle (or an object holding one) is accepted; with CPU tensors the emulator runs in order,
    so it is ignored with a debug line."""
    caplog.set_level(logging.DEBUG, logger="flyaot.compat.aiter")
    aiter.flydsl_pa_mqa_logits_fp4(*decode_args(1, 64), stream=stream)
    assert "ignored: CPU tensors run on the emulator" in caplog.text and recorded


@pytest.mark.parametrize("stream", ["0", object(), 12345], ids=["str", "object", "int"])
def test_gemm_takes_only_torch_streams(recorded, stream):
    """Upstream's GEMM reads stream.device (a raw handle has none); here that is a TypeError naming it."""
    from flyaot.kernel_defs.gemm_a16wfp4.reference import random_weight
    w, s = random_weight(256, 256, generator=torch.Generator().manual_seed(3))
    p = aiter.prepare_gemm_a16wfp4_weight(w, s)
    a = torch.randn(2, 256).to(torch.bfloat16)
    cfg = aiter.DenseGemmConfig(16, 256, 256, 1, None)
    for kw in ({}, {"config": cfg}):
        with pytest.raises(TypeError, match="^stream: expected a torch stream"):
            aiter.flydsl_gemm_a16wfp4(a, p, stream=stream, **kw)


@pytest.mark.parametrize("count", [2, 4])
def test_varqlen_windows_out_of_the_wrong_length_names_out(count):
    cu, ctx = torch.tensor([0, 2, 3], dtype=torch.int32), torch.tensor([200, 90], dtype=torch.int32)
    bufs = tuple(torch.empty(3, dtype=torch.int32) for _ in range(count))
    with pytest.raises(ValueError, match=f"^out: expected three int32 buffers .*got {count} items"):
        aiter.compute_varqlen_windows(cu, ctx, 3, out=bufs)
