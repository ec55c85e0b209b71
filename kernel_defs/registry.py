"""The kernel family contract, and how the families are found.

A family is a subpackage of kernel_defs (or of a FLYAOT_EXTRA_FAMILIES folder) whose folder name is
its name. It declares everything about itself once, in `specs.py`, as `FAMILY = Family(...)`:
  axes, specs      compile-time parameters, their supported values, and `specs(target)`: every parameter
                   dict to prebuild for a target (a targets.py row)
  symbol, block    the kernel symbol a spec's code object defines, and `block(params, target)`: the
                   workgroup size it launches with on that target
  abi              the kernel's arguments in order, as (name, C type) pairs (`kernel_abi("void* out, ...")`);
                   the build refuses a code object whose launcher signature differs, and every
                   LaunchPlan is checked against it, so a wrong argument name fails in pure Python
  targets          the targets.py rows its kernels compile for
  budget           `budget(params, target)`: resource limits beyond the target's own (gates.py enforces both)
  kernel           the module (default `kernel`) whose `launcher(params, target)` returns the `@flyc.jit`
                   launcher of a spec for a target row, and which may define `compile_hints(params)`;
                   the family's modules that import flydsl are this one and the modules it imports
                   (build_tools/flydsl_compile.py compiles it)
A family folder is a one-way stack: `geometry.py` (every size as a function of params and target,
`symbol`, `block`, the tile tables; it imports targets.py and shared kernel_defs code only) ->
`specs.py` (FAMILY; registry and geometry, never the plan) -> `plan.py` and `kernel.py`, which import
`FAMILY` from specs.py. `plan.py` (pure Python + torch) turns a call into
`FAMILY.launch_plan(params, grid, args)`. A family uses another only through that family's `plan.py`.
build_tools finds families by listing, so adding one needs no change outside its own folder.
"""
import functools
import hashlib
import importlib
import logging
import pathlib
import pkgutil
from dataclasses import dataclass, field
from typing import Callable, Mapping, NamedTuple, Optional

from ..formats.manifest import SLOT_CTYPES

from .. import targets as _targets


@dataclass(frozen=True)
class Budget:
    """Resource limits a family promises for a spec; the build gate refuses code objects beyond them.

    None means "no family-specific limit" (the global gates still apply). VGPR limits count
    registers per lane as `Resources.registers` splits them: architectural VGPRs, AGPRs, and their
    total in the VGPR file.
    """
    max_vgpr: Optional[int] = None
    max_agpr: Optional[int] = None
    max_vgpr_plus_agpr: Optional[int] = None
    max_sgpr: Optional[int] = None
    max_lds: Optional[int] = None
    exact_lds: Optional[int] = None


@dataclass(frozen=True)
class Family:
    name: str
    axes: Mapping[str, tuple]                    # compile-time parameters and their supported values
    specs: Callable[[_targets.GPUTarget], list]  # every parameter dict to prebuild for a target row
    symbol: Callable[[dict], str]                # kernel symbol the code object must define
    block: Callable[[dict, _targets.GPUTarget], tuple]   # workgroup size (x, y, z) on a target row
    targets: tuple                               # arch names (rows of targets.py) its kernels compile for
    abi: Callable[[dict], tuple]                 # ((argument name, C type), ...) of a spec's kernel
    budget: Callable[[dict, _targets.GPUTarget], Budget] = field(default=lambda params, target: Budget())
    shipped: bool = True                         # False: built only on request (tests, examples)
    doc: str = ""
    kernel: str = "kernel"                       # module of the family package defining launcher(params, target)

    @property
    def kernel_module(self) -> str:
        return f"{__package__}.{self.name}.{self.kernel}"

    @functools.cached_property
    def target_rows(self) -> tuple:
        """The targets.py rows of `targets`, in declaration order (looked up once: launch_plan runs on
        every op call)."""
        return tuple(_targets.get(t) for t in self.targets)

    def launch_plan(self, params: dict, grid: tuple, args: dict, target: "_targets.GPUTarget" = None) -> "LaunchPlan":
        """The LaunchPlan of one call; `args` must name exactly the spec's kernel arguments. The block is
        the one `target` launches with (default: the family's first target; a plan is made before the
        device is known, so a family whose targets differ in block passes the row)."""
        abi = self.abi(params)
        names = _ABI_NAMES.get(id(abi))
        if names is None or names[0] is not abi:     # an ABI tuple seen for the first time
            names = _ABI_NAMES[id(abi)] = (abi, frozenset(n for n, _ in abi))
        if args.keys() != names[1]:
            names = [n for n, _ in abi]
            missing, extra = [n for n in names if n not in args], [n for n in args if n not in names]
            raise ValueError(f"{self.name}: launch arguments do not match the kernel ABI "
                             f"(missing {missing}, unknown {extra}; the ABI is {list(names)})")
        row = target if target is not None else self.target_rows[0]
        return LaunchPlan(self.name, params, tuple(grid), tuple(self.block(params, row)), args)

    def __post_init__(self):
        if not self.targets:
            raise ValueError(f"family {self.name} declares no targets")
        for t in self.targets:
            if _targets.get(t).arch != t:
                raise ValueError(f"family {self.name}: target {t!r} must be spelled as its row, {_targets.get(t).arch!r}")

    def validate_params(self, params: dict) -> None:
        unknown = set(params) - set(self.axes)
        missing = set(self.axes) - set(params)
        if unknown or missing:
            raise ValueError(f"{self.name}: params {sorted(params)} do not match axes {sorted(self.axes)}")
        for k, v in params.items():
            allowed = self.axes[k]
            if allowed and v not in allowed:
                raise ValueError(f"{self.name}: {k}={v!r} is not supported (supported: {list(allowed)})")


