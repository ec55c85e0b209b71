"""The misses file: one JSON object per line naming a spec no store had, the input of
`python -m flyaot.build_tools build --from-misses FILE --out DIR` (an add-on pack).

    {"family": ..., "key": ..., "params": {...}, "target": ...}
"""
import json
import pathlib

from ..formats.manifest import Spec
from . import files
from .errors import StoreError

MISSES_CAP = 16 << 20      # bytes


def line(spec) -> str:
    rec = {"family": spec.family, "key": spec.key, "params": spec.param_dict, "target": spec.target}
    return json.dumps(rec, sort_keys=True, separators=(",", ":")) + "\n"


def parse_line(text: str, target: str, where: str) -> Spec:
    """One record as a Spec for `target`; StoreError naming `where` for a malformed line or a line
    recorded on another target (a pack holds one target's code objects)."""
    try:
        rec = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise StoreError(f"{where}: not JSON ({e})") from None
    if not isinstance(rec, dict) or not isinstance(rec.get("family"), str):
        raise StoreError(f"{where}: not a miss record (an object with \"family\" and \"params\")")
    params = rec.get("params")
    if not isinstance(params, dict):
        raise StoreError(f"{where}: params must be an object of name: value, got {params!r}")
    got = rec.get("target", target)
    if got != target:
        raise StoreError(f"{where}: recorded for target {got!r}; this build makes {target} stores (build that "
                         f"target's pack on its own)")
    try:
        spec = Spec.make(rec["family"], params, target)
    except TypeError as e:
        raise StoreError(f"{where}: {e}") from None
    if "key" in rec and rec["key"] != spec.key:
        raise StoreError(f"{where}: key {rec['key']!r} does not match its family/params ({spec.key!r})")
    return spec


def read(path, target: str) -> list:
    """The unique specs of a misses file, in key order; blank lines skipped."""
    path = pathlib.Path(path)
    text = files.read_capped(path, MISSES_CAP, "misses file").decode("utf-8", "replace")
    seen = {}
    for n, raw in enumerate(text.splitlines(), 1):
        if raw.strip():
            spec = parse_line(raw, target, f"{path}:{n}")
            seen[spec.key] = spec
    return sorted(seen.values(), key=lambda s: s.key)
