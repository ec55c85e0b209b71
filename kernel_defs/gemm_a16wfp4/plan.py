"""Launch plan of the A16WFP4 GEMM: validate the inputs, pick the spec, compute grid and arguments.

Pure Python over torch: allocates nothing and never touches device memory, so a call with a
preallocated `out` allocates nothing at all.
"""
import torch

from ..registry import LaunchPlan
from ..validate import check_device, check_int, check_tensor
from . import configs, tiles
from .layout import PreparedMXFP4Weight
from .tiles import WAVE, WAVES

FAMILY = "gemm_a16wfp4"
FUSED_ALIGN = 256        # N and K the kernels serve must be multiples of this


def block(params: dict) -> tuple:
    return (WAVES * WAVE, 1, 1)


def fused_supported(n: int, k: int) -> bool:
    return n % FUSED_ALIGN == 0 and k % FUSED_ALIGN == 0 and n > 0 and k > 0


def _check_row_stride(name, t) -> None:
    # In-tile offsets are 32-bit: 128 rows of the largest tile times the row pitch must fit.
    if t.shape[0] > 1 and t.stride(0) * 2 * 128 >= 1 << 31:
        raise ValueError(f"{name}: row stride {t.stride(0)} is too large (limit {(1 << 31) // 256 - 1} elements)")
    check_int(f"{name}.shape[0]", t.shape[0], lo=0)


def check_x(x, k: int) -> int:
    """x: bf16 [M, K], unit column stride, 16-byte aligned rows. Returns M."""
    check_tensor("x", x, dtype=torch.bfloat16, ndim=2)
    if x.shape[1] != k:
        raise ValueError(f"x: has {x.shape[1]} columns, the weight has K={k}")
    if x.stride(1) != 1 and x.shape[0] * x.shape[1] > 1:
        raise ValueError(f"x: columns must be contiguous (stride {x.stride()})")
    if x.shape[0] > 1 and x.stride(0) % 8:
        raise ValueError(f"x: row stride {x.stride(0)} must be a multiple of 8 elements (16 bytes)")
    _check_row_stride("x", x)
    check_tensor("x", x, align=16)
    return x.shape[0]


def check_out(out, m: int, n: int, like) -> None:
    check_tensor("out", out, dtype=torch.bfloat16, shape=(m, n))
    check_device("out", out, like)
    if out.stride(1) != 1 and m * n > 1:
        raise ValueError(f"out: columns must be contiguous (stride {out.stride()})")
    _check_row_stride("out", out)
    check_tensor("out", out, align=4)


def plan(x, weight: PreparedMXFP4Weight, out, *, params: dict = None) -> LaunchPlan:
    """Plan for out[M, N] = x[M, K] @ W^T with a fused-layout weight. `params` overrides the table."""
    if not weight.fused:
        raise ValueError(f"weight: N={weight.n}, K={weight.k} is not served by the fused kernels "
                         f"(both must be multiples of {FUSED_ALIGN})")
    weight.check_tensors()
    m = check_x(x, weight.k)
    check_device("x", x, weight.weight)
    check_out(out, m, weight.n, x)
    params = params or configs.choose(weight.n, weight.k, m)
    t = tiles.tile(params)
    if weight.k % t.kstep:
        raise ValueError(f"config {tiles.symbol(params)} steps K by {t.kstep}, K={weight.k} is not a multiple")
    grid = ((m + t.bm - 1) // t.bm, weight.n // t.bn, 1)
    args = {"out": out, "x": x, "w": weight.weight, "w_scale": weight.scales,
            "m": m, "n": weight.n, "k": weight.k,
            "stride_x": x.stride(0) if m > 1 else weight.k,
            "stride_out": out.stride(0) if m > 1 else weight.n}
    return LaunchPlan(FAMILY, params, grid, block(params), args)
