"""Execution engine: runs a decoded Program over a grid of workgroups.

Waves of one workgroup share an LDS array and run one after another: each runs until it reaches
s_barrier or s_endpgm, and when every live wave waits at the barrier they are all released. Not
timing accurate (s_waitcnt and s_nop do nothing), which is sound for the data-race-free code our
compiler emits: every cross-wave dependence goes through a barrier. The sanitizer (sanitizer.py)
checks that assumption through the probe hook below; a schedule (random interleaving of the waves
at instruction granularity between barriers) shakes it.

Probe hook: `Launch.probe`, None by default (then the plain loop runs, untouched). A probe (the
sanitizer, the timing tracer emu/timing/trace.py) is an object with
    watches                       True: it wants every memory access (lds / mem below)
    workgroup(wg_id, waves)       a workgroup starts (waves initialised); returning False leaves
                                  that workgroup to the plain loop, without further calls
    before(w, k, ins)             instruction k of the program is about to execute on wave w
    after(w, k, ins)              it executed (also s_barrier / s_endpgm, which yield the wave)
    released(waves)               every live wave reached s_barrier and was released
    lds(w, mode, addr, nbytes)    an LDS access of the running instruction ('r', 'w' or 'a'tomic),
    mem(mode, addr, nbytes)       a global one; addr holds one address per access
    finish()                      the launch ended
While a probe that watches is set, memory instructions run their general handlers (which report
every access through Wave.watch / Memory.watch) instead of the specialized fast paths.

Initial state follows the AMDGPU ABI (docs/emulator.md#execution-model) via program.LaunchFacts:
user SGPRs (dispatch ptr, kernarg segment ptr, ... , preloaded kernarg dwords), then system SGPRs
(workgroup ids, workgroup info, wave offset), v0 = packed work-item ids (x 9:0, y 19:10, z 29:20)
on gfx90a+, EXEC = the lanes that hold a work-item.
"""
import random
import struct
import weakref

import numpy as np

from flyaot.formats import env

from .counters import CLASSES, Counters, classify
from .memory import Memory
from .semantics import HANDLERS, handler_for
from .semantics.salu_ops import WaveYield
from .wave import EmuError, LANES, SanitizerError, Wave


def _unimplemented(w, ins):
    raise EmuError(f"unimplemented instruction {ins.op!r} ({ins.enc})")


class Prepared:
    """Per-program tables built once: handler (specialized where possible), fall-through address
    and class per instruction."""

    def __init__(self, program):
        self.program = program
        self.instrs = list(program.instrs)
        self.handlers = [handler_for(i) or _unimplemented for i in self.instrs]
        self.next_pc = [i.addr + i.size for i in self.instrs]
        self.index = {i.addr: k for k, i in enumerate(self.instrs)}
        self.cls = [CLASSES.index(classify(i.enc, i.op)) for i in self.instrs]
        self._watched = None
        self.cache: dict = {}           # per-program tables of probes (e.g. the sanitizer's), by name

    @property
    def watched_handlers(self) -> list:
        """The handlers a probed run uses: memory instructions take their general handler, whose
        every access reaches the probe."""
        if self._watched is None:
            self._watched = [HANDLERS.get(i.op, _unimplemented) if i.enc in _MEMORY_ENC else h
                             for i, h in zip(self.instrs, self.handlers)]
        return self._watched

    @classmethod
    def of(cls, program) -> "Prepared":
        """The (shared) tables of a program; built on first use."""
        prep = _PREPARED.get(program)
        if prep is None:
            prep = _PREPARED[program] = cls(program)
        return prep

    def unimplemented(self) -> set:
        return {i.op for i in self.instrs if i.op not in HANDLERS}


_PREPARED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_MEMORY_ENC = frozenset(("DS", "MUBUF", "MTBUF", "GLOBAL", "FLAT", "SCRATCH", "SMEM"))


def run_wave(prep: Prepared, w: Wave, counts: list) -> None:
    """Run `w` until s_endpgm or s_barrier (WaveYield); w.pc then holds the resume address."""
    instrs, handlers, nxt, index = prep.instrs, prep.handlers, prep.next_pc, prep.index
    try:
        i = index[w.pc]
    except KeyError:
        raise EmuError(f"{prep.program.name}: jump to 0x{w.pc:x}, not an instruction start") from None
    ins = None
    try:
        while True:
            ins = instrs[i]
            n = nxt[i]
            w.pc = n
            counts[i] += 1
            handlers[i](w, ins)
            if w.pc == n:
                i += 1
            else:
                i = index[w.pc]
    except WaveYield:
        return
    except Exception as e:              # any failure names the instruction that raised it
        raise _fault(prep, w, i, ins, e) from e


