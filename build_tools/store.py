"""Content-addressed build cache and store writing (code objects + canonical manifest).

Writes go to a temporary file then os.replace, and the manifest is written last, so an interrupted
build never leaves a manifest that names a missing or partial code object.
"""
import json
import os
import pathlib

from ..formats import codeobject
from ..formats.codeobject import user_args
from ..formats.manifest import MANIFEST_NAME, pretty_json, sha256_hex


def atomic_write(path: pathlib.Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


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
        "file": f"{spec.target}/{spec_id}.co", "size": len(data), "sha256": sha256_hex(data),
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


def write_store(out_dir, manifest: dict, blobs: dict) -> None:
    """Make `out_dir` hold exactly the manifest's code objects; blobs maps spec id -> bytes."""
    out = pathlib.Path(out_dir)
    wanted = set()
    for sid, entry in manifest["specs"].items():
        path = out / entry["file"]
        wanted.add(path.resolve())
        if not (path.exists() and sha256_hex(path.read_bytes()) == entry["sha256"]):
            atomic_write(path, blobs[sid])
    atomic_write(out / MANIFEST_NAME, pretty_json(manifest))
    # Only once the new manifest is in place: an interrupted build never names a missing file.
    for stale in (out / manifest["target"]).glob("*.co"):
        if stale.resolve() not in wanted:
            stale.unlink()
