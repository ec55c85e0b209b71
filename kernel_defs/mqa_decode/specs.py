"""mqa_decode family: FP4 paged MQA logits decode (docs/families/mqa_decode.md), the prebuilt matrix.

Compile-time: path, heads, head_dim, page_size, block_k (staged chunk / direct tile tokens), num_warps,
weight_load (direct path: vector or scalar weight loads; the walk path is H64 D128 bk256 w4 per page
size). Runtime: next_n, every stride (including the block-table width), max_seq_len, batch, grid size,
weight_scale.

Budgets (per path): no scratch and no spills (global gate); the staged kernel's LDS is exactly its
KV stage (block_k * (D/2 + D/32) bytes); the direct kernel's LDS is exactly the head-reduction buffer
(2 waves x 8 rows x tile x 4 bytes) and nothing else, and it keeps DIRECT_MIN_WAVES_PER_SIMD waves per
SIMD (a quarter of the target's VGPRs + AGPRs); the walk kernel has no LDS and keeps
WALK_MIN_WAVES_PER_SIMD (an eighth).
"""
from ... import targets
from ..mqa_common.inputs import HEAD_DIMS, HEADS, PAGE_SIZES
from ..registry import Budget, Family, kernel_abi
from . import geometry
from .geometry import (DIRECT_HEADS, DIRECT_MIN_WAVES_PER_SIMD, DIRECT_VARIANTS, MAX_WARPS, STAGED_LDS_PER_TOKEN,
                       STAGED_TILES, WALK_MIN_WAVES_PER_SIMD, Direct, Walk, direct_params, staged_params,
                       walk_params)

TARGETS = (targets.DEFAULT_TARGET,)

_COMMON = ("void* out, void* q, void* q_scale, void* kv_cache, void* kv_scale, void* block_tables, void* weights, "
           "void* cta_info, int32_t next_n, int32_t max_seq_len, int64_t stride_out, int64_t stride_kv, "
           "int64_t stride_ks, int32_t stride_bt, float weight_scale")
# num_pages and bt_width bound every page the kernels read (docs/safety.md); the staged kernel also
# bounds the output rows a schedule entry may name.
_STAGED_ABI = kernel_abi(_COMMON + ", int32_t rows, int32_t num_pages, int32_t bt_width")
# The direct and walk kernels need no schedule: each CTA reads its batch's context length.
_DIRECT_ABI = tuple(("context_lens", t) if n == "cta_info" else (n, t)
                    for n, t in kernel_abi(_COMMON + ", int32_t num_pages, int32_t bt_width"))


def _specs(target):
    out = []
    for h in HEADS:
        for d in HEAD_DIMS:
            for p in PAGE_SIZES:
                for bk, w in STAGED_TILES:
                    if bk % p == 0:
                        out.append(staged_params(h, d, p, bk, w))
    for h in DIRECT_HEADS:
        for p in PAGE_SIZES:
            for tile, wl, waves in DIRECT_VARIANTS[h]:
                out.append(direct_params(h, p, tile, wl == "scalar", waves))
    out += [walk_params(p) for p in PAGE_SIZES]
    return out


def _budget(params, target):
    g = geometry.of(params)
    registers = target.vgprs + target.agprs
    if isinstance(g, Direct):
        return Budget(max_vgpr_plus_agpr=registers // DIRECT_MIN_WAVES_PER_SIMD, exact_lds=g.lds_bytes)
    if isinstance(g, Walk):
        return Budget(max_vgpr_plus_agpr=registers // WALK_MIN_WAVES_PER_SIMD, exact_lds=0)
    return Budget(max_vgpr_plus_agpr=registers, exact_lds=g.lds_bytes)


_MAX_LDS = max(targets.get(t).lds_bytes for t in TARGETS)

FAMILY = Family(
    name="mqa_decode",
    axes={"path": ("staged", "direct", "walk"), "heads": HEADS, "head_dim": HEAD_DIMS, "page_size": PAGE_SIZES,
          # staged: any multiple of 64 tokens the LDS holds, 1..16 waves (plan.staged_tile); direct: 32, 64
          "block_k": (32,) + tuple(range(64, _MAX_LDS // STAGED_LDS_PER_TOKEN + 1, 64)),
          "num_warps": tuple(range(1, MAX_WARPS + 1)), "weight_load": ("vector", "scalar")},
    specs=_specs,
    symbol=geometry.symbol,
    block=geometry.block,
    targets=TARGETS,
    abi=lambda params: _STAGED_ABI if params["path"] == "staged" else _DIRECT_ABI,
    budget=_budget,
    shipped=True,
    doc=__doc__,
)
