"""Sizes shared by the metadata kernels, their launch plans and the spec budget (pure Python), with
`symbol` and `block` (a function of the params and the target row)."""
from ..mqa_common.prefill_table import CHUNK_TOKENS, CTA_INFO_INTS, ROW_INFO_INTS, WAVES  # noqa: F401

LAYOUTS = ("groups", "windows", "convert")
WAVE_SIZE = 64                # lanes per wave the groups kernel's sums are written for (block() checks it)
GROUP_THREADS = 1024          # the groups kernel is one workgroup: 16 waves share the row arrays in LDS
ELEM_THREADS = 256            # windows / convert: one lane per row / slot
MAX_ROWS = 32768              # rows whose per-row chunk counts the groups kernel holds in LDS (4 bytes each)
FIT_POINTS = 2                # candidates the groups kernel tests per step of its chunks-per-slot search


def threads(layout: str) -> int:
    return GROUP_THREADS if layout == "groups" else ELEM_THREADS


def symbol(params: dict) -> str:
    return f"mqa_prefill_meta_{params['layout']}"


def block(params: dict, target) -> tuple:
    target.wave(WAVE_SIZE, "mqa_prefill_meta")
    return (threads(params["layout"]), 1, 1)


def group_lds_bytes() -> int:
    """Per-row int32 array, then the cross-wave scratch: one int32 per wave for the scans, two
    banks of two int32 per search point per wave (the 16-bit halves of its sums), and one spare
    int32 per wave that its lanes past the rows store to (one per wave: no two waves write one word
    without a barrier between them)."""
    waves = GROUP_THREADS // WAVE_SIZE
    return MAX_ROWS * 4 + waves * 4 + 2 * 8 * FIT_POINTS * waves + 4 * waves


def fit_space(max_seq_len: int) -> tuple:
    """(s_max, rounds) of the chunks-per-slot search over s in [1, s_max]: a step leaves at most
    1/(FIT_POINTS + 1) of the open range, so `rounds` steps close it."""
    s_max = max(1, -(-max_seq_len // CHUNK_TOKENS))
    span, rounds = s_max - 1, 0
    while span:
        span //= FIT_POINTS + 1
        rounds += 1
    return s_max, rounds


def search_rounds(n: int) -> int:
    """Steps of a lower-bound search over n sorted entries."""
    return max(n, 1).bit_length() + 1
