"""Public ops. Each family's ops live in the private module `flyaot.ops._<family>` and are imported
on first attribute access, so `import flyaot.ops` stays cheap. (Private module names keep a module
from ever shadowing an op of the same name, such as `gemm_a16wfp4`.)"""
import importlib

_WHERE = {
    "pa_mqa_logits_fp4": "mqa_decode",
    "pa_mqa_logits_fp4_prefill": "mqa_prefill",
    "pa_mqa_logits_fp4_varqlen": "mqa_prefill",
    "compute_prefill_schedule": "mqa_prefill",
    "compute_varqlen_windows": "mqa_prefill",
    "prepare_mxfp4_weight": "gemm_a16wfp4",
    "gemm_a16wfp4": "gemm_a16wfp4",
}

__all__ = sorted(_WHERE)


def family_module(family: str):
    """The module holding a family's ops (and its selftest/bench hooks)."""
    return importlib.import_module(f"{__name__}._{family}")


def __getattr__(name):
    family = _WHERE.get(name)
    if family is None:
        raise AttributeError(f"flyaot.ops has no attribute {name!r}")
    value = getattr(family_module(family), name)
    globals()[name] = value
    return value
