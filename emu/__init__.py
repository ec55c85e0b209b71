"""A functional gfx950 emulator: decodes and executes real code objects over CPU memory.

It depends on `flyaot.formats` alone (no stores, specs or FlyDSL); the runtime reaches it through
its emu driver adapter.
"""
