"""Exceptions the runtime raises; each message names what is wrong and what to do about it.

FlyaotError, StoreError and IntegrityError are the store's own (a store raises them below the runtime).
"""
from ..store.errors import FlyaotError, IntegrityError, StoreError  # noqa: F401


class MissingSpecError(FlyaotError, LookupError):
    """No store has the spec and the JIT fallback is not allowed or not available."""


class ArchMismatchError(FlyaotError):
    """The current device's architecture is not the one the code object was built for."""


class DriverError(FlyaotError):
    """A driver call returned an error; the message carries the driver's own error string."""

    def __init__(self, message: str, code: int = 0):
        super().__init__(message)
        self.code = code


class JitError(FlyaotError):
    """The JIT fallback failed or timed out waiting for another process."""
