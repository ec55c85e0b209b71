"""torch.library registration by `traced_op`: a public function becomes a functional op and an `_out` op
with a schema, a fake implementation, and passes opcheck; the options of ops that are not one tensor
in, one tensor out (an output parameter of several tensors, an argument expanded into schema arguments,
a traced route, a public result that is not the op's)."""
from typing import Optional, Tuple

import pytest
import torch

from flyaot.ops._torch_ops import traced_op


def _fake(x, alpha, **_):
    return torch.empty_like(x)


@traced_op(fake=_fake)
def trace_test_scale(x: torch.Tensor, alpha: float, *, out=None):
    if out is None:
        return x * alpha
    return torch.mul(x, alpha, out=out)


class Pair:
    """A host object that travels through the schema as two tensors."""
    def __init__(self, a, b):
        self.a, self.b = a, b


def _pair(a: torch.Tensor, b: torch.Tensor) -> Pair:
    return Pair(a, b)


def _split_fake(a, **_):
    return torch.empty_like(a), torch.empty_like(a)


def _pair_tensors(p):
    return p.a, p.b


def _first(result) -> Tuple[torch.Tensor, torch.Tensor]:
    return result[0]


def _with_count(parts):
    return parts, len(parts)


@traced_op(fake=_split_fake, out_fields=("hi", "lo"), expand={"pair": (_pair_tensors, _pair)},
           local=("swap",), route=lambda swap, **_: not swap, result=(_first, _with_count))
def trace_test_split(pair: Pair, shift: Optional[int] = None, *, swap: bool = False, out=None):
    a, b = (pair.b, pair.a) if swap else (pair.a, pair.b)
    s = shift or 0
    if out is None:
        return (a + b + s, a - b - s), 2
    out[0].copy_(a + b + s)
    out[1].copy_(a - b - s)
    return tuple(out), 2


class _Ops(torch.utils._python_dispatch.TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def test_op_is_registered_in_the_flyaot_namespace_and_runs():
    x = torch.arange(4.0)
    assert torch.equal(torch.ops.flyaot.trace_test_scale(x, 2.0), x * 2)
    out = torch.empty(4)
    torch.ops.flyaot.trace_test_scale_out(x, 3.0, out)
    assert torch.equal(out, x * 3)
    schema = torch.ops.flyaot.trace_test_split_out.default._schema
    assert [a.name for a in schema.arguments] == ["a", "b", "shift", "hi", "lo"]
    assert [a.alias_info is not None and a.alias_info.is_write for a in schema.arguments] == [False] * 3 + [True] * 2


def test_opcheck_passes_including_the_fake_implementation():
    torch.library.opcheck(torch.ops.flyaot.trace_test_scale.default, (torch.randn(3, 2), 0.5))
    torch.library.opcheck(torch.ops.flyaot.trace_test_scale_out.default, (torch.randn(5), 0.5, torch.empty(5)))
    a, b = torch.randn(4), torch.randn(4)
    torch.library.opcheck(torch.ops.flyaot.trace_test_split.default, (a, b, 1))
    torch.library.opcheck(torch.ops.flyaot.trace_test_split_out.default, (a, b, None, torch.empty(4), torch.empty(4)))


def test_fake_tensor_propagation_uses_the_fake_impl():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        y = torch.ops.flyaot.trace_test_scale(torch.empty(7, 3), 1.0)
    assert y.shape == (7, 3)


def test_traced_calls_route_to_the_ops_and_match_eager():
    a, b = torch.randn(4), torch.randn(4)
    eager = trace_test_split(Pair(a, b), 1)
    fixed = (torch.empty(4), torch.empty(4))
    with _Ops() as log:
        moded = trace_test_split(Pair(a, b), 1)
        moded_out = trace_test_split(Pair(a, b), 1, out=list(fixed))
        swapped = trace_test_split(Pair(a, b), 1, swap=True)         # route says no: the function runs
    assert [op for op in log.ops if op.startswith("flyaot.")] == ["flyaot.trace_test_split.default",
                                                                  "flyaot.trace_test_split_out.default"]
    assert moded[1] == moded_out[1] == 2 and all(torch.equal(m, e) for m, e in zip(moded[0], eager[0]))
    assert moded_out[0] == fixed and all(torch.equal(f, e) for f, e in zip(fixed, eager[0]))
    assert torch.equal(swapped[0][0], eager[0][0]) and torch.equal(swapped[0][1], b - a - 1)


def _plain_scale(x: torch.Tensor, alpha: float):
    return x * alpha


def test_registering_twice_returns_the_same_op_and_a_fake_is_required():
    before = torch.ops.flyaot.trace_test_scale.default
    traced_op(fake=_fake)(trace_test_scale.__wrapped__)
    assert torch.ops.flyaot.trace_test_scale.default is before
    with pytest.raises(TypeError, match="fake implementation is required"):
        traced_op(fake=None)
    with pytest.raises(TypeError, match="needs a type annotation"):
        traced_op(fake=_fake)(lambda x, alpha: x)
    with pytest.raises(TypeError, match=r"\['swap'\] are not parameters"):
        traced_op(fake=_fake, local=("swap",))(_plain_scale)
