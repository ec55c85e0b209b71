"""Public ops as torch.library custom ops (torch.ops.flyaot.*), derived from the public function.

`@traced_op(fake=...)` on a public op reads its signature once and from it:
- registers `flyaot::<name>` (functional) and `flyaot::<name>_out` (mutates `out`), whose schemas are
  the function's parameters in order, positional, typed by their annotations; `out` and `stream`
  are not schema arguments (a stream object cannot go through a schema: traced calls run on the
  current stream);
- registers `fake(**schema_args)` (output metadata only) for the functional op, and a no-op fake for
  the `_out` op (it only mutates `out`);
- returns a function with the public signature that, while something traces it, calls the
  registered op, and otherwise calls the public function directly.

"Traced" means `is_compiling() or dispatch_modes()`: torch.compile / torch.export are tracing (dynamo
folds `is_compiling()` to True, so that branch is all it sees), or a TorchDispatchMode (make_fx,
FakeTensorMode, FlopCounterMode...) is active. A registered op's implementation calls the public
function again: by then every mode has been popped (torch does so while running the kernel) and
nothing is tracing, so that call takes the eager path.

The router is generated source with the exact public signature (no *args parsing), so an eager call
costs one extra Python call and dynamo traces it without a graph break.
"""
import contextlib
import functools
import inspect
import threading

import torch

NAMESPACE = "flyaot"
NOT_IN_SCHEMA = ("out", "stream")

# Bound once: an eager call pays these two calls (~0.1-0.2 us) and never enters the dispatcher.
is_compiling = torch.compiler.is_compiling
dispatch_modes = torch._C._len_torch_dispatch_stack

_registered = {}
_lock = threading.Lock()


def registered_ops() -> list:
    """Qualified names of every op registered in this process (flyaot::...)."""
    return sorted(_registered)


def _register(name: str, impl, *, mutates_args, fake):
    qualname = f"{NAMESPACE}::{name}"
    with _lock:
        op = _registered.get(qualname)
        if op is None:
            op = torch.library.custom_op(qualname, impl, mutates_args=tuple(mutates_args))
            op.register_fake(fake)
            _registered[qualname] = op
    return op


def no_output(*args, **kwargs) -> None:
    """Fake of every `out=` variant: it only mutates `out`, so there is no metadata to compute."""
    return None


def custom_op(name: str, *, mutates_args, fake):
    """Register a hand-written typed function as flyaot::<name> with its fake (once per process); for the
    few ops whose public function does not map one to one onto a schema (a prepared-weight object,
    several `out` buffers, a traced route that depends on the arguments)."""
    if not callable(fake):
        raise TypeError(f"{NAMESPACE}::{name}: a fake implementation is required for torch.compile")
    return lambda fn: _register(name, fn, mutates_args=mutates_args, fake=fake)


def call_registered(op: str, args: tuple, out, stream):
    """A traced call of a hand-registered op: torch.ops.flyaot.<op>(*args), or <op>_out(*args, out) when
    the caller passed `out`. A stream object cannot go through an op schema: it runs on the current stream."""
    if stream is not None:
        raise TypeError(f"{op}: stream= is not supported under torch.compile or a dispatch mode; "
                        "the op runs on the current stream (wrap the call in torch.cuda.stream(s))")
    if out is None:
        return getattr(torch.ops.flyaot, op)(*args)
    getattr(torch.ops.flyaot, f"{op}_out")(*args, out)
    return out


def traced_op(*, fake):
    """Decorator for a public op (see the module docstring)."""
    def decorate(fn):
        op_name = fn.__name__
        sig = inspect.signature(fn)
        schema = [p for p in sig.parameters.values() if p.name not in NOT_IN_SCHEMA]
        for p in schema:
            if p.annotation is inspect.Parameter.empty:
                raise TypeError(f"{op_name}: parameter {p.name!r} needs a type annotation (it is part of the op schema)")
        names = [p.name for p in schema]
        positional = [p.replace(kind=inspect.Parameter.POSITIONAL_OR_KEYWORD, default=inspect.Parameter.empty)
                      for p in schema]
        ret = sig.return_annotation if sig.return_annotation is not inspect.Signature.empty else torch.Tensor

        def impl(*args):
            return fn(**dict(zip(names, args)))

        def impl_out(*args):
            fn(**dict(zip(names, args[:-1])), out=args[-1])

        impl.__signature__ = inspect.Signature(positional, return_annotation=ret)
        out_param = inspect.Parameter("out", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=torch.Tensor)
        impl_out.__signature__ = inspect.Signature(positional + [out_param], return_annotation=None)
        functional = _register(op_name, impl, mutates_args=(), fake=lambda *a: fake(**dict(zip(names, a))))
        with_out = _register(f"{op_name}_out", impl_out, mutates_args=("out",), fake=no_output)

        router = _router(fn, sig, names, functional, with_out)
        functools.update_wrapper(router, fn)
        router.__signature__ = sig
        return router

    return decorate


def _router(fn, sig, names, functional, with_out):
    """Source-generated `def <name>(<public signature>)` that routes traced calls to the ops."""
    params, call, defaults = [], [], {}
    star = False
    for p in sig.parameters.values():
        if p.kind is inspect.Parameter.KEYWORD_ONLY and not star:
            params.append("*")
            star = True
        text = p.name
        if p.default is not inspect.Parameter.empty:
            defaults[f"_default_{p.name}"] = p.default
            text += f"=_default_{p.name}"
        params.append(text)
        # positional where the signature allows: keywords bound to positional parameters cost ~30 ns each
        call.append(p.name if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD else f"{p.name}={p.name}")
    has_out, has_stream = "out" in sig.parameters, "stream" in sig.parameters
    args = "(" + "".join(f"{n}, " for n in names) + ")"
    src = [f"def {fn.__name__}({', '.join(params)}):", "    if _is_compiling() or _dispatch_modes():"]
    if has_stream:
        src += ["        if stream is not None:",
                f"            raise TypeError({fn.__name__!r} ': stream= is not supported under torch.compile or a "
                "dispatch mode; the op runs on the current stream (wrap the call in torch.cuda.stream(s))')"]
    if has_out:
        src += ["        if out is not None:", f"            _with_out(*{args}, out)", "            return out"]
    src += [f"        return _functional(*{args})", f"    return _fn({', '.join(call)})"]
    namespace = dict(defaults, _is_compiling=is_compiling, _dispatch_modes=dispatch_modes, _fn=fn,
                     _functional=functional, _with_out=with_out)
    exec("\n".join(src), namespace)
    return namespace[fn.__name__]


_NO_STREAM = contextlib.nullcontext()


def on_stream(stream):
    """Makes a torch `stream` current for an op's own torch work (schedule, -inf fill) so that it is
    ordered before the kernel launched on that stream; nothing to do for None or a raw handle."""
    if stream is None or isinstance(stream, int):
        return _NO_STREAM
    return torch.cuda.stream(stream)
