"""mqa_decode family: FP4 paged MQA logits decode (docs/families/mqa_decode.md), the prebuilt matrix.

Compile-time: path, heads, head_dim, page_size, block_k (staged chunk / direct tile tokens), num_warps,
weight_load (direct path: vector or scalar weight loads). Runtime: next_n, every stride (including the
block-table width), max_seq_len, batch, grid size, weight_scale.

Budgets (per path): no scratch and no spills (global gate); the staged kernel's LDS is exactly its
KV stage (block_k * (D/2 + D/32) bytes); the direct kernel's LDS is exactly the head-reduction buffer
(2 waves x 8 rows x tile x 4 bytes) and nothing else, and it stays within 128 VGPRs (4 waves / SIMD).
"""
from ..mqa_common.inputs import HEAD_DIMS, HEADS, PAGE_SIZES
from ...targets import DEFAULT_TARGET
from ..registry import Budget, Family, kernel_abi
from . import plan
from . import geometry
from .geometry import DIRECT_HEADS, DIRECT_MIN_WAVES_PER_SIMD, Direct, direct_params, staged_params


_COMMON = ("void* out, void* q, void* q_scale, void* kv_cache, void* kv_scale, void* block_tables, void* weights, "
           "void* cta_info, int32_t next_n, int32_t max_seq_len, int64_t stride_out, int64_t stride_kv, "
           "int64_t stride_ks, int32_t stride_bt, float weight_scale")
# num_pages and bt_width bound every page the kernels read (docs/safety.md); the staged kernel also
# bounds the output rows a schedule entry may name.
_STAGED_ABI = kernel_abi(_COMMON + ", int32_t rows, int32_t num_pages, int32_t bt_width")
# The direct kernel needs no schedule: each CTA reads its batch's context length.
_DIRECT_ABI = tuple(("context_lens", t) if n == "cta_info" else (n, t)
                    for n, t in kernel_abi(_COMMON + ", int32_t num_pages, int32_t bt_width"))


def _specs():
    out = []
    for h in HEADS:
        for d in HEAD_DIMS:
            for p in PAGE_SIZES:
                for bk, w in plan.STAGED_TILES:
                    if bk % p == 0:
                        out.append(staged_params(h, d, p, bk, w))
    for h in DIRECT_HEADS:
        for p in PAGE_SIZES:
            for tile, wl, waves in plan.DIRECT_VARIANTS[h]:
                out.append(direct_params(h, p, tile, wl == "scalar", waves))
    return out


def _symbol(params):
    name = "mqa_decode_{path}_h{heads}_d{head_dim}_p{page_size}_bk{block_k}_w{num_warps}".format(**params)
    return name + ("_sw" if params["weight_load"] == "scalar" else "")


def _budget(params):
    g = geometry.of(params)
    if isinstance(g, Direct):
        return Budget(max_vgpr_plus_agpr=512 // DIRECT_MIN_WAVES_PER_SIMD, exact_lds=g.lds_bytes)
    return Budget(max_vgpr_plus_agpr=512, exact_lds=g.lds_bytes)


FAMILY = Family(
    name="mqa_decode",
    axes={"path": ("staged", "direct"), "heads": HEADS, "head_dim": HEAD_DIMS, "page_size": PAGE_SIZES,
          # staged: any multiple of 64 tokens the LDS holds, 1..16 waves (plan.staged_tile); direct: 32, 64
          "block_k": (32,) + tuple(range(64, plan.MAX_LDS // 68 + 1, 64)),
          "num_warps": tuple(range(1, plan.MAX_WARPS + 1)), "weight_load": ("vector", "scalar")},
    specs=_specs,
    symbol=_symbol,
    block=plan.block,
    targets=(DEFAULT_TARGET,),
    abi=lambda params: _DIRECT_ABI if params["path"] == "direct" else _STAGED_ABI,
    budget=_budget,
    shipped=True,
    doc=__doc__,
)
