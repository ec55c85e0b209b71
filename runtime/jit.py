"""JIT fallback: compile one missing spec with the build's own function and publish it into the user
cache atomically, so it is then loaded exactly like a prebuilt code object.

Publishing protocol (safe for many threads and processes):
  1. flock locks/<key hash>.lock: one compiler per spec; the others wait (bounded), then find it.
  2. Re-read the cache manifest; if the spec is there now, stop.
  3. Compile; write <target>/<id>.co via temp file + fsync + os.replace (+ directory fsync).
  4. Under flock locks/manifest.lock, re-read the manifest, add the entry, write it the same way.
A reader never sees a partial file: names only ever appear through os.replace of complete files.
"""
import hashlib
import importlib.util
import logging
import os
import pathlib
import time

from .. import __version__, targets
from ..formats import manifest as mf
from . import locks
from .config import EXPECTED_FLYDSL
from .errors import JitError
from .stores import SPEC_ID, open_user_cache

log = logging.getLogger("flyaot.runtime")

EXPECTED_SECONDS = "1-5"     # measured: 0.2-1.2 s per spec in a warm process, +2 s to import FlyDSL


def unavailable_reason(config, target: str) -> str:
    """Why the JIT may not run here ('' when it may). Never imports flydsl."""
    try:
        targets.get(target)
    except targets.UnknownTargetError:
        return f"the JIT compiles for {', '.join(sorted(targets.TARGETS))} only and the current device is {target}"
    if config.disable_jit:
        return "FLYAOT_DISABLE_JIT is set"
    if importlib.util.find_spec("flydsl") is None:
        return "FlyDSL is not installed (`python -m pip install flyaot[jit]` enables the JIT fallback)"
    from importlib.metadata import version
    installed = version("flydsl")
    if installed != EXPECTED_FLYDSL:
        return f"FlyDSL {installed} is installed, flyaot {__version__} compiles with FlyDSL {EXPECTED_FLYDSL}"
    return ""


def lock_name(spec) -> str:
    """Lock file name for a spec: a hash of its key (known before compiling, unlike the content id)."""
    return hashlib.sha256(spec.key.encode()).hexdigest()[:24] + ".lock"


def _write_atomic(path: pathlib.Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _cached_ids(root: pathlib.Path) -> dict:
    """spec key -> content id of the user cache's entries (none if the cache is refused)."""
    return {key: sid for key, (sid, _) in open_user_cache(root).by_key.items()}


def default_compile(spec):
    from ..build_tools.jit import compile_spec
    return compile_spec(spec)


def default_toolchain() -> dict:
    from ..build_tools import toolchain
    return {"flydsl": toolchain.flydsl_version(), "lld": toolchain.find_linker().version}


def publish(root, spec, *, timeout: float, compile_fn=default_compile, toolchain_fn=default_toolchain,
            stale_id=None) -> bool:
    """Make sure the user cache at `root` holds `spec`; True if this call compiled it. An entry whose id is
    `stale_id` (built from older kernel sources) does not count and is replaced.

    compile_fn(spec) -> (code object bytes, manifest entry incl. its content "id"); toolchain_fn() -> the
    toolchain fingerprint recorded when the cache manifest is first created.
    """
    root = pathlib.Path(root)
    with locks.exclusive(str(root / "locks" / lock_name(spec)), timeout=timeout, what=f"compiling {spec.key}"):
        cached = _cached_ids(root).get(spec.key)
        if cached is not None and cached != stale_id:
            return False
        target_dir = root / spec.target
        target_dir.mkdir(parents=True, exist_ok=True)
        log.warning("flyaot: %s is not prebuilt; compiling it with FlyDSL now (about %s s)", spec.key,
                    EXPECTED_SECONDS)
        t0 = time.monotonic()
        try:
            code_object, entry = compile_fn(spec)
        except Exception as e:
            raise JitError(f"flyaot: JIT compile of {spec.key} failed: {e}") from e
        sid = entry.get("id")
        if entry.get("key") != spec.key or not isinstance(sid, str) or not SPEC_ID.fullmatch(sid):
            raise JitError(f"flyaot: JIT of {spec.key} returned an entry for {entry.get('key')!r} "
                           f"with id {sid!r}")
        co_path = target_dir / f"{sid}.co"
        for stale in target_dir.glob(f".{sid}.co.*.tmp"):
            stale.unlink()        # left by a compiler that died mid-write; we hold this spec's lock
        entry = dict(entry, file=f"{spec.target}/{sid}.co", size=len(code_object),
                     sha256=mf.sha256_hex(code_object))
        _write_atomic(co_path, code_object)
        with locks.exclusive(str(root / "locks" / "manifest.lock"), timeout=timeout, what="updating the manifest"):
            path = root / mf.MANIFEST_NAME
            for stale in root.glob(f".{mf.MANIFEST_NAME}.*.tmp"):
                stale.unlink()
            manifest = open_user_cache(root).manifest
            if not manifest["specs"]:      # new, empty or refused (another flyaot version): start afresh
                manifest = mf.empty_manifest(flyaot_version=__version__, toolchain=toolchain_fn(), target=spec.target)
            manifest["specs"] = {k: e for k, e in manifest["specs"].items() if e["key"] != spec.key}
            manifest["specs"][sid] = entry
            _write_atomic(path, mf.pretty_json(manifest))
        log.info("flyaot: compiled %s in %.2f s into %s", spec.key, time.monotonic() - t0, co_path)
        return True
