"""From a LaunchPlan to a launch: spec lookup, lazy per-device load, the cheap repeated call.

The repeated call costs two dict lookups, one `get_device()`, the current-stream query and the
launcher (C: packs on its stack and calls the driver). Everything else happens once per
(spec, device): store lookup, JIT fallback, integrity checks, module load.
"""
import logging
import threading

from ..formats.manifest import Spec
from ..store.index import Index
from . import drivers, jit, loader, misses
from .config import EXPECTED_FLYDSL, Config
from .errors import JitError, MissingSpecError, StoreError

log = logging.getLogger("flyaot.runtime")

_raw_stream = None        # torch's current-stream query, bound on the first GPU load


def _bind_stream_query():
    global _raw_stream
    import torch
    query = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    _raw_stream = query or (lambda device: torch.cuda.current_stream(device).cuda_stream)


def current_id(spec):
    """The content id a build of `spec` from this package's kernel sources gets (None for a family this
    package does not define). An entry with another id was built from other sources: out of date."""
    from ..kernel_defs import registry
    if spec.family not in registry.family_names():
        return None
    return spec.content_id(registry.family_source_hash(spec.family), EXPECTED_FLYDSL)


class Runtime:
    """Stores, drivers and loaded kernels of one process (see `runtime()`)."""

    def __init__(self, config: Config = None):
        self.config = config or Config.from_env()
        self._index = None
        self._lock = threading.RLock()
        self._kernels = {}        # (family, params items in plan order) -> Kernel
        self._loaded = {}         # (driver, device, store root, spec id) -> loader.Loaded

    @property
    def index(self):
        if self._index is None:
            with self._lock:
                if self._index is None:
                    self._index = Index.open(self.config)
        return self._index

    def kernel(self, family: str, params: dict) -> "Kernel":
        Spec.make(family, params, "")      # parameter values must be int, bool or str (TypeError naming one)
        k = self._kernels.get((family, tuple(params.items())))
        if k is None:
            with self._lock:
                k = self._kernels.setdefault((family, tuple(params.items())), Kernel(self, family, dict(params)))
        return k

    def launch(self, plan, stream=None) -> None:
        try:
            k = self._kernels[(plan.family, tuple(plan.params.items()))]
        except (KeyError, TypeError):      # TypeError: an unhashable parameter, named by kernel()
            k = self.kernel(plan.family, plan.params)
        k(plan.grid, plan.block, plan.args, stream)

    def resolve(self, plans) -> None:
        """Find and load the code object of every plan (on its tensors' device); raises the first
        MissingSpecError after trying them all."""
        missing = None
        for plan in plans:
            try:
                self.kernel(plan.family, plan.params).resolve(plan.args)
            except MissingSpecError as e:
                missing = missing or e
        if missing is not None:
            raise missing

    def find(self, spec: Spec, device: int):
        """(store, spec id, entry) for the spec: from a store, else JIT into the user cache, else an error."""
        index = self.index
        current = current_id(spec)
        hit = index.lookup(spec.key, current)
        if hit is not None:
            return hit
        stale = index.lookup(spec.key)
        if stale is not None:
            # Built from other kernel sources (a checkout whose kernel_defs changed since `make prebuilt`).
            log.warning("flyaot: %s holds %s built from other kernel sources; not using it (rebuild the "
                        "store: `python -m flyaot.build_tools build`)", stale[0].label, spec.key)
        cached = index.cache(spec.target).by_key.get(spec.key)
        recorded = bool(self.config.record_misses) and misses.record(self.config.record_misses, spec)
        reason = self._jit_unavailable(spec, device)
        if reason:
            if stale is not None:
                reason += f"; {stale[0].label} has it only from other kernel sources (rebuild that store)"
            raise misses.missing_error(spec, index, reason, self.config.record_misses, recorded)
        return self._compile(spec, stale_id=cached[0] if cached else None)

    def _jit_unavailable(self, spec: Spec, device: int) -> str:
        reason = jit.unavailable_reason(self.config, spec.target)
        if not reason and device >= 0:
            import torch
            if torch.cuda.is_current_stream_capturing():
                reason = ("a CUDA/HIP graph is being captured and the JIT never runs during capture; "
                          "launch once before capturing")
        return reason

    def _compile(self, spec: Spec, *, stale_id):
        index = self.index
        with self._lock:
            root = index.cache(spec.target).root
        jit.publish(root, spec, timeout=self.config.jit_timeout, stale_id=stale_id)
        with self._lock:
            index.reopen(index.cache(spec.target))
        hit = index.lookup(spec.key, current_id(spec))
        if hit is None:
            raise JitError(f"flyaot: {spec.key} was compiled into {root} but is not in its manifest")
        return hit

    def find_loaded(self, driver, spec: Spec, device: int) -> loader.Loaded:
        """Find and load the spec. A user cache entry that fails its checks is compiled again once (when
        the JIT may run), never served."""
        hit = self.find(spec, device)
        try:
            return self.load(driver, device, hit)
        except StoreError as e:
            store, sid, _ = hit
            if store.kind != "cache" or self._jit_unavailable(spec, device):
                raise
            log.warning("flyaot: the user cache entry of %s is unusable (%s); compiling it again", spec.key, e)
            return self.load(driver, device, self._compile(spec, stale_id=sid))

    def load(self, driver, device: int, hit) -> loader.Loaded:
        """One module per (driver, device, code object), however many plans map to it."""
        store, sid, entry = hit
        key = (driver.name, device, str(store.root), sid)
        loaded = self._loaded.get(key)
        if loaded is None:
            with self._lock:
                loaded = self._loaded.get(key)
                if loaded is None:
                    loaded = loader.load(driver, device, store, sid, entry, prefer_c=not self.config.py_launch)
                    self._loaded[key] = loaded
        return loaded

    def unload_all(self) -> None:
        with self._lock:
            for loaded in self._loaded.values():
                loaded.driver.unload(loaded.module)
            self._loaded.clear()
            self._kernels.clear()


