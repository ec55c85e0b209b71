"""The public ops as torch.library custom ops (torch.ops.flyaot.*): opcheck, torch.compile(fullgraph)
against eager on the gfx950 emulator, and the eager path staying off the dispatcher.

The store holds just the specs these cases launch: the cases are run once with no store and JIT off,
recording their misses, and the real build CLI builds the recorded specs (the add-on-pack workflow).
"""
import importlib

import pytest
import torch
from torch._dynamo.testing import CompileCounterWithBackend
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.profiler import ProfilerActivity, profile
from torch.utils._python_dispatch import TorchDispatchMode

from flyaot import runtime
from flyaot.kernel_defs.gemm_a16wfp4.reference import gemm_reference, random_weight
from flyaot.kernel_defs.mqa_decode.reference import pa_mqa_logits_reference
from flyaot.kernel_defs.mqa_runs_schedule.reference import varctx_reference as build_schedule
from flyaot.kernel_defs.mqa_prefill_meta import reference as meta_reference
from flyaot.ops import (gemm_a16wfp4, pa_mqa_logits_fp4, pa_mqa_logits_fp4_prefill, pa_mqa_logits_fp4_varqlen,
                        prepare_mxfp4_weight)
from flyaot.ops import compute_prefill_schedule, compute_varqlen_windows
from flyaot.runtime.config import Config
from flyaot.runtime.dispatch import Runtime
from tests.support import miss_records, run_build

decode_mod = importlib.import_module("flyaot.ops._mqa_decode")
prefill_mod = importlib.import_module("flyaot.ops._mqa_prefill")

NEG_INF = float("-inf")
DECODE_CTX = [100, 0, 37]


def _i32(values):
    return torch.tensor(values, dtype=torch.int32)


# ----------------------------------------------------------------------------- small valid problems

def decode_problem(heads):
    """(inputs, max_seq_len, next_n): H16 takes the staged kernel, H64 the direct one (D128, page 64)."""
    _, dev = decode_mod._hook_problem(heads, DECODE_CTX, 2, heads, "cpu")
    return dev, 128, 2


def prefill_problem():
    """(inputs, case): H64 D128 page 64, two batches of contexts 130, 64, 100 over four query rows."""
    case, dev = prefill_mod._hook_case(4, [130, 64, 100], 64, 130, 2, "cpu")
    return dev, case


def gemm_problem(n, k, m=7, seed=0):
    g = torch.Generator().manual_seed(seed)
    w, s = random_weight(n, k, generator=g)
    return torch.randn(m, k, generator=g).to(torch.bfloat16), w, s


CU, CTX = _i32([0, 2, 2, 3]), _i32([130, 64, 100])     # qlens 2, 0, 1 plus a padding row


def _launch_decode(heads):
    dev, msl, next_n = decode_problem(heads)
    return pa_mqa_logits_fp4(*dev, msl, next_n=next_n)


def _launch_prefill():
    dev, case = prefill_problem()
    return pa_mqa_logits_fp4_varqlen(*dev, case.max_seq_len, cu_seq_q=CU, context_lens=CTX)


def _launch_prefill_schedule():
    return compute_prefill_schedule(*meta_reference.varqlen_windows(CU, CTX, 4), page_size=64, max_seq_len=130)


def _launch_prefill_kernel():
    """The prefill kernel alone: windows and schedule from the torch references."""
    dev, case = prefill_problem()
    windows = meta_reference.varqlen_windows(CU, CTX, 4)
    info = meta_reference.build_schedule(*windows, page_size=64, max_seq_len=case.max_seq_len, slots=4)
    return pa_mqa_logits_fp4_prefill(*dev, *windows, case.max_seq_len, cta_info=info, n_ctas=4)


def _launch_gemm():
    x, w, s = gemm_problem(256, 512)
    return gemm_a16wfp4(x, prepare_mxfp4_weight(w, s))


