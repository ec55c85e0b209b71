"""The build's checks of a store: the store checker (`store.verify`), plus each code object against
its family's gates and the entry the build would write for it."""
import pathlib

from .. import targets
from ..formats import codeobject
from ..formats.manifest import Spec
from ..kernel_defs import registry
from .flydsl_compile import KernelBuild
from ..store import verify as store_verify
from ..store.index import Location
from . import gates
from .build_cache import make_entry


def gate_problems(store, sid: str, entry: dict, data: bytes) -> list:
    """What the build's gates say about one checked code object (empty: it passes)."""
    spec = Spec.make(entry["family"], entry["params"], store.target)
    try:
        fam = registry.get_family(spec.family)
        target = targets.get(store.target)
    except (KeyError, ValueError) as e:
        return [str(e)]
    co = codeobject.parse(data)
    params = spec.param_dict
    kb = KernelBuild.from_entry(entry, data)
    problems = gates.check(co, target=target, symbol=fam.symbol(params), block=tuple(fam.block(params, target)),
                           traced_block=kb.block, arg_ctypes=kb.arg_ctypes, budget=fam.budget(params, target))
    if make_entry(spec, sid, kb, co) != entry:
        problems.append("manifest entry disagrees with the code object's metadata")
    return problems


def verify(store_dir) -> list:
    """All problems found in the store (empty: it is sound)."""
    loc = Location("store", pathlib.Path(store_dir), True)
    return store_verify.verify([loc], checks=gate_problems).problems
