"""Helpers shared by test folders (importable as `tests.support`: the repository root conftest puts
the root on sys.path)."""
import os
import pathlib
import subprocess
import sys


def run_build(*args, env_extra=None, check=True):
    """Run the real build CLI in its own process, as a user would."""
    env = dict(os.environ, **(env_extra or {}))
    proc = subprocess.run([sys.executable, "-m", "flyaot.build_tools", *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=900)
    if check and proc.returncode != 0:
        raise AssertionError(f"build failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def store_files(root: pathlib.Path) -> dict:
    """Every file of a store, relative path -> bytes."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
