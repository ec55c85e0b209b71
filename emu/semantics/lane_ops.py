"""Cross-lane moves between VGPR lanes and SGPRs: readlane, readfirstlane, writelane and the
gfx950 permlane swaps."""
import numpy as np

from ..wave import LANES
from . import handles
from .salu_ops import s32, set32


@handles("v_readlane_b32")
def _readlane(w, ins):
    lane = s32(w, ins.src[1]) & (LANES - 1)
    set32(w, ins.dst[0], int(w.read(ins.src[0], 1)[0, lane]))


@handles("v_readfirstlane_b32")
def _readfirstlane(w, ins):
    # With EXEC == 0 the hardware reads lane 0.
    act = np.flatnonzero(w.exec)
    lane = int(act[0]) if act.size else 0
    set32(w, ins.dst[0], int(w.read(ins.src[0], 1)[0, lane]))


@handles("v_writelane_b32")
def _writelane(w, ins):
    # Writes one lane regardless of EXEC.
    lane = s32(w, ins.src[1]) & (LANES - 1)
    m = np.zeros(LANES, dtype=bool)
    m[lane] = True
    w.write(ins.dst[0], np.full((1, LANES), s32(w, ins.src[0]), dtype=np.uint32), m)


def _swap_pair(ins):
    """(vdst, vsrc) of a permlane swap: both are read and written."""
    a = ins.dst[0]
    b = ins.dst[1] if len(ins.dst) > 1 else ins.src[0]
    return a, b


def _permlane_swap(w, ins, partner: np.ndarray, take: np.ndarray):
    """Lanes where `take` is set exchange vdst[lane] with vsrc[partner[lane]].

    permlane16_swap: odd rows (16 lanes) of vdst <-> even rows of vsrc.
    permlane32_swap: upper 32 lanes of vdst <-> lower 32 lanes of vsrc.
    Each exchange happens when EXEC is set for the lane whose register half is written.
    """
    a_op, b_op = _swap_pair(ins)
    a = w.read(a_op, 1)[0].copy()
    b = w.read(b_op, 1)[0].copy()
    new_a, new_b = a.copy(), b.copy()
    lanes = np.flatnonzero(take)
    new_a[lanes] = b[partner[lanes]]
    new_b[partner[lanes]] = a[lanes]
    ma = np.zeros(LANES, bool)
    ma[lanes] = True
    mb = np.zeros(LANES, bool)
    mb[partner[lanes]] = True
    w.write(a_op, new_a[None], w.exec & ma)
    w.write(b_op, new_b[None], w.exec & mb)


_L = np.arange(LANES)
_P16 = _L - 16                       # odd row r pairs with even row r-1 of the other register
_T16 = (_L // 16) % 2 == 1
_P32 = _L - 32
_T32 = _L >= 32


@handles("v_permlane16_swap_b32")
def _permlane16_swap(w, ins):
    _permlane_swap(w, ins, _P16, _T16)


@handles("v_permlane32_swap_b32")
def _permlane32_swap(w, ins):
    _permlane_swap(w, ins, _P32, _T32)
