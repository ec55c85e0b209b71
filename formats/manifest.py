"""A store's manifest: one JSON file describing every code object of a store, and its one schema.

Layout of a store directory (one target: each target's stores are directories of their own):
    manifest.json           this schema (`validate`)
    <spec id>.co            code objects

Written deterministically (sorted keys, a fixed indent, trailing newline) so the same specs always give
byte-identical manifests: no timestamps, paths or host names.
"""
import hashlib
import json
import re
from dataclasses import dataclass

SCHEMA_VERSION = 2             # 2: one target per store directory, code objects beside the manifest
MANIFEST_NAME = "manifest.json"

# The C types an argument slot may have (a flat kernel ABI), with the size and AMDGPU value_kind the
# code object's metadata must show for them.
SLOT_CTYPES = {"void*": (8, "global_buffer"), "int32_t": (4, "by_value"), "int64_t": (8, "by_value"),
               "float": (4, "by_value")}


def canonical_json(obj) -> bytes:
    return (json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True) + "\n").encode()


def pretty_json(obj) -> bytes:
    return (json.dumps(obj, sort_keys=True, indent=1, ensure_ascii=True) + "\n").encode()


@dataclass(frozen=True)
class Spec:
    """A specialization: family + compile-time parameters + target. A pure value."""
    family: str
    params: tuple            # sorted (name, value) pairs; values are int, bool or str
    target: str

    @classmethod
    def make(cls, family: str, params: dict, target: str) -> "Spec":
        for k, v in params.items():
            if not isinstance(v, (int, str, bool)):
                raise TypeError(f"spec parameter {k}={v!r} must be int, bool or str")
        return cls(family, tuple(sorted(params.items())), target)

    @property
    def param_dict(self) -> dict:
        return dict(self.params)

    @property
    def key(self) -> str:
        """Lookup key, e.g. 'mqa_decode[D=128,H=64]@gfx950'; what the runtime dispatches on."""
        inner = ",".join(f"{k}={_fmt(v)}" for k, v in self.params)
        return f"{self.family}[{inner}]@{self.target}"

    def content_id(self, source_hash: str, flydsl_version: str) -> str:
        """Content address: changes when anything that can change the code object changes."""
        blob = canonical_json({
            "schema": SCHEMA_VERSION, "family": self.family, "params": [list(p) for p in self.params],
            "target": self.target, "source": source_hash, "flydsl": flydsl_version,
        })
        return hashlib.sha256(blob).hexdigest()[:24]


def _fmt(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def empty_manifest(*, flyaot_version: str, toolchain: dict, target: str) -> dict:
    return {"schema": SCHEMA_VERSION, "flyaot": flyaot_version, "toolchain": dict(toolchain),
            "target": target, "specs": {}}


# --- the schema ----------------------------------------------------------------------------------
# One schema for every manifest (the package store, add-on packs, the user cache, shards), checked by
# `validate` on every read (the runtime, both `verify` commands, merge) and before every write.

SPEC_ID = re.compile(r"[0-9A-Za-z_-]{1,128}")     # a spec id: also the code object's file name
SHA256 = re.compile(r"[0-9a-f]{64}")
ARCH = re.compile(r"[0-9A-Za-z_]{1,32}")          # a target name: the name of its stores' directories
SHARD = re.compile(r"(0|[1-9][0-9]*)/([1-9][0-9]*)")

# field -> (JSON type, required). `int` never admits a bool.
TOP_FIELDS = {"schema": (int, True), "flyaot": (str, True), "toolchain": (dict, True), "target": (str, True),
              "specs": (dict, True), "shard": (str, False)}
ENTRY_FIELDS = {"family": (str, True), "params": (dict, True), "key": (str, True), "file": (str, True),
                "size": (int, True), "sha256": (str, True), "symbol": (str, True), "block": (list, True),
                "kernarg_size": (int, True), "args": (list, True), "resources": (dict, True),
                "id": (str, False), "kernarg_align": (int, False)}
ARG_FIELDS = {"name": (str, True), "ctype": (str, True), "kind": (str, True), "offset": (int, True),
              "size": (int, True)}

# Bounds on what a manifest may contain: a real one nests 4 deep and holds small numbers.
MAX_DEPTH = 16
MAX_INT_DIGITS = 20

_JSON_NAMES = {dict: "an object", list: "a list", str: "a string", int: "an integer", float: "a number",
               bool: "a bool", type(None): "null"}


class ManifestError(ValueError):
    """A manifest that breaks the schema: the message names the file (`origin`) and the `field`."""

    def __init__(self, origin: str, field: str, problem: str):
        self.origin, self.field, self.problem = origin, field, problem
        super().__init__(f"{origin}: {field}: {problem}" if field else f"{origin}: {problem}")


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"integer of {len(text)} digits")
    return int(text)


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _unique_keys(pairs):
    """JSON objects with a repeated name are refused: with last-one-wins a second `specs` or spec id
    silently replaces the first."""
    obj = {}
    for k, v in pairs:
        if k in obj:
            raise ValueError(f"duplicate key {k!r} in one JSON object")
        obj[k] = v
    return obj


