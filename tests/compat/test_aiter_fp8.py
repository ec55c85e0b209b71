"""flyaot.compat.aiter's FP8 indexer names: aiter's signatures and defaults, and the call sequences the
engines use (vLLM: preshuffled 64-token pages with the varctx schedule; SGLang: plain 64-token pages,
ChunkK=128, WavePerEU=5), run from the prebuilt store with the JIT off."""
import inspect

import pytest
import torch

from flyaot import runtime
from flyaot.compat import aiter as compat
from flyaot.kernel_defs.mqa_fp8 import reference as R

from tests.kernels.test_mqa_fp8 import check, make_problem

# aiter cae82635, aiter/ops/triton/attention/pa_mqa_logits.py and fp8_mqa_logits.py
UPSTREAM = {
    "deepgemm_fp8_paged_mqa_logits": (
        ["q_fp8", "kv_cache", "weights", "out_logits", "context_lens", "kv_indices", "max_model_len",
         "Preshuffle", "KVBlockSize", "ChunkK", "TotalCuCount", "WavePerEU", "VarCtxSchedule"],
        {"Preshuffle": False, "KVBlockSize": 1, "ChunkK": 256, "TotalCuCount": None, "WavePerEU": 2,
         "VarCtxSchedule": None}),
    "deepgemm_fp8_paged_mqa_logits_schedule": (
        ["batch_size", "next_n", "context_lens", "max_model_len", "ChunkK", "TotalCuCount", "WavePerEU"],
        {"ChunkK": 256, "TotalCuCount": None, "WavePerEU": 2}),
}


@pytest.mark.parametrize("name", sorted(UPSTREAM))
def test_signature_is_upstreams(name):
    params = inspect.signature(getattr(compat, name)).parameters
    names, defaults = UPSTREAM[name]
    assert list(params) == names
    assert {k: p.default for k, p in params.items() if p.default is not inspect.Parameter.empty} == defaults
    assert all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in params.values())


@pytest.fixture
def prebuilt_only(monkeypatch):
    monkeypatch.setenv("FLYAOT_DISABLE_JIT", "1")
    runtime.reset()
    yield
    runtime.reset()


@pytest.mark.parametrize("heads", [64, 32])
def test_vllm_sequence(prebuilt_only, heads):
    ctx, msl, next_n = [900, 17, 300], 1024, 2
    q, keys, cache, w, cl, bt = make_problem(21, ctx, next_n, heads, 64, preshuffle=True)
    sched = compat.deepgemm_fp8_paged_mqa_logits_schedule(len(ctx), next_n, cl, msl, ChunkK=256, WavePerEU=2)
    out = torch.full((len(ctx) * next_n, msl), float("-inf"))
    name = compat.deepgemm_fp8_paged_mqa_logits(q.to(R.FP8), cache, w, out, cl, bt, msl, Preshuffle=True,
                                                KVBlockSize=64, ChunkK=256, WavePerEU=2, VarCtxSchedule=sched)
    assert name.endswith("_varctx") and f"_h{heads}_" in name
    check(out, q, keys, cache, w, cl, bt, msl, True)


@pytest.mark.parametrize("heads", [64, 32])
def test_sglang_sequence(prebuilt_only, heads):
    ctx, msl, next_n = [129, 640, 1], 704, 1
    q, keys, cache, w, cl, bt = make_problem(22, ctx, next_n, heads, 64)
    out = torch.empty((len(ctx) * next_n, msl))
    compat.deepgemm_fp8_paged_mqa_logits(q.to(R.FP8), cache, w, out, cl, bt, msl, Preshuffle=False, KVBlockSize=64,
                                         ChunkK=128, WavePerEU=5)
    check(out, q, keys, cache, w, cl, bt, msl, False)


def test_default_block_size_one(prebuilt_only):
    ctx, msl = [77, 200], 256
    q, keys, cache, w, cl, bt = make_problem(23, ctx, 3, 64, 1)
    out = torch.empty((len(ctx) * 3, msl))
    compat.deepgemm_fp8_paged_mqa_logits(q.to(R.FP8), cache, w, out, cl, bt, msl)
    check(out, q, keys, cache, w, cl, bt, msl, False)
