"""End to end through the runtime path: the emu_samples kernels, compiled for gfx950 by the real build
CLI, are found in a store, packed from their manifest slots and launched on the emulator (CPU
tensors), then checked against their torch references."""
import dataclasses

import pytest
import torch

from flyaot.kernel_defs.emu_samples import plan, reference
from flyaot.runtime.config import Config
from flyaot.runtime.dispatch import Runtime

pytest.importorskip("flydsl")


@pytest.fixture(scope="module")
def runtime(emu_samples_store, tmp_path_factory):
    cfg = dataclasses.replace(Config.from_env(), package_dir=tmp_path_factory.mktemp("no-package"),
                              extra_stores=(emu_samples_store,), cache_dir=tmp_path_factory.mktemp("cache"),
                              disable_jit=True, record_misses="", device="emu")
    return Runtime(cfg)


@pytest.mark.parametrize("kernel", plan.KERNELS)
def test_sample_matches_reference(kernel, runtime):
    case = reference.make_case(kernel)
    runtime.launch(plan.plan(kernel, case), None)
    for name, want in reference.expected(kernel, case).items():
        got = case[name]
        if want.dtype.is_floating_point:
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        else:
            assert torch.equal(got, want), name
