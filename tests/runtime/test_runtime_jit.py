"""JIT fallback: several processes missing one spec compile it once, publish it atomically into the
user cache, and launch it through the same path as a prebuilt code object; locks are bounded and
released by the kernel when a holder dies."""
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch
from runtime_helpers import PROBE64, make_config

from flyaot.formats import codeobject
from flyaot.formats.manifest import Spec
from flyaot.kernel_defs.probe import plan as probe
from flyaot.runtime import jit
from flyaot.runtime.dispatch import Runtime
from flyaot.runtime.errors import JitError
from flyaot.store.slots import ArgLayout
from flyaot.store import lock
from flyaot.store.errors import LockTimeout
from flyaot.store.index import Store, cache_store
from flyaot.store.write import CACHE_MARKER, lock_name

HERE = pathlib.Path(__file__).parent

LAUNCH_SCRIPT = textwrap.dedent("""
    import logging, sys, torch
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    from runtime_helpers import make_config
    from flyaot.kernel_defs.probe import plan as probe
    from flyaot.runtime.dispatch import Runtime
    cfg = make_config(__import__("pathlib").Path(sys.argv[1]), cache=sys.argv[2], disable_jit=False)
    out = torch.zeros(100)
    Runtime(cfg).launch(probe.plan(out, float(sys.argv[3])))
    assert torch.equal(out, torch.full((100,), float(sys.argv[3]) + 1.0)), out
    print("LAUNCHED OK")
""")


def _env():
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))


@pytest.mark.slow
def test_concurrent_processes_compile_once_publish_atomically_and_launch(tmp_path):
    cache = tmp_path / "cache"
    procs = [subprocess.Popen([sys.executable, "-c", LAUNCH_SCRIPT, str(tmp_path / f"p{i}"), str(cache), str(i)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
             for i in range(3)]
    results = [p.communicate(timeout=600) + (p.returncode,) for p in procs]
    for out, err, rc in results:
        assert rc == 0 and "LAUNCHED OK" in out, err
    compiled = [err for _, err, _ in results if "compiling it with FlyDSL now" in err]
    assert len(compiled) == 1, [err for _, err, _ in results]
    assert f"compiled {PROBE64} in" in compiled[0]
    # The cache is a valid store (schema, toolchain fingerprint, entry checks) with one checked spec,
    # the device target's: <cache>/<version>/gfx950/
    store = Store.open(cache_store(cache, "gfx950"), "cache", missing_ok=False)
    (sid, entry), = store.by_key.values()
    data = store.read(sid, entry)
    ArgLayout.from_entry(entry, "jit").cross_check(codeobject.parse(data).kernel(entry["symbol"]), entry, "jit")
    files = sorted(p.relative_to(store.root).as_posix() for p in cache.rglob("*") if p.is_file())
    lock = "locks/" + lock_name(Spec.make("probe", {"block": 64, "behavior": "ok"}, "gfx950"))
    assert files == sorted(["manifest.json", entry["file"], "locks/manifest.lock", lock, CACHE_MARKER])
    # A later process finds it in the cache with the JIT disabled.
    rt = Runtime(make_config(tmp_path, cache=cache))
    out = torch.zeros(5)
    rt.launch(probe.plan(out, 7.0))
    assert torch.equal(out, torch.full((5,), 8.0))


@pytest.mark.slow
def test_a_script_without_a_main_guard_compiles_and_launches(tmp_path):
    """A script run by path with no `if __name__ == "__main__"` guard: the compile process must not run
    it again (a forkserver child imports its parent's main script; the copy called the same op and
    waited for the spec lock its own parent held until the compile failed, which fails the launch)."""
    script = tmp_path / "unguarded.py"
    script.write_text(LAUNCH_SCRIPT)
    p = subprocess.run([sys.executable, str(script), str(tmp_path / "p"), str(tmp_path / "cache"), "3"],
                       capture_output=True, text=True, timeout=300,
                       env=dict(_env(), FLYAOT_BUILD_CACHE=str(tmp_path / "build-cache")))   # a real compile
    assert p.returncode == 0 and "LAUNCHED OK" in p.stdout, p.stderr
    assert p.stderr.count("compiling it with FlyDSL now") == 1, p.stderr


HOLDER = textwrap.dedent("""
    import logging, sys, time
    logging.basicConfig(level=logging.INFO)
    from flyaot.formats.manifest import Spec
    from flyaot.runtime import jit
    spec = Spec.make("probe", {"block": 64, "behavior": "hang"}, "gfx950")
    def compile_forever(spec):
        time.sleep(3600)
    jit.publish(sys.argv[1], spec, timeout=10, compile_fn=compile_forever, toolchain_fn=dict)
""")


def test_waits_are_bounded_and_a_dead_holder_releases_the_lock(tmp_path):
    spec = Spec.make("probe", {"block": 64, "behavior": "hang"}, "gfx950")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], stderr=subprocess.PIPE, text=True,
                              env=_env())
    try:
        line = ""
        while "compiling it with FlyDSL now" not in line:      # the holder has the spec lock now
            line = holder.stderr.readline()
            assert line or holder.poll() is None, "holder exited early"
        t0 = time.monotonic()
        with pytest.raises(JitError, match=f"timed out after 0.5 s waiting for .*{lock_name(spec)}"):
            jit.publish(tmp_path, spec, timeout=0.5, compile_fn=_must_not_compile)
        assert time.monotonic() - t0 < 5
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # The kernel released the dead holder's flock: this call gets the lock and reaches the compiler.
    with pytest.raises(JitError, match="JIT compile of .* failed: reached the compiler"):
        jit.publish(tmp_path, spec, timeout=5, compile_fn=_fails)
    # nothing but the locks and the cache marker (written first, when the cache was claimed)
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and p.parent.name != "locks" and p.name != CACHE_MARKER]


