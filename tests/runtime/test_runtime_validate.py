"""kernel_defs.tensor_checks: the checks every plan.py runs before launching (property tests)."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from flyaot.kernel_defs.tensor_checks import (E8M0, FP4X2, check_choice, check_device, check_float, check_int,
                                         check_same_device, check_tensor)

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.uint8, torch.int32]
shapes = st.lists(st.integers(1, 5), min_size=1, max_size=4).map(tuple)


@settings(max_examples=80, deadline=None)
@given(shape=shapes, dtype=st.sampled_from(DTYPES), want=st.sampled_from(DTYPES))
def test_dtype_check_accepts_exactly_the_named_dtype(shape, dtype, want):
    t = torch.zeros(shape, dtype=dtype)
    if dtype == want:
        assert check_tensor("x", t, dtype=want) is t
    else:
        with pytest.raises(TypeError, match="^x: dtype must be"):
            check_tensor("x", t, dtype=want)


@settings(max_examples=80, deadline=None)
@given(shape=shapes, expected=st.lists(st.one_of(st.none(), st.integers(1, 5)), min_size=1, max_size=4))
def test_shape_check_matches_entrywise_with_wildcards(shape, expected):
    t = torch.zeros(shape)
    ok = len(shape) == len(expected) and all(e is None or e == s for s, e in zip(shape, expected))
    if ok:
        check_tensor("q", t, shape=tuple(expected))
    else:
        with pytest.raises(ValueError, match="^q: "):
            check_tensor("q", t, shape=tuple(expected))


@settings(max_examples=60, deadline=None)
@given(b=st.integers(1, 4), h=st.integers(1, 4), h2=st.integers(1, 4))
def test_named_dims_bind_across_arguments(b, h, h2):
    dims = {}
    check_tensor("q", torch.zeros(b, h, 8), shape=("B", "H", 8), dims=dims)
    assert dims == {"B": b, "H": h}
    if h2 == h:
        check_tensor("out", torch.zeros(b, h2), shape=("B", "H"), dims=dims)
    else:
        with pytest.raises(ValueError, match=f"^out: shape\\[1\\] is {h2}, but H={h} from an earlier argument"):
            check_tensor("out", torch.zeros(b, h2), shape=("B", "H"), dims=dims)


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(1, 6), cols=st.integers(1, 6), transpose=st.booleans())
def test_stride_and_contiguity(rows, cols, transpose):
    t = torch.zeros(rows, cols)
    t = t.t() if transpose else t
    # Independent oracles: contiguity is torch's notion (size-1 dims ignored), strides are literal.
    if t.is_contiguous():
        check_tensor("w", t, contiguous=True)
    else:
        with pytest.raises(ValueError, match="^w: must be contiguous"):
            check_tensor("w", t, contiguous=True)
    if t.stride()[1] == 1:
        check_tensor("w", t, stride=(None, 1))
    else:
        with pytest.raises(ValueError, match="^w: stride\\[1\\] must be 1"):
            check_tensor("w", t, stride=(None, 1))


@settings(max_examples=60, deadline=None)
@given(offset=st.integers(0, 31), align=st.sampled_from([4, 8, 16]))
def test_alignment_of_the_data_pointer(offset, align):
    base = torch.zeros(64, dtype=torch.uint8)
    assert base.data_ptr() % 64 == 0          # torch's CPU allocator aligns to 64 bytes
    view = base[offset:]
    if offset % align == 0:
        check_tensor("kv", view, align=align)
    else:
        with pytest.raises(ValueError, match=f"^kv: data pointer must be {align}-byte aligned"):
            check_tensor("kv", view, align=align)


def test_packed_fp4_and_e8m0_accept_uint8_and_torch_dtypes():
    assert torch.uint8 in FP4X2 and torch.uint8 in E8M0
    for name in ("float4_e2m1fn_x2",):
        if hasattr(torch, name):
            assert getattr(torch, name) in FP4X2
            check_tensor("w", torch.zeros(4, dtype=torch.uint8).view(getattr(torch, name)), dtype=FP4X2)
    if hasattr(torch, "float8_e8m0fnu"):
        check_tensor("s", torch.zeros(4, dtype=torch.float8_e8m0fnu), dtype=E8M0)
    check_tensor("w", torch.zeros(4, dtype=torch.uint8), dtype=FP4X2)
    with pytest.raises(TypeError, match="w: dtype must be uint8"):
        check_tensor("w", torch.zeros(4, dtype=torch.int8), dtype=FP4X2)


def test_not_a_tensor_and_devices():
    with pytest.raises(TypeError, match="^x: expected a torch.Tensor, got list"):
        check_tensor("x", [1.0])
    t = torch.zeros(2)
    check_tensor("x", t, device="cpu")
    with pytest.raises(ValueError, match="^x: must be on cuda, got cpu"):
        check_tensor("x", t, device="cuda")
    check_device("x", t, torch.ones(1))
    check_same_device(a=t, b=None, c=torch.ones(3))
    with pytest.raises(ValueError, match="^b: on meta, but a is on cpu"):
        check_same_device(a=t, b=torch.zeros(2, device="meta"))


@given(st.one_of(st.integers(-(1 << 70), 1 << 70), st.booleans(), st.floats(allow_nan=False)),
       st.sampled_from([32, 64]))
def test_check_int(v, bits):
    if isinstance(v, bool) or not isinstance(v, int):
        with pytest.raises(TypeError, match="^n: expected an int"):
            check_int("n", v, bits=bits)
    elif -(1 << (bits - 1)) <= v < (1 << (bits - 1)):
        assert check_int("n", v, bits=bits) == v
    else:
        with pytest.raises(ValueError, match="^n: .* is outside"):
            check_int("n", v, bits=bits)


@given(st.integers(-100, 100), st.integers(-100, 100), st.integers(-100, 100))
def test_check_int_bounds(v, lo, hi):
    if lo <= v <= hi:
        check_int("k", v, lo=lo, hi=hi)
    else:
        with pytest.raises(ValueError, match=f"^k: {v} is outside \\[{lo}, {hi}\\]"):
            check_int("k", v, lo=lo, hi=hi)


@given(st.one_of(st.floats(), st.integers(-10, 10), st.booleans(), st.text(max_size=2)))
def test_check_float(v):
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        with pytest.raises(TypeError, match="^scale: expected a float"):
            check_float("scale", v)
    elif v != v or v in (float("inf"), float("-inf")):
        with pytest.raises(ValueError, match="^scale: must be finite"):
            check_float("scale", v)
    else:
        assert check_float("scale", v) == float(v)


def test_check_choice_names_the_supported_values():
    check_choice("head_dim", 128, (64, 128))
    with pytest.raises(ValueError, match="^head_dim=96 is not supported \\(supported: 64, 128\\)"):
        check_choice("head_dim", 96, (64, 128))
