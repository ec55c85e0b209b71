"""The C and Python launchers, driven into a recording stand-in for cuLaunchKernel/hipModuleLaunchKernel
(compiled here with the C compiler, same signature), so the exact parameter array they hand the driver
can be read back byte for byte on a machine without a GPU."""
import ctypes
import shutil
import subprocess
import threading

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from flyaot.runtime import launchers
from flyaot.runtime.drivers.base import LAUNCH_ARGS as _LAUNCH_ARGS
from flyaot.store.slots import ArgLayout

RECORDER = r"""
#include <string.h>
static unsigned char cells[64][8];
static int sizes[64], nsizes, rc_next, calls;
static unsigned dims[7];
static void *fn_seen, *stream_seen, *extra_seen;
void set_sizes(int n, const int *s) { nsizes = n; memcpy(sizes, s, n * sizeof(int)); }
void set_rc(int rc) { rc_next = rc; }
int ncalls(void) { return calls; }
void *seen(int which) { return which == 0 ? fn_seen : which == 1 ? stream_seen : extra_seen; }
unsigned dim(int i) { return dims[i]; }
void cell(int i, unsigned char *out) { memcpy(out, cells[i], 8); }
int record(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
           unsigned shared, void *stream, void **params, void **extra) {
    unsigned d[7] = {gx, gy, gz, bx, by, bz, shared};
    memcpy(dims, d, sizeof d);
    fn_seen = f; stream_seen = stream; extra_seen = extra;
    for (int i = 0; i < nsizes; i++) { memset(cells[i], 0, 8); memcpy(cells[i], params[i], sizes[i]); }
    calls++;
    return rc_next;
}
"""

ENTRY = {"symbol": "k", "block": [128, 1, 1], "kernarg_size": 40, "resources": {}, "args": [
    {"name": "out", "ctype": "void*", "kind": "global_buffer", "offset": 0, "size": 8},
    {"name": "n", "ctype": "int32_t", "kind": "by_value", "offset": 8, "size": 4},
    {"name": "big", "ctype": "int64_t", "kind": "by_value", "offset": 16, "size": 8},
    {"name": "alpha", "ctype": "float", "kind": "by_value", "offset": 24, "size": 4},
    {"name": "src", "ctype": "void*", "kind": "global_buffer", "offset": 32, "size": 8}]}
LAYOUT = ArgLayout.from_entry(ENTRY, "test")


@pytest.fixture(scope="module")
def recorder(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the recording stand-in")
    d = tmp_path_factory.mktemp("rec")
    (d / "rec.c").write_text(RECORDER)
    subprocess.run([cc, "-O1", "-shared", "-fPIC", "-o", str(d / "rec.so"), str(d / "rec.c")], check=True)
    lib = ctypes.CDLL(str(d / "rec.so"))
    lib.seen.restype = ctypes.c_void_p
    lib.dim.restype = ctypes.c_uint
    sizes = (ctypes.c_int * len(LAYOUT.slots))(*[s.size for s in LAYOUT.slots])
    lib.set_sizes(len(LAYOUT.slots), sizes)
    lib.launch_fn = ctypes.CFUNCTYPE(ctypes.c_int, *_LAUNCH_ARGS)(("record", lib))
    return lib


def _launchers(lib):
    c = launchers.make_gpu_launcher(lib.launch_fn, 0xF00D, LAYOUT, prefer_c=True)
    py = launchers.make_gpu_launcher(lib.launch_fn, 0xF00D, LAYOUT, prefer_c=False)
    assert type(c).__name__ == "Launcher" and isinstance(py, launchers.PyLauncher)
    return {"c": c, "python": py}


def _cells(lib):
    out = []
    for i in range(len(LAYOUT.slots)):
        buf = (ctypes.c_ubyte * 8)()
        lib.cell(i, buf)
        out.append(bytes(buf))
    return out


def _expected(args):
    """Independent encoding of each cell: what the kernel reads at its parameter's address."""
    return [np.uint64(args["out"].data_ptr()).tobytes(), np.int32(args["n"]).tobytes() + bytes(4),
            np.int64(args["big"]).tobytes(), np.float32(args["alpha"]).tobytes() + bytes(4),
            np.uint64(args["src"].data_ptr()).tobytes()]


@pytest.mark.parametrize("which", ["c", "python"])
def test_launch_hands_the_driver_exact_parameters(recorder, which):
    launch = _launchers(recorder)[which]
    out, src = torch.zeros(4), torch.ones(3)
    args = {"big": (1 << 40) + 5, "alpha": 0.1, "out": out, "n": -7, "src": src[1:]}
    before = recorder.ncalls()
    assert launch((3, 2, 1), (128, 1, 1), args, 0xABC) == 0
    assert recorder.ncalls() == before + 1
    assert [recorder.dim(i) for i in range(7)] == [3, 2, 1, 128, 1, 1, 0]
    assert recorder.seen(0) == 0xF00D and recorder.seen(1) == 0xABC and recorder.seen(2) is None
    assert _cells(recorder) == _expected(args)
    recorder.set_rc(719)
    try:
        assert launch((1, 1, 1), [128, 1, 1], args, 0) == 719      # the return code reaches the caller
    finally:
        recorder.set_rc(0)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(-(1 << 31), (1 << 31) - 1), big=st.integers(-(1 << 63), (1 << 63) - 1),
       alpha=st.floats(-3e38, 3e38, allow_nan=False), g=st.tuples(*[st.integers(1, 1 << 20)] * 3))
