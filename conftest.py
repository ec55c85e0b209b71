"""Repository-wide pytest setup: the test-only families are found, device tests skip cleanly where
their device is absent, and the probe family's store is built once per session by the real build CLI.

Two device markers, so that a run on one kind of GPU can never be read as a run on another:
  gpu     any CUDA or ROCm device torch can see (the load/launch/graph path; cubins on NVIDIA)
  gfx950  an AMD gfx950 device (MI350X/MI355X): the shipped code objects executing for real
"""
import json
import os
import pathlib

import pytest

# The test-only families (probe, emu_samples) live in tests/families; this makes them families of
# flyaot.kernel_defs for this process and every build CLI and compile worker it starts.
os.environ.setdefault("FLYAOT_EXTRA_FAMILIES", str(pathlib.Path(__file__).resolve().parent / "tests" / "families"))

from tests.support import run_build


def _device_arch() -> str:
    """The architecture of GPU 0 as torch reports it ('' without a GPU; sm_XY on NVIDIA)."""
    import torch
    if not torch.cuda.is_available():
        return ""
    props = torch.cuda.get_device_properties(0)
    arch = getattr(props, "gcnArchName", "") if torch.version.hip else ""
    return arch.split(":")[0] if arch else f"sm_{props.major}{props.minor}"


def pytest_collection_modifyitems(config, items):
    arch = _device_arch()
    skips = {
        "gpu": None if arch else pytest.mark.skip(
            reason="needs a CUDA or ROCm GPU: torch.cuda.is_available() is False here "
                   "(run `python -m pytest -m gpu` on the GPU machine)"),
        "gfx950": None if arch == "gfx950" else pytest.mark.skip(
            reason=f"needs an AMD gfx950 GPU (MI350X/MI355X); this machine has {arch or 'no GPU'}"),
    }
    for item in items:
        for marker, skip in skips.items():
            if skip is not None and marker in item.keywords:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def probe_build(tmp_path_factory):
    """The probe family's two specs built into a fresh store and cache: {out, cache, manifest, stdout}."""
    root = tmp_path_factory.mktemp("probe")
    out, cache = root / "store", root / "cache"
    proc = run_build("build", "--family", "probe", "--out", out, "--cache", cache, "--jobs", 2)
    manifest = json.loads((out / "manifest.json").read_text())
    return {"out": out, "cache": cache, "manifest": manifest, "stdout": proc.stdout}


@pytest.fixture
def private_jit_cache(tmp_path_factory, monkeypatch):
    """Kernels missing from the prebuilt store are JIT-built into a cache owned by this test session
    (request it autouse where a folder or module may compile)."""
    monkeypatch.setenv("FLYAOT_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "flyaot-cache"))
    import flyaot.runtime
    flyaot.runtime.reset()
    yield
    flyaot.runtime.reset()
