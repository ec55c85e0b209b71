"""Helpers of the hostile-input tests: guarded placement of tensors and the docs/safety.md result check."""
import torch

from flyaot.kernel_defs.mqa_common.reference import compare, passes

NEG_INF = float("-inf")


def guarded(t: torch.Tensor, pad: int) -> torch.Tensor:
    """A copy of contiguous `t` inside a byte pool with `pad` bytes of no tensor on each side."""
    nbytes = t.numel() * t.element_size()
    pool = torch.randint(0, 256, (2 * pad + nbytes,), dtype=torch.uint8)
    view = pool[pad:pad + nbytes].view(t.dtype).view(t.shape)
    view.copy_(t)
    return view


def guard_kv(kv):
    page = kv.kv_cache[0].numel()
    kv.kv_cache = guarded(kv.kv_cache.contiguous(), 4 * page)
    kv.kv_scale = guarded(kv.kv_scale.contiguous(), 4 * kv.kv_scale[0].numel())
    kv.block_tables = guarded(kv.block_tables.contiguous(), 256)
    return kv


def assert_contract(out, ref, shown):
    """Cells the reference leaves -inf (hidden, or an invalid page) are exactly -inf; the others match."""
    finite = shown & torch.isfinite(ref)
    assert bool((out[~finite] == NEG_INF).all()), "a cell outside the valid pages is not -inf"
    m = compare(out, ref, finite)
    assert passes(m), m
