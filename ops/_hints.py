"""What an op's input error adds: the public builder (`flyaot.inputs`) that makes the layout the op
expected, and the doc section that describes it. Keyed by the argument an error names (its first word,
as every check of kernel_defs/tensor_checks.py writes "<argument>: ...")."""

_Q = "flyaot.inputs.quantize_q(q) makes (q_fp4, q_scale) from q [..., H, D] (docs/families/mqa_decode.md#formats)"
_KV = ("flyaot.inputs.paged_kv(keys, page_size) or pack_kv_pages(values, scales) makes the page layout "
       "(docs/families/mqa_decode.md#kv-pages)")
_INT32 = "flyaot.inputs.lengths, cu_seqlens and paged_kv make int32 tensors (docs/families/mqa_decode.md#formats)"

MQA = {
    "q_fp4": _Q,
    "q_scale": ("q_scale is the swizzled [..., KT, 4, 16, QS_PAD] layout, not natural [..., H, D/32]: "
                "flyaot.inputs.quantize_q(q) or swizzle_q_scale(scales) makes it (docs/families/mqa_decode.md#q-scales)"),
    "kv_cache": _KV,
    "kv_scale": _KV,
    "block_tables": _INT32,
    "context_lens": _INT32,
    "cu_seq_q": _INT32,
}
GEMM = {name: "flyaot.inputs.quantize_mxfp4(w) makes (w_packed, scales) from W [N, K] "
              "(docs/families/gemm_a16wfp4.md#formats)" for name in ("w_packed", "scales")}


def add_hint(e: Exception, hints: dict) -> None:
    """Append the hint for the argument `e` names to its message, in place (the traceback stays)."""
    if len(e.args) == 1 and isinstance(e.args[0], str):
        hint = hints.get(e.args[0].split(":", 1)[0])
        if hint and hint not in e.args[0]:
            e.args = (f"{e.args[0]}; {hint}",)
