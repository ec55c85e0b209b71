import pytest


@pytest.fixture(autouse=True)
def _private_jit_cache(private_jit_cache):
    """Every test here may JIT-build a kernel the prebuilt store lacks (the root conftest's fixture)."""
