"""The runtime's JIT fallback entry point: one spec compiled exactly as the build compiles it.

The compile runs in a worker process of its own, as in the build: FlyDSL's compile-only environment
never enters the serving process, and an MLIR abort kills the worker, not the server. The build
cache is consulted first, so a spec a developer already built is not compiled again.
"""
from .build import compile_specs


def compile_spec(spec, *, timeout: float = 300.0):
    """Return (code_object_bytes, manifest_entry) or raise RuntimeError naming the spec."""
    report = compile_specs([spec], jobs=1, timeout=timeout)
    if report.failures:
        raise RuntimeError(f"JIT build of {spec.key} failed: {report.failures[spec.key]}")
    (sid, entry), = report.entries.items()
    return report.blobs[sid], entry
