"""Always-on host checks (no sync): overlapping or aliasing outputs, empty batches, index dtypes and
hand-built prepared weights are clear errors or documented results before anything is launched."""
import pytest
import torch

from flyaot.kernel_defs.gemm_a16wfp4.layout import PreparedMXFP4Weight
from flyaot.kernel_defs.gemm_a16wfp4.reference import random_weight
from flyaot.kernel_defs.mqa_runs_schedule.reference import varctx_reference as build_schedule
from flyaot.ops import _gemm_a16wfp4 as gemm
from flyaot.ops import _mqa_decode as decode
from flyaot.ops import _mqa_prefill as prefill
from tests.hostile.guard_cases import MSL, run_decode, decode_inputs, run_prefill, prefill_inputs, prepared_weight

@pytest.fixture
def no_launch(monkeypatch):
    """Every case here must be decided before a launch: a launch fails the test."""
    def refuse(plan, stream=None):
        raise AssertionError(f"launched {plan.family} {plan.params}")
    for module in (decode, prefill, gemm):
        monkeypatch.setattr(module.runtime, "launch", refuse)


# --- overlapping output rows ----------------------------------------------------------------------

def _overlapping_rows(rows, width, dtype):
    yield "expand", torch.empty(1, width, dtype=dtype).expand(rows, width)
    yield "stride below width", torch.empty(rows * width, dtype=dtype).as_strided((rows, width), (width // 2, 1))


@pytest.mark.parametrize("case", [0, 1])
def test_prefill_refuses_overlapping_out_rows(no_launch, case):
    name, out = list(_overlapping_rows(3, MSL, torch.float32))[case]
    with pytest.raises(ValueError, match="out: row stride .* rows overlap"):
        run_prefill(prefill_inputs(), out=out)


@pytest.mark.parametrize("case", [0, 1])
def test_gemm_refuses_overlapping_out_rows(no_launch, case):
    name, out = list(_overlapping_rows(4, 256, torch.bfloat16))[case]
    x = torch.randn(4, 256).to(torch.bfloat16)
    with pytest.raises(ValueError, match="out: row stride .* rows overlap"):
        gemm.gemm_a16wfp4(x, prepared_weight(), out=out)


@pytest.mark.parametrize("case", [0, 1])
def test_decode_refuses_overlapping_out_rows(no_launch, case):
    name, out = list(_overlapping_rows(2, MSL, torch.float32))[case]
    with pytest.raises(ValueError, match="out: row stride .* rows overlap"):
        run_decode(decode_inputs(), out=out)


# --- out aliasing an input ------------------------------------------------------------------------

def test_gemm_out_aliasing_x_is_refused(no_launch):
    x = torch.randn(8, 256).to(torch.bfloat16)
    before = x.clone()
    with pytest.raises(ValueError, match="out: its memory overlaps x"):
        gemm.gemm_a16wfp4(x, prepared_weight(256, 256), out=x)          # N == K, so the shapes match
    assert torch.equal(x, before)


def test_gemm_out_over_the_weight_is_refused(no_launch):
    w = prepared_weight(256, 256)
    out = w.weight.view(-1).view(torch.bfloat16)[:256].view(1, 256)     # 512 bytes of the packed weight
    with pytest.raises(ValueError, match="overlaps weight.weight"):
        gemm.gemm_a16wfp4(torch.randn(1, 256).to(torch.bfloat16), w, out=out)


def test_gemm_fallback_out_aliasing_x_is_refused():
    w, s = random_weight(64, 64, generator=torch.Generator().manual_seed(0))   # not fused: torch fallback
    x = torch.randn(4, 64).to(torch.bfloat16)
    with pytest.raises(ValueError, match="overlaps x"):
        gemm.gemm_a16wfp4(x, gemm.prepare_mxfp4_weight(w, s, allow_fallback=True), out=x)


def test_decode_out_over_the_kv_cache_is_refused(no_launch):
    a = decode_inputs()
    kv_before = a["kv_cache"].clone()
    out = a["kv_cache"].view(-1).view(torch.float32)[:2 * MSL].view(2, MSL)
    with pytest.raises(ValueError, match="out: its memory overlaps kv_cache"):
        run_decode(a, out=out)
    assert torch.equal(a["kv_cache"], kv_before)               # nothing was written, not even the -inf fill


@pytest.mark.parametrize("victim", ["q_fp4", "weights", "block_tables", "local_ends"])
def test_prefill_out_aliasing_an_input_is_refused(no_launch, victim):
    a = prefill_inputs()
    nbytes, out_bytes = a[victim].numel() * a[victim].element_size(), 3 * MSL * 4
    buf = torch.zeros(nbytes + out_bytes, dtype=torch.uint8)          # the input, then room for out
    buf[:nbytes] = a[victim].reshape(-1).view(torch.uint8)
    a[victim] = buf[:nbytes].view(a[victim].dtype).view(a[victim].shape)
    overlapping = buf[nbytes - 4:nbytes - 4 + out_bytes].view(torch.float32).view(3, MSL)   # shares 4 bytes
    with pytest.raises(ValueError, match=f"out: its memory overlaps {victim}"):
        run_prefill(a, out=overlapping)
    # The same buffer with out just past the input is fine: the call goes on to launch.
    with pytest.raises(AssertionError, match="launched mqa_prefill"):
        run_prefill(a, out=buf[nbytes:].view(torch.float32).view(3, MSL))


def test_prefill_out_laid_over_the_kv_cache_is_refused(no_launch):
    a = prefill_inputs()
    out = a["kv_cache"].view(-1).view(torch.float32)[:3 * MSL].view(3, MSL)
    with pytest.raises(ValueError, match="overlaps kv_cache"):
        run_prefill(a, out=out)


def test_schedule_and_window_buffers_must_not_alias_inputs():
    buf = torch.zeros(4 * 8, dtype=torch.int32)
    rb, ls, le = buf[:4], torch.zeros(4, dtype=torch.int32), torch.zeros(4, dtype=torch.int32)
    with pytest.raises(ValueError, match="cta_info_out: its memory overlaps row_to_batch"):
        prefill.compute_prefill_schedule(rb, ls, le, page_size=64, max_seq_len=MSL, cta_info_out=buf.view(4, 8))
    cu, ctx = torch.tensor([0, 2, 4], dtype=torch.int32), torch.tensor([9, 9], dtype=torch.int32)
    with pytest.raises(ValueError, match=r"out \(local_ends\): its memory overlaps row_to_batch"):
        prefill.compute_varqlen_windows(cu, ctx, 4, out=(rb, ls, rb))
    big = torch.zeros(8, dtype=torch.int32)
    with pytest.raises(ValueError, match=r"out \(row_to_batch\): its memory overlaps cu_seq_q"):
        prefill.compute_varqlen_windows(big[:3], ctx, 4, out=(big[2:6], ls, le))


# --- empty batches ----------------------------------------------------------------------------------

@pytest.mark.parametrize("heads", [16, 64])         # staged path (it raised max(): Expected reduction dim) / direct
def test_decode_with_no_sequence_returns_the_empty_result(no_launch, heads):
    a = decode_inputs(ctx=(), heads=heads)
    out = run_decode(a)
    assert out.shape == (0, MSL) and out.dtype == torch.float32
    given = torch.empty(0, MSL)
    assert run_decode(a, out=given) is given
    assert run_decode(a, block_k=256, num_warps=4).shape == (0, MSL)


def test_decode_schedule_builder_with_no_sequence_is_all_idle():
    info, safe = build_schedule(torch.zeros(0, dtype=torch.int32), 256, 4, MSL, 1)
    assert info.tolist() == [[0, 0, 1, 0]] * 4 and safe.tolist() == [1]


def test_prefill_with_no_batch_is_all_minus_inf(no_launch):
    a = prefill_inputs()
    a["block_tables"] = a["block_tables"][:0]
    out = run_prefill(a)
    assert out.shape == (3, MSL) and bool((out == float("-inf")).all())


def test_varqlen_with_no_batch_makes_padding_rows():
    """The windows kernel runs (on the emulator); the prefill op then has no batch and launches nothing."""
    cu, ctx = torch.zeros(1, dtype=torch.int32), torch.zeros(0, dtype=torch.int32)
    rb, ls, le = prefill.compute_varqlen_windows(cu, ctx, 3)
    assert rb.tolist() == [-1, -1, -1] and ls.tolist() == le.tolist() == [0, 0, 0]
    a = prefill_inputs()
    out = prefill.pa_mqa_logits_fp4_varqlen(a["q_fp4"], a["q_scale"], a["kv_cache"], a["kv_scale"],
                                            a["block_tables"][:0], a["weights"], MSL, cu_seq_q=cu, context_lens=ctx)
    assert out.shape == (3, MSL) and bool((out == float("-inf")).all())


def test_gemm_with_no_rows_returns_the_empty_result(no_launch):
    out = gemm.gemm_a16wfp4(torch.empty(0, 256, dtype=torch.bfloat16), prepared_weight())
    assert out.shape == (0, 256)


# --- index dtypes: int32 only, never a silent wrap ------------------------------------------------

def test_int64_context_lens_are_refused_not_wrapped(no_launch):
    a = decode_inputs()
    a["context_lens"] = torch.tensor([2**32 + 70, 70], dtype=torch.int64)      # used to run as 70
    with pytest.raises(TypeError, match="context_lens: dtype must be int32, got int64"):
        run_decode(a)


@pytest.mark.parametrize("dtype", [torch.int64, torch.float32, torch.int16])
def test_varqlen_index_dtypes_are_int32_only(dtype):
    good_cu, good_ctx = torch.tensor([0, 2, 3], dtype=torch.int32), torch.tensor([9, 9], dtype=torch.int32)
    with pytest.raises(TypeError, match="cu_seq_q: dtype must be int32"):
        prefill.compute_varqlen_windows(good_cu.to(dtype), good_ctx, 3)
    with pytest.raises(TypeError, match="context_lens: dtype must be int32"):
        prefill.compute_varqlen_windows(good_cu, good_ctx.to(dtype), 3)


def test_cu_seq_q_shape_is_checked():
    with pytest.raises(ValueError, match=r"cu_seq_q: .*shape"):
        prefill.compute_varqlen_windows(torch.tensor([0, 2], dtype=torch.int32), torch.tensor([9, 9], dtype=torch.int32), 3)


# --- hand-built prepared weights ------------------------------------------------------------------

@pytest.mark.parametrize("field,value", [("n", 512), ("k", 512), ("weight", "short"), ("scales", "short")])
def test_hand_built_weight_must_match_its_tensors(no_launch, field, value):
    w = prepared_weight(256, 256)
    kw = dict(weight=w.weight, scales=w.scales, n=w.n, k=w.k, fused=True)
    if value == "short":
        kw[field] = kw[field][:128]
    else:
        kw[field] = value
    bad = PreparedMXFP4Weight(kw["weight"], kw["scales"], kw["n"], kw["k"], fused=True)
    with pytest.raises(ValueError, match=r"weight\.(weight|scales): shape"):
        gemm.gemm_a16wfp4(torch.randn(2, bad.k).to(torch.bfloat16), bad)


# --- stream= ----------------------------------------------------------------------------------------

# A raw int is refused too: it cannot be told from a mistake, and a wrong handle would be launched on.
WRONG_STREAMS = ["0", object(), 1.5, -1, 12345, True]


def _stream_calls():
    a, p = decode_inputs(), prefill_inputs()
    cu, ctx = torch.tensor([0, 2, 3], dtype=torch.int32), torch.tensor([130, 70], dtype=torch.int32)
    x = torch.randn(2, 256).to(torch.bfloat16)
    return {
        "decode": lambda **kw: run_decode(a, **kw),
        "prefill": lambda **kw: run_prefill(p, **kw),
        "varqlen": lambda **kw: prefill.pa_mqa_logits_fp4_varqlen(
            p["q_fp4"], p["q_scale"], p["kv_cache"], p["kv_scale"], p["block_tables"], p["weights"], MSL,
            cu_seq_q=cu, context_lens=ctx, **kw),
        "gemm": lambda **kw: gemm.gemm_a16wfp4(x, prepared_weight(), **kw),
    }


@pytest.mark.parametrize("op", ["decode", "prefill", "varqlen", "gemm"])
@pytest.mark.parametrize("stream", WRONG_STREAMS, ids=lambda s: type(s).__name__ + repr(s)[:8])
def test_wrong_kind_of_stream_is_refused(no_launch, op, stream):
    with pytest.raises(TypeError, match="^stream: expected a torch stream"):
        _stream_calls()[op](stream=stream)


@pytest.mark.parametrize("op", ["decode", "prefill", "varqlen", "gemm"])
def test_stream_of_another_device_is_refused(no_launch, op):
    with pytest.raises(ValueError, match="^stream: on meta, but the inputs are on cpu"):
        _stream_calls()[op](stream=torch.Stream("meta"))


def test_a_torch_stream_of_the_inputs_device_runs():
    """The emulator's device is the CPU: a CPU torch stream is the inputs' stream, and the call runs."""
    a = decode_inputs()
    assert torch.equal(run_decode(a, stream=torch.Stream("cpu")), run_decode(a))


# --- varqlen: rows given twice, windows of the wrong length -------------------------------------------

@pytest.mark.parametrize("given", ["cu_seq_q", "context_lens", "both"])
def test_varqlen_refuses_windows_together_with_cu_seq_q(no_launch, given):
    p = prefill_inputs()
    cu, ctx = torch.tensor([0, 2, 3], dtype=torch.int32), torch.tensor([130, 70], dtype=torch.int32)
    kw = {"cu_seq_q": cu, "context_lens": ctx}
    kw = kw if given == "both" else {given: kw[given]}
    with pytest.raises(ValueError, match="windows= and cu_seq_q/context_lens describe the rows twice"):
        prefill.pa_mqa_logits_fp4_varqlen(p["q_fp4"], p["q_scale"], p["kv_cache"], p["kv_scale"], p["block_tables"],
                                          p["weights"], MSL, windows=(p["row_to_batch"], p["local_starts"],
                                                                      p["local_ends"]), **kw)


@pytest.mark.parametrize("count", [0, 2, 4])
def test_windows_of_the_wrong_length_name_the_argument(no_launch, count):
    p = prefill_inputs()
    cu, ctx = torch.tensor([0, 2, 3], dtype=torch.int32), torch.tensor([130, 70], dtype=torch.int32)
    bufs = tuple(torch.empty(3, dtype=torch.int32) for _ in range(count))
    with pytest.raises(ValueError, match=f"^out: expected three int32 tensors .*got {count} items"):
        prefill.compute_varqlen_windows(cu, ctx, 3, out=bufs)
    with pytest.raises(ValueError, match=f"^windows: expected three int32 tensors .*got {count} items"):
        prefill.pa_mqa_logits_fp4_varqlen(p["q_fp4"], p["q_scale"], p["kv_cache"], p["kv_scale"], p["block_tables"],
                                          p["weights"], MSL, windows=bufs)


# --- meta tensors --------------------------------------------------------------------------------------

def _on_meta(inputs: dict) -> dict:
    return {k: v.to("meta") for k, v in inputs.items()}


def test_meta_tensors_are_refused_as_meta_not_as_overlap(no_launch):
    """Every data_ptr() of a meta tensor is 0, which an overlap check would read as aliasing."""
    with pytest.raises(ValueError, match="^out: on the meta device; meta tensors cannot be launched"):
        run_decode(_on_meta(decode_inputs()), out=torch.empty(2, MSL, device="meta"))
    with pytest.raises(ValueError, match="^out: on the meta device; meta tensors cannot be launched"):
        run_prefill(_on_meta(prefill_inputs()), out=torch.empty(3, MSL, device="meta"))
    w = prepared_weight()
    meta_w = PreparedMXFP4Weight(w.weight.to("meta"), w.scales.to("meta"), w.n, w.k, fused=True)
    with pytest.raises(ValueError, match="^out: on the meta device; meta tensors cannot be launched"):
        gemm.gemm_a16wfp4(torch.empty(2, w.k, dtype=torch.bfloat16, device="meta"), meta_w,
                          out=torch.empty(2, w.n, dtype=torch.bfloat16, device="meta"))
