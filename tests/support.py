"""Helpers shared by test folders (importable as `tests.support`: the repository root conftest puts
the root on sys.path)."""
import contextlib
import json
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


@contextlib.contextmanager
def emulated_store(root: pathlib.Path, *build_args):
    """Build specs with the real build CLI (`build_args`, e.g. "--family", "mqa_prefill") into
    root/store and serve that store to flyaot.runtime on the emulator with the JIT off.
    Yields (store path, manifest dict)."""
    import pytest

    from flyaot import runtime
    store = root / "store"
    run_build("build", *build_args, "--out", store, "--cache", root / "cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FLYAOT_PREBUILT_PATH", str(store))
        mp.setenv("FLYAOT_DEVICE", "emu")
        mp.setenv("FLYAOT_DISABLE_JIT", "1")
        mp.setenv("FLYAOT_CACHE_DIR", str(root / "user-cache"))
        runtime.reset()
        try:
            yield store, json.loads((store / "manifest.json").read_text())
        finally:
            runtime.reset()


def miss_records(path) -> list:
    """The raw records of a FLYAOT_RECORD_MISSES file, in the order they were written."""
    return [json.loads(line) for line in pathlib.Path(path).read_text().splitlines() if line.strip()]
