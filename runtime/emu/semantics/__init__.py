"""Instruction semantics: mnemonic -> handler(wave, instr).

Each semantics module registers its handlers with `@handles("v_add_u32", ...)` at import time;
importing this package imports all of them, so HANDLERS is complete once `semantics` is loaded.
An opcode missing from HANDLERS is an error at execution time, never a silent no-op.
"""
from typing import Callable

HANDLERS: dict[str, Callable] = {}


def handles(*mnemonics: str):
    """Register the decorated function as the handler of every mnemonic given."""
    def register(fn):
        for m in mnemonics:
            if m in HANDLERS and HANDLERS[m] is not fn:
                raise ValueError(f"two handlers registered for {m}: {HANDLERS[m].__module__}.{HANDLERS[m].__name__} "
                                 f"and {fn.__module__}.{fn.__name__}")
            HANDLERS[m] = fn
        return fn
    return register


# Registration order does not matter; a mnemonic claimed twice raises at import.
from . import salu_ops, valu_ops, cmp_ops, lane_ops, smem_ops, vmem_ops, lds_ops  # noqa: E402,F401
from . import mfma_ops, convert_ops  # noqa: E402,F401

