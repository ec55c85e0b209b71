"""vLLM's A16WFP4 linear through flyaot.compat.aiter, on the emulator, against the torch reference:
prepare at load, keep the four fields, rebuild the weight per call, call; the N/K % 256 gate and its
fallback when prepare raises; config= and the shape/config probes."""
import dataclasses

import pytest
import torch

from flyaot.compat import aiter
from flyaot.kernel_defs.gemm_a16wfp4.reference import decode_weight, gemm_reference, random_weight


def _gen(seed):
    return torch.Generator().manual_seed(seed)


class Layer:
    """What vLLM's linear kernel keeps on its layer after process_weights_after_loading."""

    def __init__(self, weight, weight_scale):
        n, k = weight.shape[0], weight.shape[1] * 2
        self.prepared = False
        if n % 256 == 0 and k % 256 == 0:
            try:
                prepared = aiter.prepare_gemm_a16wfp4_weight(weight, weight_scale)
            except ValueError:
                pass
            else:
                self.weight, self.weight_scale = prepared.weight, prepared.scale
                self.n, self.k, self.prepared = prepared.n, prepared.k, True
                return
        self.weight, self.weight_scale, self.n, self.k = weight, weight_scale, n, k

    def __call__(self, x):
        if not self.prepared:
            return torch.nn.functional.linear(x, decode_weight(self.weight, self.weight_scale))
        w = aiter.PreshuffledA16WFP4Weight(weight=self.weight, scale=self.weight_scale, n=self.n, k=self.k)
        return aiter.flydsl_gemm_a16wfp4(x.reshape(-1, x.shape[-1]).contiguous(), w)


def _rel(y, ref):
    return ((y.float() - ref.float()).norm() / ref.float().norm()).item()


@pytest.mark.parametrize("m,n,k", [(5, 256, 512), (40, 512, 256)])
def test_vllm_prepare_rebuild_call(m, n, k):
    w, s = random_weight(n, k, generator=_gen(m + n))
    layer = Layer(w, s)
    assert layer.prepared and (layer.n, layer.k) == (n, k)
    assert layer.weight.shape == (n, k // 2) and layer.weight_scale.shape == (n, k // 32)
    x = torch.randn(m, k, generator=_gen(k)).to(torch.bfloat16)
    for _ in range(2):                                     # the weight object is rebuilt on every call
        y = layer(x)
        assert y.shape == (m, n) and y.dtype == torch.bfloat16
        assert _rel(y, gemm_reference(x, w, s)) <= 1e-4


def test_prepared_weight_is_frozen_and_typed():
    w, s = random_weight(256, 256, generator=_gen(1))
    p = aiter.prepare_gemm_a16wfp4_weight(w, s)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.n = 512
    x = torch.zeros(1, 256, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match="prepare_gemm_a16wfp4_weight"):
        aiter.flydsl_gemm_a16wfp4(x, (p.weight, p.scale))
    with pytest.raises(ValueError, match="M must be positive"):
        aiter.flydsl_gemm_a16wfp4(torch.zeros(0, 256, dtype=torch.bfloat16), p)
    with pytest.raises(TypeError, match="one byte"):
        aiter.prepare_gemm_a16wfp4_weight(w.to(torch.int16), s)


def test_unaligned_weight_raises_and_the_engine_falls_back():
    w, s = random_weight(96, 320, generator=_gen(2))      # N, K not multiples of 256
    assert not aiter.a16wfp4_shape_supported(96, 320) and aiter.a16wfp4_shape_supported(256, 512)
    with pytest.raises(ValueError, match="256"):
        aiter.prepare_gemm_a16wfp4_weight(w, s)
    layer = Layer(w, s)
    assert not layer.prepared
    x = torch.randn(3, 320, generator=_gen(3)).to(torch.bfloat16)
    assert _rel(layer(x), gemm_reference(x, w, s)) <= 1e-2


def test_config_selects_a_tile_and_illegal_ones_raise():
    n, k = 256, 512
    w, s = random_weight(n, k, generator=_gen(4))
    p = aiter.prepare_gemm_a16wfp4_weight(w, s)
    x = torch.randn(7, k, generator=_gen(5)).to(torch.bfloat16)
    ref = gemm_reference(x, w, s)
    for cfg in (aiter.DenseGemmConfig(16, 64, 128, 2, 1), aiter.DenseGemmConfig(64, 128, 128, 1, None)):
        assert aiter.a16wfp4_config_legal(n, k, cfg)
        out = torch.empty(7, n, dtype=torch.bfloat16)
        assert aiter.flydsl_gemm_a16wfp4(x, p, out=out, config=cfg) is out
        assert _rel(out, ref) <= 1e-4, cfg
    for bad in (aiter.DenseGemmConfig(48, 192, 256, 1, 2),      # a tile_n these kernels do not have
                aiter.DenseGemmConfig(16, 512, 256, 1, 2),      # does not divide N
                aiter.DenseGemmConfig(16, 64, 256, 4, 2)):      # k_wave * tile_k = 1024 does not divide K
        assert not aiter.a16wfp4_config_legal(n, k, bad)
        with pytest.raises(ValueError, match="config"):
            aiter.flydsl_gemm_a16wfp4(x, p, config=bad)
    with pytest.raises(TypeError, match="DenseGemmConfig"):
        aiter.flydsl_gemm_a16wfp4(x, p, config=(16, 64, 128, 2, 1))


@pytest.mark.slow
def test_config_outside_the_prebuilt_set_is_jit_compiled(monkeypatch):
    from flyaot import runtime
    monkeypatch.delenv("FLYAOT_DISABLE_JIT", raising=False)
    runtime.reset()
    n, k = 256, 512
    w, s = random_weight(n, k, generator=_gen(6))
    p = aiter.prepare_gemm_a16wfp4_weight(w, s)
    x = torch.randn(50, k, generator=_gen(7)).to(torch.bfloat16)
    cfg = aiter.DenseGemmConfig(48, 64, 256, 1, 2)              # a 48-row tile: no prebuilt config has it
    assert _rel(aiter.flydsl_gemm_a16wfp4(x, p, config=cfg), gemm_reference(x, w, s)) <= 1e-4
