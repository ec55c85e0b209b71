"""Emulator speed: wave-instructions per second on one core, and the time of a decode-sized run.

    python benchmarks/emulator.py [--n N --k K]

1. A synthetic VALU/SALU loop (hand-built instructions, 4 waves) gives the raw instruction rate.
2. A real FlyDSL-compiled kernel: the A16WFP4 GEMM at decode shape (M=1, N x K, compiled in a
   subprocess) runs on the emulator and is checked against the torch reference; then again with the
   timing model on (a sample of workgroups traced, then all of them): rates against timing off.
Goal: >= 100k wave-instructions/s.
"""
import argparse
import pathlib
import struct
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "emu"))
from exec_helpers import VCC, c, ins, label, launch, lit, program, s, v  # noqa: E402

from flyaot.emu import timing  # noqa: E402
from flyaot.emu.driver import Emulator  # noqa: E402


def synthetic(iters=2000):
    body = [ins("v_add_u32", [v(1)], [v(1), v(0)]), ins("v_mul_f32", [v(2)], [v(2), v(3)]),
            ins("v_fma_f32", [v(3)], [v(2), v(2), v(3)]), ins("v_lshl_add_u32", [v(4)], [v(1), c(2), v(0)]),
            ins("v_cmp_gt_u32", [VCC], [v(1), v(4)]), ins("v_cndmask_b32", [v(5)], [v(1), v(4), VCC]),
            ins("v_and_b32", [v(6)], [s(4), v(5)]), ins("v_xor_b32", [v(7)], [v(6), v(5)]),
            ins("s_add_u32", [s(4)], [s(4), c(1)])]
    prog = program([ins("s_mov_b32", [s(4)], [c(0)], enc="SOP1"), *body,
                    ins("s_cmp_lt_u32", [], [s(4), lit(iters)], enc="SOPC"),
                    ins("s_cbranch_scc1", [], [label(0x104)], enc="SOPP"), ins("s_endpgm", enc="SOPP")])
    t = time.perf_counter()
    cnt = launch(prog, (1, 1, 1), (256, 1, 1))
    return cnt.instructions, time.perf_counter() - t


_COMPILE = """
import sys
from flyaot import targets
from flyaot.build_tools.toolchain import setup_process_env; setup_process_env()
from flyaot.build_tools.flydsl_compile import compile_family_spec
from flyaot.kernel_defs import registry
from flyaot.kernel_defs.gemm_a16wfp4 import configs
kb = compile_family_spec(registry.get_family("gemm_a16wfp4"), configs.choose({n}, {k}, 1),
                         targets.get(targets.DEFAULT_TARGET))
open(sys.argv[1], "wb").write(kb.code_object)
print(kb.kernel_name)
"""


def compile_gemm(n, k):
    """(kernel name, code object) of the decode-bucket A16WFP4 kernel for N x K, compiled by FlyDSL."""
    with tempfile.TemporaryDirectory() as d:
        path = pathlib.Path(d) / "gemm.co"
        name = subprocess.run([sys.executable, "-c", _COMPILE.format(n=n, k=k), str(path)], check=True,
                              capture_output=True, text=True, timeout=600).stdout.split()[-1]
        return name, path.read_bytes()


def gemm_decode(n, k, compiled, timed_samples=0):
    from flyaot.kernel_defs.gemm_a16wfp4 import configs, layout, plan, reference
    name, code = compiled
    g = torch.Generator().manual_seed(0)
    w_packed, scales = reference.random_weight(n, k, generator=g)
    weight = layout.PreparedMXFP4Weight(layout.shuffle_weight(w_packed), layout.shuffle_scales(scales),
                                        n, k, True)
    x = torch.randn(1, k, generator=g).to(torch.bfloat16)
    out = torch.zeros(1, n, dtype=torch.bfloat16)
    p = plan.plan(x, weight, out, params=configs.choose(n, k, 1))
    drv = Emulator()
    fn = drv.get_function(drv.load_module(code), name)
    buf = bytearray(fn.kernel.kernarg_size)
    explicit = [a for a in fn.kernel.args if not a.value_kind.startswith("hidden")]
    for a, val in zip(explicit, p.args.values()):
        if isinstance(val, torch.Tensor):
            struct.pack_into("<Q", buf, a.offset, val.data_ptr())
        else:
            struct.pack_into("<i" if a.size == 4 else "<q", buf, a.offset, val)
    t = time.perf_counter()
    rec = timing.Recorder(samples=timed_samples) if timed_samples else None
    cnt = drv.launch(fn, p.grid, p.block, bytes(buf), [x, out, weight.weight, weight.scales], recorder=rec)
    dt = time.perf_counter() - t
    ref = reference.gemm_reference(x.float(), w_packed, scales)
    err = (out.float() - ref).abs().max().item() / max(ref.abs().max().item(), 1e-9)
    return name, p.grid, cnt, dt, err


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--k", type=int, default=1024)
    args = ap.parse_args()
    n_ins, dt = synthetic()
    print(f"synthetic loop: {n_ins} wave-instructions in {dt:.3f} s = {n_ins / dt:,.0f} wave-instr/s")
    compiled = compile_gemm(args.n, args.k)
    name, grid, cnt, dt, err = gemm_decode(args.n, args.k, compiled)
    print(f"{name} M=1 N={args.n} K={args.k} grid={grid}: {cnt.instructions} wave-instructions "
          f"({cnt.mfma} mfma, {cnt.vmem} vmem, {cnt.lds} lds) in {dt:.2f} s = "
          f"{cnt.instructions / dt:,.0f} wave-instr/s; max rel. error vs torch {err:.2e}")
    base = cnt.instructions / dt
    for samples, what in ((16, "timing on, 16 workgroups traced"), (1 << 30, "timing on, every workgroup traced")):
        _, _, c2, dt2, _ = gemm_decode(args.n, args.k, compiled, timed_samples=samples)
        print(f"  {what}: {c2.instructions / dt2:,.0f} wave-instr/s ({c2.instructions / dt2 / base:.2f}x of "
              f"timing off); timing-model time {c2.timing.us:.2f} us")


if __name__ == "__main__":
    main()
