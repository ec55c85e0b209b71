"""End to end: FlyDSL-compiled emu_samples kernels run on the emulator against their torch
references (compiled once per session in a subprocess, so flydsl never loads in the test process)."""
import struct
import subprocess
import sys

import pytest
import torch

from flyaot.kernel_defs.emu_samples import plan, reference
from flyaot.runtime.emu.driver import EmuDriver

pytest.importorskip("flydsl")


@pytest.fixture(scope="module")
def code_objects(tmp_path_factory):
    out = tmp_path_factory.mktemp("emu_samples")
    subprocess.run([sys.executable, "-m", "flyaot.kernel_defs.emu_samples.build", str(out)],
                   check=True, timeout=600)
    return {k: (out / f"{k}.co").read_bytes() for k in plan.KERNELS}


def _pack(kernel, names, case) -> bytes:
    """Kernarg bytes from the code object's own slot offsets (explicit args in ABI order; a
    launcher-only parameter such as lds_waves' `groups` comes last and has no slot)."""
    buf = bytearray(kernel.kernarg_size)
    explicit = [a for a in kernel.args if not a.value_kind.startswith("hidden")]
    assert len(explicit) <= len(names)
    for a, n in zip(explicit, names):
        val = case[n]
        if isinstance(val, torch.Tensor):
            struct.pack_into("<Q", buf, a.offset, val.data_ptr())
        else:
            struct.pack_into("<i" if a.size == 4 else "<q", buf, a.offset, val)
    return bytes(buf)


@pytest.mark.parametrize("kernel", plan.KERNELS)
def test_sample_matches_reference(kernel, code_objects):
    drv = EmuDriver()
    fn = drv.get_function(drv.load_module(code_objects[kernel]), plan.symbol({"kernel": kernel}))
    assert not fn.prepared.unimplemented()
    case = reference.make_case(kernel)
    tensors = [v for v in case.values() if isinstance(v, torch.Tensor)]
    counters = drv.launch(fn, plan.grid(kernel, case), plan.BLOCKS[kernel],
                          _pack(fn.kernel, plan.ARGS[kernel], case), tensors)
    assert counters.instructions > 0 and counters.workgroups == plan.grid(kernel, case)[0]
    for name, want in reference.expected(kernel, case).items():
        got = case[name]
        if want.dtype.is_floating_point:
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        else:
            assert torch.equal(got, want), name
