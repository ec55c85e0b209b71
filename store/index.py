"""Reading stores: one opened store, the precedence list of store locations, and the index over them.

A store is a directory of one target: `<root>/manifest.json` plus `<root>/<id>.co`. The package keeps
one store per target (`<package dir>/<arch>/`), the user cache one per device target
(`<cache>/<version>/<arch>/`, `cache_store`); an extra store or an add-on pack is one such directory.
It is checked when it is opened:
a bounded read, the manifest schema (`formats.manifest.validate`: types, required and unknown fields,
no repeated JSON key, one entry per spec key, every entry's key, file name and slot table), the flyaot
version and the toolchain fingerprint. A code object's size and sha256 are checked when it is first read.
Nothing here imports a compiler or unpickles anything.
"""
import importlib.util
import logging
import pathlib
from dataclasses import dataclass
from importlib import metadata

from .. import FLYDSL_VERSION, __version__
from ..formats import manifest as mf
from . import files
from .errors import IntegrityError, StoreError

log = logging.getLogger("flyaot.store")

ENTRY_POINT_GROUP = "flyaot.stores"    # an installed add-on pack names its store's package here


class Store:
    """One opened store. `kind` is 'package', 'extra', 'pack' or 'cache' (for messages and precedence)."""

    def __init__(self, root: pathlib.Path, kind: str, manifest: dict):
        self.root = pathlib.Path(root)
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
    def empty(cls, root, kind: str) -> "Store":
        return cls(root, kind, mf.empty_manifest(flyaot_version=__version__, toolchain={"flydsl": FLYDSL_VERSION},
                                                 target=""))

    @classmethod
    def open(cls, root, kind: str, *, missing_ok: bool) -> "Store":
        root = pathlib.Path(root)
        path = root / mf.MANIFEST_NAME
        if not (path.exists() or path.is_symlink()):      # a dangling link is read, and refused, below
            if missing_ok:
                return cls.empty(root, kind)
            raise StoreError(f"{kind} store {root}: no {mf.MANIFEST_NAME} (is this a flyaot store built by "
                             f"`python -m flyaot.build_tools build --out DIR`?)")
        return cls(root, kind, read_manifest(root, kind))

    def read(self, sid: str, entry: dict) -> bytes:
        path = self.root / entry["file"]
        try:
            data = files.read_capped(path, files.CODE_OBJECT_CAP, "code object")
        except StoreError as e:
            raise StoreError(f"{self.label}: {entry['key']}: {e}") from None
        if len(data) != entry["size"] or mf.sha256_hex(data) != entry["sha256"]:
            raise IntegrityError(
                f"{self.label}: {path} ({entry['key']}) does not match its manifest entry: size {len(data)} "
                f"vs {entry['size']}, sha256 {mf.sha256_hex(data)} vs {entry['sha256']}; the store is "
                "corrupt or was modified: rebuild it (or `python -m flyaot clear-cache` for the user cache)")
        return data


def read_manifest(root: pathlib.Path, kind: str = "store") -> dict:
    """The manifest of the store at `root`, checked against the one schema (`formats.manifest.validate`)
    and this flyaot's versions; StoreError naming the store, the file and the field for anything wrong."""
    origin = f"{kind} store {root}"
    path = root / mf.MANIFEST_NAME
    try:
        data = mf.parse(files.read_capped(path, files.MANIFEST_CAP, "manifest"), origin=str(path))
    except (mf.ManifestError, StoreError) as e:
        raise StoreError(f"{origin} refused: {e}") from None
    _check_fingerprint(data, origin)
    return data


def _check_fingerprint(data: dict, origin: str) -> None:
    if data["flyaot"] != __version__:
        raise StoreError(f"{origin} refused: built for flyaot {data['flyaot']}, this is flyaot {__version__}; "
                         "rebuild it with this version's build_tools")
    got = data["toolchain"].get("flydsl")
    if got != FLYDSL_VERSION:
        raise StoreError(f"{origin} refused: built with FlyDSL {got!r}, flyaot {__version__} needs FlyDSL "
                         f"{FLYDSL_VERSION}; rebuild it (for the user cache: `python -m flyaot clear-cache`)")


_REFUSED_HINT = {
    "package": "without it every spec needs the JIT; reinstall flyaot or run `python -m flyaot.build_tools build`",
    "extra": "the other stores keep serving; rebuild it or take it off FLYAOT_PREBUILT_PATH",
    "pack": "the other stores keep serving; reinstall or remove that pack",
    "cache": "`python -m flyaot clear-cache` removes it",
}


# --- where stores are found ------------------------------------------------------------------------

