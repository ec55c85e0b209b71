"""The prefill family: every (H, D, page size) spec is prebuilt; everything else is a runtime argument.

H 16..128 step 16 x D {128, 256} x P {64, 128} = 32 specs. Budget: for D128 H64 P64 the LDS is
exactly the staged chunk (17,408 bytes) and at most 126 VGPRs; every spec's LDS is exactly its chunk.
"""
from ..mqa_common.inputs import HEAD_DIMS, HEADS, PAGE_SIZES
from ...targets import DEFAULT_TARGET
from ..registry import Budget, Family, kernel_abi
from .geometry import Geometry, block, spec_params, symbol

ABI = kernel_abi("void* out, void* q, void* q_scale, void* kv_cache, void* kv_scale, void* block_tables, "
                 "void* weights, void* local_starts, void* local_ends, void* cta_info, int32_t stride_out, "
                 "int32_t stride_q, int32_t stride_qs, int32_t stride_w, int32_t stride_kv_page, "
                 "int32_t stride_kvs_page, int32_t stride_bt, int32_t bt_width, int32_t max_seq_len, "
                 "float weight_scale, int32_t rows, int32_t bt_rows, int32_t num_pages")
BUDGET_SPEC = spec_params(heads=64, head_dim=128, page_size=64)
BUDGET_MAX_VGPR = 126


def specs(target) -> list:
    return [spec_params(h, d, p) for h in HEADS for d in HEAD_DIMS for p in PAGE_SIZES]


def budget(params: dict, target) -> Budget:
    lds = Geometry.of(params).lds_bytes
    if params == BUDGET_SPEC:
        return Budget(max_vgpr=BUDGET_MAX_VGPR, max_vgpr_plus_agpr=BUDGET_MAX_VGPR, exact_lds=lds)
    return Budget(exact_lds=lds)


FAMILY = Family(
    name="mqa_prefill",
    axes={"heads": HEADS, "head_dim": HEAD_DIMS, "page_size": PAGE_SIZES},
    specs=specs,
    symbol=symbol,
    block=block,
    targets=(DEFAULT_TARGET,),
    abi=lambda params: ABI,
    budget=budget,
    shipped=True,
    doc="FP4 paged MQA logits, prefill: 4 same-batch query rows per CTA share an LDS-staged KV chunk",
)
