import pytest


@pytest.fixture(scope="session")
def probe_store(probe_build):
    return probe_build
