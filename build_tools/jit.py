"""The runtime's JIT fallback entry point: compile one spec in this process, gate it, describe it.

Uses exactly the build's compile function and gates, so a JIT-built kernel is indistinguishable
from a prebuilt one.
"""
from . import toolchain
from .build import finish_entry, spec_ids
from .worker import compile_spec_in_process

_linker = None


def compile_spec(spec):
    """Return (code_object_bytes, manifest_entry) or raise RuntimeError naming the spec."""
    global _linker
    if _linker is None:
        _linker = toolchain.setup_process_env()
    kb = compile_spec_in_process(spec.family, spec.param_dict)
    build = {"code_object": kb.code_object, "kernel_name": kb.kernel_name, "arg_names": list(kb.arg_names),
             "arg_ctypes": list(kb.arg_ctypes), "block": list(kb.block)}
    sid = spec_ids([spec], toolchain.flydsl_version())[spec.key]
    entry, reason = finish_entry(spec, sid, build)
    if reason:
        raise RuntimeError(f"JIT build of {spec.key} failed: {reason}")
    return kb.code_object, entry
