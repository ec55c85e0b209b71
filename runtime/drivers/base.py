"""What the hip and cuda drivers share: a module API reached through ctypes in the library torch opened.

HIP's module API and the CUDA driver API have the same shape (load data, get function, unload,
launch with a kernel-parameter array), so a subclass names its four entry points and supplies what
differs: error strings, making a device current, the device's target, and launch recovery. Launches
use the kernel-parameter array form: measured on H200, it is the form that works under stream
capture (the packed-buffer form failed during capture).
"""
import contextlib
import ctypes
import logging
from ctypes import POINTER as P
from ctypes import c_char_p, c_int, c_uint, c_void_p

from ..errors import DriverError
from ..launchers import make_gpu_launcher

log = logging.getLogger("flyaot.runtime")

# (function, grid x y z, block x y z, shared bytes, stream, kernel params, extra): both APIs' launch.
LAUNCH_ARGS = (c_void_p, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_void_p, P(c_void_p), P(c_void_p))


def open_library(fallback: str):
    """The handle torch uses for its platform; the plain library name if that private helper moved."""
    try:
        from torch.cuda._utils import _get_gpu_runtime_library
        return _get_gpu_runtime_library()
    except (ImportError, AttributeError, OSError) as e:
        log.info("flyaot: torch.cuda._utils._get_gpu_runtime_library unavailable (%s); opening %s", e, fallback)
    return ctypes.CDLL(fallback)


def bind(lib, name, restype, *argtypes):
    return ctypes.CFUNCTYPE(restype, *argtypes)((name, lib))


class ModuleDriver:
    """Base of the GPU drivers. Subclasses set `name`, `LIBRARY` and `SYMBOLS` (load, get, unload,
    launch entry points) and implement `_error_strings`, `_make_current`, `target`."""
    name = ""
    LIBRARY = ""
    SYMBOLS = {}

    def __init__(self):
        lib = self._lib = open_library(self.LIBRARY)
        sym = self.SYMBOLS
        self._load = bind(lib, sym["load"], c_int, P(c_void_p), c_void_p)
        self._get = bind(lib, sym["get"], c_int, P(c_void_p), c_void_p, c_char_p)
        self._unload = bind(lib, sym["unload"], c_int, c_void_p)
        self.launch_fn = bind(lib, sym["launch"], c_int, *LAUNCH_ARGS)

    # -- errors ---------------------------------------------------------------------------------
    def _error_strings(self, rc: int) -> tuple:
        """(name, description) bytes of a return code, as the API spells them."""
        raise NotImplementedError

    def error(self, rc: int, what: str) -> DriverError:
        name, text = self._error_strings(rc)
        decode = lambda b: b.decode(errors="replace") if b else "unknown error"  # noqa: E731
        return DriverError(f"{self.name}: {what} failed: error {rc} {decode(name)}: {decode(text)}", rc)

    def _check(self, rc: int, what: str) -> None:
        if rc:
            raise self.error(rc, what)

    # -- device ---------------------------------------------------------------------------------
    def target(self, device: int) -> str:
        raise NotImplementedError

    def _make_current(self, device: int):
        """Make `device` current for this thread; return a function that restores what was (-> rc)."""
        raise NotImplementedError

    @contextlib.contextmanager
    def _on_device(self, device: int):
        """Make `device` current for this thread for the duration, then restore what was current."""
        restore = self._make_current(device)
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
            self._check(self._load(ctypes.byref(mod), data), f"{self.SYMBOLS['load']} on device {device}")
        return mod.value

    def get_function(self, module: int, symbol: str) -> int:
        fn = c_void_p()
        self._check(self._get(ctypes.byref(fn), module, symbol.encode()), f"{self.SYMBOLS['get']}({symbol!r})")
        return fn.value

    def unload(self, module: int) -> None:
        self._check(self._unload(module), self.SYMBOLS["unload"])

    def param_layout(self, function: int):
        """[(offset, size)] of the kernel's parameters as the driver reads them, where it can; else None."""
        return None

    # -- launch ---------------------------------------------------------------------------------
    def make_launcher(self, function: int, layout, device: int, prefer_c: bool):
        return make_gpu_launcher(self.launch_fn, function, layout, prefer_c)

    def recover(self, rc: int, device: int, relaunch) -> int:
        """Retry a failed launch once if the failure is one this API can fix; else return rc."""
        return rc
