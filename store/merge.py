"""Join shard stores into one store, deterministically (the result equals a single full build).

Every shard is opened and checked like any store the runtime serves (the one manifest schema, then
each code object); the merged manifest meets the same schema before anything is written, so two
shards holding one spec key under different ids are refused. The output's file names come from
entry ids and the table target. A merge that would drop specs an existing output holds, or that
lacks some of the shards a build was split into, is refused unless forced.
"""
import pathlib

from ..formats import manifest as mf
from .errors import StoreError
from .index import Store, read_manifest
from .verify import check_entry
from .write import write_store

_SAME = ("schema", "flyaot", "toolchain", "target")


def _shard_of(store: Store):
    """(i, n) from a shard manifest's "shard" field (the schema holds it to i/n), or None for an
    unsharded store."""
    text = store.manifest.get("shard")
    return None if text is None else tuple(int(x) for x in text.split("/"))


def _missing_shards(shards: list) -> str:
    marks = [_shard_of(s) for s in shards]
    counts = {m[1] for m in marks if m}
    if len(counts) > 1:
        raise StoreError(f"the shards were split differently: {sorted(counts)} ways")
    if not counts:
        return ""
    n, = counts
    missing = sorted(set(range(n)) - {m[0] for m in marks if m})
    return ", ".join(f"{i}/{n}" for i in missing)


def merge(shard_dirs, out_dir, *, force: bool = False) -> dict:
    if not shard_dirs:
        raise StoreError("merge needs at least one shard store")
    shards = [Store.open(d, "shard", missing_ok=False) for d in shard_dirs]
    missing = _missing_shards(shards)
    if missing and not force:
        raise StoreError(f"shards {missing} are missing from the merge; give them all (or --force to write "
                         "an incomplete store)")
    merged = {k: v for k, v in shards[0].manifest.items() if k not in ("specs", "shard")}
    merged["specs"], blobs = {}, {}
    for shard in shards:
        for f in _SAME:
            if shard.manifest[f] != merged[f]:
                raise StoreError(f"shard {shard.root} has {f}={shard.manifest[f]!r}, other shards have {merged[f]!r}")
        for sid, entry in shard.manifest["specs"].items():
            data, _ = check_entry(shard, sid, entry)
            if sid in merged["specs"] and merged["specs"][sid] != entry:
                raise StoreError(f"spec {entry['key']} differs between shards")
            merged["specs"][sid] = entry
            blobs[sid] = data
    merged["specs"] = dict(sorted(merged["specs"].items()))
    if not force:
        _refuse_shrinking(pathlib.Path(out_dir), merged)
    write_store(out_dir, merged, blobs)
    return merged


def _refuse_shrinking(out: pathlib.Path, merged: dict) -> None:
    """An existing store at `out` must not lose specs to a merge unless forced."""
    if not (out / mf.MANIFEST_NAME).exists():
        return
    try:
        held = {e["key"] for e in read_manifest(out, "output")["specs"].values()}
    except StoreError as e:
        raise StoreError(f"{out} holds a store that cannot be read ({e}); --force replaces it") from None
    lost = sorted(held - {e["key"] for e in merged["specs"].values()})
    if lost:
        raise StoreError(f"{out} holds {len(held)} specs and the merge {len(merged['specs'])}: it would drop "
                         f"{len(lost)} (e.g. {lost[0]}); are shards missing? --force replaces it anyway")
