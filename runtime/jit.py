"""JIT fallback policy: whether a missing spec may be compiled here, and the call that compiles it with
the build's own function and adds it to the user cache (`store.write.add_entry`: locked, atomic), so
it is then loaded exactly like a prebuilt code object.
"""
import importlib.util
import logging
import time

from .. import __version__, targets
from ..store.errors import LockTimeout
from ..store.write import add_entry
from .config import EXPECTED_FLYDSL
from .errors import JitError

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


def default_compile(spec):
    from ..build_tools.jit import compile_spec
    return compile_spec(spec)


def default_toolchain() -> dict:
    from ..build_tools import toolchain
    return {"flydsl": toolchain.flydsl_version(), "lld": toolchain.find_linker().version}


def publish(root, spec, *, timeout: float, compile_fn=default_compile, toolchain_fn=default_toolchain,
            stale_id=None) -> bool:
    """Make sure the user cache at `root` holds `spec`; True if this call compiled it. An entry whose id is
    `stale_id` (built from older kernel sources, or corrupt) does not count and is replaced.

    compile_fn(spec) -> (code object bytes, manifest entry incl. its content "id"); toolchain_fn() -> the
    toolchain fingerprint recorded when the cache manifest is first created.
    """
    t0 = time.monotonic()

    def produce():
        # Logged once this process holds the spec's lock: it is the one that compiles.
        log.warning("flyaot: %s is not prebuilt; compiling it with FlyDSL now (about %s s)", spec.key,
                    EXPECTED_SECONDS)
        try:
            return compile_fn(spec)
        except Exception as e:
            raise JitError(f"flyaot: JIT compile of {spec.key} failed: {e}") from e

    try:
        compiled = add_entry(root, spec, produce, timeout=timeout, toolchain=toolchain_fn, stale_id=stale_id)
    except LockTimeout as e:
        raise JitError(str(e)) from None
    if compiled:
        log.info("flyaot: compiled %s in %.2f s into %s", spec.key, time.monotonic() - t0, root)
    return compiled
