"""Host time per kernel launch: flyaot against Triton, torch's `_CudaKernel` and a native torch op.

    python benchmarks/launch_overhead.py [--n 20000] [--runs 5]     # NVIDIA GPU (cubin built with nvcc)
    python benchmarks/launch_overhead.py --dry                       # no GPU: flyaot's own host cost

Each figure is the best of `runs` loops of `n` launches of a 1024-element `x += 1` kernel, with no
sync inside the loop (one after it), so the figure is host cost alone. `--dry` replaces the
driver's launch function by a C no-op, which isolates what flyaot itself adds per launch.
"""
import argparse
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def best_us(fn, n, runs, sync):
    best = float("inf")
    for _ in range(runs):
        sync()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        best = min(best, (time.perf_counter() - t0) / n * 1e6)
    return best


def flyaot_cases(store, x, py_launch=False):
    import cubin_store as cs

    from flyaot.kernel_defs.registry import LaunchPlan
    from flyaot.runtime.config import Config
    from flyaot.runtime.dispatch import Runtime
    cfg = Config.from_env()
    rt = Runtime(Config(**dict(cfg.__dict__, package_dir=store.parent, extra_stores=(), py_launch=py_launch,
                               cache_dir=store / "no-cache")))
    n = x.numel()
    grid = ((n + cs.BLOCK[0] - 1) // cs.BLOCK[0], 1, 1)
    plan = LaunchPlan(cs.FAMILY, cs.PARAMS, grid, cs.BLOCK, {"x": x, "n": n})
    rt.launch(plan)                                # load once, outside the timing
    kernel = rt.kernel(cs.FAMILY, cs.PARAMS)
    args = plan.args
    return {
        "launch(plan), plan reused": lambda: rt.launch(plan),
        "launch(LaunchPlan(...)) built per call": lambda: rt.launch(
            LaunchPlan(cs.FAMILY, cs.PARAMS, grid, cs.BLOCK, {"x": x, "n": n})),
        "kernel(grid, block, args)": lambda: kernel(grid, cs.BLOCK, args),
    }


def triton_case(x):
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def add_one(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)

    n = x.numel()
    grid = (triton.cdiv(n, 256),)
    add_one[grid](x, n, BLOCK=256)
    return lambda: add_one[grid](x, n, BLOCK=256)


def gpu(a):
    import torch
    import cubin_store as cs
    tmp = tempfile.mkdtemp(prefix="flyaot-bench-")
    try:
        store, cubin, target = cs.build(tmp)
        x = torch.zeros(1024, device="cuda")
        sync = torch.cuda.synchronize
        rows = []
        for name, fn in flyaot_cases(store, x).items():
            rows.append((f"flyaot {name}", best_us(fn, a.n, a.runs, sync)))
        py_cases = flyaot_cases(store, x, py_launch=True)
        rows.append(("flyaot launch(plan), Python launcher", best_us(py_cases["launch(plan), plan reused"],
                                                                     a.n, a.runs, sync)))
        tri = triton_case(x)
        if tri is not None:
            import triton
            rows.append((f"Triton {triton.__version__} kernel[grid](...)", best_us(tri, a.n, a.runs, sync)))
        else:
            rows.append(("Triton (not installed)", None))
        from torch.cuda._utils import _cuda_load_module
        k = _cuda_load_module(cubin, ["add_one"])["add_one"]
        rows.append(("torch _CudaKernel __call__", best_us(
            lambda: k(grid=(4, 1, 1), block=(256, 1, 1), args=[x, 1024]), a.n, a.runs, sync)))
        rows.append(("torch x.add_(1.0) (native op)", best_us(lambda: x.add_(1.0), a.n, a.runs, sync)))
        header = f"{torch.cuda.get_device_name(0)} ({target}), torch {torch.__version__}"
        report(rows, header)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def dry(a):
    """flyaot's launchers with a C no-op as the driver's launch function (no GPU needed)."""
    import torch
    from flyaot.runtime import launchers
    from flyaot.runtime.drivers.base import LAUNCH_ARGS as _LAUNCH_ARGS
    from flyaot.store.slots import ArgLayout
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise SystemExit("--dry needs a C compiler for the no-op launch function")
    tmp = tempfile.mkdtemp(prefix="flyaot-dry-")
    try:
        src = os.path.join(tmp, "noop.c")
        with open(src, "w") as f:
            f.write("int noop(void *f, unsigned a, unsigned b, unsigned c, unsigned d, unsigned e, unsigned g,"
                    " unsigned s, void *st, void **p, void **x) { return 0; }\n")
        subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", os.path.join(tmp, "noop.so"), src], check=True)
        fn = ctypes.CFUNCTYPE(ctypes.c_int, *_LAUNCH_ARGS)(("noop", ctypes.CDLL(os.path.join(tmp, "noop.so"))))
        entry = {"symbol": "k", "block": [256, 1, 1], "kernarg_size": 12, "resources": {}, "args": [
            {"name": "x", "ctype": "void*", "kind": "global_buffer", "offset": 0, "size": 8},
            {"name": "n", "ctype": "int32_t", "kind": "by_value", "offset": 8, "size": 4}]}
        layout = ArgLayout.from_entry(entry, "dry")
        x = torch.zeros(1024)
        args, grid, block = {"x": x, "n": 1024}, (4, 1, 1), (256, 1, 1)
        rows = []
        for prefer_c in (True, False):
            launcher = launchers.make_gpu_launcher(fn, 1, layout, prefer_c)
            rows.append((f"{type(launcher).__name__} (pack + call a no-op driver)",
                         best_us(lambda: launcher(grid, block, args, 0), a.n, a.runs, lambda: None)))
        # The real dispatch layer (Runtime.launch) above the C launcher; device -1 (CPU tensors) skips
        # the current-stream query, which a GPU launch adds.
        from flyaot.kernel_defs.registry import LaunchPlan
        from flyaot.runtime.config import Config
        from flyaot.runtime.dispatch import Runtime
        rt = Runtime(Config.from_env())
        k = rt.kernel("dry", {"v": 1})
        k._by_device[-1] = launchers.make_gpu_launcher(fn, 1, layout, True)
        plan = LaunchPlan("dry", {"v": 1}, grid, block, args)
        rows.append(("Runtime.launch(plan) + C launcher, minus stream query",
                     best_us(lambda: rt.launch(plan), a.n, a.runs, lambda: None)))
        rows.append(("torch x.add_(1.0) on CPU (for scale)", best_us(lambda: x.add_(1.0), a.n, a.runs, lambda: None)))
        report(rows, "dry run: no GPU; the driver's launch is a C no-op")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def report(rows, header):
    print(header)
    base = rows[0][1]
    for name, us in rows:
        if us is None:
            print(f"  {name:58} {'-':>9}")
        else:
            print(f"  {name:58} {us:9.2f} us/launch   {us / base:5.2f}x flyaot")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dry", action="store_true")
    a = ap.parse_args()
    import torch
    if a.dry:
        dry(a)
    elif torch.cuda.is_available() and not torch.version.hip:
        gpu(a)
    else:
        raise SystemExit("no NVIDIA GPU here: run with --dry, or on the GPU machine")


if __name__ == "__main__":
    main()
