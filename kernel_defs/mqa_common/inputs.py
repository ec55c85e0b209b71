"""What both MQA logits families accept: the prebuilt shape axes and the checks of the arguments they
read the same way. Pure Python + torch (both families' inputs.py use it).

Alignment, from the kernels' memory accesses: Q and KV values are read 16 bytes per lane
(buffer_load_dwordx4), so their base and every row / page stride the kernels step by are multiples of
VALUE_ALIGN; everything else (E8M0 scales, bf16 weights, int32 tables, windows and schedules, f32
outputs) is read or written in whole dwords (1-4 dword vector or scalar accesses, which need dword
alignment), so multiples of DWORD_ALIGN.
"""
from ..tensor_checks import E8M0, FP4X2, check_tensor

HEADS = tuple(range(16, 129, 16))
HEAD_DIMS = (128, 256)
PAGE_SIZES = (64, 128)

VALUE_ALIGN = 16
DWORD_ALIGN = 4


def check_kv_pages(kv_cache, kv_scale, *, k_tiles: int, page_size: int, like) -> None:
    """kv_cache [N, KT, 4, P, 16] FP4 and kv_scale [N, KT, 4, P] E8M0 in the page layout of
    layouts.pack_kv_pages: pages may sit at any aligned stride (a shared pool), but never overlap."""
    dims = {}
    kt, p = k_tiles, page_size
    check_tensor("kv_cache", kv_cache, dtype=FP4X2, shape=("pages", kt, 4, p, 16), stride=(None, 64 * p, 16 * p, 16, 1),
                 device=like, align=VALUE_ALIGN, align_strides=True, dims=dims)
    check_tensor("kv_scale", kv_scale, dtype=E8M0, shape=("pages", kt, 4, p), stride=(None, 4 * p, p, 1),
                 device=like, align=DWORD_ALIGN, align_strides=True, dims=dims)
    for name, t, page_bytes in (("kv_cache", kv_cache, kt * 64 * p), ("kv_scale", kv_scale, kt * 4 * p)):
        if t.shape[0] > 1 and t.stride(0) < page_bytes:
            raise ValueError(f"{name}: page stride {t.stride(0)} B is below the page size {page_bytes} B "
                             "(pages would overlap)")
