"""Repository-wide pytest setup: the test-only families are found, GPU tests skip cleanly where torch
sees no GPU, and the probe family's store is built once per session by the real build CLI."""
import json
import os
import pathlib

import pytest

# The test-only families (probe, emu_samples) live in tests/families; this makes them families of
# flyaot.kernel_defs for this process and every build CLI and compile worker it starts.
os.environ.setdefault("FLYAOT_EXTRA_FAMILIES", str(pathlib.Path(__file__).resolve().parent / "tests" / "families"))

from tests.support import run_build


def pytest_collection_modifyitems(config, items):
    import torch
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA or ROCm GPU: torch.cuda.is_available() is False here "
                                   "(run `python -m pytest -m gpu` on the GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def probe_build(tmp_path_factory):
    """The probe family's two specs built into a fresh store and cache: {out, cache, manifest, stdout}."""
    root = tmp_path_factory.mktemp("probe")
    out, cache = root / "store", root / "cache"
    proc = run_build("build", "--family", "probe", "--out", out, "--cache", cache, "--jobs", 2)
    manifest = json.loads((out / "manifest.json").read_text())
    return {"out": out, "cache": cache, "manifest": manifest, "stdout": proc.stdout}
