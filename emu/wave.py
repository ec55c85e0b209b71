"""State of one 64-lane wavefront and the operand read/write API every semantics handler uses.

Layout (gfx950):
- `sgpr`  uint32[108]: s0..s101 plus room for the encodings the decoder may still hand over as sgprs.
- `vgpr`  uint32[512, 64]: the unified file, row = register, column = lane. ArchVGPRs are rows
  0..agpr_base-1, AGPRs start at `agpr_base` (the descriptor's accum_offset).
- `exec`, `vcc`  bool[64]: one flag per lane (the 64-bit masks are packed only when a scalar
  instruction reads them as data).
- `scc` int 0/1, `m0` int, `pc` byte address in .text of the next instruction to run.
- `lds`  uint8 array shared by all waves of the workgroup; `mem` the global memory (memory.py).

Vector reads return [n, 64] uint32; scalar/constant operands are broadcast across the lanes.
Vector writes honour EXEC unless an explicit lane mask is given.
"""
import struct

import numpy as np

from .counters import Counters
from .instr import Operand

N_SGPR = 108
N_VGPR = 512
LANES = 64

_EMPTY = np.zeros(0, dtype=np.uint32)


class EmuError(RuntimeError):
    """An instruction the emulator cannot execute faithfully (never silently skipped)."""


class SanitizerError(EmuError):
    """A defect the sanitizer found (emu/sanitizer.py): `kind` is one of KINDS and the message
    starts with it."""
    KINDS = ("race", "wait", "hazard", "uninit")

    def __init__(self, kind: str, message: str):
        if kind not in self.KINDS:
            raise ValueError(f"sanitizer kind {kind!r} is not one of {self.KINDS}")
        super().__init__(f"{kind}: {message}")
        self.kind = kind


def pack_mask(mask: np.ndarray) -> np.ndarray:
    """bool[64] -> uint32[2] (lo, hi) as the hardware stores a 64-bit lane mask."""
    return np.packbits(mask, bitorder="little").view(np.uint32)


def unpack_mask(words) -> np.ndarray:
    """uint32[2] (lo, hi) -> bool[64]."""
    w = np.asarray(words, dtype=np.uint32)
    return np.unpackbits(w.view(np.uint8), bitorder="little").view(bool)


def mask_to_int(mask: np.ndarray) -> int:
    return int.from_bytes(np.packbits(mask, bitorder="little").tobytes(), "little")


def int_to_mask(value: int) -> np.ndarray:
    b = np.frombuffer((value & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "little"), dtype=np.uint8)
    return np.unpackbits(b, bitorder="little").view(bool)


def _inline_const64(op: Operand, fp64: bool) -> int:
    """Inline constants seen by a 64-bit operand: integers sign-extend, floats are f64 patterns."""
    name = op.name
    try:
        return int(name, 0) & 0xFFFFFFFFFFFFFFFF
    except ValueError:
        pass
    if name in ("0.15915494", "0.159154943091895", "1/(2*pi)"):
        return 0x3FC45F306DC9C882      # the f64 encoding of 1/(2*pi) the hardware provides
    if name:
        try:
            return struct.unpack("<Q", struct.pack("<d", float(name)))[0]
        except ValueError:
            pass
    v = op.value & 0xFFFFFFFF
    # No spelling: a 32-bit pattern; integers sign-extend, an f32 pattern widens to f64.
    if fp64:
        return struct.unpack("<Q", struct.pack("<d", struct.unpack("<f", struct.pack("<I", v))[0]))[0]
    return v | (0xFFFFFFFF00000000 if v & 0x80000000 else 0)


