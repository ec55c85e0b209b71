"""Where the stores are and which switches are set, read from the environment in one place.

Every variable is a row of the one table, `formats/env.py` (type, default, meaning; docs/environment.md
is generated from it): an unusable value is an `EnvError` (a ValueError) naming the variable.
"""
import pathlib
from dataclasses import dataclass

from .. import FLYDSL_VERSION as EXPECTED_FLYDSL  # noqa: F401  (every store must be built with it)

from ..formats import env
from ..formats.env import EnvError  # noqa: F401  (what from_env raises)


def package_dir() -> pathlib.Path:
    """The package's stores, one per target: `prebuilt/<arch>/`."""
    return pathlib.Path(__file__).resolve().parent.parent / "prebuilt"


def default_cache_dir() -> pathlib.Path:
    base = env.value("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache"
    return pathlib.Path(base) / "flyaot"


@dataclass(frozen=True)
class Config:
    package_dir: pathlib.Path         # one store per target directory (store.index.target_dirs)
    extra_stores: tuple
    cache_dir: pathlib.Path           # the user cache: one store per target, <cache_dir>/<version>/<arch>/
    disable_jit: bool
    record_misses: str
    device: str
    jit_timeout: float
    py_launch: bool
    check: bool = False

    @classmethod
    def from_env(cls, *, lenient: bool = False) -> "Config":
        """The configuration the environment states; EnvError naming the first unusable variable, or with
        `lenient` (what `flyaot env` reports through) that variable's default instead."""
        def get(name):
            try:
                return env.value(name)
            except EnvError:
                if not lenient:
                    raise
                return env.BY_NAME[name].default
        return cls(
            package_dir=package_dir(),
            extra_stores=tuple(pathlib.Path(p) for p in get("FLYAOT_PREBUILT_PATH")),
            cache_dir=pathlib.Path(get("FLYAOT_CACHE_DIR") or default_cache_dir()),
            disable_jit=get("FLYAOT_DISABLE_JIT"),
            record_misses=get("FLYAOT_RECORD_MISSES") or "",
            device=get("FLYAOT_DEVICE"),
            jit_timeout=get("FLYAOT_JIT_TIMEOUT"),
            py_launch=get("FLYAOT_PY_LAUNCH"),
            check=get("FLYAOT_CHECK"),
        )
