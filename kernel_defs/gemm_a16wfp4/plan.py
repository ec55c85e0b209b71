"""Launch plan of the A16WFP4 GEMM: validate the inputs, pick the spec, compute grid and arguments.

Pure Python over torch: allocates nothing and never touches device memory, so a call with a
preallocated `out` allocates nothing at all.
"""
import torch

from ..registry import LaunchPlan  # noqa: F401  (the type plans return)
from ..tensor_checks import check_device, check_int, check_no_overlap, check_rows_disjoint, check_tensor
from . import configs, geometry
from .layout import PreparedMXFP4Weight
from .specs import FAMILY

FUSED_ALIGN = 256        # N and K the kernels serve must be multiples of this

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


def check_weight(weight: PreparedMXFP4Weight) -> None:
    """The tensors of a PreparedMXFP4Weight hold what its n and k promise (a hand-built one may not):
    uint8 [n, k/2] codes and [n, k/32] scales on one device, contiguous when fused (the kernels read
    them as flat buffers). Shapes only, no sync."""
    w, s, n, k = weight.weight, weight.scales, weight.n, weight.k
    if (type(n) is int and type(k) is int and k % 32 == 0 and isinstance(w, torch.Tensor)       # fast path
            and isinstance(s, torch.Tensor) and w.dtype == s.dtype == torch.uint8
            and w.shape == (n, k // 2) and s.shape == (n, k // 32) and w.device == s.device
            and (not weight.fused or (w.is_contiguous() and s.is_contiguous()))):
        return
    n = check_int("weight.n", n, lo=0)
    k = check_int("weight.k", k, lo=0)
    if k % 32:
        raise ValueError(f"weight: K={k} is not a multiple of 32")
    check_tensor("weight.weight", weight.weight, dtype=torch.uint8, shape=(n, k // 2), contiguous=weight.fused)
    check_tensor("weight.scales", weight.scales, dtype=torch.uint8, shape=(n, k // 32), contiguous=weight.fused)
    check_device("weight.scales", weight.scales, weight.weight)


def check_out(out, m: int, n: int, like, weight: PreparedMXFP4Weight = None) -> None:
    """out bf16 [m, n], unit column stride, rows disjoint, sharing no memory with x (`like`) or the weight."""
    check_tensor("out", out, dtype=torch.bfloat16, shape=(m, n))
    check_device("out", out, like)
    if out.stride(1) != 1 and m * n > 1:
        raise ValueError(f"out: columns must be contiguous (stride {out.stride()})")
    check_rows_disjoint("out", out)
    _check_row_stride("out", out)
    check_tensor("out", out, align=4)
    check_no_overlap("out", out, x=like, **({} if weight is None else
                                             {"weight.weight": weight.weight, "weight.scales": weight.scales}))


def plan(x, weight: PreparedMXFP4Weight, out, *, params: dict = None) -> LaunchPlan:
    """Plan for out[M, N] = x[M, K] @ W^T with a fused-layout weight. `params` overrides the table."""
    if not weight.fused:
        raise ValueError(f"weight: N={weight.n}, K={weight.k} is not served by the fused kernels "
                         f"(both must be multiples of {FUSED_ALIGN})")
    check_weight(weight)
    m = check_x(x, weight.k)
    check_device("x", x, weight.weight)
    check_out(out, m, weight.n, x, weight)
    params = params or configs.choose(weight.n, weight.k, m)
    t = geometry.tile(params)
    if weight.k % t.kstep:
        raise ValueError(f"config {geometry.symbol(params)} steps K by {t.kstep}, K={weight.k} is not a multiple")
    grid = ((m + t.bm - 1) // t.bm, weight.n // t.bn, 1)
    args = {"out": out, "x": x, "w": weight.weight, "w_scale": weight.scales,
            "m": m, "n": weight.n, "k": weight.k,
            "stride_x": x.stride(0) if m > 1 else weight.k,
            "stride_out": out.stride(0) if m > 1 else weight.n}
    return FAMILY.launch_plan(params, grid, args)
