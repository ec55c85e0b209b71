"""The always-on input checks the families' inputs.py and plan.py build on: fail before anything is
launched, naming the argument.

Pure Python over torch (no flydsl, no GPU calls), so the plans stay importable by build_tools and the
runtime alike. Conventions: not-a-tensor, wrong dtype and wrong Python type -> TypeError; wrong shape,
stride, device, alignment, range or an unsupported combination -> ValueError.

Shapes may name dimensions with strings; a `dims` dict shared across calls binds each name on first
sight and checks it afterwards:

    dims = {}
    check_tensor("q", q, dtype=torch.bfloat16, shape=("B", "H", 128), device="cuda", dims=dims)
    check_tensor("out", out, dtype=torch.float32, shape=("B", "H"), dims=dims)
"""
import torch

# Dtypes a packed-FP4 (two E2M1 values per byte) or an E8M0-scale tensor may carry: always uint8,
# plus torch's own dtype where the installed torch has it.
FP4X2 = tuple(d for d in (torch.uint8, getattr(torch, "float4_e2m1fn_x2", None)) if d is not None)
E8M0 = tuple(d for d in (torch.uint8, getattr(torch, "float8_e8m0fnu", None)) if d is not None)

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def _dtype_names(dtypes) -> str:
    return " or ".join(str(d).replace("torch.", "") for d in dtypes)


def _match_dims(name, what, actual, expected, dims):
    if len(actual) != len(expected):
        raise ValueError(f"{name}: expected {len(expected)} dims {what} {tuple(expected)}, got {tuple(actual)}")
    for i, (a, e) in enumerate(zip(actual, expected)):
        if e is None:
            continue
        if isinstance(e, str):
            if dims is None:
                raise ValueError(f"{name}: symbolic {what} entry {e!r} needs a dims dict")
            bound = dims.setdefault(e, a)
            if bound != a:
                raise ValueError(f"{name}: {what}[{i}] is {a}, but {e}={bound} from an earlier argument")
        elif a != e:
            raise ValueError(f"{name}: {what}[{i}] must be {e}, got {a} ({what} {tuple(actual)})")


def check_tensor(name: str, t, *, dtype=None, shape=None, ndim=None, stride=None, device=None,
                 contiguous=False, align=None, align_strides=False, dims=None):
    """Check one tensor argument; return it unchanged.

    dtype: a torch.dtype or a tuple of accepted dtypes (FP4X2, E8M0 above).
    shape / stride: tuples whose entries are ints (exact), None (any) or strings (named, see module doc).
    device: "cuda", "cpu", a torch.device, or a tensor whose device must match.
    align: required byte alignment of the data pointer; with align_strides, also of every stride (in bytes)
    a kernel steps by from there: those of the dims of size > 1 other than the innermost (the innermost
    dim is the run a load reads; a size-1 dim is never stepped).
    """
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if dtype is not None:
        accepted = dtype if isinstance(dtype, tuple) else (dtype,)
        if t.dtype not in accepted:
            raise TypeError(f"{name}: dtype must be {_dtype_names(accepted)}, got {_dtype_names((t.dtype,))}")
    if ndim is not None and t.dim() != ndim:
        raise ValueError(f"{name}: expected {ndim} dims, got shape {tuple(t.shape)}")
    if shape is not None:
        _match_dims(name, "shape", tuple(t.shape), tuple(shape), dims)
    if stride is not None:
        _match_dims(name, "stride", t.stride(), tuple(stride), dims)
    if device is not None:
        check_device(name, t, device)
    if contiguous and not t.is_contiguous():
        raise ValueError(f"{name}: must be contiguous (shape {tuple(t.shape)}, stride {t.stride()})")
    if align is not None:
        if t.data_ptr() % align:
            raise ValueError(f"{name}: data pointer must be {align}-byte aligned (it is 0x{t.data_ptr():x}, "
                             f"storage offset {t.storage_offset()})")
        if align_strides:
            _check_stride_alignment(name, t, align)
    return t


def _check_stride_alignment(name, t, align):
    for i, (n, s) in enumerate(zip(t.shape[:-1], t.stride()[:-1])):
        if n > 1 and (s * t.element_size()) % align:
            raise ValueError(f"{name}: stride[{i}] must be a multiple of {align} bytes, got {s} elements "
                             f"({s * t.element_size()} bytes)")


