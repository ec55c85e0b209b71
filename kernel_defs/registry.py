"""What a kernel family declares, and how the families are found.

A family is a subpackage of kernel_defs with a `specs.py` that defines `FAMILY`; build_tools finds
families by listing, so adding one needs no change outside its own folder.
"""
import functools
import hashlib
import importlib
import importlib.util
import pathlib
import pkgutil
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional

from .. import targets as _targets


@dataclass(frozen=True)
class Budget:
    """Resource limits a family promises for a spec; the build gate refuses code objects beyond them.

    None means "no family-specific limit" (the global gates still apply).
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
    specs: Callable[[], list]                    # every parameter dict to prebuild
    symbol: Callable[[dict], str]                # kernel symbol the code object must define
    block: Callable[[dict], tuple]               # workgroup size the launch plan uses (x, y, z)
    targets: tuple                               # arch names (rows of targets.py) its kernels compile for
    budget: Callable[[dict], Budget] = field(default=lambda params: Budget())
    shipped: bool = True                         # False: built only on request (tests, examples)
    doc: str = ""

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


def family_names() -> list:
    pkg = importlib.import_module(__package__)
    return sorted(
        m.name for m in pkgutil.iter_modules(pkg.__path__)
        if m.ispkg and importlib.util.find_spec(f"{__package__}.{m.name}.specs") is not None
    )


def get_family(name: str) -> Family:
    if name not in family_names():
        raise KeyError(f"unknown kernel family {name!r}; known: {', '.join(family_names())}")
    return importlib.import_module(f"{__package__}.{name}.specs").FAMILY


@functools.lru_cache(maxsize=None)
def family_source_hash(family: str) -> str:
    """Hash of every source that can change a family's code objects: its own folder plus the shared
    parts of kernel_defs (top-level modules and non-family folders), never other families. Part of a
    spec's content id, so the build and the runtime both know when a code object is out of date."""
    root = pathlib.Path(__file__).parent
    others = set(family_names()) - {family}
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


@dataclass(frozen=True)
class LaunchPlan:
    """What a family's plan.py decides for one call: which spec, the launch geometry, the arguments.

    `args` maps every kernel argument name (as the code object's manifest slots name them) to its
    value: a torch.Tensor for pointer slots, a Python int for int32/int64, a float for f32.
    """
    family: str
    params: dict
    grid: tuple
    block: tuple
    args: dict
