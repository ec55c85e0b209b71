"""Stores (manifest.json + <target>/<id>.co) and the ordered index over them.

A store is checked when it is opened: manifest schema, flyaot version, toolchain fingerprint, and
every entry's key, file name and slot table. A code object's size and sha256 are checked when it is
first read. Nothing here imports a compiler or unpickles anything; manifests are plain JSON.
"""
import logging
import pathlib
import re

from .. import __version__
from ..formats import manifest as mf
from .config import EXPECTED_FLYDSL
from .errors import IntegrityError, StoreError
from .packing import ArgLayout

log = logging.getLogger("flyaot.runtime")


SPEC_ID = re.compile(r"[0-9A-Za-z_-]{1,128}")
_SHA = re.compile(r"[0-9a-f]{64}")


class Store:
    """One opened store. `kind` is 'package', 'extra' or 'cache' (for messages and precedence)."""

    def __init__(self, root: pathlib.Path, kind: str, manifest: dict):
        self.root = root
        self.kind = kind
        self.manifest = manifest
        self.target = manifest["target"]
        self.by_key = {e["key"]: (sid, e) for sid, e in manifest["specs"].items()}

    def __repr__(self):
        return f"<{self.kind} store {self.root} target={self.target} specs={len(self.by_key)}>"

    @property
    def label(self) -> str:
        return f"{self.kind} store {self.root}"

    @classmethod
    def open(cls, root, kind: str, *, missing_ok: bool) -> "Store":
        root = pathlib.Path(root)
        path = root / mf.MANIFEST_NAME
        if not path.exists():
            if missing_ok:
                return cls(root, kind, _empty())
            raise StoreError(f"{kind} store {root}: no {mf.MANIFEST_NAME} (is this a flyaot store built by "
                             f"`python -m flyaot.build_tools build --out DIR`?)")
        try:
            data = mf.load(path)
        except mf.ManifestError as e:
            raise StoreError(f"{kind} store refused: {e}") from None
        _check_fingerprint(data, f"{kind} store {root}")
        for sid, entry in data["specs"].items():
            _check_entry(sid, entry, data["target"], f"{kind} store {root}: spec {sid}")
        return cls(root, kind, data)

    def read(self, sid: str, entry: dict) -> bytes:
        path = self.root / entry["file"]
        try:
            data = path.read_bytes()
        except OSError as e:
            raise StoreError(f"{self.label}: cannot read {entry['key']} from {path}: {e}") from None
        if len(data) != entry["size"] or mf.sha256_hex(data) != entry["sha256"]:
            raise IntegrityError(
                f"{self.label}: {path} ({entry['key']}) does not match its manifest entry: size {len(data)} "
                f"vs {entry['size']}, sha256 {mf.sha256_hex(data)} vs {entry['sha256']}; the store is "
                "corrupt or was modified: rebuild it (or `python -m flyaot clear-cache` for the user cache)")
        return data


def _empty() -> dict:
    return mf.empty_manifest(flyaot_version=__version__, toolchain={"flydsl": EXPECTED_FLYDSL}, target="")


def _check_fingerprint(data: dict, origin: str) -> None:
    if data["flyaot"] != __version__:
        raise StoreError(f"{origin} refused: built for flyaot {data['flyaot']}, this is flyaot {__version__}; "
                         "rebuild it with this version's build_tools")
    tc = data["toolchain"]
    if not isinstance(tc, dict) or tc.get("flydsl") != EXPECTED_FLYDSL:
        got = tc.get("flydsl") if isinstance(tc, dict) else tc
        raise StoreError(f"{origin} refused: built with FlyDSL {got!r}, flyaot {__version__} needs FlyDSL "
                         f"{EXPECTED_FLYDSL}; rebuild it (for the user cache: `python -m flyaot clear-cache`)")
    if not isinstance(data["target"], str) or not data["target"]:
        raise StoreError(f"{origin} refused: target {data['target']!r} is not an architecture name")


