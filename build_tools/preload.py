"""Imported once by the compile workers' fork server: the toolchain environment and FlyDSL's imports
(~1.2 s), which every forked worker then starts with. Compiles nothing."""
from .toolchain import setup_process_env

setup_process_env()

import flydsl.compiler  # noqa: E402,F401
import flydsl.expr  # noqa: E402,F401
