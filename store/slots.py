"""Kernel argument slots: read from the manifest, checked against the code object, packed exactly.

Every slot has a C type: 'void*' (a tensor's data_ptr), 'int32_t', 'int64_t' or 'float' (IEEE f32).
Values are converted exactly: ints are range-checked for their own width (never narrowed or widened
silently), floats are rounded once to f32, bools and tensors in scalar slots are refused.
"""
import struct
from dataclasses import dataclass

from ..formats.codeobject import user_args
from ..formats.manifest import SLOT_CTYPES, ManifestError, check_slots
from .errors import IntegrityError, StoreError

# ctype -> (one-letter code shared with the C launcher, size, value_kind, struct format); sizes and
# kinds are the manifest vocabulary's
_CODES = {"void*": ("p", "<Q"), "int32_t": ("i", "<i"), "int64_t": ("l", "<q"), "float": ("f", "<f")}
CTYPES = {ct: (code, *SLOT_CTYPES[ct], fmt) for ct, (code, fmt) in _CODES.items()}
_INT_RANGE = {"i": (-(1 << 31), (1 << 31) - 1), "l": (-(1 << 63), (1 << 63) - 1)}


@dataclass(frozen=True)
class Slot:
    name: str
    ctype: str
    kind: str
    offset: int
    size: int

    @property
    def code(self) -> str:
        return CTYPES[self.ctype][0]


def convert(slot: Slot, value):
    """The exact value one slot carries: an address for pointers, a checked int, an f32-rounded float."""
    code = slot.code
    if code == "p":
        data_ptr = getattr(value, "data_ptr", None)
        if data_ptr is None:
            raise TypeError(f"kernel argument {slot.name!r} ({slot.ctype}): expected a tensor, "
                            f"got {type(value).__name__}")
        return data_ptr()
    if isinstance(value, bool):
        raise TypeError(f"kernel argument {slot.name!r} ({slot.ctype}): got a bool; pass an int or float")
    if code in _INT_RANGE:
        if not isinstance(value, int):
            raise TypeError(f"kernel argument {slot.name!r} ({slot.ctype}): expected an int, "
                            f"got {type(value).__name__}")
        lo, hi = _INT_RANGE[code]
        if not lo <= value <= hi:
            raise ValueError(f"kernel argument {slot.name!r} ({slot.ctype}): {value} is out of range")
        return value
    if not isinstance(value, (int, float)):
        raise TypeError(f"kernel argument {slot.name!r} (float): expected a float, got {type(value).__name__}")
    try:
        # Round once to f32; a finite value that rounds to infinity does not fit.
        return struct.unpack("<f", struct.pack("<f", float(value)))[0]
    except OverflowError:
        raise ValueError(f"kernel argument {slot.name!r} (float): {value} does not fit in f32") from None


@dataclass(frozen=True)
class ArgLayout:
    symbol: str
    slots: tuple
    kernarg_size: int
    block: tuple

    @property
    def names(self) -> tuple:
        return tuple(s.name for s in self.slots)

    @property
    def codes(self) -> str:
        return "".join(s.code for s in self.slots)

    @classmethod
    def from_entry(cls, entry: dict, origin: str) -> "ArgLayout":
        """An entry's slot table, checked by the manifest schema's slot rules (types, sizes, alignment,
        overlap, names, kernarg size, block)."""
        try:
            check_slots(entry, origin, "")
        except ManifestError as e:
            raise StoreError(str(e)) from None
        slots = tuple(Slot(a["name"], a["ctype"], a["kind"], a["offset"], a["size"]) for a in entry["args"])
        return cls(entry["symbol"], slots, entry["kernarg_size"], tuple(entry["block"]))

    def cross_check(self, kernel, entry: dict, origin: str) -> None:
        """The manifest must describe the code object's own AMDGPU metadata exactly (kernel: KernelInfo)."""
        explicit = user_args(kernel)
        ours = [(s.offset, s.size, s.kind) for s in self.slots]
        theirs = [(a.offset, a.size, a.value_kind) for a in explicit]
        if ours != theirs:
            raise IntegrityError(f"{origin}: manifest argument slots (offset, size, kind) {ours} differ from "
                                 f"the code object's metadata {theirs}")
        if kernel.kernarg_size != self.kernarg_size:
            raise IntegrityError(f"{origin}: manifest kernarg_size {self.kernarg_size}, code object "
                                 f"{kernel.kernarg_size}")
        if kernel.reqd_workgroup_size and tuple(kernel.reqd_workgroup_size) != self.block:
            raise IntegrityError(f"{origin}: manifest block {self.block}, code object requires "
                                 f"{tuple(kernel.reqd_workgroup_size)}")
        recorded, actual = entry.get("resources", {}), kernel.resources.as_dict()
        diff = {k: (recorded[k], actual[k]) for k in recorded if k in actual and recorded[k] != actual[k]}
        if diff:
            raise IntegrityError(f"{origin}: manifest resources differ from the code object (manifest, "
                                 f"code object): {diff}")

    def cross_check_params(self, params: list, origin: str) -> None:
        """Against the (offset, size) list a CUDA driver reports for a cubin's parameters."""
        ours = [(s.offset, s.size) for s in self.slots]
        if ours != list(params):
            raise IntegrityError(f"{origin}: manifest argument slots (offset, size) {ours} differ from the "
                                 f"driver's parameter info {list(params)}")

    def check_args(self, args: dict) -> None:
        if len(args) != len(self.slots) or any(n not in args for n in self.names):
            missing = [n for n in self.names if n not in args]
            extra = [n for n in args if n not in self.names]
            raise ValueError(f"kernel {self.symbol} takes arguments {list(self.names)}; "
                             f"missing {missing}, unexpected {extra}")

    def pack(self, args: dict) -> bytes:
        """The kernarg segment as the hardware reads it (the emulator's input)."""
        self.check_args(args)
        buf = bytearray(self.kernarg_size)
        for s in self.slots:
            struct.pack_into(CTYPES[s.ctype][3], buf, s.offset, convert(s, args[s.name]))
        return bytes(buf)
