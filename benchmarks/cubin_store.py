"""A one-kernel store for NVIDIA benchmarks: `add_one(float *x, int n)` compiled with nvcc into a cubin
for the current device, with the manifest flyaot's runtime reads (target sm_XY)."""
import os
import pathlib
import shutil
import subprocess

SOURCE = r"""
extern "C" __global__ void add_one(float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}
"""
FAMILY, PARAMS, BLOCK = "bench_add_one", {"v": 1}, (256, 1, 1)


def build(root) -> tuple:
    """(store dir, cubin bytes, target) under `root`."""
    import torch

    from flyaot import __version__
    from flyaot.formats.manifest import SCHEMA_VERSION, Spec, pretty_json, sha256_hex
    from flyaot.runtime.config import EXPECTED_FLYDSL
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not os.path.exists(nvcc):
        raise SystemExit("nvcc not found: the NVIDIA benchmarks compile their kernel with it")
    major, minor = torch.cuda.get_device_capability(0)
    target = f"sm_{major}{minor}"
    root = pathlib.Path(root)
    (root / "add_one.cu").write_text(SOURCE)
    cubin = root / "add_one.cubin"
    subprocess.run([nvcc, "--cubin", f"-arch={target}", "-o", str(cubin), str(root / "add_one.cu")], check=True)
    data = cubin.read_bytes()
    store = root / target              # a package-style folder: one store per target directory
    store.mkdir(parents=True)
    (store / "add_one.co").write_bytes(data)
    entry = {"family": FAMILY, "params": PARAMS, "key": Spec.make(FAMILY, PARAMS, target).key,
             "file": "add_one.co", "size": len(data), "sha256": sha256_hex(data), "symbol": "add_one",
             "block": list(BLOCK), "kernarg_size": 12, "kernarg_align": 8, "resources": {},
             "args": [{"name": "x", "ctype": "void*", "kind": "global_buffer", "offset": 0, "size": 8},
                      {"name": "n", "ctype": "int32_t", "kind": "by_value", "offset": 8, "size": 4}]}
    manifest = {"schema": SCHEMA_VERSION, "flyaot": __version__, "target": target, "specs": {"add_one": entry},
                "toolchain": {"flydsl": EXPECTED_FLYDSL, "lld": "n/a", "nvcc": "see nvcc --version"}}
    (store / "manifest.json").write_bytes(pretty_json(manifest))
    return store, data, target
