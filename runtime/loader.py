"""Load one store entry onto one device: integrity, metadata cross-check, module, function, launcher."""
from dataclasses import dataclass

from ..formats import codeobject
from ..formats.elf import EM_AMDGPU, Elf, ElfError
from .errors import ArchMismatchError, IntegrityError
from .packing import ArgLayout


@dataclass
class Loaded:
    key: str
    driver: object
    device: int
    module: object
    function: object
    layout: ArgLayout
    launcher: object


def check(store, sid: str, entry: dict):
    """Read one code object and check it against its manifest entry and its own metadata, without a
    device: (bytes, argument layout)."""
    origin = f"{store.label}: {entry['key']}"
    layout = ArgLayout.from_entry(entry, origin)
    data = store.read(sid, entry)            # size + sha256 against the manifest
    try:
        machine = Elf(data).machine
    except ElfError as e:
        raise IntegrityError(f"{origin}: {store.root / entry['file']} is not a code object: {e}") from None
    if machine == EM_AMDGPU:
        # The code object's own metadata is the truth; the manifest must agree with it exactly.
        co = codeobject.parse(data)
        if co.mach != store.target:
            raise ArchMismatchError(f"{origin}: the code object is for {co.mach}, the store says {store.target}")
        layout.cross_check(co.kernel(entry["symbol"]), entry, origin)
    return data, layout


def load(driver, device: int, store, sid: str, entry: dict, *, prefer_c: bool) -> Loaded:
    origin = f"{store.label}: {entry['key']}"
    data, layout = check(store, sid, entry)
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
        driver.unload(module)
        raise
    return Loaded(entry["key"], driver, device, module, function, layout, launcher)
