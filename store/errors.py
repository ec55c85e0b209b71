"""The errors a store raises; the package's base error lives here, at the lowest layer that raises one.

Every message names the store (or file) and what to do about it.
"""


class FlyaotError(RuntimeError):
    pass


class StoreError(FlyaotError):
    """A store (manifest + code objects) was refused: schema, toolchain, layout, target or a bad file."""


class IntegrityError(StoreError):
    """A code object does not match its manifest entry (hash, size, metadata)."""


class LockTimeout(FlyaotError):
    """Another process held a store lock for longer than the caller would wait."""
