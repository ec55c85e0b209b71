"""Which kernel each knob combination runs (hints leave the choice to the op, binding knobs pick the
staged kernel and its tile), the JIT / strict-mode path of a tile that is not prebuilt, the prefill
knobs, and that the compat layer imports no FlyDSL."""
import subprocess
import sys

import pytest
import torch

from flyaot import runtime
from flyaot.kernel_defs.mqa_common import layouts
from flyaot.kernel_defs.mqa_common.reference import compare, passes
from flyaot.kernel_defs.mqa_decode import geometry as G
from flyaot.kernel_defs.mqa_decode import plan as P
from flyaot.kernel_defs.mqa_decode.reference import pa_mqa_logits_reference, visible_mask
from flyaot.kernel_defs.mqa_runs_schedule.reference import varctx_reference as build_schedule
from flyaot.kernel_defs.mqa_prefill import plan as PP
from flyaot.kernel_defs.mqa_prefill import reference as R
from flyaot.ops import pa_mqa_logits_fp4, pa_mqa_logits_fp4_prefill
from flyaot.runtime.errors import MissingSpecError


def _decode_problem(heads=64, next_n=1, ctx=(100, 37), head_dim=128):
    g = torch.Generator().manual_seed(heads + next_n)
    kv = layouts.make_paged_kv(list(ctx), head_dim, 64, g)
    q, qs = layouts.make_q((len(ctx), next_n), heads, head_dim, g)
    w = (torch.randn(len(ctx) * next_n, heads, generator=g) * 0.5).to(torch.bfloat16)
    return (q, qs, kv.kv_cache, kv.kv_scale, kv.block_tables, w, torch.tensor(ctx, dtype=torch.int32)), 128


def _launched(monkeypatch, fn, *args, **kw):
    plans = []
    monkeypatch.setattr(runtime, "launch", lambda plan, stream=None: plans.append(plan))
    fn(*args, **kw)
    return plans


def _planned(monkeypatch, fn, *args, **kw):
    """The op's own kernel: the last launch (a schedule or metadata kernel it needs comes first)."""
    return _launched(monkeypatch, fn, *args, **kw)[-1]


def _kernel(plan):
    p = plan.params
    return p["path"] if p["path"] == "direct" else (p["path"], p["block_k"], p["num_warps"])


# knobs -> kernel, the dispatch table of the decode op (H64 D128 page 64 unless `problem` says otherwise)
DECODE_TABLE = [
    ({}, "direct"),
    ({"block_k": 256, "num_warps": 4}, "direct"),                         # SGLang's call: upstream defaults
    ({"block_k": 256, "num_warps": 4, "parallel_unit_num": None}, "direct"),
    ({"block_k": 512}, ("staged", 512, 4)),
    ({"block_k": 128, "num_warps": 2}, ("staged", 128, 2)),
    ({"block_k": 128, "num_warps": 4}, ("staged", 128, 2)),              # 2 quads: 2 waves
    ({"block_k": 64, "num_warps": 1}, ("staged", 64, 1)),
    ({"block_k": 64, "num_warps": 4}, ("staged", 64, 1)),
    ({"num_warps": 8}, ("staged", 256, 4)),
    ({"parallel_unit_num": 8}, ("staged", 256, 4)),
    ({"external": True}, ("staged", 256, 4)),
    ({"next_n": 12}, ("staged", 256, 4)),
    ({"heads": 32}, ("staged", 256, 4)),
    ({"head_dim": 256}, ("staged", 256, 4)),
]


@pytest.mark.parametrize("knobs,kernel", DECODE_TABLE, ids=[str(k) for k, _ in DECODE_TABLE])
def test_decode_dispatch_table(monkeypatch, knobs, kernel):
    knobs = dict(knobs)
    shape = {k: knobs.pop(k) for k in ("heads", "next_n", "head_dim") if k in knobs}
    args, msl = _decode_problem(**shape)
    next_n = shape.get("next_n", 1)
    if knobs.pop("external", False):
        info, _ = build_schedule(args[-1], 256, 2 * next_n, msl, next_n)
        knobs.update(cta_info=info, total_ctas=2 * next_n)
    internal = "cta_info" not in knobs
    *schedule, plan = _launched(monkeypatch, pa_mqa_logits_fp4, *args, msl, next_n=next_n, **knobs)
    assert _kernel(plan) == kernel
    # the staged kernel's internal schedule is one launch of the runs-schedule kernel before it
    want = [("mqa_runs_schedule", {"layout": "varctx"})] if internal and kernel != "direct" else []
    assert [(p.family, p.params) for p in schedule] == want


