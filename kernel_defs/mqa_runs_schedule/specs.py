"""mqa_runs_schedule family: the "runs" schedule tables, each built by one launch of one workgroup.

layout "varctx": the decode staged kernel's cta_info int32 [P, 4] (row, chunk start, chunk count, ctx),
next_n rows per slot. layout "rows": the one-row-per-CTA prefill table int32 [P, 6] (row, batch,
chunk start, chunk count, local start, local end). Runtime: item count, slots, next_n, block_k,
max_seq_len and the search's round count. Budget: no scratch or spills (global gate), LDS exactly the
item cache plus the block arrays (geometry.LDS_BYTES).
"""
from ...targets import DEFAULT_TARGET
from ..registry import Budget, Family, kernel_abi
from .geometry import LAYOUTS, LDS_BYTES, block, symbol

_ABI = {
    "varctx": kernel_abi("void* cta_info, void* safe, void* context_lens, int32_t items, int32_t slots, "
                         "int32_t next_n, int32_t block_k, int32_t max_seq_len, int32_t rounds"),
    "rows": kernel_abi("void* cta_info, void* safe, void* local_ends, void* row_to_batch, void* local_starts, "
                       "int32_t items, int32_t slots, int32_t block_k, int32_t max_seq_len, int32_t rounds"),
}

FAMILY = Family(
    name="mqa_runs_schedule",
    axes={"layout": LAYOUTS},
    specs=lambda target: [{"layout": layout} for layout in LAYOUTS],
    symbol=symbol,
    block=block,
    targets=(DEFAULT_TARGET,),
    abi=lambda params: _ABI[params["layout"]],
    budget=lambda params, target: Budget(max_vgpr=64, exact_lds=LDS_BYTES),
    shipped=True,
    doc=__doc__,
)
