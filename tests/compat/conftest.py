import pytest


@pytest.fixture(autouse=True)
def _private_jit_cache(tmp_path_factory, monkeypatch):
    """Kernels missing from the prebuilt store are JIT-built into a cache owned by this test session."""
    monkeypatch.setenv("FLYAOT_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "flyaot-cache"))
    import flyaot.runtime
    flyaot.runtime.reset()
    yield
    flyaot.runtime.reset()
