"""Manifest entries from compiled code objects, and the content-addressed build cache.

Stores themselves are written by `store.write` (one writer for build, merge and the JIT).
"""
import json
import pathlib

from ..formats import codeobject
from ..formats.codeobject import user_args
from ..formats.manifest import sha256_hex
from ..store.files import atomic_write


def make_entry(spec, spec_id: str, kb, co: codeobject.CodeObject) -> dict:
    """Manifest entry for one spec: argument layout and resources as the code object states them."""
    k = co.kernel(kb.kernel_name)
    args = [
        {"name": name, "ctype": ctype, "kind": a.value_kind, "offset": a.offset, "size": a.size}
        for name, ctype, a in zip(kb.arg_names, kb.arg_ctypes, user_args(k))
    ]
    data = kb.code_object
    return {
        "id": spec_id, "family": spec.family, "params": spec.param_dict, "key": spec.key,
        "file": f"{spec_id}.co", "size": len(data), "sha256": sha256_hex(data),
        "symbol": k.name, "block": list(kb.block), "kernarg_size": k.kernarg_size,
        "kernarg_align": k.kernarg_align, "args": args, "resources": k.resources.as_dict(),
    }


class BuildCache:
    """`<dir>/<id>.co` + `<id>.json` per successfully gated spec; ids are content hashes."""

    def __init__(self, root):
        self.root = pathlib.Path(root)

    def get(self, spec_id: str):
        co_path, meta_path = self.root / f"{spec_id}.co", self.root / f"{spec_id}.json"
        try:
            data = co_path.read_bytes()
            entry = json.loads(meta_path.read_text())
        except (OSError, ValueError):
            return None
        if entry.get("sha256") != sha256_hex(data):
            return None
        return entry, data

    def put(self, entry: dict, data: bytes) -> None:
        atomic_write(self.root / f"{entry['id']}.co", data)
        atomic_write(self.root / f"{entry['id']}.json", (json.dumps(entry, sort_keys=True) + "\n").encode())
