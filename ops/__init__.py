"""Public ops. Each lives in its family's module here and is imported on first attribute access, so
`import flyaot.ops` stays cheap."""
import importlib

_WHERE = {
    "pa_mqa_logits_fp4": "mqa_decode",
    "pa_mqa_logits_fp4_prefill": "mqa_prefill",
    "pa_mqa_logits_fp4_varqlen": "mqa_prefill",
    "prepare_mxfp4_weight": "gemm_a16wfp4",
    "gemm_a16wfp4": "gemm_a16wfp4",
}

__all__ = sorted(_WHERE)


def __getattr__(name):
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"flyaot.ops has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    # An op named like its module: importing the module set this package attribute to the module.
    globals()[name] = value
    return value