def kernel_abi(signature: str) -> tuple:
    """((name, C type), ...) from a C-like list such as "void* out, int32_t n, float value"."""
    out = []
    for part in signature.split(","):
        ctype, _, name = part.strip().rpartition(" ")
        if ctype.strip() not in SLOT_CTYPES or not name.isidentifier():
            raise ValueError(f"kernel ABI entry {part.strip()!r}: expected '<C type> <name>' with a C type "
                             f"of {sorted(SLOT_CTYPES)}")
        out.append((name, ctype.strip()))
    return tuple(out)


# id(ABI tuple) -> (the tuple, its argument names): launch_plan runs on every op call, so the names of
# each declared ABI are gathered once (the tuple is kept, so its id cannot be reused).
_ABI_NAMES = {}


# name -> why the family was left out: a family whose package or specs.py cannot be imported (say, a
# broken folder on FLYAOT_EXTRA_FAMILIES) is refused alone, so every other family keeps working.
_REFUSED = {}


def _folders() -> dict:
    """name -> folder of every subpackage that has a specs.py, found without importing anything."""
    pkg = importlib.import_module(__package__)
    out = {}
    for m in pkgutil.iter_modules(pkg.__path__):
        folder = pathlib.Path(getattr(m.module_finder, "path", "")) / m.name
        if m.ispkg and m.name not in out and (folder / "specs.py").is_file():
            out[m.name] = folder
    return out


def family_names() -> list:
    """The families that can be used: every family folder whose package and specs.py import."""
    names = []
    for name, folder in sorted(_folders().items()):
        if name not in _REFUSED:
            try:
                importlib.import_module(f"{__package__}.{name}.specs")
            except Exception as e:        # noqa: BLE001  (any import-time failure refuses this family alone)
                _REFUSED[name] = f"{type(e).__name__}: {e}"
                extra = "" if folder.parent == pathlib.Path(__file__).parent else " (a FLYAOT_EXTRA_FAMILIES folder)"
                logging.getLogger("flyaot.kernel_defs").warning(
                    "flyaot: kernel family %r at %s%s cannot be imported and is left out: %s", name, folder, extra,
                    _REFUSED[name])
        if name not in _REFUSED:
            names.append(name)
    return names


def get_family(name: str) -> Family:
    known = family_names()
    if name in _REFUSED:
        raise KeyError(f"kernel family {name!r} cannot be imported and was left out: {_REFUSED[name]}")
    if name not in known:
        raise KeyError(f"unknown kernel family {name!r}; known: {', '.join(known)}")
    fam = importlib.import_module(f"{__package__}.{name}.specs").FAMILY
    if fam.name != name:
        raise ValueError(f"the family in folder {name!r} declares the name {fam.name!r}")
    return fam


@functools.lru_cache(maxsize=None)
def family_source_hash(family: str) -> str:
    """Hash of every source that can change a family's code objects: its own folder plus the shared
    parts of kernel_defs (top-level modules and non-family folders), never other families. Part of a
    spec's content id, so the build and the runtime both know when a code object is out of date."""
    root = pathlib.Path(__file__).parent
    others = set(_folders()) - {family}       # a refused family's folder is still no shared source
    files = [(p.relative_to(root), p) for p in root.rglob("*.py") if p.relative_to(root).parts[0] not in others]
    own = pathlib.Path(importlib.import_module(f"{__package__}.{family}").__file__).parent
    if own.parent != root:      # a family from FLYAOT_EXTRA_FAMILIES: its folder is not under root
        files += [(pathlib.Path(family) / p.relative_to(own), p) for p in own.rglob("*.py")]
    h = hashlib.sha256()
    for rel, path in sorted(files):
        if "__pycache__" in rel.parts:
            continue
        h.update(rel.as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


class LaunchPlan(NamedTuple):
    """What a family's plan.py decides for one call: which spec, the launch geometry, the arguments.

    `args` maps every kernel argument name (as the code object's manifest slots name them) to its
    value: a torch.Tensor for pointer slots, a Python int for int32/int64, a float for f32. A tuple
    (immutable like a frozen dataclass, built in a third of the time: one is built per op call).
    """
    family: str
    params: dict
    grid: tuple
    block: tuple
    args: dict
