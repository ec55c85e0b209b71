"""Join shard stores into one store, deterministically (the result equals a single full build)."""
import pathlib

from ..formats import manifest as mf
from .store import write_store


def merge(shard_dirs, out_dir) -> dict:
    if not shard_dirs:
        raise ValueError("merge needs at least one shard store")
    merged, blobs = None, {}
    for d in shard_dirs:
        d = pathlib.Path(d)
        m = mf.load(d / mf.MANIFEST_NAME)
        if merged is None:
            merged = {k: v for k, v in m.items() if k != "specs"}
            merged["specs"] = {}
        for field in ("schema", "flyaot", "toolchain", "target"):
            if m[field] != merged[field]:
                raise ValueError(f"shard {d} has {field}={m[field]!r}, other shards have {merged[field]!r}")
        for sid, entry in m["specs"].items():
            data = (d / entry["file"]).read_bytes()
            if mf.sha256_hex(data) != entry["sha256"]:
                raise ValueError(f"shard {d}: {entry['file']} does not match its sha256")
            if sid in merged["specs"] and merged["specs"][sid] != entry:
                raise ValueError(f"spec {entry['key']} differs between shards")
            merged["specs"][sid] = entry
            blobs[sid] = data
    merged["specs"] = dict(sorted(merged["specs"].items()))
    write_store(out_dir, merged, blobs)
    return merged
