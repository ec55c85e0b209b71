"""Helpers for the store tests: copies of real stores (built by the real build CLI) and edits of them."""
import json
import pathlib
import shutil

from flyaot.formats.manifest import MANIFEST_NAME, pretty_json
from flyaot.store.index import cache_store  # noqa: F401  (the user cache store of a target)
from flyaot.runtime.config import Config

PROBE64 = "probe[behavior=ok,block=64]@gfx950"
PROBE128 = "probe[behavior=ok,block=128]@gfx950"


def copy_store(src, dst) -> pathlib.Path:
    shutil.copytree(src, dst)
    return pathlib.Path(dst)


def read_manifest(root) -> dict:
    return json.loads((pathlib.Path(root) / MANIFEST_NAME).read_text())


def write_manifest(root, manifest: dict) -> None:
    (pathlib.Path(root) / MANIFEST_NAME).write_bytes(pretty_json(manifest))


def edit_manifest(root, edit) -> pathlib.Path:
    m = read_manifest(root)
    edit(m)
    write_manifest(root, m)
    return pathlib.Path(root)


def config(tmp_path, *, package=None, extra=(), cache=None, **over) -> Config:
    """A Config that sees only the given stores (never the checkout's own prebuilt store)."""
    fields = dict(package_dir=pathlib.Path(package or tmp_path / "no-package-stores"),
                  extra_stores=tuple(pathlib.Path(p) for p in extra),
                  cache_dir=pathlib.Path(cache or tmp_path / "user-cache"),
                  disable_jit=True, record_misses="", device="emu", jit_timeout=60.0, py_launch=False)
    fields.update(over)
    return Config(**fields)


def one_line_error(proc) -> str:
    """The CLI's error: exactly one line on stderr starting with 'error:', no traceback."""
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith("INFO ")]
    assert "Traceback" not in proc.stderr, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    return lines[0]
