"""The emulator's module API: load code objects and launch their kernels on the CPU.

Same shape as the hip/cuda drivers: load_module(bytes) -> module, get_function(module, name),
launch(function, grid, block, kernarg, buffers) -> counters, unload(module). `grid` counts
workgroups per dimension; `buffers` are the CPU tensors the kernel may touch (their storage is
the global address space, so kernarg pointers are plain tensor.data_ptr() values).
"""
import logging
import struct
from dataclasses import dataclass

from flyaot.formats import codeobject, env

from .counters import Counters
from .decode import ISA_ARCH
from .machine import Launch, Prepared, parse_schedule
from .memory import Memory
from .program import Program
from .sanitizer import Sanitizer, enabled_by_env
from . import timing

log = logging.getLogger("flyaot.emu")

# Hidden (implicit) kernel arguments that follow from the launch geometry, code object v5.
_HIDDEN = {"hidden_block_count_x": (0, "I"), "hidden_block_count_y": (1, "I"),
           "hidden_block_count_z": (2, "I"), "hidden_group_size_x": (0, "H"),
           "hidden_group_size_y": (1, "H"), "hidden_group_size_z": (2, "H"),
           "hidden_remainder_x": (0, "H"), "hidden_remainder_y": (1, "H"),
           "hidden_remainder_z": (2, "H"), "hidden_grid_dims": (0, "H")}


@dataclass
class EmuModule:
    code_object: bytes
    info: codeobject.CodeObject


@dataclass
class EmuFunction:
    name: str
    prepared: Prepared
    kernel: codeobject.KernelInfo


class Emulator:
    """Loads code objects and runs their kernels on the CPU (the runtime adapts it as the emu driver).

    sanitize: run every launch under the sanitizer (emu/sanitizer.py; a defect raises
    SanitizerError); None follows FLYAOT_EMU_SANITIZE. schedule: None follows FLYAOT_EMU_SCHEDULE
    ('random:SEED' interleaves the waves of a workgroup at random between barriers), an int is such
    a seed, 'turn' the default in-turn order.
    """

    def __init__(self, sanitize: bool | None = None, schedule=None):
        if sanitize is not None and not isinstance(sanitize, bool):
            raise TypeError(f"Emulator(sanitize=...) takes True, False or None, got {sanitize!r}")
        if schedule is not None and not isinstance(schedule, (int, str)) or isinstance(schedule, bool):
            raise TypeError(f"Emulator(schedule=...) takes None, an int seed or 'random:SEED', got {schedule!r}")
        self.sanitize = sanitize
        self.schedule = parse_schedule(schedule, "Emulator(schedule=...)") if isinstance(schedule, str) else schedule
        self._schedule_given = schedule is not None

    def load_module(self, code_object: bytes) -> EmuModule:
        data = bytes(code_object)
        info = codeobject.parse(data)
        if info.target.split(":")[0].rsplit("-", 1)[-1] != ISA_ARCH:
            log.warning("emulating a %s code object with %s semantics", info.target, ISA_ARCH)
        return EmuModule(data, info)

    def get_function(self, module: EmuModule, name: str) -> EmuFunction:
        prog = Program.from_code_object(module.code_object, name)
        return EmuFunction(name, Prepared.of(prog), module.info.kernel(name))

    def launch(self, function: EmuFunction, grid, block, kernarg: bytes, buffers=(),
               lds_bytes: int = 0, recorder: timing.Recorder = None, progress=None,
               sanitize: bool | None = None) -> Counters:
        """Run the kernel to completion; `progress(workgroups done)` is called after each workgroup
        (not when timed: timing emulates only a sample). With a `recorder` (or FLYAOT_EMU_TIMING set)
        the launch is also timed: its counters carry the modeled time as `.timing`. `sanitize` overrides
        the emulator's own setting for this launch."""
        mem = Memory()
        for t in buffers:
            mem.register_tensor(t)
        kernarg = _with_hidden_args(function.kernel, bytes(kernarg), grid, block)
        if sanitize is None:
            sanitize = enabled_by_env() if self.sanitize is None else self.sanitize
        schedule = self.schedule if self._schedule_given else env.value("FLYAOT_EMU_SCHEDULE")
        launch = Launch(function.prepared, grid, block, kernarg, mem, lds_bytes, schedule=schedule)
        if sanitize:
            launch.probe = Sanitizer(launch)
        if recorder is None:
            recorder = timing.from_env()
        if recorder is not None and (sanitize or schedule is not None):
            log.warning("%s: not timed: the timing model does not run under the sanitizer or a schedule",
                        function.name)
            recorder = None
        if recorder is None:
            return launch.run(progress)
        result = recorder.time(function.name, launch)
        counters = launch.counters
        counters.timing = result          # the modeled MI355X time of this launch
        log.info("%s: modeled %.2f us on MI355X (timing model, sampling error %.0f%%)",
                 function.name, result.us, 100 * result.sampling_error)
        return counters

    def unload(self, module: EmuModule) -> None:
        module.info = None


def _with_hidden_args(kernel, kernarg: bytes, grid, block) -> bytes:
    """Fill the geometry-derived hidden arguments the metadata declares (v5 implicit args)."""
    buf = bytearray(kernarg.ljust(kernel.kernarg_size, b"\0"))
    for a in kernel.args:
        spec = _HIDDEN.get(a.value_kind)
        if spec is None:
            continue
        d, fmt = spec
        if a.value_kind == "hidden_block_count_" + "xyz"[d]:
            v = int(grid[d])
        elif a.value_kind == "hidden_grid_dims":
            v = 3 if grid[2] * block[2] > 1 else 2 if grid[1] * block[1] > 1 else 1
        elif a.value_kind.startswith("hidden_remainder"):
            v = 0                        # grids are whole workgroups here
        else:
            v = int(block[d])
        struct.pack_into("<" + fmt, buf, a.offset, v)
    return bytes(buf)
