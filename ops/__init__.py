"""Public ops, one private module per family (`flyaot.ops._<family>`; private names keep a module from
ever shadowing an op of the same name, such as `gemm_a16wfp4`).

Importing this package imports torch and the families' pure-Python plans and registers every
torch.ops.flyaot.* op; it imports no FlyDSL, MLIR or build tools and reads no store (the first
launch does).
"""
import importlib

from ._gemm_a16wfp4 import gemm_a16wfp4, prepare_mxfp4_weight
from ._mqa_decode import pa_mqa_logits_fp4
from ._mqa_fp8 import fp8_mqa_logits, fp8_paged_mqa_logits, fp8_paged_mqa_logits_schedule
from ._mqa_prefill import (compute_prefill_schedule, compute_varqlen_windows, pa_mqa_logits_fp4_prefill,
                           pa_mqa_logits_fp4_varqlen)

__all__ = sorted(["compute_prefill_schedule", "compute_varqlen_windows", "fp8_mqa_logits", "fp8_paged_mqa_logits", "fp8_paged_mqa_logits_schedule", "gemm_a16wfp4", "pa_mqa_logits_fp4",
                  "pa_mqa_logits_fp4_prefill", "pa_mqa_logits_fp4_varqlen", "prepare_mxfp4_weight"])


def family_module(family: str):
    """The module holding a family's ops (and its selftest/bench hooks)."""
    return importlib.import_module(f"{__name__}._{family}")
