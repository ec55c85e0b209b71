"""Public ops as torch.library custom ops (torch.ops.flyaot.*), derived from the public function.

`@traced_op(fake=...)` on a public op reads its signature once and from it:
- registers `flyaot::<name>` (functional) and `flyaot::<name>_out` (mutates the output buffers), whose
  schemas are the function's parameters in order, positional, typed by their annotations. Not schema
  arguments: `stream` (a stream object cannot go through a schema: traced calls run on the current
  stream), the output parameter (`out=`, the last arguments of the `_out` op) and the `local`
  parameters. A parameter with an adapter in `expand` travels as the typed parameters of its
  `from_schema` function (a prepared weight as its tensors and sizes);
- registers `fake(**schema_args)` (output metadata only) for the functional op, and a no-op fake for
  the `_out` op (it only mutates its outputs);
- returns a function with the public signature that, while something traces it, calls the
  registered op, and otherwise calls the public function directly.

Options for a public function that is not one tensor in, one op out:
- `out="cta_info_out"` names the output parameter (default "out"); `out_fields=(...)` names the
  tensors of an output parameter that is a tuple of tensors (each one mutated `_out` argument);
- `route(**public_args)` decides whether a traced call becomes the op; when it says no, the public
  function runs under the trace itself (a fallback traced as torch ops, or a call that forwards to
  another routed op). `local` parameters exist only on such calls: the op's implementation passes
  their defaults, so `route` must say yes only when their values do not matter;
- `result=(to_op, to_public)` for a public return value that is not the op's (the op returns
  `to_op(public result)`, a traced call `to_public(op result)`; for the `_out` op, `to_public(out)`).

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

# Bound once: an eager call pays these two calls (~0.1-0.2 us) and never enters the dispatcher.
is_compiling = torch.compiler.is_compiling
dispatch_modes = torch._C._len_torch_dispatch_stack

_registered = {}
_lock = threading.Lock()
_POSITIONAL = inspect.Parameter.POSITIONAL_OR_KEYWORD


def _register(name: str, impl, *, mutates_args, fake):
    qualname = f"{NAMESPACE}::{name}"
    with _lock:
        op = _registered.get(qualname)
        if op is None:
            op = torch.library.custom_op(qualname, impl, mutates_args=tuple(mutates_args))
            op.register_fake(fake)
            _registered[qualname] = op
    return op


def _no_output(*args, **kwargs) -> None:
    """Fake of every `_out` variant: it only mutates its outputs, so there is no metadata to compute."""
    return None


def _typed(op_name: str, params) -> list:
    """`params` as positional schema parameters (annotation required, no defaults)."""
    for p in params:
        if p.annotation is inspect.Parameter.empty:
            raise TypeError(f"{op_name}: parameter {p.name!r} needs a type annotation (it is part of the op schema)")
    return [p.replace(kind=_POSITIONAL, default=inspect.Parameter.empty) for p in params]


def traced_op(*, fake, out: str = "out", out_fields=None, expand=None, local=(), route=None, result=None):
    """Decorator for a public op (see the module docstring). `expand` maps a parameter name to
    (to_schema(value) -> tuple, from_schema(typed schema parameters) -> value)."""
    if not callable(fake):
        raise TypeError(f"{NAMESPACE}: a fake implementation is required for torch.compile")
    expand = dict(expand or {})

    def decorate(fn):
        op_name = fn.__name__
        sig = inspect.signature(fn)
        unknown = [n for n in (*local, *expand, *([out] if out_fields else [])) if n not in sig.parameters]
        if unknown:
            raise TypeError(f"{op_name}: {unknown} are not parameters of the public function")
        skip = {out, "stream", *local}
        # (public name, schema parameters it becomes, rebuild from their values or None)
        sources = []
        for p in sig.parameters.values():
            if p.name in skip:
                continue
            if p.name in expand:
                from_schema = expand[p.name][1]
                sources.append((p.name, _typed(op_name, inspect.signature(from_schema).parameters.values()),
                                from_schema))
            else:
                sources.append((p.name, _typed(op_name, [p]), None))
        schema = [q for _, qs, _ in sources for q in qs]
        names = [q.name for q in schema]
        if len(set(names)) != len(names):
            raise TypeError(f"{op_name}: schema parameter names repeat: {names}")
        fields = tuple(out_fields) if out_fields else (out,)
        has_out = out in sig.parameters
        to_op, to_public = result if result is not None else (None, None)

        def public_args(args):
            kwargs, i = {}, 0
            for name, qs, from_schema in sources:
                values = args[i:i + len(qs)]
                kwargs[name] = from_schema(*values) if from_schema else values[0]
                i += len(qs)
            return kwargs

        def impl(*args):
            value = fn(**public_args(args))
            return to_op(value) if to_op else value

        def impl_out(*args):
            buffers = args[len(names):]
            fn(**public_args(args), **{out: buffers if out_fields else buffers[0]})

        ret = sig.return_annotation if sig.return_annotation is not inspect.Signature.empty else torch.Tensor
        if to_op is not None:
            ret = inspect.signature(to_op).return_annotation
        impl.__signature__ = inspect.Signature(schema, return_annotation=ret)
        outs = [inspect.Parameter(f, _POSITIONAL, annotation=torch.Tensor) for f in fields]
        impl_out.__signature__ = inspect.Signature(schema + outs, return_annotation=None)
        functional = _register(op_name, impl, mutates_args=(), fake=lambda *a: fake(**dict(zip(names, a))))
        with_out = (_register(f"{op_name}_out", impl_out, mutates_args=fields, fake=_no_output)
                    if has_out else None)

        router = _router(fn, sig, sources, expand, out if has_out else None, bool(out_fields), functional,
                         with_out, route, to_public)
        functools.update_wrapper(router, fn)
        router.__signature__ = sig
        return router

    return decorate


def _router(fn, sig, sources, expand, out, several_outs, functional, with_out, route, to_public):
    """Source-generated `def <name>(<public signature>)` that routes traced calls to the ops."""
    params, call, fast, defaults = [], [], [], {}
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
        call.append(f"{p.name}={p.name}")
        # positional where the signature allows: keywords bound to positional parameters cost ~30 ns each
        fast.append(p.name if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD else f"{p.name}={p.name}")
    call = ", ".join(call)
    args = "".join(f"*_to_{name}({name}), " if name in expand else f"{name}, " for name, _, _ in sources)
    src = [f"def {fn.__name__}({', '.join(params)}):",
           "    if (_is_compiling() or _dispatch_modes())" + (f" and _route({call}):" if route else ":")]
    if "stream" in sig.parameters:
        src += ["        if stream is not None:",
                f"            raise TypeError({fn.__name__!r} ': stream= is not supported under torch.compile or a "
                "dispatch mode; the op runs on the current stream (wrap the call in torch.cuda.stream(s))')"]
    public = "_to_public({})" if to_public else "{}"
    if out is not None:
        value = f"tuple({out})" if several_outs else out
        src += [f"        if {out} is not None:", f"            _with_out({args}*{value})" if several_outs
                else f"            _with_out({args}{out})", f"            return {public.format(value)}"]
    src += [f"        return {public.format(f'_functional({args})')}", f"    return _fn({', '.join(fast)})"]
    namespace = dict(defaults, _is_compiling=is_compiling, _dispatch_modes=dispatch_modes, _fn=fn,
                     _functional=functional, _with_out=with_out, _route=route, _to_public=to_public,
                     **{f"_to_{name}": to_schema for name, (to_schema, _) in expand.items()})
    exec("\n".join(src), namespace)
    return namespace[fn.__name__]


_NO_STREAM = contextlib.nullcontext()


def launch_stream(stream, like):
    """The `stream=` of a public op, checked before anything runs: None (torch's current stream) or a
    torch stream on the device of `like` (the op's first tensor; when it is not a tensor the op's input
    checks name it). A raw handle, or anything else, is a TypeError: an int cannot be told from a
    mistake, and a wrong one would be launched on. Returns the stream as a torch.cuda.Stream on a GPU."""
    if stream is None:
        return None
    if not isinstance(stream, (torch.cuda.Stream, torch.Stream)):
        raise TypeError(f"stream: expected a torch stream (torch.cuda.Stream) or None, got "
                        f"{type(stream).__name__} {stream!r:.60}")
    device = stream.device
    if isinstance(like, torch.Tensor) and device != like.device:
        raise ValueError(f"stream: on {device}, but the inputs are on {like.device}")
    if device.type == "cuda" and not isinstance(stream, torch.cuda.Stream):
        # a device-generic torch.Stream (torch.accelerator): the launcher reads the raw cuda_stream
        stream = torch.cuda.Stream(stream_id=stream.stream_id, device_index=stream.device_index,
                                   device_type=stream.device_type)
    return stream


def on_stream(stream):
    """Makes a checked `stream` (launch_stream) current for an op's own torch work (schedule, -inf fill)
    so that it is ordered before the kernel launched on that stream; nothing to do for None or a CPU
    stream (the emulator runs in order)."""
    if stream is None or stream.device.type != "cuda":
        return _NO_STREAM
    return torch.cuda.stream(stream)
