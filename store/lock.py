"""Inter-process exclusive locks on lock files, with a bounded wait.

flock is released by the kernel when its holder exits, however it exits, so a crashed compiler never
leaves a stale lock. Lock files are never deleted: unlinking one while another process waits on it
would let two processes hold "the" lock at once.
"""
import contextlib
import fcntl
import os
import time

from .errors import LockTimeout

_POLL_S = 0.05


@contextlib.contextmanager
def exclusive(path, *, timeout: float, what: str):
    """Hold an exclusive flock on `path` (created if absent); LockTimeout after `timeout` seconds."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LockTimeout(f"flyaot: timed out after {timeout:g} s waiting for {path}, held by another "
                                   f"process {what}. If that process is stuck, end it; raise "
                                   "FLYAOT_JIT_TIMEOUT to wait longer. (Do not delete the lock file.)") from None
                time.sleep(_POLL_S)
        yield
    finally:
        os.close(fd)        # closing the descriptor releases the lock
