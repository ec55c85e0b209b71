"""Writing stores: the one manifest writer, a whole store (build, merge) and one added entry (the JIT).

Every file goes through `files.atomic_write` (temp file, fsync, rename, directory fsync), code objects
before the manifest that names them, so a reader or a crash never sees a manifest naming a missing or
partial file. Paths come from the entry id, never from a manifest; a store holds one target, a row of
the target table.

The user cache is the one store the JIT writes and `clear-cache` empties, in whatever folder
FLYAOT_CACHE_DIR names, so it carries a marker file (`CACHE_MARKER`), written when flyaot creates the
cache: only a marked folder is ever emptied, and the JIT never writes into a folder that holds other
files and no flyaot manifest.

Adding one entry (safe for many threads and processes):
  0. Claim the folder: the marker, if the folder is new, empty or a flyaot store already.
  1. flock locks/<key hash>.lock: one producer per spec; the others wait (bounded), then find it.
  2. Re-read the manifest; if the spec is there now (and is not the entry being replaced), stop.
  3. Produce the code object; write <id>.co.
  4. Under flock locks/manifest.lock, re-read the manifest, put the entry in, write it.
"""
import hashlib
import logging
import pathlib

from .. import __version__
from ..formats import manifest as mf
from . import files, lock
from .errors import StoreError
from .index import Store

log = logging.getLogger("flyaot.store")


def _check(root: pathlib.Path, manifest: dict) -> None:
    """Every manifest written meets the schema every reader checks."""
    try:
        mf.validate(manifest, origin=str(root / mf.MANIFEST_NAME))
    except mf.ManifestError as e:
        raise StoreError(f"refusing to write {e}") from None


def write_manifest(root: pathlib.Path, manifest: dict) -> None:
    _check(root, manifest)
    files.atomic_write(root / mf.MANIFEST_NAME, mf.pretty_json(manifest))


def _out_dir(out) -> pathlib.Path:
    out = pathlib.Path(out)
    if out.exists() and not out.is_dir():
        raise StoreError(f"{out} is not a directory; a store is written into a directory")
    return out


def _same_file(path: pathlib.Path, sha256: str) -> bool:
    if not path.is_file():
        return False
    try:
        return mf.sha256_hex(files.read_capped(path, files.CODE_OBJECT_CAP, "code object")) == sha256
    except StoreError:
        return False


def write_store(out_dir, manifest: dict, blobs: dict) -> None:
    """Make `out_dir` hold exactly the manifest's code objects; blobs maps spec id -> bytes. Each file
    name is derived from the entry's id; the manifest's target must be a table target."""
    out = _out_dir(out_dir)
    _check(out, manifest)         # before any file is written
    files.table_target(manifest["target"])
    wanted = set()
    for sid, entry in manifest["specs"].items():
        path = out / files.entry_file(sid)
        wanted.add(path.name)
        if not _same_file(path, entry["sha256"]):
            files.atomic_write(path, blobs[sid])
    write_manifest(out, manifest)
    # Only once the new manifest is in place: an interrupted write never names a missing file.
    for stale in out.glob("*.co"):
        if stale.name not in wanted and (stale.is_file() or stale.is_symlink()):
            stale.unlink()


def relayout(root) -> pathlib.Path:
    """Turn a store of the schema-1 layout (root/manifest.json naming root/<arch>/<id>.co) into the store
    root/<arch>/ of schema 2: the same code objects, ids and entries, the manifest beside them. Returns
    the new store's directory; every code object is checked against its entry first."""
    root = pathlib.Path(root)
    path = root / mf.MANIFEST_NAME
    try:
        old = mf.parse(files.read_capped(path, files.MANIFEST_CAP, "manifest"), origin=str(path), check=False)
    except mf.ManifestError as e:
        raise StoreError(str(e)) from None
    if not isinstance(old, dict) or old.get("schema") != 1 or not isinstance(old.get("specs"), dict):
        raise StoreError(f"{path} is not a manifest of the schema-1 layout; nothing changed")
    target = files.table_target(old.get("target"))
    new = dict(old, schema=mf.SCHEMA_VERSION,
               specs={sid: dict(e, file=files.entry_file(sid)) for sid, e in old["specs"].items()})
    _check(root / target, new)
    blobs = {}
    for sid, e in new["specs"].items():
        co = root / target / files.entry_file(sid)
        blobs[sid] = files.read_capped(co, files.CODE_OBJECT_CAP, "code object")
        if mf.sha256_hex(blobs[sid]) != e["sha256"]:
            raise StoreError(f"{co} does not match its manifest entry ({e['key']}); nothing changed")
    write_store(root / target, new, blobs)
    path.unlink()
    return root / target


CACHE_MARKER = ".flyaot-cache"
_MARKER_TEXT = (b"flyaot user cache: manifest.json, *.co and locks/ here are flyaot's "
                b"(`python -m flyaot clear-cache` empties it)\n")


def _claimable(p: pathlib.Path) -> bool:
    """What a cache may hold before its marker proves it ours: the marker's own temp file (another process
    claiming it now), and lock files (a cache emptied by a clear-cache from before markers)."""
    if p.name.startswith(f".{CACHE_MARKER}.") and p.name.endswith(".tmp"):
        return True
    return p.name == "locks" and p.is_dir() and not p.is_symlink() and all(q.suffix == ".lock" for q in p.iterdir())


