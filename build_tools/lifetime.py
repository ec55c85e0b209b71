"""Compile processes never outlive the build or JIT process that asked for them.

The chain is: parent (build CLI or a serving process) -> fork server (preloaded FlyDSL) -> one worker
per spec, each the leader of its own process group -> the linkers FlyDSL starts (same group). The
fork server stays alive while any worker holds its "alive" pipe, so a hung worker keeps it (and the
resource tracker, which holds the parent's stdout/stderr) running after the parent is gone. Hence:
- the fork server gets SIGTERM when its parent dies (PR_SET_PDEATHSIG) and then kills every worker's
  process group, linkers included, and exits;
- a worker gets SIGKILL when the fork server dies (in case the server itself was killed);
- the parent kills a worker's whole group on a per-spec timeout, not just the worker.
Linux only (prctl); elsewhere these calls do nothing and a timeout still kills the group where the
platform has process groups.
"""
import ctypes
import os
import signal
import sys

from ..formats import env

PR_SET_PDEATHSIG = 1                  # linux/prctl.h
PARENT_ENV = "_FLYAOT_COMPILE_PARENT"  # pid of the process the fork server must die with (internal)


def _prctl_pdeathsig(sig: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0


def kill_group(pid: int) -> None:
    """SIGKILL the process group led by `pid` (a worker and its linkers); the process alone if it has
    not made its group yet."""
    try:
        os.killpg(pid, signal.SIGKILL)
        return
    except (ProcessLookupError, PermissionError, AttributeError):
        pass
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _children() -> list:
    """This process's child pids (Linux /proc; [] where unavailable)."""
    pids = []
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/children") as f:
                pids.extend(int(p) for p in f.read().split())
    except OSError:
        return []
    return pids


def _server_parent_died(signum, frame):
    for pid in _children():
        kill_group(pid)
    os._exit(1)


def server_dies_with_parent() -> None:
    """In the fork server (its preload): on the parent's death, kill every worker group and exit."""
    expected = env.value(PARENT_ENV)
    signal.signal(signal.SIGTERM, _server_parent_died)
    if _prctl_pdeathsig(signal.SIGTERM) and expected and os.getppid() != expected:
        _server_parent_died(signal.SIGTERM, None)       # the parent died before prctl took effect


def worker_dies_with_server() -> None:
    """In a freshly forked worker: lead a process group of its own (its linkers join it), drop the
    server's SIGTERM handler, and die with the server."""
    server = os.getppid()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        os.setpgid(0, 0)
    except OSError:
        pass
    if _prctl_pdeathsig(signal.SIGKILL) and os.getppid() != server:
        os._exit(1)
