"""The prebuilt store's manifest: one JSON file describing every code object of a store.

Layout of a store directory:
    manifest.json           this schema
    <target>/<spec id>.co   code objects

Written deterministically (sorted keys, a fixed indent, trailing newline) so the same specs always give
byte-identical manifests: no timestamps, paths or host names.
"""
import hashlib
import json
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


def validate(manifest: dict, *, origin: str = "manifest") -> dict:
    """Structural check of a loaded manifest; raises ManifestError naming what is wrong."""
    if not isinstance(manifest, dict):
        raise ManifestError(f"{origin}: not a JSON object")
    if manifest.get("schema") != SCHEMA_VERSION:
        raise ManifestError(f"{origin}: schema {manifest.get('schema')!r}, this flyaot reads schema {SCHEMA_VERSION}")
    for field in ("flyaot", "toolchain", "target", "specs"):
        if field not in manifest:
            raise ManifestError(f"{origin}: missing field {field!r}")
    for sid, e in manifest["specs"].items():
        for field in ("family", "params", "key", "file", "size", "sha256", "symbol", "block", "kernarg_size",
                      "args", "resources"):
            if field not in e:
                raise ManifestError(f"{origin}: spec {sid} lacks field {field!r}")
    return manifest


def load(path) -> dict:
    import pathlib
    p = pathlib.Path(path)
    try:
        data = json.loads(p.read_bytes())
    except (OSError, json.JSONDecodeError) as e:
        raise ManifestError(f"cannot read manifest {p}: {e}") from None
    return validate(data, origin=str(p))
