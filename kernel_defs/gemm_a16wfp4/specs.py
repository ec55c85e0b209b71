"""gemm_a16wfp4 family: dense BF16 x MXFP4 GEMM (docs/families/gemm_a16wfp4.md), the prebuilt set.

Compile-time: pipeline order, tile (bm, bn), intra-workgroup split-K factor sk, 128-K blocks per wave
per step kb, MFMA shape mfma. Runtime: M, N, K, both row strides. The spec list is every config configs.py names
(tuned shapes and the generic fallback share code objects where their tiles agree).

Budgets: decode-order specs serve decode M; they must keep 2 waves per SIMD (VGPR+AGPR <= 256 and
LDS <= 80 KiB, so two 4-wave workgroups fit one CU), which covers the 8448 x 7168 decode configs.
Every spec: VGPR+AGPR <= 512 and LDS exactly as geometry.py computes (the plan relies on it).
"""
from ...targets import DEFAULT_TARGET
from ..registry import Budget, Family, kernel_abi
from . import configs, geometry
from .geometry import DECODE_MAX_REGS

ABI = kernel_abi("void* out, void* x, void* w, void* w_scale, int32_t m, int32_t n, int32_t k, int32_t stride_x, "
                 "int32_t stride_out")


def _budget(params: dict, target) -> Budget:
    t = geometry.tile(params)
    if t.order == "decode":
        return Budget(max_vgpr_plus_agpr=DECODE_MAX_REGS, max_lds=geometry.lds_limit("decode", target),
                      exact_lds=t.lds_bytes)
    return Budget(max_vgpr_plus_agpr=target.vgprs + target.agprs, exact_lds=t.lds_bytes)


FAMILY = Family(
    name="gemm_a16wfp4",
    axes={"order": geometry.ORDERS, "bm": configs.TILE_BM, "bn": configs.TILE_BN, "sk": (1, 2, 4),
          "kb": tuple(t // geometry.KBLOCK for t in configs.TILE_K), "mfma": tuple(geometry.MFMAS)},
    specs=lambda target: configs.all_configs(),
    symbol=geometry.symbol,
    block=geometry.block,
    targets=(DEFAULT_TARGET,),
    abi=lambda params: ABI,
    budget=_budget,
    shipped=True,
    doc=__doc__,
)
