"""Global memory of an emulated launch: registered host allocations addressed by their real
pointers (torch CPU tensors' storage, the kernarg segment, the dispatch packet).

Accesses are vectorised over lanes: one gather/scatter per instruction when all lanes fall into
one allocation. A lane touching bytes outside every allocation is an error that names the
instruction and the address (no silent corruption of host memory).

Each registration also declares a region: the bytes of the tensor itself (a view's span, not its
whole storage). A buffer access (a V# or scalar buffer load) must stay inside a region that holds
the descriptor's base address: reaching another tensor, the unused bytes of a shared storage, or
memory of no tensor is a fault, though the hardware would perform it, because a kernel that does
so reads or writes memory its caller never handed it.
"""
import bisect
import ctypes

import numpy as np

from .wave import EmuError


class Memory:
    def __init__(self):
        self._allocs = []        # (base, size, uint8 view, owner)
        self._bases = np.zeros(0, dtype=np.uint64)
        self._ends = np.zeros(0, dtype=np.uint64)
        self._base_list: list[int] = []     # the same as Python ints, for one-range lookups
        self._end_list: list[int] = []
        self._u32: list = []                # dword view of each allocation (None if unaligned)
        self._regions: list[tuple[int, int]] = []   # [lo, hi) of each registered tensor / array
        self._limits: dict[int, int] = {}           # descriptor base -> end of its region (cache)
        self.watch = None        # a probe told of every access: watch.mem(mode, addr, nbytes)

    # ----- registration -----
    def register_array(self, arr: np.ndarray) -> int:
        """Register a contiguous numpy array (kept alive here); returns its address."""
        a = np.ascontiguousarray(arr)
        u8 = a.reshape(-1).view(np.uint8)
        base = a.ctypes.data
        self._add(base, u8.size, u8, a)
        self._add_region(base, base + u8.size)
        return base

    def register_tensor(self, t) -> None:
        """Register a torch CPU tensor's whole storage, aliased (writes land in the tensor)."""
        if t.device.type != "cpu":
            raise EmuError(f"emu memory needs CPU tensors, got {t.device}")
        st = t.untyped_storage()
        base, size = st.data_ptr(), st.nbytes()
        if size == 0:
            return
        buf = (ctypes.c_uint8 * size).from_address(base)
        self._add(base, size, np.frombuffer(buf, dtype=np.uint8), t)
        if t.numel():
            span = 1 + sum((n - 1) * st for n, st in zip(t.shape, t.stride()))
            self._add_region(t.data_ptr(), t.data_ptr() + span * t.element_size())

    def _add_region(self, lo: int, hi: int) -> None:
        if hi > lo:
            self._regions.append((lo, hi))
            self._limits.clear()

    def confine(self, base: int, lo: int, hi: int, what: str) -> None:
        """Fault unless the bytes [lo, hi) of a buffer access lie in a region holding `base` (the
        descriptor's base address); overlapping views of one storage each count."""
        lim = self._limits.get(base)
        if lim is None:
            lim = max((h for l, h in self._regions if l <= base < h), default=-1)
            self._limits[base] = lim
        if lo < base or hi > lim:
            where = (f"its tensor ends at 0x{lim:x}" if lim >= 0 else "the base lies in no tensor")
            raise EmuError(f"{what}: buffer access [0x{lo:x}, 0x{hi:x}) through a descriptor based at "
                           f"0x{base:x} leaves its tensor ({where})")

    def _add(self, base, size, u8, owner):
        for b, s, _, _ in self._allocs:
            if b == base and s == size:
                return                          # the same storage registered twice
            if base < b + s and b < base + size:
                raise EmuError(f"allocation 0x{base:x}+{size} overlaps 0x{b:x}+{s}")
        self._allocs.append((base, size, u8, owner))
        self._allocs.sort(key=lambda x: x[0])
        self._bases = np.array([a[0] for a in self._allocs], dtype=np.uint64)
        self._ends = np.array([a[0] + a[1] for a in self._allocs], dtype=np.uint64)
        self._base_list = [a[0] for a in self._allocs]
        self._end_list = [a[0] + a[1] for a in self._allocs]
        self._u32 = [u[:n - n % 4].view(np.uint32) if b % 4 == 0 else None
                     for b, n, u, _ in self._allocs]

    def containing(self, lo: int, hi: int) -> int:
        """Index of the allocation that holds all of [lo, hi), or -1."""
        k = bisect.bisect_right(self._base_list, lo) - 1
        return k if k >= 0 and hi <= self._end_list[k] else -1

    def dword_view(self, lo: int, hi: int):
        """(uint32 view, base address) of the dword-aligned allocation holding [lo, hi), or None."""
        k = self.containing(lo, hi)
        if k < 0 or self._u32[k] is None:
            return None
        return self._u32[k], self._base_list[k]

    # ----- lookup -----
    def _locate(self, addr: np.ndarray, nbytes: int, what: str):
        """Allocation index per address; raises naming the first address outside every allocation."""
        idx = np.searchsorted(self._bases, addr, side="right").astype(np.intp) - 1
        ok = idx >= 0
        safe = np.where(ok, idx, 0)
        if self._allocs:
            ok &= (addr + np.uint64(nbytes)) <= self._ends[safe]
        else:
            ok[:] = False
        if not ok.all():
            bad = int(addr[~ok][0])
            raise EmuError(f"{what}: address 0x{bad:x} (+{nbytes} bytes) is outside every registered "
                           f"allocation")
        return safe

    def _groups(self, addr, nbytes, what):
        """Yield (uint8 buffer, byte offsets, lane selector or None) per allocation touched."""
        k = self.containing(int(addr.min()), int(addr.max()) + nbytes)
        if k >= 0:
            yield self._allocs[k][2], (addr - np.uint64(self._base_list[k])).astype(np.intp), None
            return
        idx = self._locate(addr, nbytes, what)
        first = idx[0]
        if (idx == first).all():
            base, _, u8, _ = self._allocs[first]
            yield u8, (addr - np.uint64(base)).astype(np.intp), None
            return
        for k in np.unique(idx):
            sel = idx == k
            base, _, u8, _ = self._allocs[k]
            yield u8, (addr[sel] - np.uint64(base)).astype(np.intp), sel

    # ----- vector access -----
    def load(self, addr: np.ndarray, nbytes: int, what: str = "load") -> np.ndarray:
        """Read `nbytes` at each address (uint64 [L]) -> uint8 [L, nbytes]."""
        out = np.empty((addr.shape[0], nbytes), dtype=np.uint8)
        if addr.shape[0] == 0:
            return out
        if self.watch is not None:
            self.watch.mem("r", addr, nbytes)
        span = np.arange(nbytes, dtype=np.intp)
        for u8, off, sel in self._groups(addr, nbytes, what):
            g = u8[off[:, None] + span]
            if sel is None:
                out[:] = g
            else:
                out[sel] = g
        return out

    def load_dwords(self, addr: np.ndarray, ndw: int, what: str = "load") -> np.ndarray:
        """Read `ndw` dwords at each address -> uint32 [L, ndw] (fast path for aligned dwords)."""
        if addr.shape[0]:
            k = self.containing(int(addr.min()), int(addr.max()) + 4 * ndw)
            u32 = self._u32[k] if k >= 0 else None
            if u32 is not None and not (addr & np.uint64(3)).any():
                if self.watch is not None:
                    self.watch.mem("r", addr, 4 * ndw)
                off = ((addr - np.uint64(self._base_list[k])) >> np.uint64(2)).astype(np.intp)
                return u32[off[:, None] + np.arange(ndw)] if ndw > 1 else u32[off][:, None]
        return self.load(addr, 4 * ndw, what).view(np.uint32)

    def store(self, addr: np.ndarray, data: np.ndarray, what: str = "store") -> None:
        """Write uint8 [L, n] at each address (lanes in ascending order: later lanes win)."""
        if addr.shape[0] == 0:
            return
        nbytes = data.shape[1]
        if self.watch is not None:
            self.watch.mem("w", addr, nbytes)
        span = np.arange(nbytes, dtype=np.intp)
        for u8, off, sel in self._groups(addr, nbytes, what):
            u8[off[:, None] + span] = data if sel is None else data[sel]

    def atomic(self, addr: np.ndarray, nbytes: int, fn, what: str = "atomic"):
        """Read-modify-write per lane in lane order; fn(old uint8 [n]) -> new uint8 [n].
        Returns the old values [L, nbytes] (what the 'glc' forms return)."""
        old = np.empty((addr.shape[0], nbytes), dtype=np.uint8)
        idx = self._locate(addr, nbytes, what)
        if self.watch is not None:
            self.watch.mem("a", addr, nbytes)
        for lane in range(addr.shape[0]):
            base, _, u8, _ = self._allocs[idx[lane]]
            o = int(addr[lane]) - base
            old[lane] = u8[o:o + nbytes]
            u8[o:o + nbytes] = fn(old[lane].copy(), lane)
        return old

    # ----- scalar access (s_load) -----
    def load_scalar(self, addr: int, ndw: int, what: str = "s_load") -> np.ndarray:
        k = self.containing(addr, addr + 4 * ndw)
        if k >= 0:
            if self.watch is not None:
                self.watch.mem("r", np.array([addr], dtype=np.uint64), 4 * ndw)
            o = addr - self._base_list[k]
            return self._allocs[k][2][o:o + 4 * ndw].view(np.uint32).copy()
        return self.load(np.array([addr], dtype=np.uint64), 4 * ndw, what)[0].view(np.uint32)
