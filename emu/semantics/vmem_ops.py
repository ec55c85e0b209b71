"""Vector memory: buffer_* (MUBUF with a V# resource), global_* and flat_* loads/stores/atomics,
scratch_* loads/stores.

Buffer addressing (swizzle off, as our kernels build their V#s):
    addr = base + soffset + inst_offset + (offen ? voffset : 0) + (idxen ? vindex * stride : 0)
Range check per 32-bit component (per access for sub-dword forms), soffset excluded:
    raw (idxen = 0):        out of range if inst_offset + voffset + comp_offset + comp_size > num_records
    structured (idxen = 1): out of range if vindex >= num_records
Out-of-range loads return 0 and out-of-range stores are dropped. The in-range bytes must lie in the
tensor holding the descriptor's base (Memory.confine faults otherwise). Global/flat addresses must
fall inside a registered allocation (memory.py raises otherwise).

Buffer loads with the `lds` bit (LDS DMA: no VGPR is written) store each active lane's data in
LDS at
    M0 + inst_offset + lane * (4 if bytes <= 4 else 16)
and an out-of-range lane stores zeros there (the ISA's LDS_ADDR = LDSbase + M0 + inst_offset +
TID*4; gfx950 adds dwordx3/x4 with a 16 * lane stride, and the immediate offset applies to both
the memory and the LDS address; docs/emulator.md#sources). Only dword/dwordx3/dwordx4 are implemented
(the sizes our compiler emits); the sub-dword forms raise.

Scratch (the FLAT scratch segment) addresses each lane's own private segment (Wave.scratch, the
kernel descriptor's private_segment_fixed_size bytes per lane):
    lane offset = inst_offset + (saddr ? SGPR : 0) + (SVE ? vaddr : 0)
an access outside [0, private segment size) faults.
"""
import numpy as np

from ..wave import EmuError, LANES, N_SGPR
from . import handles, specializes
from .common import plain
from .lds_ops import lds_store
from .salu_ops import s32

U64 = np.uint64

# mnemonic suffix -> (bytes per lane, sign-extend sub-dword, d16 half: None/'lo'/'hi')
_WIDTH = {
    "dword": (4, False, None), "dwordx2": (8, False, None), "dwordx3": (12, False, None),
    "dwordx4": (16, False, None), "ubyte": (1, False, None), "sbyte": (1, True, None),
    "ushort": (2, False, None), "sshort": (2, True, None), "byte": (1, False, None),
    "short": (2, False, None), "ubyte_d16": (1, False, "lo"), "ubyte_d16_hi": (1, False, "hi"),
    "sbyte_d16": (1, True, "lo"), "sbyte_d16_hi": (1, True, "hi"), "short_d16": (2, False, "lo"),
    "short_d16_hi": (2, False, "hi"), "byte_d16_hi": (1, False, "hi"),
}


def _suffix(op: str) -> str:
    for p in ("buffer_load_", "buffer_store_", "global_load_", "global_store_", "flat_load_",
              "flat_store_", "scratch_load_", "scratch_store_"):
        if op.startswith(p):
            return op[len(p):]
    raise EmuError(f"unknown memory mnemonic {op}")


def _load_result(w, ins, raw: np.ndarray, nbytes: int, sext: bool, d16, mask):
    """raw uint8 [64, nbytes] -> write the destination VGPR(s) per the load's width/extension."""
    dst = ins.dst[0]
    if nbytes >= 4:
        vals = np.ascontiguousarray(raw).view(np.uint32).T
    else:
        v = raw.view(np.uint8 if nbytes == 1 else np.uint16)[:, 0]
        if sext:
            v = v.view(np.int8 if nbytes == 1 else np.int16).astype(np.int32).view(np.uint32)
        else:
            v = v.astype(np.uint32)
        if d16:
            old = w.read(dst, 1)[0]
            v = v & np.uint32(0xFFFF)
            v = (old & np.uint32(0xFFFF0000)) | v if d16 == "lo" else \
                (old & np.uint32(0xFFFF)) | (v << np.uint32(16))
        vals = v[None]
    w.write(dst, vals, mask)


