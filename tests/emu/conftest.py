import json

import pytest

from tests.support import run_build


@pytest.fixture(scope="session")
def emu_samples_store(tmp_path_factory):
    """The test-only emu_samples family built by the real build CLI into a store of its own."""
    root = tmp_path_factory.mktemp("emu_samples")
    run_build("build", "--family", "emu_samples", "--out", root / "store", "--cache", root / "cache")
    return root / "store"


@pytest.fixture(scope="session")
def sample_objects(emu_samples_store):
    """Paths of the emu_samples code objects."""
    manifest = json.loads((emu_samples_store / "manifest.json").read_text())
    return sorted(emu_samples_store / e["file"] for e in manifest["specs"].values())
