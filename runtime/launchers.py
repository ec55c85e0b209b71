"""Launchers: callables `launcher(grid, block, args: dict, stream: int) -> driver return code`.

The C launcher (_launch.c) packs and launches without leaving C; the Python one does the same with
ctypes cells. Both convert values through the same rules (store.slots.convert) and both pass a
kernel-parameter array, the launch form that works under graph capture.
"""
import ctypes
import logging
import threading

from ..store.slots import convert

log = logging.getLogger("flyaot.runtime")

_CELL = {"p": ctypes.c_uint64, "i": ctypes.c_int32, "l": ctypes.c_int64, "f": ctypes.c_float}
_c_launch = None          # the module, False once it failed to import
_c_launch_error = ""
_warned = False


def c_launcher_status() -> str:
    """'available' or why not (for `python -m flyaot env`)."""
    return "available" if _c_module() else f"unavailable ({_c_launch_error})"


def _c_module():
    global _c_launch, _c_launch_error
    if _c_launch is None:
        try:
            from . import _launch
            _c_launch = _launch
        except ImportError as e:
            _c_launch, _c_launch_error = False, str(e)
    return _c_launch


def make_gpu_launcher(launch_fn, function: int, layout, prefer_c: bool):
    global _warned
    mod = _c_module() if prefer_c else None
    if mod:
        addr = ctypes.cast(launch_fn, ctypes.c_void_p).value
        return mod.Launcher(addr, function, layout.codes, layout.names, layout.block, layout.symbol)
    if prefer_c and not _warned:
        _warned = True
        log.warning("flyaot: C launcher unavailable (%s); launching through Python (slower host path). "
                    "Reinstall flyaot with a C compiler present to build it.", _c_launch_error)
    return PyLauncher(launch_fn, function, layout)


class PyLauncher:
    """ctypes path: one set of parameter cells per kernel, filled and launched under a lock (the cells
    are shared, and the driver copies their values during the launch call, captures included)."""

    def __init__(self, launch_fn, function: int, layout):
        self._fn = launch_fn
        self._function = ctypes.c_void_p(function)
        self._layout = layout
        cells = [_CELL[s.code]() for s in layout.slots]
        self._fill = [(s, cell) for s, cell in zip(layout.slots, cells)]
        self._params = (ctypes.c_void_p * max(len(cells), 1))(*[ctypes.addressof(c) for c in cells])
        self._lock = threading.Lock()

    def __call__(self, grid, block, args, stream):
        layout = self._layout
        if tuple(block) != layout.block:
            raise ValueError(f"{layout.symbol} was built for block {layout.block}, got {tuple(block)}")
        gx, gy, gz = _dim3(grid, layout.symbol)
        layout.check_args(args)
        with self._lock:
            for slot, cell in self._fill:
                cell.value = convert(slot, args[slot.name])
            return self._fn(self._function, gx, gy, gz, *layout.block, 0, stream, self._params, None)


def _dim3(grid, symbol):
    g = tuple(grid)
    if len(g) != 3 or not all(isinstance(x, int) and not isinstance(x, bool) and 1 <= x < 1 << 31 for x in g):
        raise ValueError(f"{symbol}: grid must be 3 ints in [1, 2**31-1], got {grid!r}")
    return g