def _check_entry(sid: str, e: dict, target: str, origin: str) -> None:
    if not SPEC_ID.fullmatch(sid):
        raise StoreError(f"{origin}: spec id is not a plain name")
    if not isinstance(e["params"], dict):
        raise StoreError(f"{origin}: params is not an object")
    try:
        key = mf.Spec.make(e["family"], e["params"], target).key
    except TypeError as err:
        raise StoreError(f"{origin}: {err}") from None
    if e["key"] != key:
        raise StoreError(f"{origin}: key {e['key']!r} does not match its family/params/target ({key!r})")
    if e["file"] != f"{target}/{sid}.co":
        raise StoreError(f"{origin}: file {e['file']!r} must be {target}/{sid}.co")
    if not isinstance(e["size"], int) or not isinstance(e["sha256"], str) or not _SHA.fullmatch(e["sha256"]):
        raise StoreError(f"{origin}: size/sha256 malformed")
    ArgLayout.from_entry(e, origin)


def open_user_cache(root) -> Store:
    """The user cache, or an empty one if it is refused (say, written by another flyaot version): it
    only holds JIT products, so refusing it must not stop prebuilt kernels from launching."""
    try:
        return Store.open(root, "cache", missing_ok=True)
    except StoreError as e:
        log.warning("flyaot: ignoring the user cache: %s (`python -m flyaot clear-cache` removes it)", e)
        return Store(pathlib.Path(root), "cache", _empty())


def current_id(spec):
    """The content id a build of `spec` from this package's kernel sources gets (None for a family this
    package does not define). An entry with another id was built from other sources: out of date."""
    from ..kernel_defs import registry
    if spec.family not in registry.family_names():
        return None
    return spec.content_id(registry.family_source_hash(spec.family), EXPECTED_FLYDSL)


class Index:
    """The stores in precedence order (package, extras, user cache); the first that has a key wins."""

    def __init__(self, stores: list):
        self.stores = list(stores)

    @classmethod
    def open(cls, config) -> "Index":
        stores = [Store.open(config.package_store, "package", missing_ok=True)]
        stores += [Store.open(p, "extra", missing_ok=False) for p in config.extra_stores]
        stores.append(open_user_cache(config.cache_dir))
        return cls(stores)

    def lookup(self, key: str, sid: str = None):
        """(store, spec id, entry) of the first store holding `key` (built as content id `sid` if given)."""
        for store in self.stores:
            hit = store.by_key.get(key)
            if hit is not None and (sid is None or hit[0] == sid):
                return store, hit[0], hit[1]
        return None

    def reopen(self, store: Store) -> None:
        """Re-read one store (the user cache after a JIT publish)."""
        i = self.stores.index(store)
        self.stores[i] = open_user_cache(store.root) if store.kind == "cache" else \
            Store.open(store.root, store.kind, missing_ok=True)

    def store_of_kind(self, kind: str) -> Store:
        return next(s for s in self.stores if s.kind == kind)

    def entries(self):
        """Every (store, spec id, entry), shadowed duplicates included, in precedence order."""
        for store in self.stores:
            for key, (sid, e) in store.by_key.items():
                yield store, sid, e

    def same_spec_other_target(self, family: str, params: dict, target: str) -> list:
        return sorted({s.target for s, _, e in self.entries()
                       if e["family"] == family and e["params"] == params and s.target != target})

    def nearest(self, family: str, params: dict, target: str, n: int = 3) -> list:
        """Keys of the same family and target, fewest differing parameters first, then closest values."""
        def distance(p):
            names = set(p) | set(params)
            differing = [k for k in names if p.get(k) != params.get(k)]
            numeric = sum(abs(p[k] - params[k]) / max(abs(params[k]), 1) for k in differing
                          if isinstance(p.get(k), int) and isinstance(params.get(k), int))
            return (len(differing), numeric)

        keys = {e["key"]: e["params"] for s, _, e in self.entries() if e["family"] == family and s.target == target}
        return sorted(keys, key=lambda k: (distance(keys[k]), k))[:n]

    def families(self, target: str) -> list:
        return sorted({e["family"] for s, _, e in self.entries() if s.target == target})

