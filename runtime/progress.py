"""Progress of long work (emulator launches, selftest cases): a bar with rate and ETA on a terminal,
plain lines otherwise.

On a terminal (stderr is a TTY) the bar is redrawn in place on stderr. Elsewhere each report is a plain
line: printed on stderr when a command asked for them (`flyaot selftest` / `bench` / `model` call
`plain_lines(True)`), else logged at INFO (so a serving process stays quiet by default). Work that ends
within `delay` seconds shows nothing.
"""
import logging
import sys
import time

log = logging.getLogger(__name__)
_plain = False


def plain_lines(on: bool) -> None:
    """Print plain progress lines on stderr when it is not a terminal (instead of logging them)."""
    global _plain
    _plain = on


def _duration(s: float) -> str:
    s = int(s)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


class Progress:
    """progress = Progress("kernel x", total=512, unit="workgroups"); progress.update(done); progress.close()"""

    def __init__(self, what: str, total: int, unit: str, *, delay: float = 2.0, every: float = 10.0,
                 stream=None, tty=None):
        self.what, self.total, self.unit, self.delay, self.every = what, max(int(total), 0), unit, delay, every
        self.stream = stream if stream is not None else sys.stderr
        self.tty = tty if tty is not None else bool(getattr(self.stream, "isatty", lambda: False)())
        self.start = time.monotonic()
        self._last = self.start if self.tty else float("-inf")    # plain lines: the first right after `delay`
        self.done, self.shown = 0, False

    def line(self) -> str:
        elapsed = time.monotonic() - self.start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        left = (self.total - self.done) / rate if rate > 0 and self.total else None
        eta = f"ETA {_duration(left)}" if left is not None else "ETA ?"
        parts = [f"{self.done}/{self.total} {self.unit}"]
        if rate > 0:
            parts.append(f"{rate:.1f} {self.unit}/s" if rate >= 1 else f"{1 / rate:.1f} s each")
        parts += [f"{_duration(elapsed)} elapsed", eta]
        return f"{self.what}: {', '.join(parts)}"

    def update(self, done: int) -> None:
        self.done = done
        now = time.monotonic()
        if now - self.start < self.delay:
            return
        if self.tty:
            if now - self._last >= 0.2 or done == self.total:
                width = 24
                fill = width * done // self.total if self.total else 0
                self.stream.write(f"\r\x1b[K[{'#' * fill}{'.' * (width - fill)}] {self.line()}")
                self.stream.flush()
                self._last, self.shown = now, True
        elif now - self._last >= self.every or (done == self.total and self.shown):
            self._emit(self.line())
            self._last, self.shown = now, True

    def clear(self) -> None:
        """Erase the bar (before printing a line of output under it)."""
        if self.tty and self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()

    def close(self) -> None:
        if self.tty and self.shown:
            self.clear()
            self.stream.write(self.line() + "\n")
            self.stream.flush()
        elif self.shown and self.done != self.total:
            self._emit(self.line())

    def _emit(self, text: str) -> None:
        if _plain:
            print(text, file=self.stream, flush=True)
        else:
            log.info("%s", text)
