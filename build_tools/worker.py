"""A compile worker: a fresh process per spec (see pool.py for why), with stdout/stderr sent to a
log file, so when FlyDSL aborts the process (an MLIR assertion) the parent still has the diagnostic
and fails only that spec.
"""
import os
import traceback


def compile_spec_in_process(family: str, params: dict, target):
    """Compile one spec here for `target`, a targets.py row (the caller has set up the toolchain
    environment). The row travels as a value: a worker never looks its target up in its own table."""
    from ..kernel_defs import registry
    from .flydsl_compile import compile_family_spec
    return compile_family_spec(registry.get_family(family), params, target)


def run_one(conn, log_path: str, toolkit_root: str, family: str, params: dict, target) -> None:
    from .lifetime import worker_dies_with_server
    worker_dies_with_server()
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    from .toolchain import setup_process_env
    setup_process_env(toolkit_root, target.arch)   # a no-op rewrite when the fork server's preload did it
    try:
        conn.send(("ok", compile_spec_in_process(family, params, target).as_dict()))
    except Exception:  # a Python-level compile error fails this spec only
        conn.send(("error", traceback.format_exc()))
    conn.close()
