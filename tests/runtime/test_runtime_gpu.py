"""GPU tests (CUDA): tiny kernels compiled here with nvcc into cubins, put in a store with a manifest,
then loaded and launched through the exact runtime path (store, integrity, driver, packing, launcher).
On ROCm the same runtime path runs with the hip driver; these cubin tests need NVIDIA."""
import os
import shutil
import subprocess
import sys
import threading

import pytest
import torch
from runtime_helpers import make_config, write_store

from flyaot.kernel_defs.registry import LaunchPlan
from flyaot.runtime.dispatch import Runtime
from flyaot.runtime.errors import ArchMismatchError, DriverError, IntegrityError

pytestmark = pytest.mark.gpu

SOURCES = {
    "args_probe": r"""
extern "C" __global__ void args_probe(float *out, long long *out64, const float *x, int n, long long offset,
                                      float alpha) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { out[i] = x[i] * alpha; out64[i] = offset + (long long)i * n; }
}""",
    "add_one": r"""
extern "C" __global__ void add_one(float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}""",
}


def _arg(name, ctype, offset):
    size = {"void*": 8, "int32_t": 4, "int64_t": 8, "float": 4}[ctype]
    return {"name": name, "ctype": ctype, "kind": "global_buffer" if ctype == "void*" else "by_value",
            "offset": offset, "size": size}


ARGS = {
    "args_probe": ([_arg("out", "void*", 0), _arg("out64", "void*", 8), _arg("x", "void*", 16),
                    _arg("n", "int32_t", 24), _arg("offset", "int64_t", 32), _arg("alpha", "float", 40)], 44),
    "add_one": ([_arg("x", "void*", 0), _arg("n", "int32_t", 8)], 12),
}
BLOCK = 128
RES = {"vgpr": 0, "agpr": 0, "sgpr": 0, "lds": 0, "scratch": 0, "vgpr_spill": 0, "sgpr_spill": 0,
       "wavefront_size": 32, "max_workgroup_size": 1024, "uses_dynamic_stack": False}


def _entry(name, target, args=None, kernarg_size=None):
    a, ks = ARGS[name]
    return {"family": f"gpu_{name}", "params": {"v": 1}, "key": f"gpu_{name}[v=1]@{target}", "symbol": name,
            "block": [BLOCK, 1, 1], "kernarg_size": kernarg_size or ks, "kernarg_align": 8,
            "args": args or a, "resources": RES}


@pytest.fixture(scope="module")
def cubins(tmp_path_factory):
    if torch.version.hip or not torch.cuda.is_available():
        pytest.skip("cubin tests need an NVIDIA GPU")
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not os.path.exists(nvcc):
        pytest.skip("nvcc not found")
    major, minor = torch.cuda.get_device_capability(0)
    target = f"sm_{major}{minor}"
    d = tmp_path_factory.mktemp("cubins")
    out = {}
    for name, src in SOURCES.items():
        (d / f"{name}.cu").write_text(src)
        subprocess.run([nvcc, "--cubin", f"-arch={target}", "-o", str(d / f"{name}.cubin"), str(d / f"{name}.cu")],
                       check=True, capture_output=True, timeout=300)
        out[name] = (d / f"{name}.cubin").read_bytes()
    return target, out


@pytest.fixture
def store(cubins, tmp_path):
    target, blobs = cubins
    return write_store(tmp_path / "store", target, {f"id_{n}": (_entry(n, target), blobs[n]) for n in blobs})


def _rt(tmp_path, store, **over):
    # a flat store (one target's manifest beside its code objects), seen as FLYAOT_PREBUILT_PATH sees it
    return Runtime(make_config(tmp_path, extra=(store,), **over))


def _plan(name, grid, **args):
    return LaunchPlan(f"gpu_{name}", {"v": 1}, grid, (BLOCK, 1, 1), args)


def _args_probe(n, dev="cuda"):
    x = torch.randn(n, device=dev)
    return x, torch.full((n,), -1.0, device=dev), torch.full((n,), -1, dtype=torch.int64, device=dev)


