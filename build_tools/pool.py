"""Run compiles in spawned worker processes: per-spec timeout, crash isolation, progress."""
import logging
import multiprocessing
import multiprocessing.connection
import os
import pathlib
import sys
import tempfile
import time
from dataclasses import dataclass

from . import worker

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


class _Worker:
    def __init__(self, ctx, logdir: pathlib.Path, index: int, toolkit_root: str):
        self.log_path = logdir / f"worker{index}.log"
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=worker.main, args=(child, str(self.log_path), toolkit_root), daemon=True)
        self.proc.start()
        child.close()
        self.job = None
        self.started = 0.0
        self.log_offset = 0

    def submit(self, spec):
        self.job = spec
        self.started = time.monotonic()
        self.log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        self.conn.send((spec.family, spec.param_dict))

    def log_tail(self, limit=4000) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self.log_offset)
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        return text[-limit:]

    def kill(self):
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)
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


def compile_all(specs, *, jobs: int, timeout: float, toolkit_root: str, on_result=None) -> list:
    """Compile every spec; return Outcomes in spec order. Never raises for a failing spec."""
    if not specs:
        return []
    ctx = multiprocessing.get_context("spawn")
    jobs = max(1, min(jobs, len(specs)))
    outcomes = {}
    pending = list(reversed(specs))
    progress = Progress(len(specs))
    with tempfile.TemporaryDirectory(prefix="flyaot-build-") as tmp:
        logdir = pathlib.Path(tmp)
        workers = [_Worker(ctx, logdir, i, toolkit_root) for i in range(jobs)]
        spawned = jobs
        try:
            while len(outcomes) < len(specs):
                for i, w in enumerate(workers):
                    if w.job is None and pending:
                        w.submit(pending.pop())
                busy = [w for w in workers if w.job is not None]
                ready = multiprocessing.connection.wait([w.conn for w in busy] + [w.proc.sentinel for w in busy],
                                                        timeout=0.5)
                for i, w in enumerate(workers):
                    if w.job is None:
                        continue
                    outcome = None
                    if w.conn in ready or w.conn.poll():
                        try:
                            status, payload = w.conn.recv()
                            outcome = Outcome(w.job, status == "ok", payload if status == "ok" else None,
                                              "" if status == "ok" else payload)
                        except (EOFError, OSError):
                            outcome = None
                    if outcome is None and not w.proc.is_alive():
                        outcome = Outcome(w.job, False, error=f"compile process died (exit code {w.proc.exitcode})"
                                          f"\n{w.log_tail()}")
                    elif outcome is None and time.monotonic() - w.started > timeout:
                        outcome = Outcome(w.job, False, error=f"compile timed out after {timeout:.0f}s\n{w.log_tail()}")
                    if outcome is None:
                        continue
                    outcome.seconds = time.monotonic() - w.started
                    outcomes[outcome.spec.key] = outcome
                    progress.step(outcome)
                    if on_result:
                        on_result(outcome)
                    w.job = None
                    if not w.proc.is_alive() or outcome.error.startswith("compile timed out"):
                        w.kill()
                        workers[i] = _Worker(ctx, logdir, spawned, toolkit_root)
                        spawned += 1
        finally:
            progress.close()
            for w in workers:
                try:
                    w.conn.send(None)
                except (OSError, BrokenPipeError):
                    pass
            for w in workers:
                w.proc.join(10)
                w.kill()
    return [outcomes[s.key] for s in specs]
