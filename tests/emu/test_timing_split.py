"""cu.simulate split into one-job methods: the same cycles and stalls as the monolithic replay loop
it replaced (kept beside this test as cu_before_split.py), on real prebuilt launches."""
import dataclasses

import pytest

import cu_before_split
from flyaot.emu import timing
from flyaot.emu.timing import cu


@pytest.mark.parametrize("family,shape", [("gemm", (512, 1024, 1)), ("gemm", (1024, 512, 256)),
                                          ("decode", (2, 2, 512)), ("prefill", (1, 64, 512))])
def test_split_simulate_replays_like_the_monolithic_loop(family, shape, monkeypatch):
    pytest.importorskip("flydsl")
    from flyaot.ops import modeled
    from flyaot.runtime.drivers import emu
    call, _ = modeled.OPS[family](*shape)
    with emu.recording(samples=6, functional=False) as rec:
        call()
    assert rec.launches
    tables = [timing.Params(), dataclasses.replace(timing.Params(), mem_latency_scale=2.0, valu_scale=1.5)]
    for _, _, replay in rec.launches:
        for params in tables:
            split = replay(params)
            with monkeypatch.context() as mp:
                mp.setattr(cu, "simulate", cu_before_split.simulate)
                before = replay(params)
            assert split.cycles == before.cycles and split.cycles > 0
            assert split.stalls == before.stalls and split.sampling_error == before.sampling_error
