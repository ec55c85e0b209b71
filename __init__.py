"""flyaot: ahead-of-time compiled FlyDSL kernels for AMD GPUs (the targets in targets.py), loaded with zero JIT.

Importing this package reads no code object and imports neither flydsl nor MLIR; the public ops
live in `flyaot.ops` and load what they need on first use.

Logging: the library logs to the `flyaot` logger and attaches no handler of its own unless
FLYAOT_LOG_LEVEL is set (DEBUG, INFO, WARNING, ERROR), in which case that logger gets the level and
one stderr handler, and stops propagating so messages are not printed twice.
"""
import logging as _logging

__version__ = "0.1.0"
FLYDSL_VERSION = "0.5.0"     # the FlyDSL release the prebuilt set is built and tested with


def _configure_logging() -> None:
    from .formats import env
    try:
        name = env.value("FLYAOT_LOG_LEVEL")
    except env.EnvError as e:      # importing flyaot never fails over a log level
        import warnings
        warnings.warn(f"{e}; ignored", stacklevel=2)
        return
    if name is None:
        return
    logger = _logging.getLogger("flyaot")
    logger.setLevel(name)
    if not any(getattr(h, "_flyaot", False) for h in logger.handlers):
        handler = _logging.StreamHandler()
        handler.setFormatter(_logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        handler._flyaot = True
        logger.addHandler(handler)
    logger.propagate = False


_configure_logging()