# One eager launch per spec the tests need: decode staged + direct, the prefill metadata's windows and
# groups, prefill, one GEMM config.
SPEC_LAUNCHES = (lambda: _launch_decode(16), lambda: _launch_decode(64), _launch_prefill, _launch_prefill_schedule,
                 _launch_prefill_kernel, _launch_gemm)


@pytest.fixture(scope="module", autouse=True)
def store(tmp_path_factory):
    """Misses of SPEC_LAUNCHES recorded by a storeless runtime, built by the build CLI, served with JIT off."""
    root = tmp_path_factory.mktemp("torch_compile_ops")
    record = root / "misses.jsonl"
    storeless = Config(package_dir=root / "no-package-store", extra_stores=(), cache_dir=root / "no-cache",
                       disable_jit=True, record_misses=str(record), device="emu", jit_timeout=60.0, py_launch=False)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(runtime, "_runtime", Runtime(storeless))
        for launch in SPEC_LAUNCHES:
            with pytest.raises(runtime.MissingSpecError):
                launch()
    recorded = [(r["family"], r["params"].get("path")) for r in miss_records(record)]
    assert sorted(recorded, key=str) == sorted([("mqa_decode", "staged"), ("mqa_runs_schedule", None),
                                                ("mqa_decode", "direct"), ("mqa_prefill_meta", None),
                                                ("mqa_prefill_meta", None), ("mqa_prefill", None),
                                                ("gemm_a16wfp4", None)], key=str)
    run_build("build", "--from-misses", record, "--out", root / "store", "--cache", root / "build", "--jobs", 2)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FLYAOT_PREBUILT_PATH", str(root / "store"))
        mp.setenv("FLYAOT_DEVICE", "emu")
        mp.setenv("FLYAOT_DISABLE_JIT", "1")
        mp.setenv("FLYAOT_CACHE_DIR", str(root / "user-cache"))
        runtime.reset()
        yield root / "store"
    runtime.reset()


# ----------------------------------------------------------------------------- torch.compile vs eager

def _compiled(fn):
    """fn compiled whole (fullgraph: any graph break fails) through AOT autograd; the counter keeps the
    dynamo graphs."""
    counter = CompileCounterWithBackend("aot_eager")
    return torch.compile(fn, backend=counter, fullgraph=True), counter


def _flyaot_ops(counter) -> list:
    """Names of the flyaot ops called in the dynamo graphs, in order."""
    return [str(n.target).split(".")[1] for g in counter.graphs for n in g.graph.nodes
            if n.op == "call_function" and str(n.target).startswith("flyaot.")]


def _assert_same(compiled, eager):
    assert len(compiled) == len(eager)
    for c, e in zip(compiled, eager):
        assert c.dtype == e.dtype and c.shape == e.shape and c.stride() == e.stride()
        assert torch.equal(c, e)


@pytest.mark.parametrize("heads, kernel", [(16, "staged"), (64, "direct")])
def test_decode_compiles_to_its_op_and_matches_eager(heads, kernel):
    dev, msl, next_n = decode_problem(heads)

    def fn(*inputs):
        out = torch.empty(len(DECODE_CTX) * next_n, msl)
        logits = pa_mqa_logits_fp4(*inputs, msl, next_n=next_n, weight_scale=1.5)
        pa_mqa_logits_fp4(*inputs, msl, next_n=next_n, weight_scale=1.5, out=out)
        return logits, out, logits.relu().sum(-1)

    compiled, counter = _compiled(fn)
    _assert_same(compiled(*dev), fn(*dev))
    assert _flyaot_ops(counter) == ["pa_mqa_logits_fp4", "pa_mqa_logits_fp4_out"]
    ref = pa_mqa_logits_reference(*dev, msl, weight_scale=1.5, next_n=next_n)
    assert torch.allclose(fn(*dev)[0], ref, rtol=1e-4, atol=1e-3)


