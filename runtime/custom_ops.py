"""Registering public ops as torch.library custom ops, so they trace under torch.compile.

    @custom_op("gemm_a16wfp4", mutates_args=(), fake=_gemm_fake)
    def gemm_a16wfp4(x: torch.Tensor, w: torch.Tensor, w_scale: torch.Tensor) -> torch.Tensor: ...

registers `torch.ops.flyaot.gemm_a16wfp4`. The implementation needs full type annotations (torch
derives the schema from them); `fake` computes output metadata only (shapes, dtypes, devices) on
fake tensors. For `out=` variants register a second op that lists "out" in mutates_args and
returns None.
"""
import threading

NAMESPACE = "flyaot"
_ops = {}
_lock = threading.Lock()


def custom_op(name: str, *, mutates_args, fake):
    """Decorator: register `fn` as flyaot::<name> with its fake implementation (once per process)."""
    if not callable(fake):
        raise TypeError(f"{NAMESPACE}::{name}: a fake implementation is required for torch.compile")

    def register(fn):
        import torch
        qualname = f"{NAMESPACE}::{name}"
        with _lock:
            op = _ops.get(qualname)
            if op is None:
                op = torch.library.custom_op(qualname, fn, mutates_args=tuple(mutates_args))
                op.register_fake(fake)
                _ops[qualname] = op
        return op

    return register