class Wave:
    def __init__(self, mem=None, lds=None, agpr_base: int = 256, counters: Counters | None = None,
                 wave_id: int = 0):
        self.sgpr = np.zeros(N_SGPR, dtype=np.uint32)
        self.ttmp = np.zeros(16, dtype=np.uint32)
        self.vgpr = np.zeros((N_VGPR, LANES), dtype=np.uint32)
        self.agpr_base = agpr_base
        self.exec = np.ones(LANES, dtype=bool)
        self.vcc = np.zeros(LANES, dtype=bool)
        self.scc = 0
        self.m0 = 0
        self.pc = 0
        self.lds = lds if lds is not None else np.zeros(0, dtype=np.uint8)
        self.mem = mem
        self.counters = counters if counters is not None else Counters()
        self.wave_id = wave_id            # index of the wave inside its workgroup
        self.done = False                 # s_endpgm reached
        self.at_barrier = False           # parked on s_barrier until the workgroup arrives
        self.shared_base = 0              # src_shared_base / src_private_base apertures (high dword)
        self.private_base = 0
        self.scratch = np.zeros((LANES, 0), dtype=np.uint8)   # per-lane private segment (scratch_*)
        self.instr = None                 # the instruction being executed (for error messages)
        self.watch = None                 # a probe told of every LDS access (machine.py), or None

    # ----- masks -----
    # ----- vector-side reads -----
    def read(self, op: Operand, dwords: int | None = None, *, fp64: bool = False) -> np.ndarray:
        """Value of `op` for every lane as uint32[n, 64] (n = dwords or op.count).

        VGPR/AGPR reads return a view of the register file: do not modify the result in place.
        `fp64` tells how a 32-bit constant widens when a 64-bit value is read (see read_scalar).
        """
        n = dwords or op.count
        k = op.kind
        if k == "vgpr":
            return self.vgpr[op.index:op.index + n]
        if k == "agpr":
            b = self.agpr_base + op.index
            return self.vgpr[b:b + n]
        s = self.read_scalar(op, n, fp64=fp64)
        out = np.empty((n, LANES), dtype=np.uint32)
        out[:] = s[:, None]
        return out

    def read_scalar(self, op: Operand, dwords: int | None = None, *, fp64: bool = False) -> np.ndarray:
        """Value of a scalar/constant operand as uint32[n].

        For n == 2 a 32-bit inline constant or literal widens as the hardware does for 64-bit
        operands: integer constants sign-extend, float inline constants become f64 patterns, and a
        literal is the high dword when `fp64` (f64 operand) else zero-extended.
        """
        n = dwords or op.count
        k = op.kind
        if k == "sgpr":
            i = op.index
            if i + n > N_SGPR:
                raise EmuError(f"sgpr range s[{i}:{i + n - 1}] out of the register file")
            return self.sgpr[i:i + n].copy()
        if k == "const":
            if n == 1:
                return np.array([op.value & 0xFFFFFFFF], dtype=np.uint32)
            # The decoder already widened constants of 2-dword operands to their 64-bit pattern.
            v = op.value & 0xFFFFFFFFFFFFFFFF if op.count >= 2 else _inline_const64(op, fp64)
            return np.array([v & 0xFFFFFFFF, v >> 32] + [0] * (n - 2), dtype=np.uint32)
        if k == "literal":
            v = op.value & 0xFFFFFFFF
            if n == 1:
                return np.array([v], dtype=np.uint32)
            lo, hi = (0, v) if fp64 else (v, 0)
            return np.array([lo, hi] + [0] * (n - 2), dtype=np.uint32)
        if k == "special":
            return self._read_special(op.name, n)
        if k == "ttmp":
            return self.ttmp[op.index:op.index + n].copy()
        if k in ("vgpr", "agpr"):
            raise EmuError(f"vector operand {op} read as a scalar")
        raise EmuError(f"cannot read operand kind {k!r} ({op})")

    def read_u64(self, op: Operand, *, fp64: bool = False) -> int:
        """A 64-bit scalar operand as a Python int."""
        lo, hi = self.read_scalar(op, 2, fp64=fp64)
        return int(lo) | (int(hi) << 32)

    def _read_special(self, name: str, n: int) -> np.ndarray:
        if name in ("vcc", "exec"):
            w = pack_mask(self.vcc if name == "vcc" else self.exec)
            return w[:n].copy() if n <= 2 else np.concatenate([w, np.zeros(n - 2, np.uint32)])
        if name in ("vcc_lo", "vcc_hi", "exec_lo", "exec_hi"):
            w = pack_mask(self.vcc if name.startswith("vcc") else self.exec)
            i = 1 if name.endswith("hi") else 0
            return w[i:i + n].copy()
        if name == "m0":
            return np.array([self.m0 & 0xFFFFFFFF], dtype=np.uint32)
        if name in ("scc", "src_scc"):
            return np.array([self.scc & 1], dtype=np.uint32)
        if name in ("src_vccz", "vccz"):
            return np.array([int(not self.vcc.any())], dtype=np.uint32)
        if name in ("src_execz", "execz"):
            return np.array([int(not self.exec.any())], dtype=np.uint32)
        if name == "src_shared_base":
            return np.array([self.shared_base, 0][:n], dtype=np.uint32)
        if name == "src_private_base":
            return np.array([self.private_base, 0][:n], dtype=np.uint32)
        if name in ("src_shared_limit", "src_private_limit"):
            base = self.shared_base if "shared" in name else self.private_base
            return np.array([0xFFFFFFFF, base][:n], dtype=np.uint32)
        if name in ("null", "off"):
            return np.zeros(n, dtype=np.uint32)
        raise EmuError(f"read of special register {name!r} is not implemented")

    # ----- writes -----
    def write(self, op: Operand, values, mask: np.ndarray | None = None) -> None:
        """Write [n, 64] uint32 (or anything that broadcasts to it) into VGPR/AGPR lanes.

        Lanes are written where `mask` (default EXEC) is set. A scalar destination (e.g. the SGPR
        pair of a VOP3 carry-out) is forwarded to write_scalar with row values taken from lane 0.
        """
        k = op.kind
        if k == "vgpr":
            b = op.index
        elif k == "agpr":
            b = self.agpr_base + op.index
        else:
            v = np.asarray(values, dtype=np.uint32)
            self.write_scalar(op, v[:, 0] if v.ndim == 2 else v)
            return
        v = np.asarray(values)
        n = v.shape[0] if v.ndim == 2 else op.count
        if b + n > N_VGPR:
            raise EmuError(f"vgpr range v[{b}:{b + n - 1}] out of the register file")
        dst = self.vgpr[b:b + n]
        m = self.exec if mask is None else mask
        if v.dtype != np.uint32:
            v = v.astype(np.uint32) if v.dtype.kind in "ub" else v.view(np.uint32) if \
                v.dtype.itemsize == 4 else v.astype(np.int64).astype(np.uint32)
        np.copyto(dst, v, where=m)

    def write_scalar(self, op: Operand, values) -> None:
        """Write uint32[n] to an SGPR range / special register (no EXEC involvement)."""
        v = np.asarray(values).astype(np.uint32, copy=False).reshape(-1)
        k = op.kind
        if k == "sgpr":
            i = op.index
            n = v.shape[0]
            if i + n > N_SGPR:
                raise EmuError(f"sgpr range s[{i}:{i + n - 1}] out of the register file")
            self.sgpr[i:i + n] = v
            return
        if k == "special":
            self._write_special(op.name, v)
            return
        if k == "ttmp":
            self.ttmp[op.index:op.index + v.shape[0]] = v
            return
        raise EmuError(f"cannot write scalar value to operand {op}")

    def _write_special(self, name: str, v: np.ndarray) -> None:
        if name in ("vcc", "exec"):
            m = unpack_mask(v[:2]).copy()
            if name == "vcc":
                self.vcc = m
            else:
                self.exec = m
            return
        if name in ("vcc_lo", "vcc_hi", "exec_lo", "exec_hi"):
            is_vcc = name.startswith("vcc")
            cur = pack_mask(self.vcc if is_vcc else self.exec).copy()
            cur[1 if name.endswith("hi") else 0] = v[0]
            m = unpack_mask(cur).copy()
            if is_vcc:
                self.vcc = m
            else:
                self.exec = m
            return
        if name == "m0":
            self.m0 = int(v[0])
            return
        if name == "scc":
            self.scc = int(v[0]) & 1
            return
        if name in ("null", "off"):
            return
        raise EmuError(f"write of special register {name!r} is not implemented")

    # ----- lane masks as data -----
    def read_mask(self, op: Operand) -> np.ndarray:
        """A 64-bit lane-mask operand (vcc, exec, s[n:n+1], constant) as bool[64]."""
        if op.kind == "special" and op.name == "vcc":
            return self.vcc
        if op.kind == "special" and op.name == "exec":
            return self.exec
        return unpack_mask(self.read_scalar(op, 2))

    def write_mask(self, op: Operand, mask: np.ndarray) -> None:
        """Write bool[64] to a 64-bit lane-mask destination (vcc, exec, s[n:n+1])."""
        if op.kind == "special" and op.name == "vcc":
            self.vcc = mask.copy()
        elif op.kind == "special" and op.name == "exec":
            self.exec = mask.copy()
        else:
            self.write_scalar(op, pack_mask(mask))