def test_next_n_16_runs_and_17_is_refused():
    args, msl = _decode_problem(next_n=16, ctx=(40, 130))
    out = pa_mqa_logits_fp4(*args, msl, next_n=16, block_k=256, num_warps=4)
    ref = pa_mqa_logits_reference(*args, msl, next_n=16)
    m = compare(out, ref, visible_mask(args[-1], 16, msl))
    assert passes(m), m
    with pytest.raises(ValueError, match="next_n"):
        P.check_int("next_n", 17, lo=1, hi=G.STAGED_MAX_NEXT_N)


def test_tile_not_prebuilt_is_a_missing_spec_in_strict_mode(monkeypatch):
    monkeypatch.setenv("FLYAOT_DISABLE_JIT", "1")
    runtime.reset()
    args, msl = _decode_problem()
    assert (128, 1) not in G.STAGED_TILES
    with pytest.raises(MissingSpecError, match="FLYAOT_DISABLE_JIT"):
        pa_mqa_logits_fp4(*args, msl, block_k=128, num_warps=1)


@pytest.mark.slow
def test_tile_not_prebuilt_is_jit_compiled_and_correct(monkeypatch):
    monkeypatch.delenv("FLYAOT_DISABLE_JIT", raising=False)
    runtime.reset()
    args, msl = _decode_problem()
    out = pa_mqa_logits_fp4(*args, msl, block_k=128, num_warps=1, weight_scale=2.0)
    ref = pa_mqa_logits_reference(*args, msl, weight_scale=2.0)
    m = compare(out, ref, visible_mask(args[-1], 1, msl))
    assert passes(m), m


def test_decode_tile_rules_follow_upstream():
    with pytest.raises(ValueError, match="multiple of kv_block_size"):
        P.staged_tile(96, 1, 64)
    with pytest.raises(ValueError, match="num_warps"):
        P.staged_tile(64, 3, 64)
    with pytest.raises(ValueError, match="LDS"):
        P.staged_tile(2048, 4, 64, head_dim=256)
    assert P.staged_tile(192, 3, 64) == (192, 3)           # three quads over three waves (JIT)


def _prefill_problem():
    case = R.make_case(3, [300, 90], heads=64, max_seq_len=320, seed=9)
    windows = [torch.tensor(v, dtype=torch.int32) for v in ([0, 0, 1], [0, 20, 0], [300, 250, 90])]
    return (case.q_fp4, case.q_scale, case.kv_cache, case.kv_scale, case.block_tables, case.weights), windows, case


def test_prefill_knobs_are_hints(monkeypatch):
    tensors, windows, case = _prefill_problem()
    base = _planned(monkeypatch, pa_mqa_logits_fp4_prefill, *tensors, *windows, case.max_seq_len)
    for knobs in ({"block_k": 128, "num_warps": 2}, {"block_k": 512, "num_warps": 8}, {"parallel_unit_num": 512},
                  {"block_k": 256, "num_warps": 4, "kv_block_size": 64, "parallel_unit_num": 3}):
        plan = _planned(monkeypatch, pa_mqa_logits_fp4_prefill, *tensors, *windows, case.max_seq_len, **knobs)
        assert plan.params == base.params and plan.grid == base.grid == (PP.default_slots(3), 1, 1), knobs
    with pytest.raises(ValueError, match="block_k"):
        pa_mqa_logits_fp4_prefill(*tensors, *windows, case.max_seq_len, block_k=96)
    with pytest.raises(ValueError, match="parallel_unit_num"):
        pa_mqa_logits_fp4_prefill(*tensors, *windows, case.max_seq_len, parallel_unit_num=2)


def test_prefill_hint_knobs_give_the_reference():
    tensors, windows, case = _prefill_problem()
    out = pa_mqa_logits_fp4_prefill(*tensors, *windows, case.max_seq_len, block_k=128, num_warps=2)
    ref = R.prefill_logits(*tensors, *windows, case.max_seq_len)
    m = compare(out, ref, R.visible(*windows, case.max_seq_len))
    assert passes(m), m


def test_compat_imports_no_flydsl():
    code = ("import sys, flyaot.compat.aiter as a; assert a.is_flydsl_available('cpu'); "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('flydsl', 'mlir') or "
            "m.startswith('flyaot.build_tools')]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)