@pytest.mark.parametrize("py_launch", [False, True])
def test_eager_launch_is_exact_for_pointer_i32_i64_f32_args(store, tmp_path, py_launch):
    rt = _rt(tmp_path, store, py_launch=py_launch)
    n, offset, alpha = 1000, (1 << 40) + 12345, -0.3
    x, out, out64 = _args_probe(n + 24)
    rt.launch(_plan("args_probe", ((n + BLOCK - 1) // BLOCK, 1, 1), out=out, out64=out64, x=x, n=n,
                    offset=offset, alpha=alpha))
    torch.cuda.synchronize()
    alpha32 = torch.tensor(alpha, dtype=torch.float32, device="cuda")
    assert torch.equal(out[:n], x[:n] * alpha32)
    assert torch.equal(out64[:n], offset + torch.arange(n, device="cuda", dtype=torch.int64) * n)
    assert bool((out[n:] == -1).all()) and bool((out64[n:] == -1).all())


def test_graph_capture_and_replay_are_exact(store, tmp_path):
    rt = _rt(tmp_path, store)
    x = torch.zeros(300, device="cuda")
    plan = _plan("add_one", (3, 1, 1), x=x, n=300)
    rt.launch(plan)                 # first launch loads the module (outside capture)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(10):
            rt.launch(plan)
    torch.cuda.synchronize()
    assert torch.equal(x, torch.full((300,), 1.0, device="cuda"))     # capture does not execute
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    assert torch.equal(x, torch.full((300,), 31.0, device="cuda"))


def test_launches_go_to_the_current_or_given_stream(store, tmp_path):
    rt = _rt(tmp_path, store)
    rt.launch(_plan("add_one", (1, 1, 1), x=torch.zeros(1, device="cuda"), n=1))
    torch.cuda.synchronize()
    for use_param in (False, True):
        s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
        results = []
        for s in (s1, s2):
            with torch.cuda.stream(s):
                torch.cuda._sleep(50_000_000)    # if our launch went elsewhere it would run before the fill
                x = torch.empty(256, device="cuda").fill_(1.0)
            plan = _plan("add_one", (2, 1, 1), x=x, n=256)
            if use_param:
                rt.launch(plan, stream=s)
            else:
                with torch.cuda.stream(s):
                    rt.launch(plan)
            with torch.cuda.stream(s):
                results.append(x * 2)
        torch.cuda.synchronize()
        for r in results:
            assert torch.equal(r, torch.full((256,), 4.0, device="cuda")), use_param


def test_threads_racing_the_first_load(store, tmp_path):
    rt = _rt(tmp_path, store)
    xs = [torch.zeros(500, device="cuda") for _ in range(8)]
    torch.cuda.synchronize()
    barrier, errors = threading.Barrier(len(xs)), []

    def go(x):
        try:
            barrier.wait()
            for _ in range(5):
                rt.launch(_plan("add_one", (4, 1, 1), x=x, n=500))
            torch.cuda.current_stream().synchronize()
        except Exception as e:     # reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=go, args=(x,)) for x in xs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    torch.cuda.synchronize()
    assert not errors
    assert all(torch.equal(x, torch.full((500,), 5.0, device="cuda")) for x in xs)
    assert len(rt._loaded) == 1


def test_store_for_another_arch_is_refused_naming_both(cubins, tmp_path):
    target, blobs = cubins
    other = write_store(tmp_path / "other", "sm_10", {"a": (_entry("add_one", "sm_10"), blobs["add_one"])})
    rt = _rt(tmp_path, other)
    with pytest.raises(ArchMismatchError, match=f"have it for sm_10, but the current device is {target}"):
        rt.launch(_plan("add_one", (1, 1, 1), x=torch.zeros(4, device="cuda"), n=4))


def test_driver_errors_carry_the_driver_string(store, tmp_path):
    rt = _rt(tmp_path, store)
    x = torch.zeros(4, device="cuda")
    with pytest.raises(DriverError, match="CUDA_ERROR_INVALID_VALUE"):
        rt.launch(_plan("add_one", (1, 1 << 20, 1), x=x, n=4))     # gridDim.y > 65535


def test_cubin_parameter_layout_is_cross_checked_when_the_driver_can(cubins, tmp_path):
    target, blobs = cubins
    a, _ = ARGS["args_probe"]
    shifted = a[:5] + [dict(a[5], offset=48)]
    s = write_store(tmp_path / "s", target, {"x": (_entry("args_probe", target, shifted, 52), blobs["args_probe"])})
    rt = _rt(tmp_path, s)
    x, out, out64 = _args_probe(4)
    plan = _plan("args_probe", (1, 1, 1), out=out, out64=out64, x=x, n=4, offset=0, alpha=1.0)
    from flyaot.runtime import drivers
    if drivers.get("cuda")._param_info is None:
        pytest.skip("this CUDA driver has no cuFuncGetParamInfo (CUDA < 12.4)")
    with pytest.raises(IntegrityError, match="driver's parameter info"):
        rt.launch(plan)


def test_verify_loads_every_code_object_on_the_gpu(store, tmp_path):
    p = subprocess.run([sys.executable, "-m", "flyaot", "verify"], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, FLYAOT_PREBUILT_PATH=str(store), FLYAOT_CACHE_DIR=str(tmp_path / "c")))
    assert p.returncode == 0 and "2 loaded on cuda device 0" in p.stdout, p.stdout + p.stderr
