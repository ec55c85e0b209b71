"""LDS (ds_*): reads/writes of all widths, read2/write2 (+st64), LDS atomics, and the cross-lane
ds_bpermute / ds_permute / ds_swizzle (which move data between lanes without touching LDS).

Address = vaddr + offset (bytes). An access beyond the workgroup's LDS allocation raises (on
hardware it would read 0 / drop the write, but in our kernels it always means a bug).
"""
import numpy as np

from ..wave import EmuError, LANES
from . import handles, specializes
from .common import plain

_L = np.arange(LANES)


def imm_offset(ins, key="offset") -> int:
    return int(ins.mods.get(key, 0))


def _check(w, ins, addr: np.ndarray, nbytes: int):
    if addr.size and int(addr.max()) + nbytes > w.lds.size:
        bad = int(addr[addr + nbytes > w.lds.size][0])
        raise EmuError(f"{ins.op} at 0x{ins.addr:x}: LDS address 0x{bad:x} (+{nbytes}) beyond the "
                       f"{w.lds.size}-byte allocation")


def _lds_load(w, ins, addr: np.ndarray, nbytes: int) -> np.ndarray:
    """uint8 [n, nbytes] at the given byte addresses (of active lanes)."""
    addr = _wrap(addr)
    _check(w, ins, addr, nbytes)
    if w.watch is not None:
        w.watch.lds(w, "r", addr, nbytes)
    w.counters.lds_bytes_read += addr.size * nbytes
    if nbytes % 4 == 0 and not (addr & 3).any():
        u32 = w.lds[:w.lds.size - w.lds.size % 4].view(np.uint32)
        idx = (addr >> 2)[:, None] + np.arange(nbytes // 4)
        return u32[idx].view(np.uint8).reshape(addr.size, nbytes)
    return w.lds[addr[:, None] + np.arange(nbytes)]


def lds_store(w, ins, addr: np.ndarray, data: np.ndarray):
    """Store uint8 [n, nbytes] rows; a later lane wins when addresses collide (lane order)."""
    addr = _wrap(addr)
    nbytes = data.shape[1]
    _check(w, ins, addr, nbytes)
    if w.watch is not None:
        w.watch.lds(w, "w", addr, nbytes)
    w.counters.lds_bytes_written += addr.size * nbytes
    if nbytes % 4 == 0 and not (addr & 3).any():
        u32 = w.lds[:w.lds.size - w.lds.size % 4].view(np.uint32)
        u32[(addr >> 2)[:, None] + np.arange(nbytes // 4)] = \
            np.ascontiguousarray(data).view(np.uint32)
        return
    w.lds[addr[:, None] + np.arange(nbytes)] = data


_READ = {   # suffix -> (bytes, sign-extend, d16 half)
    "b32": (4, False, None), "b64": (8, False, None), "b96": (12, False, None),
    "b128": (16, False, None), "u8": (1, False, None), "i8": (1, True, None),
    "u16": (2, False, None), "i16": (2, True, None), "u8_d16": (1, False, "lo"),
    "u8_d16_hi": (1, False, "hi"), "i8_d16": (1, True, "lo"), "i8_d16_hi": (1, True, "hi"),
    "u16_d16": (2, False, "lo"), "u16_d16_hi": (2, False, "hi"),
}
_WRITE = {"b8": (1, None), "b16": (2, None), "b32": (4, None), "b64": (8, None),
          "b96": (12, None), "b128": (16, None), "b8_d16_hi": (1, "hi"), "b16_d16_hi": (2, "hi")}


def vaddr(w, ins, op_index=0):
    return w.read(ins.src[op_index], 1)[0].astype(np.int64)


def _wrap(addr: np.ndarray) -> np.ndarray:
    """LDS addresses are 32-bit: vaddr + offset wraps (LLVM folds offsets onto bases it knows wrap)."""
    return addr & 0xFFFFFFFF


@handles(*(f"ds_read_{s}" for s in _READ))
def _ds_read(w, ins):
    nbytes, sext, d16 = _READ[ins.op[len("ds_read_"):]]
    m = w.exec
    addr = (vaddr(w, ins) + imm_offset(ins))[m]
    raw = _lds_load(w, ins, addr, nbytes)
    dst = ins.dst[0]
    if nbytes >= 4:
        full = np.zeros((LANES, nbytes // 4), dtype=np.uint32)
        full[m] = raw.view(np.uint32)
        w.write(dst, full.T, m)
        return
    v = raw.view(np.uint8 if nbytes == 1 else np.uint16)[:, 0]
    v = v.view(np.int8 if nbytes == 1 else np.int16).astype(np.int32).view(np.uint32) if sext \
        else v.astype(np.uint32)
    full = np.zeros(LANES, dtype=np.uint32)
    full[m] = v
    if d16:
        old = w.read(dst, 1)[0]
        full &= np.uint32(0xFFFF)
        full = (old & np.uint32(0xFFFF0000)) | full if d16 == "lo" else \
            (old & np.uint32(0xFFFF)) | (full << np.uint32(16))
    w.write(dst, full[None], m)


def _data_bytes(w, op, nbytes, m, d16=None):
    v = w.read(op, max(1, nbytes // 4))
    if d16 == "hi":
        v = v >> np.uint32(16)
    return np.ascontiguousarray(v.T[m]).view(np.uint8)[:, :nbytes]


@handles(*(f"ds_write_{s}" for s in _WRITE))
def _ds_write(w, ins):
    nbytes, d16 = _WRITE[ins.op[len("ds_write_"):]]
    m = w.exec
    addr = (vaddr(w, ins) + imm_offset(ins))[m]
    lds_store(w, ins, addr, _data_bytes(w, ins.src[1], nbytes, m, d16))


@specializes("ds_read_b32", "ds_read_b64", "ds_read_b96", "ds_read_b128",
              "ds_write_b32", "ds_write_b64", "ds_write_b96", "ds_write_b128")
def _fast_ds(ins):
    """Whole-dword LDS reads/writes: when every lane is active and all addresses are dword
    aligned and inside the allocation, one gather/scatter on the LDS's uint32 view; anything
    else takes the general handler (which also raises the errors)."""
    is_read = ins.op.startswith("ds_read")
    ndw = int(ins.op.rsplit("_b", 1)[1]) // 32
    a = ins.src[0]
    v = ins.dst[0] if is_read else ins.src[1]
    if a.kind != "vgpr" or a.count != 1 or v.kind not in ("vgpr", "agpr") or v.count != ndw or \
            not plain(ins, allowed=("offset",)):
        return None
    off, ai, vi, agpr = np.uint32(imm_offset(ins)), a.index, v.index, v.kind == "agpr"
    general = _ds_read if is_read else _ds_write
    span = np.arange(ndw)[:, None]

    def run(w, ins):
        addr = w.vgpr[ai] + off                      # wraps at 32 bits like _wrap
        size = w.lds.size
        if np.count_nonzero(w.exec) != LANES or np.count_nonzero(addr & np.uint32(3)) or \
                int(addr.max()) + 4 * ndw > size:
            return general(w, ins)
        idx = (addr >> np.uint32(2))[None, :] + span       # [ndw, 64]
        u32 = w.lds[:size - size % 4].view(np.uint32)
        b = w.agpr_base + vi if agpr else vi
        if is_read:
            w.vgpr[b:b + ndw] = u32.take(idx)
            w.counters.lds_bytes_read += LANES * 4 * ndw
        else:
            # a C-ordered lane-major index: on colliding addresses later lanes win
            u32[np.ascontiguousarray(idx.T)] = w.vgpr[b:b + ndw].T
            w.counters.lds_bytes_written += LANES * 4 * ndw
    return run


def pair_scale(op: str) -> tuple[int, int]:
    """(element bytes, offset unit) for ds_read2*/ds_write2*."""
    nb = 8 if op.endswith("b64") else 4
    return nb, nb * (64 if "st64" in op else 1)


@handles("ds_read2_b32", "ds_read2_b64", "ds_read2st64_b32", "ds_read2st64_b64")
def _ds_read2(w, ins):
    nb, unit = pair_scale(ins.op)
    m = w.exec
    base = vaddr(w, ins)[m]
    parts = [_lds_load(w, ins, base + imm_offset(ins, k) * unit, nb) for k in ("offset0", "offset1")]
    full = np.zeros((LANES, 2 * nb // 4), dtype=np.uint32)
    full[m] = np.concatenate(parts, axis=1).view(np.uint32)
    w.write(ins.dst[0], full.T, m)


@handles("ds_write2_b32", "ds_write2_b64", "ds_write2st64_b32", "ds_write2st64_b64")
def _ds_write2(w, ins):
    nb, unit = pair_scale(ins.op)
    m = w.exec
    base = vaddr(w, ins)[m]
    for k, key in ((1, "offset0"), (2, "offset1")):
        lds_store(w, ins, base + imm_offset(ins, key) * unit, _data_bytes(w, ins.src[k], nb, m))


# ---- LDS atomics (lane order) ----
_ATOM = {
    "add_u32": lambda o, s: o + s, "sub_u32": lambda o, s: o - s, "min_u32": min, "max_u32": max,
    "min_i32": min, "max_i32": max, "and_b32": lambda o, s: o & s, "or_b32": lambda o, s: o | s,
    "xor_b32": lambda o, s: o ^ s, "wrxchg_rtn_b32": lambda o, s: s, "add_f32": lambda o, s: o + s,
    "max_f32": max, "min_f32": min, "inc_u32": None,
}


def _ds_atomic(w, ins):
    name = ins.op[3:].replace("_rtn", "") if ins.op != "ds_wrxchg_rtn_b32" else "wrxchg_rtn_b32"
    fn = _ATOM[name]
    dt = np.float32 if name.endswith("f32") else np.int32 if name.endswith("i32") else np.uint32
    m = w.exec
    addr = _wrap(vaddr(w, ins) + imm_offset(ins))[m]
    _check(w, ins, addr, 4)
    if w.watch is not None:
        w.watch.lds(w, "a", addr, 4)
    data_op = ins.src[1]
    src = w.read(data_op, 1)[0][m].view(dt)
    mem = w.lds[:w.lds.size - w.lds.size % 4].view(dt)
    old = np.empty(addr.size, dtype=dt)
    for k in range(addr.size):
        i = int(addr[k]) >> 2
        old[k] = mem[i]
        if name == "inc_u32":
            mem[i] = 0 if mem[i] >= src[k] else mem[i] + 1
        else:
            r = fn(mem[i].item(), src[k].item())
            mem[i] = np.array(r).astype(dt) if dt != np.uint32 else np.uint32(r & 0xFFFFFFFF)
    w.counters.lds_bytes_written += 4 * addr.size
    if ins.dst:
        full = np.zeros(LANES, dtype=np.uint32)
        full[m] = old.view(np.uint32)
        w.write(ins.dst[0], full[None], m)


for _n in _ATOM:
    if _n == "wrxchg_rtn_b32":
        handles("ds_wrxchg_rtn_b32")(_ds_atomic)
    else:
        handles(f"ds_{_n}", f"ds_{_n.replace('_', '_rtn_', 1)}")(_ds_atomic)


# ---- cross-lane through the LDS crossbar ----
@handles("ds_bpermute_b32")
def _bpermute(w, ins):
    """dst[lane] = data[src lane], src lane = ((addr + offset) / 4) mod 64; inactive sources read 0."""
    m = w.exec
    src_lane = ((vaddr(w, ins) + imm_offset(ins)) >> 2) & (LANES - 1)
    data = np.where(m, w.read(ins.src[1], 1)[0], np.uint32(0))
    w.write(ins.dst[0], data[src_lane][None], m)


@handles("ds_permute_b32")
def _permute(w, ins):
    """Forward permute: active lane i writes its data to lane ((addr + offset) / 4) mod 64
    (highest lane wins on collision); each active lane then reads its slot (0 if unwritten)."""
    m = w.exec
    dst_lane = (((vaddr(w, ins) + imm_offset(ins)) >> 2) & (LANES - 1))[m]
    tmp = np.zeros(LANES, dtype=np.uint32)
    tmp[dst_lane] = w.read(ins.src[1], 1)[0][m]
    w.write(ins.dst[0], tmp[None], m)


_SWZ_CACHE: dict = {}


def _swizzle_src(offset: int) -> np.ndarray:
    if offset & 0x8000:               # quad permute: 2-bit selectors per lane within each quad
        sel = np.array([(offset >> (2 * k)) & 3 for k in range(4)])
        return _L // 4 * 4 + sel[_L % 4]
    and_m, or_m, xor_m = offset & 0x1F, (offset >> 5) & 0x1F, (offset >> 10) & 0x1F
    return _L // 32 * 32 + ((((_L % 32) & and_m) | or_m) ^ xor_m)


@handles("ds_swizzle_b32")
def _swizzle(w, ins):
    off = imm_offset(ins)
    src = _SWZ_CACHE.get(off)
    if src is None:
        src = _SWZ_CACHE[off] = _swizzle_src(off)
    m = w.exec
    data = np.where(m, w.read(ins.src[0], 1)[0], np.uint32(0))    # the ADDR field carries the data
    w.write(ins.dst[0], data[src][None], m)


@handles("ds_nop")
def _ds_nop(w, ins):
    pass
