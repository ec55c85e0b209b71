"""Helpers for the runtime tests: configs pointing at temporary stores, store copies and edits."""
import json
import pathlib
import shutil

from flyaot import __version__
from flyaot.formats.manifest import MANIFEST_NAME, SCHEMA_VERSION, pretty_json, sha256_hex
from flyaot.store.index import cache_store  # noqa: F401  (the user cache store of a target)
from flyaot.runtime.config import EXPECTED_FLYDSL, Config


def make_config(tmp_path, *, package=None, extra=(), cache=None, **over) -> Config:
    """A Config that sees only the given stores (never the checkout's own prebuilt store)."""
    fields = dict(package_dir=pathlib.Path(package or tmp_path / "no-package-stores"),
                  extra_stores=tuple(pathlib.Path(p) for p in extra),
                  cache_dir=pathlib.Path(cache or tmp_path / "user-cache"),
                  disable_jit=True, record_misses="", device="", jit_timeout=60.0, py_launch=False)
    fields.update(over)
    return Config(**fields)


def read_manifest(root) -> dict:
    return json.loads((pathlib.Path(root) / MANIFEST_NAME).read_text())


def write_manifest(root, manifest: dict) -> None:
    (pathlib.Path(root) / MANIFEST_NAME).write_bytes(pretty_json(manifest))


def copy_store(src, dst, *, keys=None) -> pathlib.Path:
    """Copy a store, keeping only the specs whose key is in `keys` (all if None)."""
    src, dst = pathlib.Path(src), pathlib.Path(dst)
    m = read_manifest(src)
    m["specs"] = {sid: e for sid, e in m["specs"].items() if keys is None or e["key"] in keys}
    for e in m["specs"].values():
        (dst / e["file"]).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src / e["file"], dst / e["file"])
    dst.mkdir(parents=True, exist_ok=True)
    write_manifest(dst, m)
    return dst


def write_store(root, target: str, specs: dict, *, toolchain=None) -> pathlib.Path:
    """A store from {spec id: (entry without file/size/sha256, code object bytes)}."""
    root = pathlib.Path(root)
    m = {"schema": SCHEMA_VERSION, "flyaot": __version__, "target": target,
         "toolchain": toolchain or {"flydsl": EXPECTED_FLYDSL, "lld": "test"}, "specs": {}}
    for sid, (entry, data) in specs.items():
        path = root / f"{sid}.co"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        m["specs"][sid] = dict(entry, file=f"{sid}.co", size=len(data), sha256=sha256_hex(data))
    write_manifest(root, m)
    return root


def entry_by_key(root, key):
    """(spec id, entry) of one key in a store's manifest."""
    for sid, e in read_manifest(root)["specs"].items():
        if e["key"] == key:
            return sid, e
    raise KeyError(key)


PROBE64 = "probe[behavior=ok,block=64]@gfx950"
PROBE128 = "probe[behavior=ok,block=128]@gfx950"
