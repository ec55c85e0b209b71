"""What the public ops share for their torch.library registrations (torch.ops.flyaot.*).

Each public op keeps its eager fast path: it enters the dispatcher only while something traces it,
i.e. when `is_compiling() or dispatch_modes()`: torch.compile / torch.export are tracing (dynamo
folds `is_compiling()` to True, so that branch is all it sees), or a TorchDispatchMode (make_fx,
FakeTensorMode, FlopCounterMode...) is active. Each registered op's implementation calls its public
function again: by then every mode has been popped (torch does so while running the kernel) and
nothing is tracing, so that call takes the eager path.
"""
import contextlib

import torch

# Bound once: an eager call pays these two calls (~0.1-0.2 us) and never enters the dispatcher.
is_compiling = torch.compiler.is_compiling
dispatch_modes = torch._C._len_torch_dispatch_stack


def call_registered(op: str, args: tuple, out, stream):
    """A traced call of a public op: torch.ops.flyaot.<op>(*args), or <op>_out(*args, out) when the
    caller passed `out`. A stream object cannot go through an op schema: it runs on the current stream."""
    if stream is not None:
        raise TypeError(f"{op}: stream= is not supported under torch.compile or a dispatch mode; "
                        "the op runs on the current stream (wrap the call in torch.cuda.stream(s))")
    if out is None:
        return getattr(torch.ops.flyaot, op)(*args)
    getattr(torch.ops.flyaot, f"{op}_out")(*args, out)
    return out


def no_output(*args, **kwargs) -> None:
    """Fake of every `out=` variant: it only mutates `out`, so there is no metadata to compute."""
    return None


_NO_STREAM = contextlib.nullcontext()


def on_stream(stream):
    """Makes a torch `stream` current for an op's own torch work (schedule, -inf fill) so that it is
    ordered before the kernel launched on that stream; nothing to do for None or a raw handle."""
    if stream is None or isinstance(stream, int):
        return _NO_STREAM
    return torch.cuda.stream(stream)
