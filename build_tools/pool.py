"""Run compiles in worker processes, one spec each: per-spec timeout, crash isolation, progress.

Why one process per spec, forked from a server that preloaded FlyDSL: compiles within one process are
not independent (measured with FlyDSL 0.5.0: compiling an mqa_decode spec a second time in the same
process changed its register allocation), and forking from a warmed-up server keeps the isolation
without paying ~1.2 s of imports per spec. The server starts with a fixed PYTHONHASHSEED and without
address-space randomisation: FlyDSL's native back end orders some instructions by the relative
addresses of its IR objects, and with randomisation off those depend only on what the lowering thread
allocated (flydsl_compile.py gives the lowering a thread of its own), so a spec's code object does not
depend on build order, spec subset, worker count or environment (tools/check_reproducible.py checks it).
"""
import contextlib
import ctypes
import logging
import multiprocessing
import multiprocessing.connection
import multiprocessing.forkserver
import os
import pathlib
import queue
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

from .. import targets
from . import lifetime, worker

log = logging.getLogger("flyaot.build")

PEAK_RSS_PER_WORKER = 600 * 2**20     # measured ~450 MB per compiling FlyDSL process, plus margin


@dataclass
class Outcome:
    spec: object
    ok: bool
    build: dict = None
    error: str = ""
    seconds: float = 0.0


