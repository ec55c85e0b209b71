"""A functional gfx950 emulator: decodes and executes real code objects over CPU memory.

It depends on `flyaot.formats` alone (no stores, specs or FlyDSL); the runtime reaches it through
its emu driver adapter. It computes with numpy, which the package installs only with the `emu`
extra, so its absence is reported here, once, with the remedy.
"""
try:
    import numpy  # noqa: F401
except ImportError as e:
    raise ImportError("flyaot's emulator (CPU tensors, FLYAOT_DEVICE=emu) needs numpy, which is not installed: "
                      "pip install 'flyaot[emu]'") from e

from .wave import EmuError, SanitizerError  # noqa: E402

__all__ = ["EmuError", "SanitizerError"]