def check_device(name: str, t, device) -> None:
    """`device` is "cuda"/"cpu"/"cuda:1", a torch.device, or another tensor to match exactly."""
    if isinstance(device, torch.Tensor):
        if t.device != device.device:
            raise ValueError(f"{name}: on {t.device}, but the other inputs are on {device.device}")
        return
    want = torch.device(device)
    if t.device.type != want.type or (want.index is not None and t.device.index != want.index):
        raise ValueError(f"{name}: must be on {want}, got {t.device}")


def check_same_device(**tensors) -> None:
    """All named tensors on one device (None values are skipped: optional inputs)."""
    first = None
    for name, t in tensors.items():
        if t is None:
            continue
        if first is None:
            first = (name, t.device)
        elif t.device != first[1]:
            raise ValueError(f"{name}: on {t.device}, but {first[0]} is on {first[1]}")


def check_int(name: str, v, *, lo=None, hi=None, bits=32) -> int:
    """A Python int (bools refused) within [lo, hi] and within the signed range of `bits`."""
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{name}: expected an int, got {type(v).__name__}")
    lo_b, hi_b = (INT32_MIN, INT32_MAX) if bits == 32 else (INT64_MIN, INT64_MAX)
    lo = lo_b if lo is None else max(lo, lo_b)
    hi = hi_b if hi is None else min(hi, hi_b)
    if not lo <= v <= hi:
        raise ValueError(f"{name}: {v} is outside [{lo}, {hi}]")
    return v


def check_float(name: str, v) -> float:
    """A finite real number (int or float, bools refused), returned as float."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"{name}: expected a float, got {type(v).__name__}")
    f = float(v)
    if f != f or f in (float("inf"), float("-inf")):
        raise ValueError(f"{name}: must be finite, got {f}")
    return f


def check_choice(name: str, v, allowed) -> None:
    """An unsupported value of a dispatch axis (e.g. head dim 96): say what is supported."""
    if v not in allowed:
        raise ValueError(f"{name}={v!r} is not supported (supported: {', '.join(map(repr, allowed))})")


def _end(t) -> int:
    """One past the last byte of a non-empty tensor (torch strides are never negative, so the first
    byte is data_ptr())."""
    if t.is_contiguous():
        return t.data_ptr() + t.nbytes
    return t.data_ptr() + (1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride()))) * t.element_size()


def check_no_overlap(out_name: str, out, **inputs) -> None:
    """`out` shares no byte with any named input (None values skipped): a kernel writing `out` while it
    reads an input it overlaps computes garbage. Conservative: byte ranges, not exact element sets, so
    two interleaved views of one buffer count as overlapping. Host metadata only, no sync; an input
    starting past the end of `out` costs one data_ptr(), a contiguous one ending before it three calls.
    A meta tensor is refused before any comparison: it holds no memory (its data_ptr() is 0, which
    would read as an overlap), so it cannot be launched; a real allocation never starts at 0."""
    lo = out.data_ptr()
    if not lo:
        _refuse_meta(out_name, out)
    hi = lo + out.nbytes if out.is_contiguous() else _end(out)
    if hi == lo:                  # empty: shares no byte
        return
    for name, t in inputs.items():
        if t is None:
            continue
        start = t.data_ptr()
        if not start:
            _refuse_meta(name, t)
        if start >= hi:
            continue
        end = start + t.nbytes if t.is_contiguous() else _end(t)
        if end > lo and t.numel():
            raise ValueError(f"{out_name}: its memory overlaps {name} (bytes 0x{lo:x}-0x{hi:x} and "
                             f"0x{start:x}-0x{end:x}); an output must not alias an input")


def _refuse_meta(name: str, t) -> None:
    if t.is_meta:
        raise ValueError(f"{name}: on the meta device; meta tensors cannot be launched (they hold no memory)")


def check_rows_disjoint(name: str, t) -> None:
    """A 2-D output with unit column stride whose rows do not overlap (row stride >= width), so no
    two cells are the same memory (torch.empty(1, L).expand(R, L) is refused)."""
    rows, width = t.shape
    if rows > 1 and width > 0 and t.stride(0) < width:
        raise ValueError(f"{name}: row stride {t.stride(0)} is below the row width {width}, so rows overlap "
                         f"(shape {tuple(t.shape)}, stride {t.stride()})")
