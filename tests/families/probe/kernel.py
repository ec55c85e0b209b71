"""FlyDSL source of the probe family: out[i] = value + 1.0 for i < n."""
import os
import time

import flydsl.compiler as flyc
import flydsl.expr as fx
from flydsl.expr import gpu
from flydsl.expr.typing import Int32, T

from .geometry import symbol


def launcher(params: dict, target):
    behavior = params["behavior"]
    if behavior == "abort":
        os.write(2, b"probe: simulated MLIR assertion failure\n")
        os.abort()
    if behavior == "raise":
        raise RuntimeError("probe: simulated FlyDSL compile error")
    if behavior == "hang":
        time.sleep(3600)
    block = params["block"]
    name = symbol(params)

    @flyc.kernel(name=name)
    def probe_fill(out: fx.Pointer, n: Int32, value: fx.Float32):
        i = gpu.block_idx.x * block + gpu.thread_idx.x
        dst = fx.recast_iter(fx.PointerType.get(T.f32, fx.AddressSpace.Global, 4), out)
        if i < n:
            fx.ptr_store(value + fx.Float32(1.0), fx.add_offset(dst, i))

    @flyc.jit
    def launch(out: fx.Pointer, n: Int32, value: fx.Float32, stream: fx.Stream = fx.Stream(None)):
        probe_fill(out, n, value).launch(grid=(1, 1, 1), block=(block, 1, 1), stream=stream)

    return launch
