"""Every environment variable that configures flyaot, as data: name, type, default, meaning and who
reads it (every FLYAOT_* variable, plus XDG_CACHE_HOME and ROCM_PATH where flyaot reads them).

The one table the configuration reads through (`value`), `flyaot env` lists (every row, with its
current value, an invalid one marked) and docs/environment.md is generated from
(`markdown_table`). A leaf like the rest of `formats/`, so the runtime, the build tools, the kernel
definitions and the emulator all read their variables here without an upward import.

Rules every variable follows: unset and empty mean the same, the default; any other value either
parses as its type or is an `EnvError`, one line naming the variable, its value and what it takes.
"""
import math
import os
import shlex
from dataclasses import dataclass

_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class EnvError(ValueError):
    """A variable's value cannot work; the message names the variable."""


@dataclass(frozen=True)
class Var:
    name: str
    type: str            # a key of _PARSERS
    default: object      # what unset or empty gives (None: the reader derives it, as `default_doc` says)
    meaning: str
    readers: tuple       # the shipped modules that read it
    default_doc: str = ""    # the default as the docs state it, where it is not `default` itself
    choices: tuple = ()
    internal: bool = False   # set by flyaot for its own child processes, never by a user

    @property
    def default_text(self) -> str:
        if self.default_doc:
            return self.default_doc
        if self.type == "flag":
            return "0 (off)"
        return "unset" if self.default is None else str(self.default)

    def parse(self, raw):
        """The value `raw` (the variable's text, or None for unset) stands for; EnvError if none."""
        if raw is None or raw.strip() == "":
            return self.default
        return _PARSERS[self.type](self, raw.strip())

    def read(self, environ=None):
        return self.parse((os.environ if environ is None else environ).get(self.name))


def _bad(var: Var, raw: str, expected: str):
    raise EnvError(f"{var.name}={raw!r}: expected {expected} (unset or empty: {var.default_text})")


def _flag(var, raw):
    low = raw.lower()
    if low in _TRUE or low in _FALSE:
        return low in _TRUE
    _bad(var, raw, f"a flag ({'/'.join(_TRUE)} or {'/'.join(_FALSE)})")


def _seconds(var, raw):
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not (0 < seconds < math.inf):     # nan would never time out, 0 or less never wait
        _bad(var, raw, "a finite number of seconds > 0")
    return seconds


def _count(var, raw):
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        _bad(var, raw, "a whole number >= 1")
    return n


def _choice(var, raw):
    low = raw.lower()
    if "on" in var.choices and low in _TRUE:
        return "on"
    if "off" in var.choices and low in _FALSE:
        return "off"
    if low not in var.choices:
        _bad(var, raw, f"one of {', '.join(var.choices)}")
    return low


def _level(var, raw):
    if raw.upper() not in LEVELS:
        _bad(var, raw, f"a logging level ({', '.join(LEVELS)})")
    return raw.upper()


def _command(var, raw):
    try:
        return tuple(shlex.split(raw))
    except ValueError as e:
        _bad(var, raw, f"a command line ({e})")


def _paths(var, raw):
    return tuple(p for p in raw.split(os.pathsep) if p)


def _schedule(var, raw):
    kind, _, seed = raw.lower().partition(":")
    if raw.lower() in ("turn", "in-turn", "off", "0"):
        return None
    if kind != "random" or not seed.strip().lstrip("-").isdigit():
        _bad(var, raw, "'random:SEED' (an integer seed) or 'turn'")
    return int(seed)


_PARSERS = {"flag": _flag, "seconds": _seconds, "count": _count, "choice": _choice, "level": _level,
            "command": _command, "path": lambda var, raw: raw, "paths": _paths, "pid": _count,
            "schedule": _schedule}

_TYPE_DOC = {"flag": "flag", "seconds": "seconds > 0", "count": "integer >= 1", "choice": "one of",
             "level": "logging level", "command": "command line", "path": "path",
             "paths": "paths (os.pathsep-separated)", "pid": "process id",
             "schedule": "`turn` or `random:SEED`"}

