"""The only ways a store touches a file: a bounded read of a regular file, an atomic durable write, and
names built from an entry's id (never a path taken from a manifest).
"""
import os
import pathlib
import stat

from .. import targets
from ..formats.manifest import ARCH, SPEC_ID
from .errors import StoreError

MANIFEST_CAP = 64 << 20      # bytes; the 184-spec package manifest is about 0.5 MiB
CODE_OBJECT_CAP = 64 << 20   # bytes; a shipped code object is about 15 KiB


def read_capped(path: pathlib.Path, cap: int, what: str) -> bytes:
    """The bytes of `path` if it is a regular file of at most `cap` bytes, else StoreError naming it.

    Opened non-blocking, so a FIFO or device in its place is refused at once instead of hanging or
    streaming forever; the cap is enforced on the bytes read, not only on the size stat reports.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise StoreError(f"cannot read {what} {path}: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise StoreError(f"{what} {path} is not a regular file")
        if st.st_size > cap:
            raise StoreError(f"{what} {path} is {st.st_size} bytes, over the {cap}-byte limit")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, cap + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > cap:
                raise StoreError(f"{what} {path} grew past the {cap}-byte limit while being read")
        return b"".join(chunks)
    except OSError as e:
        raise StoreError(f"cannot read {what} {path}: {e.strerror or e}") from None
    finally:
        os.close(fd)


def _fsync_dir(path: pathlib.Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: pathlib.Path, data: bytes) -> None:
    """Write `path` whole or not at all: temp file, fsync, rename over, fsync the directory. A reader
    (or a crash) never sees a partial file; names only appear by rename of complete files."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:          # a full disk, say: leave no temp file behind
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def plain_target(target) -> str:
    """`target` if it is a plain architecture name (its stores' directory name). Readers accept any such
    name, since a CUDA driver serves sm_* stores; writers demand a row of the target table."""
    if not isinstance(target, str) or not ARCH.fullmatch(target):
        raise StoreError(f"target {target!r} is not an architecture name")
    return target


def table_target(target) -> str:
    """`target` if the target table has it under exactly this name: what a store is written for."""
    plain_target(target)
    try:
        row = targets.get(target)
    except targets.UnknownTargetError as e:
        raise StoreError(str(e)) from None
    if row.arch != target:
        raise StoreError(f"target {target!r}: a store names its target as the table does ({row.arch!r})")
    return target


def entry_file(sid: str) -> str:
    """The one relative path an entry's code object may have: <id>.co, beside the manifest."""
    if not isinstance(sid, str) or not SPEC_ID.fullmatch(sid):
        raise StoreError(f"spec id {sid!r} is not a plain name")
    return f"{sid}.co"