def _store_bytes(w, data_op, nbytes, d16):
    """The bytes a store writes per lane: uint8 [64, nbytes]."""
    ndw = max(1, nbytes // 4)
    v = w.read(data_op, ndw)
    if d16 == "hi":
        v = v >> np.uint32(16)
    return np.ascontiguousarray(v.T).view(np.uint8)[:, :nbytes]


# ---------------- buffer ----------------
def _vsharp(w, op):
    d = w.read_scalar(op, 4)
    base = int(d[0]) | ((int(d[1]) & 0xFFFF) << 32)
    stride = (int(d[1]) >> 16) & 0x3FFF
    num_records = int(d[2])
    if (int(d[3]) >> 23) & 1:
        raise EmuError("buffer resource with ADD_TID_ENABLE is not implemented")
    if (int(d[1]) >> 31) & 1:
        raise EmuError("buffer resource with SWIZZLE_ENABLE is not implemented")
    return base, stride, num_records


def buffer_operands(ins, is_store: bool):
    """(vdata op or None, [vaddr ops], srsrc op, soffset op)."""
    srcs = list(ins.src)
    vdata = srcs.pop(0) if is_store else None
    k = next((i for i, o in enumerate(srcs) if o.kind == "sgpr" and o.count == 4), None)
    if k is None:
        raise EmuError(f"{ins.op}: no 4-dword buffer resource among operands")
    vaddr = [o for o in srcs[:k] if o.kind == "vgpr"]
    soff = srcs[k + 1] if k + 1 < len(srcs) else None
    return vdata, vaddr, srcs[k], soff


def buffer_addr(w, ins, vaddr, srsrc, soff, comp_offsets, csize):
    """(addresses uint64 [64, ncomp], in-range bool [64, ncomp])."""
    mods = ins.mods
    base, stride, num_records = _vsharp(w, srsrc)
    soffset = s32(w, soff) if soff is not None else 0
    inst = int(mods.get("offset", 0))
    offen, idxen = bool(mods.get("offen")), bool(mods.get("idxen"))
    regs = []
    for o in vaddr:
        regs.extend(w.read(o)[k] for k in range(o.count))
    voff = np.zeros(LANES, dtype=U64)
    vidx = np.zeros(LANES, dtype=U64)
    if idxen:
        vidx = regs[0].astype(U64)
    if offen:
        voff = regs[1 if idxen else 0].astype(U64)
    rel = voff + U64(inst)
    comp = np.asarray(comp_offsets, dtype=U64)[None, :]
    if idxen:
        inrange = np.broadcast_to((vidx < U64(num_records))[:, None], (LANES, comp.shape[1]))
        rel = rel + vidx * U64(stride)
    else:
        inrange = (rel[:, None] + comp + U64(csize)) <= U64(num_records)
    addr = U64(base) + U64(soffset) + rel[:, None] + comp
    return base, addr, inrange


_LDS_DMA_STRIDE = {4: 4, 12: 16, 16: 16}      # bytes per lane in LDS, by load size


def _buffer_load(w, ins):
    nbytes, sext, d16 = _WIDTH[_suffix(ins.op)]
    to_lds = bool(ins.mods.get("lds"))
    if to_lds and nbytes not in _LDS_DMA_STRIDE:
        raise EmuError(f"{ins.op} with lds (load to LDS) is not implemented for {nbytes}-byte loads")
    _, vaddr, srsrc, soff = buffer_operands(ins, False)
    comp = [0, 4, 8, 12][:nbytes // 4] if nbytes >= 4 else [0]
    csize = 4 if nbytes >= 4 else nbytes
    base, addr, inrange = buffer_addr(w, ins, vaddr, srsrc, soff, comp, csize)
    active = w.exec[:, None] & inrange
    raw = np.zeros((LANES, len(comp), csize), dtype=np.uint8)
    if active.any():
        a = addr[active]
        w.mem.confine(base, int(a.min()), int(a.max()) + csize, f"{ins.op} at 0x{ins.addr:x}")
        raw[active] = w.mem.load(a, csize, what=f"{ins.op} at 0x{ins.addr:x}")
        w.counters.global_bytes_read += int(active.sum()) * csize
    raw = raw.reshape(LANES, -1)
    if not to_lds:
        _load_result(w, ins, raw, nbytes, sext, d16, w.exec)
        return
    lanes = np.flatnonzero(w.exec)
    base = (w.m0 & 0xFFFFFFFF) + int(ins.mods.get("offset", 0))
    lds_store(w, ins, base + lanes * _LDS_DMA_STRIDE[nbytes], raw[lanes])


def _buffer_store(w, ins):
    nbytes, _, d16 = _WIDTH[_suffix(ins.op)]
    vdata, vaddr, srsrc, soff = buffer_operands(ins, True)
    comp = [0, 4, 8, 12][:nbytes // 4] if nbytes >= 4 else [0]
    csize = 4 if nbytes >= 4 else nbytes
    base, addr, inrange = buffer_addr(w, ins, vaddr, srsrc, soff, comp, csize)
    active = w.exec[:, None] & inrange
    if not active.any():
        return
    a = addr[active]
    w.mem.confine(base, int(a.min()), int(a.max()) + csize, f"{ins.op} at 0x{ins.addr:x}")
    data = _store_bytes(w, vdata, nbytes, d16).reshape(LANES, len(comp), csize)
    w.mem.store(addr[active], data[active], what=f"{ins.op} at 0x{ins.addr:x}")
    w.counters.global_bytes_written += int(active.sum()) * csize


_SUB_DWORD = {(1, False): np.uint8, (1, True): np.int8, (2, False): np.uint16,
              (2, True): np.int16}


def _fast_buffer(ins):
    """Specialized raw-buffer access (offen or no VGPR address, no idxen, no d16): the V# and
    offsets are read as Python ints, whole lanes are range-checked at once, and a lane that is
    only partly in range (a multi-dword access crossing num_records) goes to the general path."""
    is_store = ins.op.startswith("buffer_store")
    nbytes, sext, d16 = _WIDTH[_suffix(ins.op)]
    to_lds = bool(ins.mods.get("lds"))
    if d16 or ins.mods.get("idxen") or (to_lds and nbytes not in _LDS_DMA_STRIDE) or \
            not plain(ins, allowed=("offset", "offen", "lds", "sc0", "sc1", "nt", "glc", "slc")):
        return None
    try:
        vdata, vaddr, srsrc, soff = buffer_operands(ins, is_store)
    except EmuError:
        return None
    offen = bool(ins.mods.get("offen"))
    if len(vaddr) != int(offen) or (offen and vaddr[0].count != 1) or srsrc.index + 4 > N_SGPR:
        return None
    if soff is None or soff.kind in ("const", "literal"):
        soff_const, soff_reg = (soff.value & 0xFFFFFFFF) if soff is not None else 0, None
    elif soff.kind == "sgpr":
        soff_const, soff_reg = 0, soff.index
    else:
        return None
    ndw = max(1, nbytes // 4)
    if is_store:
        if vdata.kind not in ("vgpr", "agpr") or vdata.count < ndw:
            return None
    elif not to_lds:
        dst = ins.dst[0]
        if dst.kind not in ("vgpr", "agpr") or dst.count != ndw:
            return None
    vi, si, inst = (vaddr[0].index if offen else -1), srsrc.index, int(ins.mods.get("offset", 0))
    general = _buffer_store if is_store else _buffer_load
    what = f"{ins.op} at 0x{ins.addr:x}"
    stride = _LDS_DMA_STRIDE.get(nbytes)

    span = np.arange(ndw, dtype=np.int64)[:, None]

    def run(w, ins):
        d0, d1, d2, d3 = w.sgpr[si:si + 4].tolist()
        if (d1 >> 31) & 1 or (d3 >> 23) & 1:
            return general(w, ins)                   # swizzled / ADD_TID resources
        rel = w.vgpr[vi].astype(np.int64) if offen else np.zeros(LANES, np.int64)
        if inst:
            rel += inst
        m = w.exec
        act = m & (rel <= d2 - nbytes)
        n = int(np.count_nonzero(act))
        if nbytes > 4 and n != np.count_nonzero(m & (rel <= d2 - 4)):
            return general(w, ins)                   # some dwords of a lane in range, some not
        if not n and is_store:
            return
        base = d0 | ((d1 & 0xFFFF) << 32)
        start = base + (int(w.sgpr[soff_reg]) if soff_reg is not None else soff_const)
        if n != LANES:
            rel = rel[act]
        if n:
            w.mem.confine(base, start + int(rel.min()), start + int(rel.max()) + nbytes, what)
        # dword accesses inside one aligned allocation: index its uint32 view directly
        dv = None
        if not nbytes % 4 and n:
            dv = w.mem.dword_view(start, start + d2)
            if dv is None:
                dv = w.mem.dword_view(start + int(rel.min()), start + int(rel.max()) + nbytes)
        if dv is not None:
            idx = rel + (start - dv[1])
            if np.count_nonzero(idx & 3):
                dv = None
            else:
                idx = (idx >> 2)[None, :] + span          # [ndw, n] dword indices
        if is_store:
            b = w.agpr_base + vdata.index if vdata.kind == "agpr" else vdata.index
            data = w.vgpr[b:b + ndw]
            if n != LANES:
                data = data[:, act]
            if dv is not None:
                # a C-ordered lane-major index: on overlapping addresses later lanes win
                dv[0][np.ascontiguousarray(idx.T)] = data.T
            else:
                w.mem.store((rel + start).astype(U64),
                            np.ascontiguousarray(data.T).view(np.uint8)[:, :nbytes], what)
            w.counters.global_bytes_written += n * nbytes
            return
        if dv is not None:
            vals = dv[0].take(idx)
        elif nbytes < 4 and n:                       # ubyte/sbyte/ushort/sshort: extend to 32
            small = w.mem.load((rel + start).astype(U64), nbytes, what)
            small = small.view(_SUB_DWORD[nbytes, sext])[:, 0]
            vals = small.astype(np.int32 if sext else np.uint32).view(np.uint32)[None]
        elif n:
            vals = w.mem.load_dwords((rel + start).astype(U64), ndw, what).T
        if n != LANES:                               # lanes out of range (or off) read 0
            full = np.zeros((ndw, LANES), dtype=np.uint32)
            if n:
                full[:, act] = vals
            vals = full
        w.counters.global_bytes_read += n * nbytes
        if to_lds:
            lanes = np.flatnonzero(m)
            lds_store(w, ins, (w.m0 & 0xFFFFFFFF) + inst + lanes * stride,
                      np.ascontiguousarray(vals.T[lanes]).view(np.uint8))
            return
        b = w.agpr_base + dst.index if dst.kind == "agpr" else dst.index
        np.copyto(w.vgpr[b:b + ndw], vals, where=m)
    return run


for _s in _WIDTH:
    if "d16" in _s or _s in ("ubyte", "sbyte", "ushort", "sshort") or _s.startswith("dword"):
        handles(f"buffer_load_{_s}")(_buffer_load)
        specializes(f"buffer_load_{_s}")(_fast_buffer)
    if _s in ("byte", "short", "byte_d16_hi", "short_d16_hi") or _s.startswith("dword"):
        handles(f"buffer_store_{_s}")(_buffer_store)
        specializes(f"buffer_store_{_s}")(_fast_buffer)


# ---------------- global / flat ----------------
def global_addr(w, ins, vaddr_op, saddr_op):
    off = np.int64(int(ins.mods.get("offset", 0)))
    if saddr_op is not None and saddr_op.kind == "sgpr":
        base = int(w.sgpr[saddr_op.index]) | (int(w.sgpr[saddr_op.index + 1]) << 32)
        a = w.read(vaddr_op, 1)[0].astype(U64) + U64(base)
    else:
        v = w.read(vaddr_op, 2)
        a = v[0].astype(U64) | (v[1].astype(U64) << U64(32))
    return (a.view(np.int64) + off).view(U64)


def global_operands(ins, is_store: bool):
    srcs = list(ins.src)
    vaddr = srcs.pop(0)
    vdata = srcs.pop(0) if is_store else None
    saddr = srcs[0] if srcs and srcs[0].kind in ("sgpr", "special") else None
    if saddr is not None and saddr.kind == "special":     # 'off'
        saddr = None
    return vaddr, vdata, saddr


def _global_load(w, ins):
    nbytes, sext, d16 = _WIDTH[_suffix(ins.op)]
    vaddr, _, saddr = global_operands(ins, False)
    addr = global_addr(w, ins, vaddr, saddr)
    m = w.exec
    raw = np.zeros((LANES, nbytes), dtype=np.uint8)
    if m.any():
        what = f"{ins.op} at 0x{ins.addr:x}"
        a = addr[m]
        if nbytes >= 4:
            raw[m] = w.mem.load_dwords(a, nbytes // 4, what).view(np.uint8).reshape(-1, nbytes)
        else:
            raw[m] = w.mem.load(a, nbytes, what)
        w.counters.global_bytes_read += int(m.sum()) * nbytes
    _load_result(w, ins, raw, nbytes, sext, d16, m)


def _global_store(w, ins):
    nbytes, _, d16 = _WIDTH[_suffix(ins.op)]
    vaddr, vdata, saddr = global_operands(ins, True)
    m = w.exec
    if not m.any():
        return
    addr = global_addr(w, ins, vaddr, saddr)
    data = _store_bytes(w, vdata, nbytes, d16)
    w.mem.store(addr[m], data[m], what=f"{ins.op} at 0x{ins.addr:x}")
    w.counters.global_bytes_written += int(m.sum()) * nbytes


for _p in ("global", "flat"):
    for _s in _WIDTH:
        if "d16" in _s or _s in ("ubyte", "sbyte", "ushort", "sshort") or _s.startswith("dword"):
            handles(f"{_p}_load_{_s}")(_global_load)
        if _s in ("byte", "short", "byte_d16_hi", "short_d16_hi") or _s.startswith("dword"):
            handles(f"{_p}_store_{_s}")(_global_store)


# ---------------- scratch ----------------
def _scratch_access(w, ins, is_store):
    """(lane byte offsets int64[64], data operand or None) of a scratch_* instruction."""
    vgprs = [o for o in ins.src if o.kind == "vgpr"]
    saddr = next((o for o in ins.src if o.kind == "sgpr"), None)
    data = vgprs.pop() if is_store else None
    off = np.full(LANES, int(ins.mods.get("offset", 0)), dtype=np.int64)
    if saddr is not None:
        off += int(w.sgpr[saddr.index])
    if ins.mods.get("sve") and vgprs:
        off += w.read(vgprs[0], 1)[0].astype(np.int64)
    return off, data


def _scratch_lanes(w, ins, off, nbytes):
    """The active lanes and their byte offsets, checked against the private segment."""
    m = w.exec
    lanes = np.nonzero(m)[0]
    o = off[m]
    size = w.scratch.shape[1]
    bad = (o < 0) | (o + nbytes > size)
    if bad.any():
        k = int(np.argmax(bad))
        raise EmuError(f"{ins.op} at 0x{ins.addr:x}: lane {int(lanes[k])} accesses private bytes "
                       f"[{int(o[k])}, {int(o[k]) + nbytes}) outside the {size}-byte scratch segment")
    return lanes, o


def _scratch_load(w, ins):
    nbytes, sext, d16 = _WIDTH[_suffix(ins.op)]
    off, _ = _scratch_access(w, ins, False)
    raw = np.zeros((LANES, nbytes), dtype=np.uint8)
    lanes, o = _scratch_lanes(w, ins, off, nbytes)
    if lanes.size:
        raw[lanes] = w.scratch[lanes[:, None], o[:, None] + np.arange(nbytes)]
    _load_result(w, ins, raw, nbytes, sext, d16, w.exec)


def _scratch_store(w, ins):
    nbytes, _, d16 = _WIDTH[_suffix(ins.op)]
    off, data = _scratch_access(w, ins, True)
    lanes, o = _scratch_lanes(w, ins, off, nbytes)
    if lanes.size:
        w.scratch[lanes[:, None], o[:, None] + np.arange(nbytes)] = _store_bytes(w, data, nbytes, d16)[lanes]


for _s in _WIDTH:
    if "d16" in _s or _s in ("ubyte", "sbyte", "ushort", "sshort") or _s.startswith("dword"):
        handles(f"scratch_load_{_s}")(_scratch_load)
    if _s in ("byte", "short", "byte_d16_hi", "short_d16_hi") or _s.startswith("dword"):
        handles(f"scratch_store_{_s}")(_scratch_store)


# ---------------- atomics ----------------
_ATOMIC = {
    "add": lambda o, s: o + s, "sub": lambda o, s: o - s, "smin": min, "umin": min, "smax": max,
    "umax": max, "and": lambda o, s: o & s, "or": lambda o, s: o | s, "xor": lambda o, s: o ^ s,
    "swap": lambda o, s: s, "inc": None, "dec": None, "add_f32": None, "cmpswap": None,
}


def _atomic_apply(kind, old_b: np.ndarray, src_b: np.ndarray) -> np.ndarray:
    nb = old_b.size
    if kind == "add_f32":
        return (old_b.view(np.float32) + src_b.view(np.float32)).view(np.uint8)
    if kind == "pk_add_bf16":
        o = (old_b.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        s = (src_b.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        r = (o + s).view(np.uint32)
        r = (r + np.uint32(0x7FFF) + ((r >> 16) & np.uint32(1))) >> 16     # RNE to bf16
        return r.astype(np.uint16).view(np.uint8)
    if kind == "cmpswap":
        data, cmp = src_b[:nb], src_b[nb:]
        return data.copy() if (old_b == cmp).all() else old_b
    signed = kind in ("smin", "smax")
    dt = {4: np.int32 if signed else np.uint32, 8: np.int64 if signed else np.uint64}[nb]
    o, s = int(old_b.view(dt)[0]), int(src_b[:nb].view(dt)[0])
    if kind == "inc":
        r = 0 if o >= s else o + 1
    elif kind == "dec":
        r = s if (o == 0 or o > s) else o - 1
    else:
        r = _ATOMIC[kind](o, s)
    return np.array([r & ((1 << (8 * nb)) - 1)], dtype=np.uint64).view(np.uint8)[:nb]


def _atomic(w, ins):
    name = ins.op.split("_atomic_", 1)[1]
    wide = name.endswith("_x2")
    kind = name[:-3] if wide else name
    nb = 8 if wide else 4
    returns = bool(ins.dst)
    srcs = list(ins.src)
    if ins.op.startswith("buffer"):
        raise EmuError(f"{ins.op}: buffer atomics are not implemented")
    vaddr = srcs.pop(0)
    data_op = srcs.pop(0)
    saddr = srcs[0] if srcs and srcs[0].kind == "sgpr" else None
    m = w.exec
    if not m.any():
        return
    addr = global_addr(w, ins, vaddr, saddr)[m]
    ndw = data_op.count
    data = np.ascontiguousarray(w.read(data_op, ndw).T).view(np.uint8)[m]
    old = w.mem.atomic(addr, nb, lambda o, lane: _atomic_apply(kind, o, data[lane]),
                       what=f"{ins.op} at 0x{ins.addr:x}")
    w.counters.global_bytes_written += int(m.sum()) * nb
    if returns:
        full = np.zeros((LANES, nb), dtype=np.uint8)
        full[m] = old
        w.write(ins.dst[0], full.view(np.uint32).T, m)


for _p in ("global", "flat"):
    for _k in ("add", "sub", "smin", "umin", "smax", "umax", "and", "or", "xor", "swap", "inc",
               "dec", "cmpswap"):
        handles(f"{_p}_atomic_{_k}", f"{_p}_atomic_{_k}_x2")(_atomic)
    handles(f"{_p}_atomic_add_f32", f"{_p}_atomic_pk_add_bf16")(_atomic)
