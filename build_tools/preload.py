"""Imported once by the compile workers' fork server: the toolchain environment and FlyDSL's imports
(~1.2 s), which every forked worker then starts with. Compiles nothing. First of all it ties the
server's life to its parent's (lifetime.py)."""
from .lifetime import server_dies_with_parent
from .toolchain import setup_process_env

server_dies_with_parent()

setup_process_env()

import flydsl.compiler  # noqa: E402,F401
import flydsl.expr  # noqa: E402,F401
