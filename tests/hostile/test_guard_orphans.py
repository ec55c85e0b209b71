"""No compile process outlives its build or JIT parent: real builds in a session of their own, real
hangs (the probe family's `hang` behaviour, a linker script that sleeps), real SIGKILLs; afterwards no
live process of that session is left, and a caller capturing the build's output gets EOF promptly."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from flyaot.build_tools import toolchain

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process lifetime is Linux-only")


def _session_procs(sid: int) -> list:
    """(pid, state, cmdline) of the live (not zombie) processes of session `sid`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")[:160]
        except OSError:
            continue
        state, session = fields[0], int(fields[3])
        if session == sid and state not in ("Z", "X"):
            found.append((int(name), state, cmd))
    return found


def _wait_for(predicate, timeout: float, step: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    return predicate()


def _worker_groups(sid: int) -> list:
    """Compile workers lead process groups of their own inside the session."""
    out = []
    for pid, _, _ in _session_procs(sid):
        try:
            if os.getpgid(pid) == pid and pid != sid:
                out.append(pid)
        except ProcessLookupError:
            pass
    return out


def _start(argv, tmp_path, env_extra=None):
    env = dict(os.environ, **(env_extra or {}))
    return subprocess.Popen([str(a) for a in argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp_path,
                            start_new_session=True)


def _hang_misses(tmp_path):
    path = tmp_path / "misses.jsonl"
    path.write_text(json.dumps({"family": "probe", "params": {"block": 64, "behavior": "hang"}}) + "\n")
    return path


def _kill_and_check(proc):
    sid = proc.pid
    try:
        assert _wait_for(lambda: _worker_groups(sid), 120), f"no compile worker started: {_session_procs(sid)}"
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        left = _wait_for(lambda: not _session_procs(sid) or None, 30)
        assert left, f"processes outlived their SIGKILLed parent: {_session_procs(sid)}"
    finally:
        for pid, _, _ in _session_procs(sid):      # never leave our own test's processes behind
            os.kill(pid, signal.SIGKILL)
        proc.stdout.close()
        proc.stderr.close()


def test_sigkill_of_the_build_leaves_no_process(tmp_path):
    proc = _start([sys.executable, "-m", "flyaot.build_tools", "build", "--from-misses", _hang_misses(tmp_path),
                   "--out", tmp_path / "out", "--cache", tmp_path / "cache", "--timeout", 300], tmp_path)
    _kill_and_check(proc)


def test_sigkill_of_a_jit_parent_leaves_no_process(tmp_path):
    # The runtime's JIT fallback compiles through build_tools.jit.compile_spec, in a request thread.
    code = textwrap.dedent(f"""
        import threading
        from flyaot.build_tools.jit import compile_spec
        from flyaot.formats.manifest import Spec
        spec = Spec.make("probe", {{"block": 64, "behavior": "hang"}}, "gfx950")
        t = threading.Thread(target=compile_spec, args=(spec,), kwargs={{"timeout": 300}})
        t.start()
        t.join()
    """)
    proc = _start([sys.executable, "-c", code], tmp_path, {"FLYAOT_BUILD_CACHE": str(tmp_path / "cache")})
    _kill_and_check(proc)


def test_hanging_linker_timeout_closes_the_pipes(tmp_path):
    real = toolchain.find_linker()
    lld = tmp_path / "hanging-ld.lld"
    # Answers --version like the real linker, then "links" forever in a child process (sh + sleep).
    lld.write_text("#!/bin/sh\ncase \"$1\" in --version) exec " + " ".join(real.command)
                   + " --version;; esac\nsleep 600\n")
    lld.chmod(0o755)
    proc = _start([sys.executable, "-m", "flyaot.build_tools", "build", "--family", "probe", "--jobs", 1,
                   "--timeout", 10, "--out", tmp_path / "out", "--cache", tmp_path / "cache"],
                  tmp_path, {"FLYAOT_LLD": str(lld)})
    sid = proc.pid
    try:
        # EOF only once every holder of the pipes is gone (orphaned linkers and the fork server used to
        # hold them for as long as the linker ran); the sleeping linkers would run for 600 s.
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 1, err
        assert err.decode().count("compile timed out after 10s") == 2
        # (a process killed a moment ago may still be exiting)
        assert _wait_for(lambda: not _session_procs(sid) or None, 10), _session_procs(sid)
    finally:
        for pid, _, _ in _session_procs(sid):
            os.kill(pid, signal.SIGKILL)


def test_compile_server_outlives_the_thread_that_asked_for_it(tmp_path):
    # The parent-death signal follows the starting thread: a JIT from a request thread that then ends
    # must not take the compile server down with it (the server is started from a long-lived thread).
    code = textwrap.dedent("""
        import multiprocessing.forkserver as fs, os, threading, time
        from flyaot.build_tools.jit import compile_spec
        from flyaot.formats.manifest import Spec
        def job(block):
            compile_spec(Spec.make("probe", {"block": block, "behavior": "ok"}, "gfx950"), timeout=120)
        t = threading.Thread(target=job, args=(64,))
        t.start()
        t.join()
        pid = fs._forkserver._forkserver_pid
        time.sleep(1)
        assert os.waitpid(pid, os.WNOHANG) == (0, 0), "the compile server died with the request thread"
        job(128)
        assert fs._forkserver._forkserver_pid == pid
        print("one server", pid)
    """)
    proc = _start([sys.executable, "-c", code], tmp_path, {"FLYAOT_BUILD_CACHE": str(tmp_path / "cache")})
    try:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0 and b"one server" in out, err.decode()[-3000:]
    finally:
        for pid, _, _ in _session_procs(proc.pid):
            os.kill(pid, signal.SIGKILL)
