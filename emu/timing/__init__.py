"""A cycle-approximate timing model of gfx950 (MI355X) on top of the functional emulator.

It is a model, calibrated against a handful of published MI355X kernel times (see
docs/timing-model.md for its constants, their sources and its validation error), not a measurement.
Timing is requested per launch: `Emulator.launch(..., recorder=Recorder(...))`, or for every launch
under FLYAOT_EMU_TIMING (`from_env()`). Nothing here holds state between launches.
"""

from ...formats import env
from .model import Params, Timing, Traced, model, occupancy, refined_ids, sample_ids, serving_levels, time_launch


class Recorder:
    """How to time the launches it is handed (parameters, sample size and phase (model.sample_ids),
    whether every workgroup runs, the sampling error to refine the sample to and its cap)
    and, when `keep`, the (kernel name, Timing, replay) of each of them in `launches`.
    functional=False runs only the sampled workgroups: outputs are then incomplete (for timing
    studies of shapes too large to emulate)."""

    def __init__(self, params: Params = Params(), samples: int = 16, functional: bool = True, keep: bool = True,
                 phase: float = 0.0, target_error: float = 0.0, max_samples: int = 0):
        if samples < 1:
            raise ValueError(f"Recorder: samples must be >= 1, got {samples}")
        if not 0.0 <= phase < 1.0:
            raise ValueError(f"Recorder: phase must be in [0, 1), got {phase}")
        self.params, self.samples, self.functional, self.keep = params, samples, functional, keep
        self.phase, self.target_error, self.max_samples = phase, target_error, max_samples
        self.launches: list = []

    def time(self, name: str, launch) -> Timing:
        """Run `launch` (machine.Launch) with timing and return its modeled time."""
        res = time_launch(launch, samples=self.samples, functional=self.functional, params=self.params,
                          phase=self.phase, target_error=self.target_error, max_samples=self.max_samples)
        if self.keep:
            self.launches.append((name, res, replay(launch)))
        return res


def from_env():
    """The Recorder FLYAOT_EMU_TIMING asks for (=1: every workgroup runs, =sample: only the sampled
    ones; FLYAOT_EMU_TIMING_SAMPLES workgroups; nothing kept), or None when it is off."""
    mode = env.value("FLYAOT_EMU_TIMING")
    if mode == "off":
        return None
    return Recorder(samples=env.value("FLYAOT_EMU_TIMING_SAMPLES"), functional=mode != "sample", keep=False)


class Replay:
    """params -> Timing of a launch already run by time_launch: the same traces modeled under other
    parameters. It holds only the model's inputs (model.Traced), so it can be pickled and re-modeled
    in another process."""

    def __init__(self, traced: Traced):
        self.traced = traced

    def __call__(self, params: Params, error: bool = False) -> Timing:
        return model(self.traced, params=params, error=error)


def replay(launch) -> Replay:
    return Replay(launch.timing_trace)


__all__ = ["Params", "Recorder", "Replay", "replay", "Timing", "Traced", "from_env", "model", "occupancy",
           "sample_ids", "serving_levels", "time_launch"]
