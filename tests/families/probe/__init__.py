"""A tiny family used only by the build pipeline's own tests (never shipped).

Its `behavior` axis lets a test make one spec misbehave the way a real compile can: abort the whole
process (as an MLIR assertion does), raise, or hang past the per-spec timeout.
"""
