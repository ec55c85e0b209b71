"""Which specs to build: enumeration from the family registry, shards, miss files, source hashes."""
import hashlib

from .. import targets
from ..formats.manifest import Spec
from ..kernel_defs import registry
from ..store import misses


def enumerate_specs(families=None, *, include_unshipped=False, target=targets.DEFAULT_TARGET) -> list:
    """Every spec to build for `target`: of the families named (each must declare that target), else
    of every shipped family (`include_unshipped`: every family) that declares it."""
    row = targets.get(target)
    arch = row.arch
    names = families or registry.family_names()
    out = []
    for name in names:
        fam = registry.get_family(name)
        if not fam.shipped and not include_unshipped and not families:
            continue
        if arch not in fam.targets:
            if families:
                raise ValueError(f"family {name} does not declare target {arch} (it declares {', '.join(fam.targets)})")
            continue
        for params in fam.specs(row):
            fam.validate_params(params)
            out.append(Spec.make(name, params, arch))
    keys = [s.key for s in out]
    if len(set(keys)) != len(keys):
        dup = sorted({k for k in keys if keys.count(k) > 1})
        raise ValueError(f"duplicate specs: {dup[:5]}")
    return sorted(out, key=lambda s: s.key)


def parse_shard(text: str) -> tuple:
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise ValueError(f"--shard must look like i/n (e.g. 0/4), got {text!r}") from None
    if not (n >= 1 and 0 <= i < n):
        raise ValueError(f"--shard {text}: need 0 <= i < n")
    return i, n


def shard(specs: list, index: int, count: int) -> list:
    """Deterministic split by key hash, so shards stay stable when specs are added elsewhere."""
    def bucket(s):
        return int(hashlib.sha256(s.key.encode()).hexdigest(), 16) % count
    return [s for s in specs if bucket(s) == index]


def specs_from_misses(path, target=targets.DEFAULT_TARGET) -> list:
    """The unique specs a FLYAOT_RECORD_MISSES file names, each checked against its family; a line that
    is malformed or recorded on another target is an error naming it."""
    specs = misses.read(path, targets.get(target).arch)
    for spec in specs:
        try:
            registry.get_family(spec.family).validate_params(spec.param_dict)
        except (KeyError, ValueError) as e:
            raise ValueError(f"{path}: {spec.key}: {e}") from None
    return specs