def test_decode_external_schedule_compiles():
    """The graph-replay pattern: schedule built outside, caller pre-fills `out` with -inf."""
    dev, msl, next_n = decode_problem(16)
    slots = len(DECODE_CTX) * next_n
    cta_info, _ = build_schedule(dev[-1], 256, slots, msl, next_n)

    def fn(cta_info, *inputs):
        out = torch.full((slots, msl), NEG_INF)
        return pa_mqa_logits_fp4(*inputs, msl, next_n=next_n, out=out, cta_info=cta_info, total_ctas=slots),

    compiled, counter = _compiled(fn)
    _assert_same(compiled(cta_info, *dev), fn(cta_info, *dev))
    assert _flyaot_ops(counter) == ["pa_mqa_logits_fp4_out"]


def test_prefill_schedule_and_windows_compile_with_the_op():
    dev, case = prefill_problem()
    msl = case.max_seq_len

    def fn(cu, ctx, *inputs):
        windows = compute_varqlen_windows(cu, ctx, 4)
        fixed = tuple(torch.empty(4, dtype=torch.int32) for _ in range(3))
        compute_varqlen_windows(cu, ctx, 4, out=fixed)
        info, n_ctas = compute_prefill_schedule(*windows, page_size=64, max_seq_len=msl, parallel_unit_num=8)
        fixed_info = torch.zeros(8, 8, dtype=torch.int32)
        compute_prefill_schedule(*fixed, page_size=64, max_seq_len=msl, cta_info_out=fixed_info)
        internal = pa_mqa_logits_fp4_prefill(*inputs, *windows, msl, weight_scale=0.5)
        out = torch.full((4, msl), NEG_INF)
        pa_mqa_logits_fp4_prefill(*inputs, *fixed, msl, weight_scale=0.5, out=out, cta_info=fixed_info,
                                  n_ctas=n_ctas)
        return (*windows, *fixed, info, fixed_info, internal, out)

    compiled, counter = _compiled(fn)
    _assert_same(compiled(CU, CTX, *dev), fn(CU, CTX, *dev))
    assert _flyaot_ops(counter) == ["compute_varqlen_windows", "compute_varqlen_windows_out",
                                    "compute_prefill_schedule", "compute_prefill_schedule_out",
                                    "pa_mqa_logits_fp4_prefill", "pa_mqa_logits_fp4_prefill_out"]


def test_varqlen_compiles_to_its_op_and_matches_eager():
    dev, case = prefill_problem()
    msl = case.max_seq_len

    def fn(cu, ctx, *inputs):
        logits = pa_mqa_logits_fp4_varqlen(*inputs, msl, cu_seq_q=cu, context_lens=ctx)
        out = torch.empty(4, msl)
        pa_mqa_logits_fp4_varqlen(*inputs, msl, cu_seq_q=cu, context_lens=ctx, out=out)
        by_windows = pa_mqa_logits_fp4_varqlen(*inputs, msl, windows=compute_varqlen_windows(cu, ctx, 4))
        return logits, out, by_windows

    compiled, counter = _compiled(fn)
    _assert_same(compiled(CU, CTX, *dev), fn(CU, CTX, *dev))
    assert _flyaot_ops(counter) == ["pa_mqa_logits_fp4_varqlen", "pa_mqa_logits_fp4_varqlen_out",
                                    "compute_varqlen_windows", "pa_mqa_logits_fp4_prefill"]


def test_gemm_fused_compiles_to_its_op_and_matches_eager():
    x, w, s = gemm_problem(256, 512)
    weight = prepare_mxfp4_weight(w, s)

    def fn(x):
        out = torch.empty(x.shape[0], weight.n, dtype=torch.bfloat16)
        gemm_a16wfp4(x, weight, out=out)
        return gemm_a16wfp4(x, weight) * 2, out

    compiled, counter = _compiled(fn)
    _assert_same(compiled(x), fn(x))
    assert _flyaot_ops(counter) == ["gemm_a16wfp4_out", "gemm_a16wfp4"]
    assert torch.equal(fn(x)[1], gemm_a16wfp4(x, weight))
    ref = gemm_reference(x, w, s).float()
    assert ((fn(x)[1].float() - ref).norm() / ref.norm()).item() <= 1e-4


