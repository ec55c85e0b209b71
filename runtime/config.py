"""Where the stores are and which switches are set, read from the environment in one place.

Variables:
  FLYAOT_PREBUILT_PATH   extra stores (add-on packs), separated by os.pathsep, searched after the
                         package's own store
  FLYAOT_CACHE_DIR       the user cache store (JIT results); default
                         $XDG_CACHE_HOME/flyaot/<version>/<target>/ (XDG default ~/.cache)
  FLYAOT_DISABLE_JIT     any value but "" or "0": never JIT, a miss is an error
  FLYAOT_RECORD_MISSES   file that each miss is appended to (JSON lines), input of
                         `python -m flyaot.build_tools build --from-misses FILE`
  FLYAOT_DEVICE          emu | hip | cuda: force a driver (default: emu for CPU tensors, else the
                         platform torch was built for)
  FLYAOT_JIT_TIMEOUT     seconds to wait for another process's JIT of the same spec (default 900;
                         a finite number > 0)
  FLYAOT_CHECK           any value but "" or "0": checked mode, every op call also validates its index
                         and length values (one host sync per call; refused under graph capture)
  FLYAOT_PY_LAUNCH       any value but "" or "0": use the pure-Python launcher, not the C one
"""
import os
import pathlib
from dataclasses import dataclass

from .. import FLYDSL_VERSION as EXPECTED_FLYDSL  # noqa: F401  (every store must be built with it)
from .. import __version__, targets
from . import drivers

ENV_VARS = ("FLYAOT_PREBUILT_PATH", "FLYAOT_CACHE_DIR", "FLYAOT_DISABLE_JIT", "FLYAOT_RECORD_MISSES",
            "FLYAOT_DEVICE", "FLYAOT_JIT_TIMEOUT", "FLYAOT_PY_LAUNCH", "FLYAOT_CHECK", "XDG_CACHE_HOME")


def _flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


def jit_timeout_from_env() -> float:
    """FLYAOT_JIT_TIMEOUT as seconds: nan would never time out and 0 or less would never wait."""
    raw = os.environ.get("FLYAOT_JIT_TIMEOUT", "900")
    try:
        seconds = float(raw)
    except ValueError:
        raise ValueError(f"FLYAOT_JIT_TIMEOUT={raw!r} is not a number of seconds") from None
    if not (0 < seconds < float("inf")):
        raise ValueError(f"FLYAOT_JIT_TIMEOUT={raw!r}: expected a finite number of seconds > 0")
    return seconds


def package_store_dir() -> pathlib.Path:
    return pathlib.Path(__file__).resolve().parent.parent / "prebuilt"


def default_cache_dir() -> pathlib.Path:
    base = os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache"
    return pathlib.Path(base) / "flyaot" / __version__ / targets.DEFAULT_TARGET


@dataclass(frozen=True)
class Config:
    package_store: pathlib.Path
    extra_stores: tuple
    cache_dir: pathlib.Path
    disable_jit: bool
    record_misses: str
    device: str
    jit_timeout: float
    py_launch: bool
    check: bool = False

    @classmethod
    def from_env(cls) -> "Config":
        extra = tuple(pathlib.Path(p) for p in os.environ.get("FLYAOT_PREBUILT_PATH", "").split(os.pathsep) if p)
        device = os.environ.get("FLYAOT_DEVICE", "").strip().lower()
        if device not in ("",) + drivers.NAMES:
            raise ValueError(f"FLYAOT_DEVICE={device!r}: expected {', '.join(drivers.NAMES)}")
        return cls(
            package_store=package_store_dir(),
            extra_stores=extra,
            cache_dir=pathlib.Path(os.environ.get("FLYAOT_CACHE_DIR") or default_cache_dir()),
            disable_jit=_flag("FLYAOT_DISABLE_JIT"),
            record_misses=os.environ.get("FLYAOT_RECORD_MISSES", ""),
            device=device,
            jit_timeout=jit_timeout_from_env(),
            py_launch=_flag("FLYAOT_PY_LAUNCH"),
            check=_flag("FLYAOT_CHECK"),
        )
