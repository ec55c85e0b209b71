"""The hip driver: ROCm's module API (hipModuleLoadData ... hipModuleLaunchKernel)."""
import ctypes
from ctypes import POINTER as P
from ctypes import c_char_p, c_int

from .base import ModuleDriver, bind


class HipDriver(ModuleDriver):
    name = "hip"
    LIBRARY = "libamdhip64.so"
    SYMBOLS = {"load": "hipModuleLoadData", "get": "hipModuleGetFunction", "unload": "hipModuleUnload",
               "launch": "hipModuleLaunchKernel"}

    def __init__(self):
        super().__init__()
        lib = self._lib
        self._err_name = bind(lib, "hipGetErrorName", c_char_p, c_int)
        self._err_string = bind(lib, "hipGetErrorString", c_char_p, c_int)
        self._get_device = bind(lib, "hipGetDevice", c_int, P(c_int))
        self._set_device = bind(lib, "hipSetDevice", c_int, c_int)

    def _error_strings(self, rc: int) -> tuple:
        return self._err_name(rc), self._err_string(rc)

    def target(self, device: int) -> str:
        import torch
        return torch.cuda.get_device_properties(device).gcnArchName.split(":")[0]

    def _make_current(self, device: int):
        prev = c_int()
        self._check(self._get_device(ctypes.byref(prev)), "hipGetDevice")
        self._check(self._set_device(device), "hipSetDevice")
        return lambda: self._set_device(prev.value)
