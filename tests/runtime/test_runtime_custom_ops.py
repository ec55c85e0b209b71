"""torch.library registration helper: ops get a schema, a fake implementation, and pass opcheck."""
import pytest
import torch

from flyaot.ops._torch_ops import custom_op


def _fake(x: torch.Tensor, alpha: float) -> torch.Tensor:
    return torch.empty_like(x)


@custom_op("test_runtime_scale", mutates_args=(), fake=_fake)
def scale(x: torch.Tensor, alpha: float) -> torch.Tensor:
    return x * alpha


def _fake_out(x: torch.Tensor, out: torch.Tensor) -> None:
    return None


@custom_op("test_runtime_copy_out", mutates_args=("out",), fake=_fake_out)
def copy_out(x: torch.Tensor, out: torch.Tensor) -> None:
    out.copy_(x)


def test_op_is_registered_in_the_flyaot_namespace_and_runs():
    x = torch.arange(4.0)
    assert torch.equal(torch.ops.flyaot.test_runtime_scale(x, 2.0), x * 2)
    out = torch.empty(4)
    torch.ops.flyaot.test_runtime_copy_out(x, out)
    assert torch.equal(out, x)


def test_opcheck_passes_including_the_fake_implementation():
    torch.library.opcheck(scale, (torch.randn(3, 2), 0.5))
    torch.library.opcheck(copy_out, (torch.randn(5), torch.empty(5)))


def test_fake_tensor_propagation_uses_the_fake_impl():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        y = torch.ops.flyaot.test_runtime_scale(torch.empty(7, 3), 1.0)
    assert y.shape == (7, 3)


def test_registering_twice_returns_the_same_op_and_a_fake_is_required():
    again = custom_op("test_runtime_scale", mutates_args=(), fake=_fake)(lambda x, alpha: x)
    assert again is scale
    with pytest.raises(TypeError, match="fake implementation is required"):
        custom_op("test_runtime_nofake", mutates_args=(), fake=None)
