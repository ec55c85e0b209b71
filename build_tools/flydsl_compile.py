"""The FlyDSL compile back end: trace and compile one family launcher without a GPU, hand back its
code object and the ABI the launcher's signature states.

Used by build workers and by the runtime's JIT fallback (the only runtime path that imports
flydsl). The caller must have set up the toolchain environment for the target first
(build_tools.toolchain).
"""
import inspect
import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class KernelBuild:
    code_object: bytes
    kernel_name: str
    arg_names: tuple          # kernel arguments in ABI order
    arg_ctypes: tuple         # 'void*', 'int32_t', 'int64_t', 'float'
    block: tuple              # workgroup size the launcher was traced with

    def as_dict(self) -> dict:
        """Plain-data form (what crosses from a compile worker to the build, and what a cached
        manifest entry is turned back into for re-gating)."""
        return {"code_object": self.code_object, "kernel_name": self.kernel_name, "arg_names": list(self.arg_names),
                "arg_ctypes": list(self.arg_ctypes), "block": list(self.block)}

    @classmethod
    def from_entry(cls, entry: dict, code_object: bytes) -> "KernelBuild":
        return cls(code_object, entry["symbol"], tuple(a["name"] for a in entry["args"]),
                   tuple(a["ctype"] for a in entry["args"]), tuple(entry["block"]))


def compile_family_spec(family, params: dict, target) -> KernelBuild:
    """Compile one spec of a registry Family for `target` (a targets.py row): its kernel module's
    `launcher(params, target)`, under the module's `compile_hints(params)` if it defines them, as the
    kernel symbol the family declares. FlyDSL picks its target from its own environment variables
    (toolchain.flydsl_env); a process set up for another arch is refused rather than compiled."""
    import importlib

    from flydsl.compiler.kernel_function import CompilationContext
    from flydsl.runtime.device import get_rocm_arch
    if get_rocm_arch() != target.arch:
        raise RuntimeError(f"{family.name}: this process compiles for {get_rocm_arch()!r}, not {target.arch!r} "
                           "(toolchain.setup_process_env sets the arch)")
    module = importlib.import_module(family.kernel_module)
    launcher = module.launcher(dict(params), target)
    hints = getattr(module, "compile_hints", lambda p: {})(dict(params))
    symbol = family.symbol(params)
    if not hints:
        return compile_launcher(launcher, symbol)
    with CompilationContext.compile_hints(hints):
        return compile_launcher(launcher, symbol)


def compile_launcher(launcher, kernel_name: str) -> KernelBuild:
    """Trace and compile a `@flyc.jit` launcher whose parameters are the kernel's arguments.

    Every parameter except a trailing `stream` must be annotated `fx.Pointer`, `Int32`, `Int64` or
    `fx.Float32` (a flat ABI); placeholders stand in for them, so no device memory is needed.
    """
    import flydsl.compiler as flyc
    import flydsl.expr as fx
    from flydsl.compiler.jit_argument import from_c_void_p

    sig = inspect.signature(launcher.func)
    names, ctypes_, placeholders = [], [], []
    for p in sig.parameters.values():
        ann = p.annotation
        if p.name == "stream":
            continue
        if ann is fx.Pointer:
            ct, ph = "void*", from_c_void_p(fx.Uint8, 0)
        elif ann is fx.Int32:
            ct, ph = "int32_t", 0
        elif ann is fx.Int64:
            ct, ph = "int64_t", fx.Int64(0)
        elif ann is fx.Float32:
            ct, ph = "float", 0.0
        else:
            raise TypeError(f"{kernel_name}: parameter {p.name!r} has unsupported annotation {ann!r}; "
                            "use fx.Pointer, Int32, Int64 or fx.Float32")
        names.append(p.name)
        ctypes_.append(ct)
        placeholders.append(ph)
    _lower_on_a_fresh_thread()
    flyc.compile(launcher, *placeholders)
    _, artifact = launcher._last_compiled
    binary, block = _binary_and_block(artifact.ir, kernel_name)
    return KernelBuild(binary, kernel_name, tuple(names), tuple(ctypes_), block)


def _lower_on_a_fresh_thread() -> None:
    """Make FlyDSL lower (MLIR passes, LLVM, code generation) the traced module's text on a new thread in
    a new MLIR context, once per process.

    Why: FlyDSL 0.5.0's bundled LLVM orders some instructions by the relative addresses of its IR
    objects. Lowered on the tracing thread, in the tracing context, those addresses depend on everything
    the process allocated before (measured: the size of one environment variable moved the code objects
    of two mqa_decode specs). A new thread allocates from a malloc arena of its own, and a new context
    shares no uniqued MLIR storage with the tracer, so the lowering's heap depends on the module's text
    alone; with address-space randomisation off (pool.py) its code object repeats byte for byte.
    FlyDSL has no hook for this, so the lowering entry point is wrapped; the text, pipeline and options
    it receives are FlyDSL's own."""
    from flydsl.compiler import jit_function

    compiler = jit_function.MlirCompiler
    if getattr(compiler.compile, "flyaot_fresh_thread", False):
        return
    lower = compiler.compile.__func__

    def compile_on_fresh_thread(cls, asm, **kwargs):
        result = []

        def run():
            try:
                with jit_function._create_mlir_context():
                    result.append((True, lower(cls, asm, **kwargs)))
            except BaseException as e:  # re-raised on the calling thread
                result.append((False, e))

        thread = threading.Thread(target=run, name="flyaot-lower")
        thread.start()
        thread.join()
        ok, value = result[0]
        if not ok:
            raise value
        return value

    compile_on_fresh_thread.flyaot_fresh_thread = True
    compiler.compile = classmethod(compile_on_fresh_thread)


def _binary_and_block(ir_text: str, kernel_name: str):
    from flydsl._mlir import ir
    from flydsl._mlir.dialects import gpu
    from flydsl.compiler.jit_function import _create_mlir_context

    binaries, blocks = [], []

    def const(value):
        return ir.IntegerAttr(value.owner.attributes["value"]).value

    def visit(op):
        if op.name == "gpu.binary":
            binaries.append(bytes(gpu.ObjectAttr(ir.ArrayAttr(op.attributes["objects"])[0]).object))
        elif op.name == "gpu.launch_func":
            launch = op.opview
            if ir.SymbolRefAttr(launch.kernel).value[-1] == kernel_name:
                blocks.append((const(launch.blockSizeX), const(launch.blockSizeY), const(launch.blockSizeZ)))
        return ir.WalkResult.ADVANCE

    with _create_mlir_context():
        ir.Module.parse(ir_text).operation.walk(visit)
    if len(binaries) != 1:
        raise RuntimeError(f"{kernel_name}: expected one gpu.binary in the compiled module, found {len(binaries)}")
    if len(blocks) != 1:
        raise RuntimeError(f"{kernel_name}: expected one launch of {kernel_name!r} in the launcher, found {len(blocks)}")
    return binaries[0], blocks[0]
