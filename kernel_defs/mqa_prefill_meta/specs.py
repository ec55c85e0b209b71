"""The prefill metadata family: one spec per table it builds; every size is a runtime argument."""
from ...targets import DEFAULT_TARGET
from ..registry import Budget, Family, kernel_abi
from .geometry import LAYOUTS, block, group_lds_bytes, symbol

ABIS = {
    "groups": kernel_abi("void* cta_info, void* row_to_batch, void* local_starts, void* local_ends, int32_t rows, "
                         "int32_t slots, int32_t page_size, int32_t max_seq_len, int32_t s_max, "
                         "int32_t fit_rounds, int32_t row_rounds"),
    "windows": kernel_abi("void* row_to_batch, void* local_starts, void* local_ends, void* cu_seq_q, "
                          "void* context_lens, int32_t rows, int32_t batches, int32_t search_rounds"),
    "convert": kernel_abi("void* cta_info, void* table, int32_t n_ctas, int32_t block_k, int32_t rows, "
                          "int32_t page_size, int32_t max_seq_len"),
}


def budget(params: dict, target) -> Budget:
    return Budget(exact_lds=group_lds_bytes() if params["layout"] == "groups" else 0)


FAMILY = Family(
    name="mqa_prefill_meta",
    axes={"layout": LAYOUTS},
    specs=lambda target: [{"layout": layout} for layout in LAYOUTS],
    symbol=symbol,
    block=block,
    targets=(DEFAULT_TARGET,),
    abi=lambda params: ABIS[params["layout"]],
    budget=budget,
    shipped=True,
    doc="prefill metadata: the grouped 8-int schedule, varqlen windows, 6 -> 8 int table conversion; one launch each",
)
