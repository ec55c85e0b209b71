"""Re-check a store: every file's hash, and every code object against its entry and the gates."""
import pathlib

from .. import targets
from ..formats import codeobject
from ..formats import manifest as mf
from ..formats.manifest import Spec
from ..kernel_defs import registry
from .flydsl_compile import KernelBuild
from . import gates
from .store import make_entry


def verify(store_dir) -> list:
    """All problems found in the store (empty: it is sound)."""
    root = pathlib.Path(store_dir)
    try:
        m = mf.load(root / mf.MANIFEST_NAME)
    except mf.ManifestError as e:
        return [str(e)]
    problems = []
    for sid, entry in m["specs"].items():
        where = f"{entry['key']} ({entry['file']})"
        try:
            data = (root / entry["file"]).read_bytes()
        except OSError as e:
            problems.append(f"{where}: {e}")
            continue
        if mf.sha256_hex(data) != entry["sha256"] or len(data) != entry["size"]:
            problems.append(f"{where}: sha256/size do not match the manifest")
            continue
        spec = Spec.make(entry["family"], entry["params"], m["target"])
        if spec.key != entry["key"]:
            problems.append(f"{where}: key does not match family/params")
        try:
            co = codeobject.parse(data)
            fam = registry.get_family(spec.family)
            target = targets.get(m["target"])
        except (codeobject.CodeObjectError, KeyError, ValueError) as e:
            problems.append(f"{where}: {e}")
            continue
        params = spec.param_dict
        kb = KernelBuild.from_entry(entry, data)
        for p in gates.check(co, target=target, symbol=fam.symbol(params), block=tuple(fam.block(params)),
                             traced_block=kb.block, arg_ctypes=kb.arg_ctypes, budget=fam.budget(params)):
            problems.append(f"{where}: {p}")
        if entry["symbol"] in [k.name for k in co.kernels] and make_entry(spec, sid, kb, co) != entry:
            problems.append(f"{where}: manifest entry disagrees with the code object's metadata")
    return problems