def test_c_and_python_launchers_agree(recorder, n, big, alpha, g):
    args = {"out": torch.zeros(1), "n": n, "big": big, "alpha": alpha, "src": torch.zeros(2)}
    seen = {}
    for name, launch in _launchers(recorder).items():
        launch(g, (128, 1, 1), args, 0)
        seen[name] = (_cells(recorder), [recorder.dim(i) for i in range(3)])
    assert seen["c"] == seen["python"] == (_expected(args), list(g))


BAD = [
    ({"n": 1 << 31}, ValueError, "'n'"), ({"n": True}, TypeError, "'n'"), ({"n": 2.0}, TypeError, "'n'"),
    ({"big": 1 << 63}, ValueError, "'big'"), ({"alpha": 1e39}, ValueError, "'alpha'"),
    ({"alpha": "1"}, TypeError, "'alpha'"), ({"out": 1234}, TypeError, "'out'"),
]


@pytest.mark.parametrize("which", ["c", "python"])
@pytest.mark.parametrize("change,exc,match", BAD)
def test_bad_values_raise_naming_the_argument_and_do_not_launch(recorder, which, change, exc, match):
    launch = _launchers(recorder)[which]
    args = dict({"out": torch.zeros(1), "n": 1, "big": 2, "alpha": 1.0, "src": torch.zeros(1)}, **change)
    before = recorder.ncalls()
    with pytest.raises(exc, match=match):
        launch((1, 1, 1), (128, 1, 1), args, 0)
    assert recorder.ncalls() == before


@pytest.mark.parametrize("which", ["c", "python"])
def test_geometry_and_argument_set_are_checked(recorder, which):
    launch = _launchers(recorder)[which]
    args = {"out": torch.zeros(1), "n": 1, "big": 2, "alpha": 1.0, "src": torch.zeros(1)}
    with pytest.raises(ValueError, match="block"):
        launch((1, 1, 1), (64, 1, 1), args, 0)
    with pytest.raises(ValueError, match="grid"):
        launch((0, 1, 1), (128, 1, 1), args, 0)
    with pytest.raises(ValueError, match="grid"):
        launch((1, 1), (128, 1, 1), args, 0)
    with pytest.raises(ValueError, match="takes arguments"):
        launch((1, 1, 1), (128, 1, 1), dict(args, extra=1), 0)
    del args["src"]
    with pytest.raises(ValueError, match="takes arguments"):
        launch((1, 1, 1), (128, 1, 1), args, 0)


def test_python_launcher_is_safe_under_concurrent_use(recorder):
    """Shared ctypes cells are filled and launched under a lock: each launch sees its own values."""
    seen, errors = [], []

    proto = ctypes.CFUNCTYPE(ctypes.c_int, *_LAUNCH_ARGS)

    @proto
    def check(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        n = ctypes.cast(params[1], ctypes.POINTER(ctypes.c_int32))[0]
        big = ctypes.cast(params[2], ctypes.POINTER(ctypes.c_int64))[0]
        if big != n * 3:
            errors.append((n, big))
        seen.append(n)
        return 0

    launch = launchers.PyLauncher(check, 1, LAYOUT)

    def worker(base):
        for i in range(300):
            n = base + i
            launch((1, 1, 1), (128, 1, 1), {"out": torch.zeros(1), "n": n, "big": n * 3, "alpha": 0.0,
                                            "src": torch.zeros(1)}, 0)

    threads = [threading.Thread(target=worker, args=(k * 1000,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(seen) == 1200


def test_c_launcher_is_built():
    assert launchers.c_launcher_status() == "available", (
        "build it with `python -m pip install -e .` or `python setup.py build_ext --inplace`")