def _must_not_compile(spec):
    raise AssertionError("compiled while another process held the lock")


def _fails(spec):
    raise RuntimeError("reached the compiler")


def test_lock_helper_excludes_within_one_process_too(tmp_path):
    path = str(tmp_path / "locks" / "x.lock")
    with lock.exclusive(path, timeout=1, what="testing"):
        with pytest.raises(LockTimeout, match="x.lock"):
            with lock.exclusive(path, timeout=0.2, what="testing"):
                pass
    with lock.exclusive(path, timeout=0.2, what="testing"):
        assert os.path.exists(path)
    assert os.path.exists(path)          # lock files are never deleted


@pytest.mark.slow
def test_entry_built_from_other_kernel_sources_is_not_used(tmp_path, caplog):
    from runtime_helpers import read_manifest, write_manifest

    from flyaot.runtime.errors import MissingSpecError
    from flyaot.runtime.dispatch import current_id
    home = tmp_path / "cache"
    cache = cache_store(home, "gfx950")
    out = torch.zeros(8)
    Runtime(make_config(tmp_path, cache=home, disable_jit=False)).launch(probe.plan(out, 1.0))
    (sid, entry), = read_manifest(cache)["specs"].items()
    assert sid == current_id(Spec.make("probe", {"block": 64, "behavior": "ok"}, "gfx950"))
    # Re-label the entry as a product of other kernel sources: a different content id, same bytes.
    old = "0" * 24
    (cache / entry["file"]).rename(cache / f"{old}.co")
    manifest = read_manifest(cache)
    manifest["specs"] = {old: dict(entry, id=old, file=f"{old}.co")}
    write_manifest(cache, manifest)
    # Without the JIT it is a miss that says why ...
    with pytest.raises(MissingSpecError, match="only from other kernel sources"):
        Runtime(make_config(tmp_path, cache=home)).launch(probe.plan(out, 2.0))
    # ... with the JIT it is rebuilt from the current sources and replaces the old entry.
    with caplog.at_level("WARNING", logger="flyaot.runtime"):
        Runtime(make_config(tmp_path, cache=home, disable_jit=False)).launch(probe.plan(out, 4.0))
    assert torch.equal(out, torch.full((8,), 5.0))
    assert "built from other kernel sources" in caplog.text
    assert list(read_manifest(cache)["specs"]) == [sid]
    # The compiles ran in a worker: FlyDSL's compile-only settings never entered this process.
    assert "COMPILE_ONLY" not in os.environ and "FLYDSL_GPU_ARCH" not in os.environ