class Kernel:
    """One (family, params): a launcher per device, loaded on first use.

    Call: kernel(grid, block, args: dict, stream=None). `stream` is None (torch's current stream of
    the tensors' device), a torch Stream, or a raw handle (int).
    """

    def __init__(self, rt: Runtime, family: str, params: dict):
        self._rt = rt
        self.family = family
        self.params = params
        self._probe = None            # name of the argument whose tensor decides the device
        self._by_device = {}          # device index (-1: CPU, the emulator) -> launcher
        self._lock = threading.Lock()

    def __call__(self, grid, block, args, stream=None) -> None:
        try:
            device = args[self._probe].get_device()
        except (KeyError, AttributeError):
            device = self._device_of(args)
        launcher = self._by_device.get(device)
        if launcher is None:
            launcher = self._load(device)
        if device < 0:
            s = 0
        elif stream is None:
            s = _raw_stream(device)
        elif type(stream) is int:
            s = stream
        else:
            s = stream.cuda_stream
        rc = launcher(grid, block, args, s)
        if rc:
            self._failed(rc, device, launcher, grid, block, args, s)

    def resolve(self, args) -> None:
        """Load this kernel for the device of `args` (what a launch would), without launching."""
        device = self._device_of(args)
        if device not in self._by_device:
            self._load(device)

    def _device_of(self, args) -> int:
        for name, v in args.items():
            if hasattr(v, "get_device"):
                self._probe = name
                return v.get_device()
        raise ValueError(f"{self.family}: a launch needs at least one tensor argument")

    def loaded(self, device: int) -> loader.Loaded:
        """Resolve, check and load this kernel for `device` (-1: the emulator) without launching."""
        rt = self._rt
        driver = drivers.get(drivers.name_for(device, rt.config.device))
        if device >= 0 and _raw_stream is None:
            _bind_stream_query()
        spec = Spec.make(self.family, self.params, driver.target(device))
        return rt.find_loaded(driver, spec, device)

    def _load(self, device: int):
        with self._lock:
            launcher = self._by_device.get(device)
            if launcher is None:
                launcher = self._by_device[device] = self.loaded(device).launcher
        return launcher

    def _failed(self, rc, device, launcher, grid, block, args, s) -> None:
        loaded = self.loaded(device)
        rc = loaded.driver.recover(rc, device, lambda: launcher(grid, block, args, s))
        if rc:
            raise loaded.driver.error(rc, f"launch of {loaded.key} (grid {tuple(grid)}, block {tuple(block)})")
