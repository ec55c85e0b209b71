import pytest


@pytest.fixture(scope="session")
def probe_store(probe_build):
    """The probe family's two specs, built by the real build CLI into a fresh store."""
    return probe_build["out"]


@pytest.fixture(scope="session")
def probe_shards(probe_build, tmp_path_factory):
    """The probe family built as shards 0/2 and 1/2 by the real build CLI: [shard 0 dir, shard 1 dir]."""
    from tests.support import run_build
    root = tmp_path_factory.mktemp("shards")
    dirs = []
    for i in range(2):
        run_build("build", "--family", "probe", "--shard", f"{i}/2", "--out", root / f"s{i}",
                  "--cache", probe_build["cache"])
        dirs.append(root / f"s{i}")
    return dirs
