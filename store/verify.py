"""The one store checker: what the runtime checks before loading a code object, and what both `verify`
commands report (the same refusals with the same messages).
"""
from dataclasses import dataclass, field

from ..formats import codeobject
from ..formats.elf import EM_AMDGPU, Elf, ElfError
from .errors import IntegrityError, StoreError
from .index import Store, open_location
from .slots import ArgLayout


def check_entry(store: Store, sid: str, entry: dict):
    """Read one code object and check it against its manifest entry and its own metadata, without a
    device: (bytes, argument layout). StoreError / IntegrityError name what is wrong."""
    origin = f"{store.label}: {entry['key']}"
    layout = ArgLayout.from_entry(entry, origin)
    data = store.read(sid, entry)            # bounded; size + sha256 against the manifest
    try:
        machine = Elf(data).machine
    except ElfError as e:
        raise IntegrityError(f"{origin}: {store.root / entry['file']} is not a code object: {e}") from None
    if machine == EM_AMDGPU:
        # The code object's own metadata is the truth; the manifest must agree with it exactly.
        try:
            co = codeobject.parse(data)
            kernel = co.kernel(entry["symbol"])
        except (codeobject.CodeObjectError, KeyError) as e:
            raise IntegrityError(f"{origin}: {store.root / entry['file']}: {e}") from None
        if co.mach != store.target:
            raise IntegrityError(f"{origin}: the code object is for {co.mach}, the store says {store.target}")
        layout.cross_check(kernel, entry, origin)
    return data, layout


@dataclass
class Report:
    checked: int = 0
    loaded: int = 0
    problems: list = field(default_factory=list)     # one line each

    def line(self, how: str = "") -> str:
        return f"verified {self.checked} code objects{how}; {len(self.problems)} problems"


def verify_store(store: Store, report: Report, *, load=None, checks=None) -> Report:
    """Check every entry of an opened store into `report`.

    load(store, entry, data, layout) -> bool: also load the checked code object (True if it did, e.g.
    on a GPU of the store's target); checks(store, sid, entry, data) -> [problems]: further checks
    (the build's gates)."""
    for key, (sid, entry) in sorted(store.by_key.items()):
        try:
            data, layout = check_entry(store, sid, entry)
            for problem in (checks(store, sid, entry, data) if checks else ()):
                report.problems.append(f"FAIL {key} ({store.label}): {problem}")
            if load is not None and load(store, entry, data, layout):
                report.loaded += 1
            report.checked += 1
        except Exception as e:       # noqa: BLE001  (a verifier reports every failure and goes on)
            report.problems.append(f"FAIL {key} ({store.label}): {e}")
    return report


def verify(locs, *, load=None, checks=None) -> Report:
    """Open and check the stores at `locs` (index.Location rows); a refused store is one problem."""
    report = Report()
    for loc in locs:
        try:
            store = open_location(loc)
        except StoreError as e:
            report.problems.append(f"FAIL {e}")      # the message names the store
            continue
        verify_store(store, report, load=load, checks=checks)
    return report
