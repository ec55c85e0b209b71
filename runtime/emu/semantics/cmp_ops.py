"""cmp_ops handlers (being written)."""
from . import handles  # noqa: F401