def run_wave_stepped(prep: Prepared, w: Wave, counts: list, probe, budget: int = -1) -> None:
    """run_wave with the probe called around each instruction, stopping after `budget`
    instructions when budget >= 0 (w.pc then holds the resume address)."""
    instrs, nxt, index = prep.instrs, prep.next_pc, prep.index
    handlers = prep.watched_handlers if probe is not None and probe.watches else prep.handlers
    try:
        i = index[w.pc]
    except KeyError:
        raise EmuError(f"{prep.program.name}: jump to 0x{w.pc:x}, not an instruction start") from None
    ins = None
    try:
        while budget != 0:
            budget -= 1
            ins = instrs[i]
            n = nxt[i]
            w.pc = n
            counts[i] += 1
            if probe is not None:
                probe.before(w, i, ins)
                try:
                    handlers[i](w, ins)
                except WaveYield:
                    probe.after(w, i, ins)
                    raise
                probe.after(w, i, ins)
            else:
                handlers[i](w, ins)
            if w.pc == n:
                i += 1
            else:
                i = index[w.pc]
    except WaveYield:
        return
    except SanitizerError:
        raise
    except Exception as e:
        raise _fault(prep, w, i, ins, e) from e


def _fault(prep: Prepared, w: Wave, i: int, ins, e: Exception) -> EmuError:
    """The EmuError a wave's failure at instruction index `i` becomes: running off the end, a branch
    into the middle of an instruction, or the instruction that raised it."""
    if isinstance(e, IndexError) and i >= len(prep.instrs):
        return EmuError(f"{prep.program.name}: execution ran past the end of the kernel")
    if isinstance(e, KeyError) and ins is not None and w.pc not in prep.index:
        return EmuError(f"{prep.program.name}: branch from 0x{ins.addr:x} to 0x{w.pc:x}, not an instruction start")
    return _located(prep, ins, e)


def parse_schedule(text: str, what: str = "FLYAOT_EMU_SCHEDULE"):
    """A schedule's text (FLYAOT_EMU_SCHEDULE's value, or `what`) -> None (waves in turn) or the
    seed of a random schedule; the variable's own parser, with the error naming `what`."""
    try:
        return env.BY_NAME["FLYAOT_EMU_SCHEDULE"].parse(text)
    except env.EnvError:
        raise ValueError(f"{what}={text!r}: expected 'random:SEED' (an integer seed) or 'turn'") from None


def _located(prep, ins, e):
    where = f"0x{ins.addr:x} {ins.text or ins.op}" if ins is not None else "?"
    return EmuError(f"{prep.program.name} @ {where}: {type(e).__name__}: {e}")


