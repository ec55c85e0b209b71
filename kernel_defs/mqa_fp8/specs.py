"""mqa_fp8 family: FP8 E4M3 MQA logits, paged decode and ragged prefill (docs/families/mqa_fp8.md).

Compile-time: path, heads, head_dim, page_size and key layout (paged path). Runtime: batch, next_n,
every stride, the output width, the table width and the page count (both bound every page read).
Prebuilt: H32/H64 x (page 1 plain, page 64 plain, page 64 preshuffled, page 64 preshuffled on the varctx
grid) paged; H32/H64 ragged.
Budget: one wave per CTA, no LDS, within a quarter of the target's VGPRs + AGPRs (gfx950: 128, 4 waves
per SIMD).
"""
from ...targets import DEFAULT_TARGET
from ..registry import Budget, Family, kernel_abi
from . import geometry as G

# `schedule` (the varctx table) and `batch` (bounds its rows) are read by the varctx grid only; the
# tiles grid reads context_lens instead.
_PAGED_ABI = kernel_abi(
    "void* out, void* q, void* kv_cache, void* weights, void* context_lens, void* block_tables, void* schedule, "
    "int32_t next_n, int32_t max_model_len, int64_t stride_out, int64_t stride_kv, int32_t stride_w, "
    "int32_t stride_bt, int32_t num_pages, int32_t bt_width, int32_t batch")
_RAGGED_ABI = kernel_abi(
    "void* out, void* q, void* kv, void* kv_scales, void* weights, void* cu_starts, void* cu_ends, "
    "int32_t seq_len, int32_t seq_len_kv, int64_t stride_out, int32_t stride_kv, int32_t stride_w, int32_t clean")

# (page_size, layout, grid) of the prebuilt paged kernels: aiter's default block 1, the 64-token pages
# SGLang (plain) and vLLM (preshuffled, with the varctx schedule) pass.
PAGED_KINDS = ((1, "plain", "tiles"), (64, "plain", "tiles"), (64, "preshuffle", "tiles"),
               (64, "preshuffle", "varctx"))


def _specs(target):
    paged = [G.params("paged", h, p, lay, grid) for h in G.HEADS for p, lay, grid in PAGED_KINDS]
    return paged + [G.params("ragged", h) for h in G.HEADS]


FAMILY = Family(
    name="mqa_fp8",
    axes={"path": G.PATHS, "heads": G.HEADS, "head_dim": (G.HEAD_DIM,), "page_size": G.PAGE_SIZES,
          "layout": G.LAYOUTS, "grid": G.GRIDS},
    specs=_specs,
    symbol=G.symbol,
    block=G.block,
    targets=(DEFAULT_TARGET,),
    abi=lambda params: _PAGED_ABI if params["path"] == "paged" else _RAGGED_ABI,
    budget=lambda params, target: Budget(max_vgpr_plus_agpr=(target.vgprs + target.agprs) // G.MIN_WAVES_PER_SIMD,
                                         exact_lds=0),
    shipped=True,
    doc=__doc__,
)
