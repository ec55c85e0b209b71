"""Instruction semantics: mnemonic -> handler(wave, instr).

Each semantics module registers its handlers with `@handles("v_add_u32", ...)` at import time;
importing this package imports all of them, so HANDLERS is complete once `semantics` is loaded.
An opcode missing from HANDLERS is an error at execution time, never a silent no-op.

SPECIALIZERS (registered with `@specializes(...)`) are the speed path: given one decoded Instr
they return a handler(wave, instr) with its operands and modifiers resolved once, or None when
that instruction needs the general handler (unusual operand kinds or modifiers). The machine
asks them once per instruction of a program; results must be bit-identical to HANDLERS
(tests/emu/test_exec_fast.py runs both on the same states).
"""
from typing import Callable

HANDLERS: dict[str, Callable] = {}
SPECIALIZERS: dict[str, Callable] = {}


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


def specializes(*mnemonics: str):
    """Register the decorated function (Instr -> handler or None) as the specializer of each
    mnemonic."""
    def register(fn):
        for m in mnemonics:
            if m in SPECIALIZERS and SPECIALIZERS[m] is not fn:
                raise ValueError(f"two specializers registered for {m}")
            SPECIALIZERS[m] = fn
        return fn
    return register


def handler_for(ins) -> Callable:
    """The fastest handler that executes `ins` (its specialization, else the general handler)."""
    spec = SPECIALIZERS.get(ins.op)
    if spec is not None:
        fast = spec(ins)
        if fast is not None:
            return fast
    return HANDLERS.get(ins.op)


# Registration order does not matter; a mnemonic claimed twice raises at import.
from . import salu_ops, valu_ops, cmp_ops, lane_ops, smem_ops, vmem_ops, lds_ops  # noqa: E402,F401
from . import mfma_ops, convert_ops  # noqa: E402,F401

