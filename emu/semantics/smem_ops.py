"""Scalar memory: s_load_dword* from a 64-bit address, s_buffer_load_dword* through a V#.

The immediate offset (21-bit signed on gfx9) and an SGPR offset may both be present; the
address's low two bits are ignored (dword aligned). s_buffer_load dwords at or beyond the V#'s
num_records read 0; the others must lie in the tensor holding the V#'s base (Memory.confine).
"""
import numpy as np

from ..wave import EmuError
from . import handles
from .salu_ops import s32, s64, set32

_NDW = {"dword": 1, "dwordx2": 2, "dwordx4": 4, "dwordx8": 8, "dwordx16": 16}


def _offset(w, ins) -> int:
    """Immediate offset (signed, decoded into mods['offset']) plus the SGPR offset if present."""
    off = int(ins.mods.get("offset", 0))
    so = ins.mods.get("soffset")
    if so is not None:
        off += s32(w, so)
    return off


def _write(w, ins, vals):
    d = ins.dst[0]
    if d.kind != "sgpr":
        raise EmuError(f"{ins.op}: destination {d} is not an SGPR range")
    w.sgpr[d.index:d.index + vals.shape[0]] = vals


def scalar_addr(w, ins) -> int:
    """The address of the first dword a scalar load reads (the timing tracer asks it too)."""
    if ins.op.startswith("s_buffer_load"):
        d = w.read_scalar(ins.src[0], 2)
        return (int(d[0]) | ((int(d[1]) & 0xFFFF) << 32)) + (_offset(w, ins) & ~3)
    return (s64(w, ins.src[0]) + _offset(w, ins)) & ~3 & 0xFFFFFFFFFFFFFFFF


def _s_load(w, ins):
    ndw = _NDW[ins.op.rsplit("_", 1)[1]]
    addr = scalar_addr(w, ins)
    _write(w, ins, w.mem.load_scalar(addr, ndw, what=f"{ins.op} at 0x{ins.addr:x}"))
    w.counters.global_bytes_read += 4 * ndw


def _s_buffer_load(w, ins):
    ndw = _NDW[ins.op.rsplit("_", 1)[1]]
    d = w.read_scalar(ins.src[0], 4)
    base = int(d[0]) | ((int(d[1]) & 0xFFFF) << 32)
    num_records = int(d[2])
    off = _offset(w, ins) & ~3
    comp = off + 4 * np.arange(ndw)
    ok = comp + 4 <= num_records
    vals = np.zeros(ndw, dtype=np.uint32)
    if ok.any():
        addrs = (base + comp[ok]).astype(np.uint64)
        w.mem.confine(base, int(addrs.min()), int(addrs.max()) + 4, f"{ins.op} at 0x{ins.addr:x}")
        vals[ok] = w.mem.load_dwords(addrs, 1, what=f"{ins.op} at 0x{ins.addr:x}")[:, 0]
        w.counters.global_bytes_read += 4 * int(ok.sum())
    _write(w, ins, vals)


for _s in _NDW:
    handles(f"s_load_{_s}")(_s_load)
    handles(f"s_buffer_load_{_s}")(_s_buffer_load)


@handles("s_memtime", "s_memrealtime")
def _memtime(w, ins):
    # A monotonically increasing stand-in for the clock: instructions executed so far.
    t = w.counters.instructions
    set32(w, ins.dst[0], t & 0xFFFFFFFF)
    w.sgpr[ins.dst[0].index + 1] = t >> 32
