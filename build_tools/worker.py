"""A compile worker process: sets up the toolchain once, then compiles one spec per request.

Runs under the spawn start method with its stdout/stderr sent to a log file, so when FlyDSL aborts
the whole process (an MLIR assertion) the parent still has the diagnostic and fails only that spec.
"""
import importlib
import os
import traceback


def compile_spec_in_process(family: str, params: dict):
    """Compile one spec here; the same function serves build workers and the runtime's JIT."""
    kernel = importlib.import_module(f"flyaot.kernel_defs.{family}.kernel")
    return kernel.build(dict(params))


def main(conn, log_path: str, toolkit_root: str) -> None:
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    from .toolchain import setup_process_env
    setup_process_env(toolkit_root)
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        family, params = msg
        try:
            conn.send(("ok", compile_spec_in_process(family, params).as_dict()))
        except Exception:  # a Python-level compile error fails this spec only
            conn.send(("error", traceback.format_exc()))
