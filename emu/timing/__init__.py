"""A cycle-approximate timing model of gfx950 (MI355X) on top of the functional emulator.

It is a model, calibrated against a handful of published MI355X kernel times (see
docs/timing-model.md for its constants, their sources and its validation error), not a measurement.
"""
import contextlib

from ...formats import env
from .model import Params, Timing, model, occupancy, sample_ids, time_launch

_RECORDERS: list = []


def enabled() -> bool:
    """Timing is on for emulator launches under FLYAOT_EMU_TIMING=1 (or =sample), or inside record()."""
    return bool(_RECORDERS) or env.value("FLYAOT_EMU_TIMING") != "off"


class Recorder:
    """Collects (kernel name, Timing, replay) of every emulator launch made while it is active."""

    def __init__(self, params: Params, samples: int, functional: bool):
        self.params, self.samples, self.functional = params, samples, functional
        self.launches: list = []


@contextlib.contextmanager
def record(params: Params = Params(), samples: int = 16, functional: bool = True):
    """Model every emulator launch inside the block. functional=False runs only the sampled
    workgroups: outputs are then incomplete (for timing studies of shapes too large to emulate)."""
    rec = Recorder(params, samples, functional)
    _RECORDERS.append(rec)
    try:
        yield rec
    finally:
        _RECORDERS.remove(rec)


def replay(launch):
    """params -> Timing of a launch already run by time_launch (same traces, other parameters)."""
    tracer, ids = launch.timing_trace
    prep, grid, nwaves = launch.prep, launch.grid, launch.nwaves

    def again(params: Params, error: bool = False) -> Timing:
        return model(prep, grid, nwaves, tracer, ids, params=params, error=error)
    return again


def time_driver_launch(name, launch) -> Timing:
    """The driver's entry: model `launch` with the innermost recorder's settings (or the env's)."""
    if _RECORDERS:
        rec = _RECORDERS[-1]
        res = time_launch(launch, samples=rec.samples, functional=rec.functional, params=rec.params)
        rec.launches.append((name, res, replay(launch)))
        return res
    return time_launch(launch, samples=env.value("FLYAOT_EMU_TIMING_SAMPLES"),
                       functional=env.value("FLYAOT_EMU_TIMING") != "sample")


__all__ = ["Params", "Recorder", "replay", "Timing", "enabled", "model", "occupancy", "record", "sample_ids",
           "time_driver_launch", "time_launch"]
