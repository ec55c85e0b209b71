import pytest


@pytest.fixture(scope="session")
def probe_store(probe_build):
    """The probe family's two specs, built by the real build CLI into a fresh store."""
    return probe_build["out"]
