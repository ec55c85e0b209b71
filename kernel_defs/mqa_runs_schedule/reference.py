"""Torch references of the two layouts (the builders the kernel replaced, kept where their formats live)."""
from ..mqa_decode.schedule import build_schedule as varctx_reference  # noqa: F401
from ..mqa_prefill.schedule import build_row_schedule as rows_reference  # noqa: F401