def claim_cache(root) -> None:
    """Mark `root` as a flyaot user cache: when it does not exist, is empty (but for lock files), or
    already holds a flyaot manifest (a cache made before markers, a copied store). A folder holding anything else is refused
    (StoreError): the JIT would overwrite its files and clear-cache delete them. A path that is no folder
    fails as the writes would (OSError, which add_entry names)."""
    root = pathlib.Path(root)
    if (root / CACHE_MARKER).is_file():
        return
    if root.is_dir() and any(not _claimable(p) for p in root.iterdir()):
        try:
            mf.parse(files.read_capped(root / mf.MANIFEST_NAME, files.MANIFEST_CAP, "manifest"),
                     origin=str(root / mf.MANIFEST_NAME))
        except (mf.ManifestError, StoreError):
            raise StoreError(f"flyaot: {root} (FLYAOT_CACHE_DIR) holds files but neither the flyaot cache marker "
                             f"{CACHE_MARKER} nor a flyaot manifest: it is not a flyaot user cache and flyaot "
                             "writes nothing there; point FLYAOT_CACHE_DIR at a new or empty folder") from None
    files.atomic_write(root / CACHE_MARKER, _MARKER_TEXT)


def clear_cache(root, *, timeout: float) -> int:
    """Delete the user cache store's manifest, code objects and temp files (lock files stay: see lock.py);
    the number of files removed. Only a folder with the cache marker is touched (StoreError otherwise).
    A cache of the schema-1 layout (code objects in <target>/ below the manifest) is emptied alike."""
    root = pathlib.Path(root)
    if not root.is_dir():
        raise StoreError(f"the user cache {root} (FLYAOT_CACHE_DIR) is not a directory; nothing deleted")
    if not (root / CACHE_MARKER).is_file():
        raise StoreError(f"{root} (FLYAOT_CACHE_DIR) has no flyaot cache marker {CACHE_MARKER}, so nothing in "
                         "it is known to be flyaot's; nothing deleted (check FLYAOT_CACHE_DIR; a cache flyaot "
                         "made before markers existed can be deleted by hand)")
    removed = 0
    # Under the manifest lock, so no JIT publish interleaves.
    with lock.exclusive(str(root / "locks" / "manifest.lock"), timeout=timeout, what="updating the manifest"):
        targets = [d for d in root.iterdir() if d.is_dir() and not d.is_symlink() and mf.ARCH.fullmatch(d.name)
                   and d.name != "locks"]
        for path in [root / mf.MANIFEST_NAME, *root.glob(".*.tmp"), *root.glob("*.co"),
                     *(p for d in targets for p in [*d.glob("*.co"), *d.glob(".*.tmp")])]:
            if path.is_file() or path.is_symlink():
                path.unlink()
                removed += 1
    return removed


def lock_name(spec) -> str:
    """Lock file name for a spec: a hash of its key (known before producing it, unlike its content id)."""
    return hashlib.sha256(spec.key.encode()).hexdigest()[:24] + ".lock"


def _cached_ids(root: pathlib.Path) -> dict:
    """spec key -> content id of the store's entries (none if it is missing or refused)."""
    try:
        return {key: sid for key, (sid, _) in Store.open(root, "cache", missing_ok=True).by_key.items()}
    except StoreError:
        return {}


def add_entry(root, spec, produce, *, timeout: float, toolchain, stale_id=None) -> bool:
    """Make the store at `root` (the user cache) hold `spec`; True if this call produced it. An entry whose
    id is `stale_id` does not count and is replaced.

    produce() -> (code object bytes, manifest entry incl. its content "id"), called under the spec's
    lock; toolchain() -> the fingerprint recorded when the manifest is first created.
    """
    root = pathlib.Path(root)
    try:
        return _add_entry(root, spec, produce, timeout=timeout, toolchain=toolchain, stale_id=stale_id)
    except OSError as e:
        raise StoreError(f"flyaot: the user cache {root} is not usable ({e.strerror or e}: {e.filename}); "
                         "point FLYAOT_CACHE_DIR at a writable directory, or set FLYAOT_DISABLE_JIT=1 to "
                         "serve only prebuilt stores") from None


def _add_entry(root, spec, produce, *, timeout, toolchain, stale_id) -> bool:
    target = files.table_target(spec.target)
    claim_cache(root)
    with lock.exclusive(str(root / "locks" / lock_name(spec)), timeout=timeout, what=f"compiling {spec.key}"):
        cached = _cached_ids(root).get(spec.key)
        if cached is not None and cached != stale_id:
            return False
        code_object, entry = produce()
        sid = entry.get("id")
        if entry.get("key") != spec.key or not isinstance(sid, str) or not files.SPEC_ID.fullmatch(sid):
            raise StoreError(f"flyaot: the entry produced for {spec.key} is for {entry.get('key')!r} "
                             f"with id {sid!r}")
        rel = files.entry_file(sid)
        for stale in root.glob(f".{sid}.co.*.tmp"):
            stale.unlink()        # left by a producer that died mid-write; we hold this spec's lock
        entry = dict(entry, file=rel, size=len(code_object), sha256=mf.sha256_hex(code_object))
        files.atomic_write(root / rel, code_object)
        with lock.exclusive(str(root / "locks" / "manifest.lock"), timeout=timeout, what="updating the manifest"):
            for stale in root.glob(f".{mf.MANIFEST_NAME}.*.tmp"):
                stale.unlink()
            try:
                manifest = Store.open(root, "cache", missing_ok=True).manifest
            except StoreError as e:
                log.warning("flyaot: replacing the refused user cache manifest %s: %s", root, e)
                manifest = None
            if not manifest or not manifest["specs"]:     # new, empty or refused: start afresh
                manifest = mf.empty_manifest(flyaot_version=__version__, toolchain=toolchain(), target=target)
            manifest["specs"] = {k: e for k, e in manifest["specs"].items() if e["key"] != spec.key}
            manifest["specs"][sid] = entry
            manifest["specs"] = dict(sorted(manifest["specs"].items()))
            write_manifest(root, manifest)
        return True