def test_gemm_fallback_traces_as_torch_ops_and_caches_the_bf16_copy_like_eager():
    x, w, s = gemm_problem(64, 96)
    weight = prepare_mxfp4_weight(w, s, allow_fallback=True)
    assert not weight.fused

    def fn(x):
        out = torch.empty(x.shape[0], weight.n, dtype=torch.bfloat16)
        gemm_a16wfp4(x, weight, out=out)
        return gemm_a16wfp4(x, weight), out

    compiled, counter = _compiled(fn)
    first = compiled(x)
    assert weight.bf16_cache is not None and _flyaot_ops(counter) == []
    cache = weight.bf16_cache
    _assert_same(compiled(x), first)            # retraced once on the cached copy, which it keeps
    assert weight.bf16_cache is cache and counter.frame_count == 2
    eager_weight = prepare_mxfp4_weight(w, s, allow_fallback=True)
    _assert_same(first, (gemm_a16wfp4(x, eager_weight), gemm_a16wfp4(x, eager_weight)))
    assert torch.equal(cache, eager_weight.bf16_cache)


# ----------------------------------------------------------------------------- opcheck

def _opcheck_cases():
    dev, msl, next_n = decode_problem(16)
    knobs = (1.5, next_n, None, 64, None, None, None, None)
    yield "pa_mqa_logits_fp4", (*dev, msl, *knobs)
    yield "pa_mqa_logits_fp4_out", (*dev, msl, *knobs, torch.empty(len(DECODE_CTX) * next_n, msl))
    dev, case = prefill_problem()
    msl = case.max_seq_len
    windows = compute_varqlen_windows(CU, CTX, 4)
    knobs = (1.0, 256, None, 4, None, None, None)
    yield "pa_mqa_logits_fp4_prefill", (*dev, *windows, msl, *knobs)
    yield "pa_mqa_logits_fp4_prefill_out", (*dev, *windows, msl, *knobs, torch.empty(4, msl))
    yield "pa_mqa_logits_fp4_varqlen", (*dev, msl, CU, CTX, *knobs)
    yield "pa_mqa_logits_fp4_varqlen_out", (*dev, msl, CU, CTX, *knobs, torch.empty(4, msl))
    yield "compute_varqlen_windows", (CU, CTX, 4)
    yield "compute_varqlen_windows_out", (CU, CTX, 4, *(torch.empty(4, dtype=torch.int32) for _ in range(3)))
    yield "compute_prefill_schedule", (*windows, 64, msl, 8)
    yield "compute_prefill_schedule_out", (*windows, 64, msl, None, torch.empty(8, 8, dtype=torch.int32))
    x, w, s = gemm_problem(256, 512)
    weight = prepare_mxfp4_weight(w, s)
    yield "gemm_a16wfp4", (x, weight.weight, weight.scales, 256, 512)
    yield "gemm_a16wfp4_out", (x, weight.weight, weight.scales, 256, 512, torch.empty(7, 256, dtype=torch.bfloat16))


OPS = ("pa_mqa_logits_fp4", "pa_mqa_logits_fp4_prefill", "pa_mqa_logits_fp4_varqlen", "compute_varqlen_windows",
       "compute_prefill_schedule", "gemm_a16wfp4")


@pytest.fixture(scope="module")
def opcheck_args():
    return dict(_opcheck_cases())


def test_every_op_and_out_variant_is_checked(opcheck_args):
    assert set(opcheck_args) == {v for op in OPS for v in (op, op + "_out")}


@pytest.mark.parametrize("name", [v for op in OPS for v in (op, op + "_out")])
def test_opcheck(name, opcheck_args):
    """torch's own checks: schema (declared mutations, no aliasing), autograd registration, fake vs
    real output metadata, AOT dispatch with dynamic shapes."""
    torch.library.opcheck(getattr(torch.ops.flyaot, name).default, opcheck_args[name])


# ----------------------------------------------------------------------------- eager path and modes

