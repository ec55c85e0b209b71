"""The cuda driver: the CUDA driver API (cuModuleLoadData ... cuLaunchKernel) under each device's
primary context, the one the CUDA runtime (and so torch) uses."""
import ctypes
import threading
from ctypes import POINTER as P
from ctypes import c_char_p, c_int, c_size_t, c_uint, c_void_p

from .base import ModuleDriver, bind

CUDA_ERROR_INVALID_VALUE = 1
CUDA_ERROR_INVALID_CONTEXT = 201
CUDA_ERROR_INVALID_HANDLE = 400


class CudaDriver(ModuleDriver):
    name = "cuda"
    LIBRARY = "libcuda.so.1"
    SYMBOLS = {"load": "cuModuleLoadData", "get": "cuModuleGetFunction", "unload": "cuModuleUnload",
               "launch": "cuLaunchKernel"}

    def __init__(self):
        super().__init__()
        lib = self._lib
        self._ctx = {}
        self._ctx_lock = threading.Lock()
        self._err_name = bind(lib, "cuGetErrorName", c_int, c_int, P(c_char_p))
        self._err_string = bind(lib, "cuGetErrorString", c_int, c_int, P(c_char_p))
        self._device_get = bind(lib, "cuDeviceGet", c_int, P(c_int), c_int)
        self._ctx_retain = bind(lib, "cuDevicePrimaryCtxRetain", c_int, P(c_void_p), c_int)
        self._ctx_get = bind(lib, "cuCtxGetCurrent", c_int, P(c_void_p))
        self._ctx_set = bind(lib, "cuCtxSetCurrent", c_int, c_void_p)
        self._ctx_push = bind(lib, "cuCtxPushCurrent_v2", c_int, c_void_p)
        self._ctx_pop = bind(lib, "cuCtxPopCurrent_v2", c_int, P(c_void_p))
        self._check(bind(lib, "cuInit", c_int, c_uint)(0), "cuInit")
        try:       # CUDA 12.4+: lets us cross-check a cubin's parameter layout against the manifest
            self._param_info = bind(lib, "cuFuncGetParamInfo", c_int, c_void_p, c_size_t, P(c_size_t), P(c_size_t))
        except AttributeError:
            self._param_info = None

    def _error_strings(self, rc: int) -> tuple:
        name, text = c_char_p(), c_char_p()
        self._err_name(rc, ctypes.byref(name))
        self._err_string(rc, ctypes.byref(text))
        return name.value, text.value

    def target(self, device: int) -> str:
        import torch
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

    def _make_current(self, device: int):
        self._check(self._ctx_push(self._primary_ctx(device)), "cuCtxPushCurrent")
        return lambda: self._ctx_pop(ctypes.byref(c_void_p()))

    def param_layout(self, function: int):
        """[(offset, size)] of the kernel's parameters as the driver reads them from the cubin."""
        if self._param_info is None:
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

    def recover(self, rc: int, device: int, relaunch) -> int:
        """A thread that never touched the CUDA runtime has no current context (error 201), and one
        whose current context is another device's cannot use this device's function (201/400):
        launch under the device's primary context. A thread with none keeps it, as cudaSetDevice would."""
        if rc not in (CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_HANDLE):
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