VARIABLES = (
    # the runtime
    Var("FLYAOT_PREBUILT_PATH", "paths", (), "extra stores (add-on packs), searched after the package's own store "
        "in the order given", ("runtime/config.py",), default_doc="none"),
    Var("FLYAOT_CACHE_DIR", "path", None, "the user cache folder: the JIT publishes into its store of the "
        "device's target, `<dir>/<version>/<target>/`", ("runtime/config.py",),
        default_doc="`$XDG_CACHE_HOME/flyaot/`"),
    Var("FLYAOT_DISABLE_JIT", "flag", False, "never JIT: a spec no store holds is an error naming the nearest "
        "prebuilt specs and the build command", ("runtime/config.py",)),
    Var("FLYAOT_RECORD_MISSES", "path", None, "file each miss is appended to (JSON lines), the input of "
        "`python -m flyaot.build_tools build --from-misses FILE`; a file that cannot be written is a warning, "
        "never the miss's error", ("runtime/config.py",), default_doc="no recording"),
    Var("FLYAOT_DEVICE", "choice", "", "force a driver", ("runtime/config.py",), choices=("emu", "hip", "cuda"),
        default_doc="emu for CPU tensors, else the platform torch was built for"),
    Var("FLYAOT_JIT_TIMEOUT", "seconds", 900.0, "how long to wait for another process's JIT of the same spec "
        "(and for the user cache's locks)", ("runtime/config.py",)),
    Var("FLYAOT_CHECK", "flag", False, "checked mode: every op call also validates its index and length values "
        "(one host sync per call; refused under graph capture)", ("runtime/config.py",)),
    Var("FLYAOT_PY_LAUNCH", "flag", False, "use the pure-Python launcher, not the C one", ("runtime/config.py",)),
    Var("FLYAOT_LOG_LEVEL", "level", None, "level of the `flyaot` logger; set, the library adds one stderr "
        "handler", ("__init__.py", "runtime/commands.py", "build_tools/__main__.py"),
        default_doc="the library adds no handler; `flyaot` logs WARNING, the build CLI INFO"),
    Var("XDG_CACHE_HOME", "path", None, "base of the default user cache, build cache and toolkit folder",
        ("runtime/config.py", "build_tools/toolchain.py"), default_doc="`~/.cache`"),
    # the kernel definitions
    Var("FLYAOT_EXTRA_FAMILIES", "paths", (), "folders whose subpackages are kernel families too (the test "
        "suite's test-only families); a family there that cannot be imported is left out with a warning",
        ("kernel_defs/__init__.py",), default_doc="none"),
    # the emulator
    Var("FLYAOT_EMU_TIMING", "choice", "off", "model MI355X time for every emulator launch (`sample`: run "
        "only the sampled workgroups, outputs incomplete)", ("emu/timing/__init__.py",),
        choices=("off", "on", "sample")),
    Var("FLYAOT_EMU_SANITIZE", "flag", False, "run every emulator launch under the sanitizer (races, waits, "
        "wait states, uninitialized reads; docs/emulator.md)", ("emu/sanitizer.py",)),
    Var("FLYAOT_EMU_SCHEDULE", "schedule", None, "wave order inside an emulated workgroup: `random:SEED` "
        "interleaves the waves at random between barriers", ("emu/driver.py",), default_doc="in turn"),
    Var("FLYAOT_EMU_TIMING_SAMPLES", "count", 16, "workgroups the timing model traces per launch",
        ("emu/timing/__init__.py",)),
    # the build
    Var("FLYAOT_BUILD_JOBS", "count", None, "compile workers (`--jobs`)", ("build_tools/__main__.py",),
        default_doc="one per CPU core"),
    Var("FLYAOT_BUILD_TIMEOUT", "seconds", 120.0, "seconds per spec before its worker is killed (`--timeout`)",
        ("build_tools/__main__.py",)),
    Var("FLYAOT_BUILD_CACHE", "path", None, "the build cache (`--cache`)", ("build_tools/build.py",),
        default_doc="`$XDG_CACHE_HOME/flyaot/build-cache`"),
    Var("FLYAOT_LLD", "command", None, "the ld.lld to link with, the only candidate when set",
        ("build_tools/toolchain.py",), default_doc="searched: `$ROCM_PATH/llvm/bin`, `/opt/rocm/llvm/bin`, `PATH`, ziglang"),
    Var("ROCM_PATH", "path", None, "a ROCm install whose llvm/bin/ld.lld is the first linker searched",
        ("build_tools/toolchain.py",), default_doc="not searched"),
    Var("FLYAOT_TOOLKIT_DIR", "path", None, "where the linker wrapper FlyDSL gets as ROCM_PATH is written",
        ("build_tools/toolchain.py",), default_doc="`$XDG_CACHE_HOME/flyaot/toolkit`"),
    Var("_FLYAOT_COMPILE_PARENT", "pid", None, "the process the compile workers' fork server dies with",
        ("build_tools/lifetime.py",), internal=True),
)
BY_NAME = {v.name: v for v in VARIABLES}


def value(name: str, environ=None):
    """The parsed value of the variable `name` (a row of the table); EnvError for an unusable one."""
    return BY_NAME[name].read(environ)


def report(environ=None) -> list:
    """[(Var, raw value or None, error or None)] for every row: what `flyaot env` lists."""
    environ = os.environ if environ is None else environ
    rows = []
    for var in VARIABLES:
        raw = environ.get(var.name)
        try:
            var.parse(raw)
            rows.append((var, raw, None))
        except EnvError as e:
            rows.append((var, raw, str(e)))
    return rows


def markdown_table() -> str:
    """The table as docs/environment.md shows it (generated; tests/test_env_table.py compares)."""
    lines = ["| variable | type | default (unset or empty) | meaning | read by |", "| --- | --- | --- | --- | --- |"]
    for v in VARIABLES:
        kind = _TYPE_DOC[v.type] + (f" {', '.join(f'`{c}`' for c in v.choices)}" if v.choices else "")
        meaning = v.meaning + (" (internal: set by flyaot itself)" if v.internal else "")
        lines.append(f"| `{v.name}` | {kind} | {v.default_text} | {meaning} | "
                     f"{', '.join(f'`{r}`' for r in v.readers)} |")
    return "\n".join(lines) + "\n"
