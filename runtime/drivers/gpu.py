"""The hip and cuda drivers: module load / get function / launch through the library torch opened.

HIP's module API and the CUDA driver API have the same shape, so one class serves both with a table
of symbol names. Launches use the kernel-parameter array form: measured on H200, it is the form that
works under stream capture (the packed-buffer form failed during capture).
"""
import contextlib
import ctypes
import logging
import threading
from ctypes import POINTER as P
from ctypes import c_char_p, c_int, c_size_t, c_uint, c_void_p

from ..errors import DriverError
from ..launchers import make_gpu_launcher

log = logging.getLogger("flyaot.runtime")

_LAUNCH_ARGS = (c_void_p, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_void_p, P(c_void_p), P(c_void_p))

_SYMBOLS = {
    "cuda": {"load": "cuModuleLoadData", "get": "cuModuleGetFunction", "unload": "cuModuleUnload",
             "launch": "cuLaunchKernel"},
    "hip": {"load": "hipModuleLoadData", "get": "hipModuleGetFunction", "unload": "hipModuleUnload",
            "launch": "hipModuleLaunchKernel"},
}
CUDA_ERROR_INVALID_VALUE = 1
CUDA_ERROR_INVALID_CONTEXT = 201
CUDA_ERROR_INVALID_HANDLE = 400


def _open_library(platform: str):
    """The handle torch uses for its platform; the plain library names if that private helper moved."""
    try:
        from torch.cuda._utils import _get_gpu_runtime_library
        return _get_gpu_runtime_library()
    except (ImportError, AttributeError, OSError) as e:
        log.info("flyaot: torch.cuda._utils._get_gpu_runtime_library unavailable (%s); opening the library", e)
    return ctypes.CDLL("libamdhip64.so" if platform == "hip" else "libcuda.so.1")


def _fn(lib, name, restype, *argtypes):
    return ctypes.CFUNCTYPE(restype, *argtypes)((name, lib))


