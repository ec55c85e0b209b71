"""flyaot: ahead-of-time compiled FlyDSL kernels for AMD GPUs (the targets in targets.py), loaded with zero JIT.

Importing this package reads no code object and imports neither flydsl nor MLIR; the public ops
live in `flyaot.ops` and load what they need on first use.
"""
__version__ = "0.1.0"
FLYDSL_VERSION = "0.5.0"     # the FlyDSL release the prebuilt set is built and tested with
