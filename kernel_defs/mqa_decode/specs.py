"""mqa_decode family: FP4 paged MQA logits decode (kernel_semantics.md section 1), the prebuilt matrix.

Compile-time: path, heads, head_dim, page_size, block_k (staged chunk / direct tile tokens), num_warps,
weight_load (direct path: vector or scalar weight loads). Runtime: next_n, every stride (including the
block-table width), max_seq_len, batch, grid size, weight_scale.

Budgets (per path): no scratch and no spills (global gate); the staged kernel's LDS is exactly its
KV stage (block_k * (D/2 + D/32) bytes); the direct kernel's LDS is exactly the head-reduction buffer
(2 waves x 8 rows x tile x 4 bytes) and nothing else, and it stays within 128 VGPRs (4 waves / SIMD).
"""
from ..mqa_common.inputs import HEAD_DIMS, HEADS, PAGE_SIZES
from ..registry import Budget, Family
from . import plan
from .geometry import DIRECT_HEADS, DIRECT_MIN_WAVES_PER_SIMD, DIRECT_WAVES, Direct, Staged


def _specs():
    out = []
    for h in HEADS:
        for d in HEAD_DIMS:
            for p in PAGE_SIZES:
                for bk, w in plan.STAGED_TILES:
                    if bk % p == 0:
                        out.append({"path": "staged", "heads": h, "head_dim": d, "page_size": p,
                                    "block_k": bk, "num_warps": w, "weight_load": "vector"})
    for h in DIRECT_HEADS:
        for p in PAGE_SIZES:
            for tile, wl in plan.DIRECT_VARIANTS:
                out.append({"path": "direct", "heads": h, "head_dim": 128, "page_size": p,
                            "block_k": tile, "num_warps": DIRECT_WAVES, "weight_load": wl})
    return out


def _symbol(params):
    name = "mqa_decode_{path}_h{heads}_d{head_dim}_p{page_size}_bk{block_k}_w{num_warps}".format(**params)
    return name + ("_sw" if params["weight_load"] == "scalar" else "")


def _budget(params):
    if params["path"] == "direct":
        g = Direct(params["heads"], params["page_size"], params["block_k"], params["weight_load"] == "scalar")
        return Budget(max_vgpr_plus_agpr=512 // DIRECT_MIN_WAVES_PER_SIMD, exact_lds=g.lds_bytes)
    g = Staged(params["heads"], params["head_dim"], params["page_size"], params["block_k"], params["num_warps"])
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
    budget=_budget,
    shipped=True,
    doc=__doc__,
)
