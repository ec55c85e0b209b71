import os
import pathlib
import subprocess
import sys

import pytest
import torch

HERE = pathlib.Path(__file__).parent


def pytest_collection_modifyitems(config, items):
    """GPU tests skip, with the reason, where torch sees no GPU (CI, the CPU build machine)."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA or ROCm GPU: torch.cuda.is_available() is False here "
                                   "(run `python -m pytest -m gpu tests/runtime` on the GPU machine)")
    for item in items:
        if "gpu" in item.keywords and HERE in pathlib.Path(str(item.fspath)).parents:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def probe_store(tmp_path_factory):
    """The probe family's two specs, built by the real build CLI into a fresh store (a few seconds)."""
    root = tmp_path_factory.mktemp("rt-probe")
    out = root / "store"
    proc = subprocess.run([sys.executable, "-m", "flyaot.build_tools", "build", "--family", "probe",
                           "--out", str(out), "--cache", str(root / "cache"), "--jobs", "2"],
                          capture_output=True, text=True, timeout=600, env=dict(os.environ))
    if proc.returncode != 0:
        raise AssertionError(f"probe build failed:\n{proc.stdout}\n{proc.stderr}")
    return out
