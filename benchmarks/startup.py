"""Startup cost: `import flyaot` + opening the store index, over `import torch`; and the time to load one
code object (read + sha256 + metadata cross-check + driver load + get function).

    python benchmarks/startup.py [--repeat 5] [--loads 20]

Imports are timed in fresh processes (median of `repeat`). Loads run on the GPU when there is one
(NVIDIA: a cubin built with nvcc; ROCm: the gfx950 stores) and on the gfx950 emulator otherwise,
over every code object of the configured stores (at most `--loads`).
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

IMPORT_TORCH = "import time; t0 = time.perf_counter(); import torch; print(time.perf_counter() - t0)"
IMPORT_FLYAOT = ("import time; t0 = time.perf_counter(); import torch; t1 = time.perf_counter(); import flyaot, "
                 "flyaot.runtime, flyaot.ops; t2 = time.perf_counter(); idx = flyaot.runtime.runtime().index; "
                 "t3 = time.perf_counter(); print(t1 - t0, t2 - t1, t3 - t2, sum(len(s.by_key) for s in idx.stores))")


def _run(code):
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return [float(x) for x in out.split()]


def imports(repeat):
    torch_only = [_run(IMPORT_TORCH)[0] for _ in range(repeat)]
    rows = [_run(IMPORT_FLYAOT) for _ in range(repeat)]
    med = lambda xs: statistics.median(xs) * 1e3  # noqa: E731
    print(f"import torch                      {med(torch_only):8.1f} ms  (alone, median of {repeat})")
    print(f"import flyaot (+runtime, ops)     {med([r[1] for r in rows]):8.1f} ms  over import torch")
    print(f"open store index                  {med([r[2] for r in rows]):8.1f} ms  ({int(rows[0][3])} specs)")


def _time_loads(driver, device, hits, limit):
    from flyaot.runtime import loader
    times = []
    for store, sid, entry in hits[:limit]:
        t0 = time.perf_counter()
        loaded = loader.load(driver, device, store, sid, entry, prefer_c=True)
        times.append(time.perf_counter() - t0)
        driver.unload(loaded.module)
    return times


def loads(limit):
    import torch

    from flyaot.runtime import drivers
    from flyaot.runtime.config import Config
    from flyaot.store.index import Index
    if torch.cuda.is_available() and not torch.version.hip:
        import cubin_store as cs
        with tempfile.TemporaryDirectory() as tmp:
            store_dir, _, _ = cs.build(tmp)
            cfg = Config.from_env()
            index = Index.open(Config(**dict(cfg.__dict__, package_dir=store_dir.parent, extra_stores=())))
            hits = [(s, sid, e) for s, sid, e in index.entries() if s.root == store_dir] * limit
            times = _time_loads(drivers.get("cuda"), 0, hits, limit)
            where = f"cuda device 0 ({torch.cuda.get_device_name(0)}), one {hits[0][2]['size']} B cubin"
    else:
        name = "hip" if torch.cuda.is_available() else "emu"
        device = 0 if name == "hip" else -1
        driver = drivers.get(name)
        index = Index.open(Config.from_env())
        hits = [(s, sid, e) for s, sid, e in index.entries() if s.target == driver.target(device)]
        if not hits:
            print(f"per-code-object load: no {driver.target(device)} code objects in the stores")
            return
        times = _time_loads(driver, device, hits, limit)
        where = f"{name} driver, {len(times)} code objects of the stores"
    ms = sorted(t * 1e3 for t in times)
    print(f"per-code-object load              {statistics.median(ms):8.2f} ms median, min {ms[0]:.2f}, "
          f"max {ms[-1]:.2f}  ({where})")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--loads", type=int, default=20)
    a = ap.parse_args()
    imports(a.repeat)
    loads(a.loads)


if __name__ == "__main__":
    main()