class Launch:
    """State of one kernel launch: memory, kernarg/dispatch packet, counters."""

    def __init__(self, prep: Prepared, grid, block, kernarg: bytes, mem: Memory, lds_bytes: int = 0,
                 probe=None, schedule: int | None = None):
        facts = prep.program.facts
        self.prep, self.facts, self.mem = prep, facts, mem
        self.grid, self.block = tuple(int(g) for g in grid), tuple(int(b) for b in block)
        if facts.wavefront_size != 64:
            raise EmuError("only wave64 kernels are supported")
        ka = np.zeros(max(len(kernarg), facts.kernarg_size, 8) + 256, dtype=np.uint8)
        ka[:len(kernarg)] = np.frombuffer(kernarg, dtype=np.uint8)
        self.kernarg = ka
        self.kernarg_addr = mem.register_array(ka)
        self.dispatch_addr = mem.register_array(self._dispatch_packet())
        self.lds_size = facts.lds_size + int(lds_bytes)
        self.counters = Counters()
        self.counts = [0] * len(prep.instrs)
        self.probe = probe         # see the module docstring
        self.schedule = schedule   # None: waves in turn; an int: the seed of a random interleaving
        threads = self.block[0] * self.block[1] * self.block[2]
        self.nwaves = -(-threads // LANES)
        self._waves = [Wave(mem=mem, agpr_base=facts.accum_offset, counters=self.counters,
                            wave_id=k) for k in range(self.nwaves)]
        for w in self._waves:
            w.scratch = np.zeros((LANES, facts.scratch_size), dtype=np.uint8)
        self._tid = self._workitem_ids(threads)

    def _dispatch_packet(self) -> np.ndarray:
        """An AQL kernel dispatch packet as the hardware queue would hold it."""
        pkt = bytearray(64)
        dims = 3 if self.grid[2] > 1 or self.block[2] > 1 else 2 if self.grid[1] > 1 or self.block[1] > 1 else 1
        struct.pack_into("<HHHHH", pkt, 0, 0, dims, *self.block)
        struct.pack_into("<III", pkt, 12, *(g * b for g, b in zip(self.grid, self.block)))
        struct.pack_into("<II", pkt, 24, self.facts.scratch_size, self.facts.lds_size)
        return np.frombuffer(bytes(pkt), dtype=np.uint8).copy()

    def _workitem_ids(self, threads):
        """Per wave: (v0 init uint32[64] or list of 3 for unpacked targets, EXEC bool[64])."""
        bx, by, _ = self.block
        t = np.arange(self.nwaves * LANES)
        x, y, z = t % bx, (t // bx) % by, t // (bx * by)
        out = []
        for k in range(self.nwaves):
            s = slice(k * LANES, (k + 1) * LANES)
            valid = t[s] < threads
            if self.facts.packed_workitem_ids:
                v = [(x[s] | (y[s] << 10) | (z[s] << 20)).astype(np.uint32)]
            else:
                v = [a[s].astype(np.uint32) for a in (x, y, z)]
            out.append((v, valid))
        return out

    def _init_wave(self, w: Wave, wg_id, lds):
        f = self.facts
        w.sgpr[:] = 0
        w.vgpr[:] = 0
        w.vcc[:] = False
        w.scc = 0
        w.m0 = 0
        w.done = False
        w.at_barrier = False
        w.lds = lds
        w.pc = self.prep.program.entry
        for i, v in self.initial_sgprs(wg_id).items():
            w.sgpr[i] = v
        vinit, valid = self._tid[w.wave_id]
        for r in range(self.initial_vgprs()):
            w.vgpr[r] = vinit[r]
        w.exec = valid.copy()

    def initial_sgprs(self, wg_id) -> dict:
        """SGPR index -> initial value, for the SGPRs the ABI initialises (the rest start at 0)."""
        f = self.facts
        out = {}

        def put64(i, v):
            if i >= 0:
                out[i], out[i + 1] = v & 0xFFFFFFFF, v >> 32
        put64(f.sgpr_dispatch_ptr, self.dispatch_addr)
        put64(f.sgpr_kernarg_segment_ptr, self.kernarg_addr)
        if f.sgpr_kernarg_preload >= 0:
            o = f.kernarg_preload_offset
            dw = self.kernarg[o:o + 4 * f.kernarg_preload_dwords].view(np.uint32)
            out.update((f.sgpr_kernarg_preload + k, int(d)) for k, d in enumerate(dw))
        for i, g in zip(f.sgpr_workgroup_id, wg_id):
            if i >= 0:
                out[i] = g
        if f.sgpr_workgroup_info >= 0:
            out[f.sgpr_workgroup_info] = 0
        return out

    def initial_vgprs(self) -> int:
        """How many VGPRs (v0, v1, ...) hold work-item ids at wave start."""
        f = self.facts
        dims = f.workitem_id_dims if not f.packed_workitem_ids else 1
        return min(len(self._tid[0][0]), max(dims, 1))

    def run_workgroup(self, wg_id) -> None:
        lds = np.zeros(self.lds_size, dtype=np.uint8)
        waves = self._waves
        for w in waves:
            self._init_wave(w, wg_id, lds)
        prep, counts = self.prep, self.counts
        probe = self.probe
        if probe is not None and probe.workgroup(wg_id, waves) is False:
            probe = None
        if probe is not None or self.schedule is not None:
            self._run_stepped(wg_id, waves, probe)
            return
        while True:
            for w in waves:
                if not w.done and not w.at_barrier:
                    run_wave(prep, w, counts)
            alive = [w for w in waves if not w.done]
            if not alive:
                break
            for w in alive:          # every live wave now waits at s_barrier: release them all
                w.at_barrier = False
        self.counters.workgroups += 1
        self.counters.waves += len(waves)

    def _run_stepped(self, wg_id, waves, probe) -> None:
        """run_workgroup through `probe` (None: none), and interleaved by the random schedule if one
        is set: each step runs a random ready wave for 1 to 8 instructions (seeded per workgroup, so
        a seed always gives the same interleaving)."""
        prep, counts = self.prep, self.counts
        rng = None if self.schedule is None else random.Random(f"{self.schedule}:{wg_id}")
        while True:
            ready = [w for w in waves if not w.done and not w.at_barrier]
            while ready:
                if rng is None:
                    run_wave_stepped(prep, ready[0], counts, probe)
                else:
                    run_wave_stepped(prep, rng.choice(ready), counts, probe, rng.randint(1, 8))
                ready = [w for w in waves if not w.done and not w.at_barrier]
            alive = [w for w in waves if not w.done]
            if not alive:
                break
            for w in alive:
                w.at_barrier = False
            if probe is not None:
                probe.released(alive)
        self.counters.workgroups += 1
        self.counters.waves += len(waves)

    def run(self, progress=None) -> Counters:
        """Run every workgroup; `progress(done)` is called after each (long launches report it)."""
        gx, gy, gz = self.grid
        done = 0
        with np.errstate(all="ignore"):
            for z in range(gz):
                for y in range(gy):
                    for x in range(gx):
                        self.run_workgroup((x, y, z))
                        if progress is not None:
                            done += 1
                            progress(done)
        if self.probe is not None:
            self.probe.finish()
        for k, c in enumerate(self.counts):
            if c:
                name = CLASSES[self.prep.cls[k]]
                setattr(self.counters, name, getattr(self.counters, name) + c)
        return self.counters