@dataclass(frozen=True)
class Location:
    kind: str             # package | extra | pack | cache
    root: pathlib.Path
    required: bool        # a missing manifest is an error (else: an empty store)


def installed_packs() -> list:
    """Store directories of installed add-on packs: each entry point of ENTRY_POINT_GROUP names a package
    whose directory holds a store. Found with find_spec, so no pack's code is imported or run."""
    roots = []
    for ep in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name):
        try:
            spec = importlib.util.find_spec(ep.value)
        except (ImportError, ValueError):
            spec = None
        dirs = list(spec.submodule_search_locations or []) if spec else []
        if not dirs:
            log.warning("flyaot: ignoring add-on pack %r: %r is not an installed package", ep.name, ep.value)
            continue
        roots.append(pathlib.Path(dirs[0]))
    return roots


def target_dirs(home) -> list:
    """The store directories of a folder that keeps one per target: its subfolders named as targets."""
    home = pathlib.Path(home)
    if not home.is_dir():
        return []
    return sorted(d for d in home.iterdir() if d.is_dir() and mf.ARCH.fullmatch(d.name) and not d.name.startswith("_"))


def cache_store(cache_dir, target: str) -> pathlib.Path:
    """The user cache store of one target: `<cache>/<version>/<arch>/`."""
    return pathlib.Path(cache_dir) / __version__ / files.plain_target(target)


def locations(config) -> list:
    """Stores in precedence order, as data: the package's store of each target, FLYAOT_PREBUILT_PATH
    entries, installed add-on packs, the user cache store of each target. The first store holding a key
    serves it."""
    return ([Location("package", d, True) for d in target_dirs(config.package_dir)]
            + [Location("extra", pathlib.Path(p), True) for p in config.extra_stores]
            + [Location("pack", p, True) for p in installed_packs()]
            + [Location("cache", d, False) for d in target_dirs(pathlib.Path(config.cache_dir) / __version__)])


def old_cache_layout(cache_dir) -> str:
    """Why `cache_dir` holds a user cache of the schema-1 layout (one store at its root), or ''."""
    path = pathlib.Path(cache_dir) / mf.MANIFEST_NAME
    try:
        old = mf.parse(files.read_capped(path, files.MANIFEST_CAP, "manifest"), origin=str(path), check=False)
    except (StoreError, mf.ManifestError):
        return ""                      # none, or no flyaot manifest: nothing of flyaot's there
    if not isinstance(old, dict) or old.get("schema") != 1:
        return ""
    return (f"user cache {cache_dir} has the layout before per-target caches (a manifest at its root); "
            f"flyaot now keeps one per target in {pathlib.Path(cache_dir) / __version__}/<arch>/ and leaves "
            "this one unread: `python -m flyaot clear-cache` empties it")


def open_location(loc: Location) -> Store:
    return Store.open(loc.root, loc.kind, missing_ok=not loc.required)


class Index:
    """The opened stores in precedence order; `refused` holds (location, reason) of those left out.

    A refused store is left out alone, with a warning, and named in every missing-spec error, so the
    others keep serving: a broken add-on pack or a user cache of another flyaot version never stops
    the package store, and a package store without its manifest is never silently empty.
    """

    def __init__(self, stores: list, refused=(), cache_dir=None):
        self.stores = list(stores)
        self.refused = list(refused)
        self.cache_dir = cache_dir

    @classmethod
    def open(cls, config) -> "Index":
        stores, refused = [], []
        old = old_cache_layout(config.cache_dir)
        if old:
            log.warning("flyaot: %s", old)
            refused.append((Location("cache", pathlib.Path(config.cache_dir), False), old))
        for loc in locations(config):
            try:
                stores.append(open_location(loc))
            except StoreError as e:
                log.warning("flyaot: %s; ignoring the %s (%s)", e, "user cache" if loc.kind == "cache" else "store",
                            _REFUSED_HINT[loc.kind])
                refused.append((loc, str(e)))
                if loc.kind in ("package", "cache"):      # kept as empty places: the cache takes JIT products
                    stores.append(Store.empty(loc.root, loc.kind))
        return cls(stores, refused, config.cache_dir)

    def cache(self, target: str) -> Store:
        """The user cache store of `target` (an empty one where none exists yet: the JIT creates it)."""
        root = cache_store(self.cache_dir, target)
        for s in self.stores:
            if s.kind == "cache" and s.root == root:
                return s
        store = Store.empty(root, "cache")
        self.stores.append(store)
        return store

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
        try:
            self.stores[i] = Store.open(store.root, store.kind, missing_ok=True)
        except StoreError as e:
            log.warning("flyaot: %s; ignoring the store", e)
            self.stores[i] = Store.empty(store.root, store.kind)

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