class GpuDriver:
    def __init__(self, platform: str):
        self.name = platform
        lib = self._lib = _open_library(platform)
        sym = _SYMBOLS[platform]
        self._load = _fn(lib, sym["load"], c_int, P(c_void_p), c_void_p)
        self._get = _fn(lib, sym["get"], c_int, P(c_void_p), c_void_p, c_char_p)
        self._unload = _fn(lib, sym["unload"], c_int, c_void_p)
        self.launch_fn = _fn(lib, sym["launch"], c_int, *_LAUNCH_ARGS)
        self._ctx = {}
        self._ctx_lock = threading.Lock()
        if platform == "cuda":
            self._err_name = _fn(lib, "cuGetErrorName", c_int, c_int, P(c_char_p))
            self._err_string = _fn(lib, "cuGetErrorString", c_int, c_int, P(c_char_p))
            self._device_get = _fn(lib, "cuDeviceGet", c_int, P(c_int), c_int)
            self._ctx_retain = _fn(lib, "cuDevicePrimaryCtxRetain", c_int, P(c_void_p), c_int)
            self._ctx_get = _fn(lib, "cuCtxGetCurrent", c_int, P(c_void_p))
            self._ctx_set = _fn(lib, "cuCtxSetCurrent", c_int, c_void_p)
            self._ctx_push = _fn(lib, "cuCtxPushCurrent_v2", c_int, c_void_p)
            self._ctx_pop = _fn(lib, "cuCtxPopCurrent_v2", c_int, P(c_void_p))
            self._check(_fn(lib, "cuInit", c_int, c_uint)(0), "cuInit")
            try:       # CUDA 12.4+: lets us cross-check a cubin's parameter layout against the manifest
                self._param_info = _fn(lib, "cuFuncGetParamInfo", c_int, c_void_p, c_size_t, P(c_size_t), P(c_size_t))
            except AttributeError:
                self._param_info = None
        else:
            self._hip_err_name = _fn(lib, "hipGetErrorName", c_char_p, c_int)
            self._hip_err_string = _fn(lib, "hipGetErrorString", c_char_p, c_int)
            self._get_device = _fn(lib, "hipGetDevice", c_int, P(c_int))
            self._set_device = _fn(lib, "hipSetDevice", c_int, c_int)

    # -- errors ---------------------------------------------------------------------------------
    def error(self, rc: int, what: str) -> DriverError:
        if self.name == "cuda":
            name, text = c_char_p(), c_char_p()
            self._err_name(rc, ctypes.byref(name))
            self._err_string(rc, ctypes.byref(text))
            name, text = name.value, text.value
        else:
            name, text = self._hip_err_name(rc), self._hip_err_string(rc)
        decode = lambda b: b.decode(errors="replace") if b else "unknown error"  # noqa: E731
        return DriverError(f"{self.name}: {what} failed: error {rc} {decode(name)}: {decode(text)}", rc)

    def _check(self, rc: int, what: str) -> None:
        if rc:
            raise self.error(rc, what)

    # -- device and context ---------------------------------------------------------------------
    def target(self, device: int) -> str:
        import torch
        if self.name == "hip":
            return torch.cuda.get_device_properties(device).gcnArchName.split(":")[0]
        major, minor = torch.cuda.get_device_capability(device)
        return f"sm_{major}{minor}"

    def _primary_ctx(self, device: int) -> int:
        ctx = self._ctx.get(device)
        if ctx is None:
            with self._ctx_lock:
                ctx = self._ctx.get(device)       # another thread may have retained it meanwhile
                if ctx is not None:
                    return ctx
                dev, c = c_int(), c_void_p()
                self._check(self._device_get(ctypes.byref(dev), device), "cuDeviceGet")
                self._check(self._ctx_retain(ctypes.byref(c), dev), "cuDevicePrimaryCtxRetain")
                ctx = self._ctx[device] = c.value
        return ctx

    @contextlib.contextmanager
    def _on_device(self, device: int):
        """Make `device` current for this thread for the duration, then restore what was current."""
        if self.name == "cuda":
            self._check(self._ctx_push(self._primary_ctx(device)), "cuCtxPushCurrent")
            restore = lambda: self._ctx_pop(ctypes.byref(c_void_p()))  # noqa: E731
        else:
            prev = c_int()
            self._check(self._get_device(ctypes.byref(prev)), "hipGetDevice")
            self._check(self._set_device(device), "hipSetDevice")
            restore = lambda: self._set_device(prev.value)  # noqa: E731
        try:
            yield
        except BaseException:
            restore()           # the original error matters more than a failed restore
            raise
        self._check(restore(), "restoring the current device")

    # -- modules --------------------------------------------------------------------------------
    def load_module(self, data: bytes, device: int) -> int:
        mod = c_void_p()
        with self._on_device(device):
            self._check(self._load(ctypes.byref(mod), data), f"{self._symbols['load']} on device {device}")
        return mod.value

    @property
    def _symbols(self):
        return _SYMBOLS[self.name]

    def get_function(self, module: int, symbol: str) -> int:
        fn = c_void_p()
        self._check(self._get(ctypes.byref(fn), module, symbol.encode()), f"{self._symbols['get']}({symbol!r})")
        return fn.value

    def unload(self, module: int) -> None:
        self._check(self._unload(module), self._symbols["unload"])

    def param_layout(self, function: int):
        """[(offset, size)] of a CUDA kernel's parameters as the driver reads them from the cubin."""
        if self.name != "cuda" or self._param_info is None:
            return None
        out, i = [], 0
        while True:
            off, size = c_size_t(), c_size_t()
            rc = self._param_info(function, i, ctypes.byref(off), ctypes.byref(size))
            if rc == CUDA_ERROR_INVALID_VALUE:     # past the last parameter
                return out
            self._check(rc, "cuFuncGetParamInfo")
            out.append((off.value, size.value))
            i += 1

    # -- launch ---------------------------------------------------------------------------------
    def make_launcher(self, function: int, layout, device: int, prefer_c: bool):
        return make_gpu_launcher(self.launch_fn, function, layout, prefer_c)

    def recover(self, rc: int, device: int, relaunch) -> int:
        """A thread that never touched the CUDA runtime has no current context (error 201), and one
        whose current context is another device's cannot use this device's function (201/400):
        launch under the device's primary context. A thread with none keeps it, as cudaSetDevice would."""
        if self.name != "cuda" or rc not in (CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_HANDLE):
            return rc
        current, ctx = c_void_p(), self._primary_ctx(device)
        self._check(self._ctx_get(ctypes.byref(current)), "cuCtxGetCurrent")
        if current.value == ctx:
            return rc
        if not current.value:
            self._check(self._ctx_set(ctx), "cuCtxSetCurrent")
            return relaunch()
        with self._on_device(device):
            return relaunch()
