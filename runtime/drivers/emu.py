"""The emu driver: the runtime's view of the emulator (flyaot.emu.driver).

Launches pack the kernarg segment exactly as the hardware would read it and hand the emulator the
CPU tensors whose memory the kernel may touch. Stream handles are meaningless here and ignored.
`recording(...)` asks the emulator to time the launches made inside it (the timing model,
docs/timing-model.md): the request travels with the calling context (a context variable, so other
threads and tasks are not timed) and reaches the emulator as its launch's `recorder` argument.
"""
import contextlib
import contextvars
import math

from ... import targets
from ..progress import Progress

_recorder = contextvars.ContextVar("flyaot_emu_recorder", default=None)
_sanitize = contextvars.ContextVar("flyaot_emu_sanitize", default=None)


@contextlib.contextmanager
def sanitizing():
    """Run every emulator launch this context makes inside the block under the sanitizer (as
    FLYAOT_EMU_SANITIZE=1 does for the whole process; `flyaot selftest --sanitize`)."""
    token = _sanitize.set(True)
    try:
        yield
    finally:
        _sanitize.reset(token)


@contextlib.contextmanager
def recording(params=None, samples: int = 16, functional: bool = True, phase: float = 0.0,
              target_error: float = 0.0, max_samples: int = 0):
    """Model every emulator launch this context makes inside the block; yields the emulator's
    timing Recorder, whose `launches` lists (kernel name, Timing, replay) in launch order.
    `phase` shifts the sampled workgroups within their strata (another sample of the same grid);
    with functional=False the sample doubles while its error is above `target_error`, up to
    `max_samples` (timing.time_launch)."""
    from flyaot.emu import timing
    rec = timing.Recorder(params if params is not None else timing.Params(), samples, functional, phase=phase,
                          target_error=target_error, max_samples=max_samples)
    token = _recorder.set(rec)
    try:
        yield rec
    finally:
        _recorder.reset(token)


class EmuDriver:
    """The runtime's driver named "emu": adapts flyaot.emu's Emulator to the driver protocol."""
    name = "emu"

    def __init__(self):
        from flyaot.emu.driver import ISA_ARCH, Emulator
        row = targets.get(ISA_ARCH)
        if not row.emulated:
            raise RuntimeError(f"the emulator implements {ISA_ARCH}, whose row in targets.py says it is not emulated")
        self._target = row.arch
        self._emu = Emulator()

    def target(self, device: int) -> str:
        return self._target

    def load_module(self, data: bytes, device: int):
        return self._emu.load_module(data)

    def get_function(self, module, symbol: str):
        return self._emu.get_function(module, symbol)

    def unload(self, module) -> None:
        self._emu.unload(module)

    def param_layout(self, function):
        return None

    def make_launcher(self, function, layout, device: int, prefer_c: bool):
        return EmuLauncher(self._emu, function, layout)

    def recover(self, rc: int, device: int, relaunch) -> int:
        return rc


class EmuLauncher:
    """Runs a launch to completion on the CPU; `last_counters` holds the emulator's counters. A launch
    that runs longer than `progress_delay` seconds reports its workgroups (runtime/progress.py)."""
    progress_delay = 2.0

    def __init__(self, emu, function, layout):
        self._emu, self._function, self._layout = emu, function, layout
        self.last_counters = None

    def __call__(self, grid, block, args, stream):
        layout = self._layout
        if tuple(block) != layout.block:
            raise ValueError(f"{layout.symbol} was built for block {layout.block}, got {tuple(block)}")
        kernarg = layout.pack(args)
        buffers = []
        for name, v in args.items():
            if hasattr(v, "data_ptr"):
                if v.device.type != "cpu":
                    raise ValueError(f"kernel argument {name!r}: the emulator runs on CPU tensors, got {v.device}")
                buffers.append(v)
        workgroups = math.prod(int(g) for g in grid)
        bar = Progress(f"emulating {layout.symbol}", workgroups, "workgroups", delay=self.progress_delay)
        try:
            self.last_counters = self._emu.launch(self._function, tuple(grid), layout.block, kernarg, buffers,
                                                  recorder=_recorder.get(), progress=bar.update,
                                                  sanitize=_sanitize.get())
        finally:
            bar.close()
        return 0
