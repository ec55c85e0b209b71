"""Load one store entry onto one device: the store's checks, then module, function, launcher."""
import logging
from dataclasses import dataclass

from ..store.slots import ArgLayout
from ..store.verify import check_entry
from .errors import ArchMismatchError

log = logging.getLogger("flyaot.runtime")


@dataclass
class Loaded:
    key: str
    driver: object
    device: int
    module: object
    function: object
    layout: ArgLayout
    launcher: object


def load(driver, device: int, store, sid: str, entry: dict, *, prefer_c: bool) -> Loaded:
    data, layout = check_entry(store, sid, entry)
    return load_checked(driver, device, store, entry, data, layout, prefer_c=prefer_c)


def load_checked(driver, device: int, store, entry: dict, data: bytes, layout: ArgLayout, *,
                 prefer_c: bool) -> Loaded:
    """Load a code object `store.verify.check_entry` has passed."""
    origin = f"{store.label}: {entry['key']}"
    device_target = driver.target(device)
    if device_target != store.target:
        raise ArchMismatchError(f"{origin}: built for {store.target}, but {driver.name} device {device} is "
                                f"{device_target}")
    module = driver.load_module(data, device)
    try:
        function = driver.get_function(module, entry["symbol"])
        params = driver.param_layout(function)
        if params is not None:
            layout.cross_check_params(params, origin)
        launcher = driver.make_launcher(function, layout, device, prefer_c)
    except BaseException:
        try:
            driver.unload(module)
        except Exception:          # the first error is the one to report
            log.warning("unloading %s after a failed load also failed", origin, exc_info=True)
        raise
    log.info("%s served by the %s: loaded code object %s (%s B, sha256 %s..., symbol %s) on %s device %d",
             entry["key"], store.label, store.root / entry["file"],
             entry.get("size"), str(entry.get("sha256"))[:16], entry["symbol"], driver.name, device)
    return Loaded(entry["key"], driver, device, module, function, layout, launcher)
