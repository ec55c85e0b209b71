"""Drivers: what the runtime needs from a GPU API, one table of them, and how one is chosen.

Every driver offers:
  name                                   its key in DRIVERS
  target(device) -> str                  the device's architecture as stores and targets.py name it
  load_module(data, device) -> handle    load a code object onto a device
  get_function(module, symbol) -> handle
  unload(module)
  param_layout(function) -> [(offset, size)] or None   what the driver itself says about the arguments
  make_launcher(function, layout, device, prefer_c) -> launcher(grid, block, args, stream) -> int
  recover(rc, device, relaunch) -> int   retry a failed launch once if the failure is fixable
  error(rc, what) -> DriverError         the driver's own name and string for a return code
"""
import importlib
import threading

# name -> "module:class", imported on first use (FLYAOT_DEVICE accepts exactly these names).
DRIVERS = {
    "emu": "emu:EmuDriver",        # CPU tensors, run by flyaot.emu
    "hip": "hip:HipDriver",
    "cuda": "cuda:CudaDriver",
}
NAMES = tuple(DRIVERS)

_drivers = {}
_lock = threading.Lock()


def get(name: str):
    """The process-wide driver of that name (created on first use)."""
    drv = _drivers.get(name)
    if drv is None:
        with _lock:
            drv = _drivers.get(name)
            if drv is None:
                try:
                    module, cls = DRIVERS[name].split(":")
                except KeyError:
                    raise ValueError(f"unknown driver {name!r}; known: {', '.join(NAMES)}") from None
                drv = _drivers[name] = getattr(importlib.import_module(f"{__name__}.{module}"), cls)()
    return drv


def name_for(device: int, forced: str) -> str:
    """emu for CPU tensors (device -1) or when forced; else the platform torch was built for."""
    if device < 0:
        if forced not in ("", "emu"):
            raise ValueError(f"FLYAOT_DEVICE={forced} needs GPU tensors; got CPU tensors")
        return "emu"
    import torch
    platform = "hip" if torch.version.hip else "cuda"
    if forced == "emu":
        raise ValueError(f"FLYAOT_DEVICE=emu runs on CPU tensors; got a tensor on {platform} device {device}")
    if forced and forced != platform:
        raise ValueError(f"FLYAOT_DEVICE={forced}, but this torch is built for {platform}")
    return platform