def _nesting(text: str) -> int:
    """Deepest [ / { nesting outside strings, found without recursion."""
    depth = deepest = 0
    for tok in re.findall(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', text):
        if tok in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif tok in "]}":
            depth -= 1
    return deepest


def parse(data: bytes, *, origin: str, check: bool = True) -> dict:
    """JSON bytes -> a manifest that satisfies the schema (with check=False: only bounded JSON, for
    reading a manifest of an older schema); ManifestError (naming `origin`) otherwise."""
    try:
        text = data.decode("utf-8")
        if _nesting(text) > MAX_DEPTH:
            raise ValueError(f"nested deeper than {MAX_DEPTH}")
        obj = json.loads(text, parse_int=_bounded_int, parse_constant=_no_constant,
                         object_pairs_hook=_unique_keys)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ManifestError(origin, "", f"cannot read manifest: {e}") from None
    return validate(obj, origin=origin) if check else obj


def _kind(v) -> str:
    return _JSON_NAMES.get(type(v), type(v).__name__)


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def _fields(obj, table: dict, origin: str, where: str) -> None:
    """`obj` is an object holding every required field of `table`, each of its type, and no other."""
    if not isinstance(obj, dict):
        raise ManifestError(origin, where, f"is {_kind(obj)}, not an object")
    for name, (kind, required) in table.items():
        field = _join(where, name)
        if name not in obj:
            if required:
                raise ManifestError(origin, field, "missing")
            continue
        v = obj[name]
        if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
            raise ManifestError(origin, field, f"is {_kind(v)}, not {_JSON_NAMES[kind]}")
    unknown = sorted(set(obj) - set(table))
    if unknown:
        raise ManifestError(origin, _join(where, unknown[0]),
                            f"unknown field (known: {', '.join(table)})")


def validate(manifest, *, origin: str = "manifest") -> dict:
    """The whole schema of a loaded manifest: every field's type, required and unknown fields, the
    values each field may hold, and one entry per spec key. Raises ManifestError naming the file and
    the field. What is not the manifest's own business (which versions this flyaot reads, the code
    objects' bytes and metadata) belongs to the store that opens it."""
    _fields(manifest, TOP_FIELDS, origin, "")
    if manifest["schema"] == 1:
        raise ManifestError(origin, "schema", "1, the layout of <target>/<id>.co under one manifest; this flyaot "
                            f"reads schema {SCHEMA_VERSION} (a store per target directory): rebuild the store "
                            "(a user cache: `python -m flyaot clear-cache`)")
    if manifest["schema"] != SCHEMA_VERSION:
        raise ManifestError(origin, "schema", f"{manifest['schema']!r}; this flyaot reads schema {SCHEMA_VERSION}")
    for name, v in manifest["toolchain"].items():
        if not isinstance(v, str):
            raise ManifestError(origin, f"toolchain.{name}", f"is {_kind(v)}, not a string")
    target = manifest["target"]
    if not ARCH.fullmatch(target):
        raise ManifestError(origin, "target", f"{target!r} is not an architecture name")
    if "shard" in manifest:
        m = SHARD.fullmatch(manifest["shard"])
        if not m or int(m[1]) >= int(m[2]):
            raise ManifestError(origin, "shard", f"{manifest['shard']!r} is not i/n with 0 <= i < n")
    owner = {}       # spec key -> the spec id holding it
    for sid, entry in manifest["specs"].items():
        where = f"specs.{sid}"
        if not SPEC_ID.fullmatch(sid):
            raise ManifestError(origin, where, "the spec id is not a plain name")
        validate_entry(sid, entry, target, origin)
        if entry["key"] in owner:
            raise ManifestError(origin, where, f"key {entry['key']!r} is also the key of spec {owner[entry['key']]}; "
                                "a store holds one entry per spec")
        owner[entry["key"]] = sid
    return manifest


def validate_entry(sid: str, e, target: str, origin: str) -> None:
    """One entry on its own terms: typed fields; key = family/params/target; file = <id>.co;
    size and sha256 well formed; the argument slots, kernarg size and block consistent."""
    where = f"specs.{sid}"
    _fields(e, ENTRY_FIELDS, origin, where)
    try:
        key = Spec.make(e["family"], e["params"], target).key
    except TypeError as err:
        raise ManifestError(origin, f"{where}.params", str(err)) from None
    if e["key"] != key:
        raise ManifestError(origin, f"{where}.key", f"{e['key']!r} does not match its family/params/target ({key!r})")
    if e["file"] != f"{sid}.co":
        raise ManifestError(origin, f"{where}.file", f"{e['file']!r} must be {sid}.co")
    if "id" in e and e["id"] != sid:
        raise ManifestError(origin, f"{where}.id", f"{e['id']!r} differs from the entry's name")
    if e["size"] < 0:
        raise ManifestError(origin, f"{where}.size", f"{e['size']} is negative")
    if not SHA256.fullmatch(e["sha256"]):
        raise ManifestError(origin, f"{where}.sha256", "is not 64 lowercase hex digits")
    for name, v in e["resources"].items():
        if not isinstance(v, (int, bool)) or (not isinstance(v, bool) and v < 0):
            raise ManifestError(origin, f"{where}.resources.{name}", f"{v!r} is not a count or a bool")
    for i, a in enumerate(e["args"]):
        _fields(a, ARG_FIELDS, origin, f"{where}.args[{i}]")
    check_slots(e, origin, where)


def check_slots(e: dict, origin: str, where: str) -> None:
    """An entry's slot table on its own terms: known C types with their sizes and kinds, aligned,
    non-overlapping, unique names, a kernarg size that holds them, a block of three positive ints."""
    end, names = 0, set()
    for i, a in enumerate(e["args"]):
        field = _join(where, f"args[{i}]")
        if not isinstance(a, dict):
            raise ManifestError(origin, field, f"is {_kind(a)}, not an object")
        ctype = a.get("ctype")
        if ctype not in SLOT_CTYPES:
            raise ManifestError(origin, f"{field}.ctype", f"{ctype!r} is not one of {sorted(SLOT_CTYPES)}")
        size, kind = SLOT_CTYPES[ctype]
        if a.get("kind") != kind or a.get("size") != size:
            raise ManifestError(origin, field, f"{ctype} must be kind {kind!r} size {size}, the manifest says "
                                f"kind {a.get('kind')!r} size {a.get('size')!r}")
        off = a.get("offset")
        if not isinstance(off, int) or isinstance(off, bool) or off < end or off % size:
            raise ManifestError(origin, f"{field}.offset", f"{off!r} overlaps the previous slot or is not "
                                f"{size}-aligned")
        name = a.get("name")
        if not isinstance(name, str) or not name:
            raise ManifestError(origin, f"{field}.name", "missing")
        if name in names:
            raise ManifestError(origin, f"{field}.name", f"duplicate argument name {name!r}")
        names.add(name)
        end = off + size
    ks = e.get("kernarg_size")
    if not isinstance(ks, int) or isinstance(ks, bool) or ks < end:
        raise ManifestError(origin, _join(where, "kernarg_size"), f"{ks!r} is smaller than the arguments ({end} bytes)")
    block = e.get("block")
    if not (isinstance(block, list) and len(block) == 3
            and all(isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in block)):
        raise ManifestError(origin, _join(where, "block"), f"{block!r} is not three positive ints")