def _gemm_weight():
    x, w, s = gemm_problem(256, 512)
    return x, prepare_mxfp4_weight(w, s)


def _profiled_op_events(fn) -> list:
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    return [e.name for e in prof.events() if e.name.startswith("flyaot::")]


def test_eager_calls_do_not_enter_the_dispatcher():
    """The profiler records every dispatcher call of an op; the eager public functions make none."""
    x, weight = _gemm_weight()
    gemm_a16wfp4(x, weight)                            # first launch loads the code object
    assert _profiled_op_events(lambda: gemm_a16wfp4(x, weight)) == []
    dev, msl, next_n = decode_problem(64)
    assert _profiled_op_events(lambda: pa_mqa_logits_fp4(*dev, msl, next_n=next_n)) == []
    dev, case = prefill_problem()
    assert _profiled_op_events(lambda: pa_mqa_logits_fp4_varqlen(*dev, case.max_seq_len, cu_seq_q=CU,
                                                                 context_lens=CTX)) == []
    # Control: the same GEMM through the registered op is seen.
    events = _profiled_op_events(lambda: torch.ops.flyaot.gemm_a16wfp4(x, weight.weight, weight.scales, 256, 512))
    assert "flyaot::gemm_a16wfp4" in events


def test_fake_tensor_mode_gets_metadata_from_the_fakes_without_launching():
    x, weight = _gemm_weight()
    dev, msl, next_n = decode_problem(16)
    pdev, case = prefill_problem()
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        fx, fw, fs = (mode.from_tensor(t) for t in (x, weight.weight, weight.scales))
        fake_weight = type(weight)(fw, fs, weight.n, weight.k, fused=True)
        y = gemm_a16wfp4(fx, fake_weight)
        logits = pa_mqa_logits_fp4(*(mode.from_tensor(t) for t in dev), msl, next_n=next_n)
        varq = pa_mqa_logits_fp4_varqlen(*(mode.from_tensor(t) for t in pdev), case.max_seq_len,
                                         cu_seq_q=mode.from_tensor(CU), context_lens=mode.from_tensor(CTX))
    assert (y.shape, y.dtype) == ((7, 256), torch.bfloat16)
    assert (logits.shape, logits.dtype) == ((len(DECODE_CTX) * next_n, msl), torch.float32)
    assert (varq.shape, varq.dtype) == ((4, case.max_seq_len), torch.float32)


class _OpLog(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def test_a_dispatch_mode_sees_the_op_once_and_the_result_is_eager():
    """Under a mode the public function routes through the op; the op's implementation runs with the
    mode popped, so it takes the eager path (no recursion) and computes the same values."""
    dev, msl, next_n = decode_problem(64)
    eager = pa_mqa_logits_fp4(*dev, msl, next_n=next_n)
    with _OpLog() as log:
        moded = pa_mqa_logits_fp4(*dev, msl, next_n=next_n)
    assert [op for op in log.ops if op.startswith("flyaot.")] == ["flyaot.pa_mqa_logits_fp4.default"]
    assert torch.equal(moded, eager)


def test_a_stream_cannot_be_traced():
    dev, msl, next_n = decode_problem(16)

    def fn(*inputs):
        return pa_mqa_logits_fp4(*inputs, msl, next_n=next_n, stream=object())

    with _OpLog(), pytest.raises(TypeError, match="stream= is not supported under torch.compile"):
        fn(*dev)


def test_the_gemm_op_checks_the_prepared_tensors_it_is_given():
    x, weight = _gemm_weight()
    op = torch.ops.flyaot.gemm_a16wfp4
    with pytest.raises(ValueError, match="weight: shape"):
        op(x, weight.weight[:128], weight.scales, 256, 512)
    with pytest.raises(ValueError, match="n=64, k=512"):
        op(x[:, :512], weight.weight[:64], weight.scales[:64], 64, 512)
    with pytest.raises(TypeError, match="scales: dtype"):
        op(x, weight.weight, weight.scales.float(), 256, 512)
