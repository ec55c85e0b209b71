"""The prebuilt store's manifest: one JSON file describing every code object of a store.

Layout of a store directory:
    manifest.json           this schema
    <target>/<spec id>.co   code objects

Written deterministically (sorted keys, a fixed indent, trailing newline) so the same specs always give
byte-identical manifests: no timestamps, paths or host names.
"""
import hashlib
import json
import re
from dataclasses import dataclass

SCHEMA_VERSION = 1
MANIFEST_NAME = "manifest.json"

# The C types an argument slot may have (a flat kernel ABI), with the size and AMDGPU value_kind the
# code object's metadata must show for them.
SLOT_CTYPES = {"void*": (8, "global_buffer"), "int32_t": (4, "by_value"), "int64_t": (8, "by_value"),
               "float": (4, "by_value")}


class ManifestError(ValueError):
    pass


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


# Bounds on what a manifest may contain: a real one nests 4 deep and holds small numbers.
MAX_DEPTH = 16
MAX_INT_DIGITS = 20
_ENTRY_FIELDS = {"family": str, "params": dict, "key": str, "file": str, "size": int, "sha256": str,
                 "symbol": str, "block": list, "kernarg_size": int, "args": list, "resources": dict}


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ManifestError(f"integer of {len(text)} digits")
    return int(text)


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


def parse(data: bytes, *, origin: str) -> dict:
    """JSON bytes -> a validated manifest; ManifestError (naming `origin`) for anything malformed."""
    try:
        text = data.decode("utf-8")
        if _nesting(text) > MAX_DEPTH:
            raise ManifestError(f"nested deeper than {MAX_DEPTH}")
        obj = json.loads(text, parse_int=_bounded_int, parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ManifestError(f"cannot read manifest {origin}: {e}") from None
    return validate(obj, origin=origin)


def _no_constant(name: str):
    raise ManifestError(f"{name} is not JSON")


def _type_name(v) -> str:
    return type(v).__name__


def validate(manifest, *, origin: str = "manifest") -> dict:
    """Structural check of a loaded manifest (every field's JSON type); raises ManifestError naming what
    is wrong. Semantic checks (fingerprint, keys, file names, slots) belong to the store that opens it."""
    if not isinstance(manifest, dict):
        raise ManifestError(f"{origin}: not a JSON object")
    if manifest.get("schema") != SCHEMA_VERSION:
        raise ManifestError(f"{origin}: schema {manifest.get('schema')!r}, this flyaot reads schema {SCHEMA_VERSION}")
    for field, kind in (("flyaot", str), ("toolchain", dict), ("target", str), ("specs", dict)):
        if field not in manifest:
            raise ManifestError(f"{origin}: missing field {field!r}")
        if not isinstance(manifest[field], kind):
            raise ManifestError(f"{origin}: {field} is a {_type_name(manifest[field])}, not a {kind.__name__}")
    if "shard" in manifest and not isinstance(manifest["shard"], str):
        raise ManifestError(f"{origin}: shard is not a string")
    for sid, e in manifest["specs"].items():
        if not isinstance(e, dict):
            raise ManifestError(f"{origin}: spec {sid} is a {_type_name(e)}, not an object")
        for field, kind in _ENTRY_FIELDS.items():
            if field not in e:
                raise ManifestError(f"{origin}: spec {sid} lacks field {field!r}")
            v = e[field]
            if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
                raise ManifestError(f"{origin}: spec {sid}: {field} is a {_type_name(v)}, not a {kind.__name__}")
        for i, a in enumerate(e["args"]):
            if not isinstance(a, dict):
                raise ManifestError(f"{origin}: spec {sid}: argument {i} is a {_type_name(a)}, not an object")
    return manifest