def default_jobs() -> int:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        avail = cpus * PEAK_RSS_PER_WORKER
    return max(1, min(cpus, avail // PEAK_RSS_PER_WORKER))


ADDR_NO_RANDOMIZE = 0x0040000      # linux/personality.h
_START_LOCK = threading.Lock()       # os.environ and the personality are process-wide


@contextlib.contextmanager
def _reproducible_children():
    """Processes started inside get a fixed hash seed and no address-space randomisation; this
    process keeps its own settings (both are restored on exit)."""
    with _START_LOCK:
        saved_seed, saved_parent = os.environ.get("PYTHONHASHSEED"), os.environ.get(lifetime.PARENT_ENV)
        os.environ["PYTHONHASHSEED"] = "0"
        os.environ[lifetime.PARENT_ENV] = str(os.getpid())
        libc = ctypes.CDLL(None, use_errno=True)
        saved_persona = libc.personality(0xFFFFFFFF)
        if saved_persona == -1 or libc.personality(saved_persona | ADDR_NO_RANDOMIZE) == -1:
            log.warning("cannot disable address-space randomisation for compile workers; "
                        "code objects may then differ between builds")
        try:
            yield
        finally:
            if saved_persona != -1:
                libc.personality(saved_persona)
            for name, saved in (("PYTHONHASHSEED", saved_seed), (lifetime.PARENT_ENV, saved_parent)):
                if saved is None:
                    del os.environ[name]
                else:
                    os.environ[name] = saved


@contextlib.contextmanager
def _without_main_module():
    """Processes started inside do not run this process's __main__ again. A forkserver child imports the
    parent's main script (by path or module name) before the worker function runs: a script without an
    `if __name__ == "__main__"` guard whose op call JIT-compiles a spec ran again in the compile
    process, called the same op, and waited for the spec lock its own parent holds until the compile
    timed out. The worker needs nothing from __main__, so it starts as if the parent were an
    interactive session (no __file__, no __spec__). Used inside _reproducible_children, whose lock it
    relies on."""
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    saved = {k: main.__dict__[k] for k in ("__file__", "__spec__") if k in main.__dict__}
    main.__dict__.pop("__file__", None)
    main.__dict__["__spec__"] = None
    try:
        yield
    finally:
        main.__dict__.pop("__spec__", None)
        main.__dict__.update(saved)


class _Job:
    """One spec compiling in its own forked process."""

    def __init__(self, ctx, logdir: pathlib.Path, index: int, toolkit_root: str, spec):
        self.spec = spec
        self.log_path = logdir / f"job{index}.log"
        self.conn, child = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=worker.run_one, daemon=True,
                                args=(child, str(self.log_path), toolkit_root, spec.family, spec.param_dict,
                                      targets.get(spec.target)))
        self.started = time.monotonic()
        with _reproducible_children(), _without_main_module():
            self.proc.start()
        child.close()

    def log_tail(self, limit=4000) -> str:
        try:
            return self.log_path.read_bytes().decode("utf-8", "replace")[-limit:]
        except OSError:
            return ""

    def outcome(self, timeout: float):
        """The finished job's Outcome, or None while it is still running."""
        if self.conn.poll():
            try:
                status, payload = self.conn.recv()
                return Outcome(self.spec, status == "ok", payload if status == "ok" else None,
                               "" if status == "ok" else payload)
            except (EOFError, OSError):
                pass
        if not self.proc.is_alive():
            self.proc.join()
            return Outcome(self.spec, False, error=f"compile process died (exit code {self.proc.exitcode})"
                                                   f"\n{self.log_tail()}")
        if time.monotonic() - self.started > timeout:
            return Outcome(self.spec, False, error=f"compile timed out after {timeout:.0f}s\n{self.log_tail()}")
        return None

    def close(self):
        if self.proc.is_alive():
            lifetime.kill_group(self.proc.pid)       # the worker and the linkers it started
        self.proc.join(10)
        self.conn.close()


class Progress:
    """One status line on a terminal; periodic log lines otherwise (CI logs stay readable)."""

    def __init__(self, total: int, stream=None):
        self.total, self.done, self.failed = total, 0, 0
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.t0 = time.monotonic()
        self.last = 0.0

    def step(self, outcome: Outcome):
        self.done += 1
        self.failed += not outcome.ok
        now = time.monotonic()
        if self.tty:
            width = 30
            fill = int(width * self.done / max(self.total, 1))
            self.stream.write(f"\r[{'#' * fill}{'.' * (width - fill)}] {self.done}/{self.total} "
                              f"({self.failed} failed) {now - self.t0:5.1f}s {outcome.spec.key[:60]:60s}")
            self.stream.flush()
        elif now - self.last >= 5 or self.done == self.total:
            self.last = now
            log.info("compiled %d/%d (%d failed) in %.1fs", self.done, self.total, self.failed, now - self.t0)

    def close(self):
        if self.tty:
            self.stream.write("\n")


_keeper = None                       # (thread, queue) that starts the fork server, see _start_server


def _keep(requests):
    while True:
        fn, done, box = requests.get()
        try:
            box.append((True, fn()))
        except BaseException as e:  # handed back to the caller's thread
            box.append((False, e))
        done.set()


def _start_server(ctx) -> None:
    """Start the fork server (if it is not running) from the main thread or one that lives as long as
    the process: a parent-death signal follows the thread that started a process, so a server started
    by a short-lived thread (a JIT from a request thread) would die when that thread ends."""
    global _keeper
    if ctx.get_start_method() != "forkserver":
        return

    def start():
        with _reproducible_children():
            multiprocessing.forkserver.ensure_running()

    if threading.current_thread() is threading.main_thread():
        return start()
    with _START_LOCK:
        if _keeper is None:
            requests = queue.Queue()
            thread = threading.Thread(target=_keep, args=(requests,), name="flyaot-compile-server", daemon=True)
            thread.start()
            _keeper = (thread, requests)
    done, box = threading.Event(), []
    _keeper[1].put((start, done, box))
    done.wait()
    ok, value = box[0]
    if not ok:
        raise value


def _context():
    """Fork workers from a server that preloaded FlyDSL; where fork servers do not exist, spawn."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["flyaot.build_tools.preload"])
        return ctx
    return multiprocessing.get_context("spawn")


def compile_all(specs, *, jobs: int, timeout: float, toolkit_root: str, on_result=None) -> list:
    """Compile every spec, each in a process of its own; return Outcomes in spec order. Never raises
    for a failing spec."""
    if not (0 < timeout < float("inf")):        # nan would never time out, <= 0 would fail every spec
        raise ValueError(f"the per-spec timeout (--timeout, FLYAOT_BUILD_TIMEOUT) must be a finite number of "
                         f"seconds > 0, got {timeout!r}")
    if not specs:
        return []
    ctx = _context()
    _start_server(ctx)
    jobs = max(1, min(jobs, len(specs)))
    outcomes = {}
    pending = list(reversed(specs))
    running = []
    progress = Progress(len(specs))
    with tempfile.TemporaryDirectory(prefix="flyaot-build-") as tmp:
        logdir = pathlib.Path(tmp)
        started = 0
        try:
            while pending or running:
                while pending and len(running) < jobs:
                    running.append(_Job(ctx, logdir, started, toolkit_root, pending.pop()))
                    started += 1
                multiprocessing.connection.wait([j.conn for j in running] + [j.proc.sentinel for j in running],
                                                timeout=0.5)
                for job in list(running):
                    outcome = job.outcome(timeout)
                    if outcome is None:
                        continue
                    outcome.seconds = time.monotonic() - job.started
                    job.close()
                    running.remove(job)
                    outcomes[outcome.spec.key] = outcome
                    progress.step(outcome)
                    if on_result:
                        on_result(outcome)
        finally:
            progress.close()
            for job in running:
                job.close()
    return [outcomes[s.key] for s in specs]
