"""Upstream (aiter) FlyDSL kernels compiled from a local aiter checkout and launched on the emulator.

Used by gfx950_model.py to time the kernels whose MI355X times the seed tables report. Nothing of aiter
is copied here: its kernel files are imported from the checkout the user names, as modules of
placeholder packages (so aiter's own package __init__ files, which need a ROCm build, do not run), with
the few host-side imports they make (triton, chip info, weight shuffles) stubbed: the schedules those
served are built here from the documented schedule rules, and weights are random bytes (timing does
not depend on their values).
"""
import functools
import pathlib
import struct
import sys
import types

import torch

from flyaot.emu.driver import _with_hidden_args
from flyaot.emu.machine import Launch, Prepared
from flyaot.emu.memory import Memory
from flyaot.emu.program import Program
from flyaot.formats import codeobject


class Upstream:
    def __init__(self, aiter_dir):
        self.root = pathlib.Path(aiter_dir).resolve()
        if not (self.root / "aiter/ops/flydsl/kernels/mqa_logits/pa_mqa_logits_fp4.py").is_file():
            raise SystemExit(f"{self.root}: not an aiter checkout with the FlyDSL FP4 MQA kernels")
        import tempfile
        from flyaot.build_tools.toolchain import setup_process_env
        # a private toolkit folder: the shared default one may be rewritten by other processes
        self._toolkit = tempfile.TemporaryDirectory(prefix="flyaot-toolkit-")
        setup_process_env(self._toolkit.name)
        self._install_stubs()

    # ----- imports from the checkout -----
    def _package(self, name, rel):
        mod = types.ModuleType(name)
        mod.__path__ = [str(self.root / rel)]
        sys.modules.setdefault(name, mod)

    def _install_stubs(self):
        tri = types.ModuleType("triton")
        tri.jit = lambda fn=None, **kw: fn if fn is not None else (lambda f: f)
        tri.next_power_of_2 = lambda n: 1 << max(0, int(n) - 1).bit_length()
        tri.cdiv = lambda a, b: -(-a // b)
        tl = types.ModuleType("triton.language")
        tl.constexpr = object
        tri.language = tl
        sys.modules.setdefault("triton", tri)
        sys.modules.setdefault("triton.language", tl)
        for name, rel in (("aiter", "aiter"), ("aiter.ops", "aiter/ops"), ("aiter.ops.flydsl", "aiter/ops/flydsl"),
                          ("aiter.ops.flydsl.kernels", "aiter/ops/flydsl/kernels"),
                          ("aiter.ops.flydsl.kernels.mqa_logits", "aiter/ops/flydsl/kernels/mqa_logits"),
                          ("aiter.jit", "aiter/jit"), ("aiter.jit.utils", "aiter/jit/utils")):
            self._package(name, rel)
        chip = types.ModuleType("aiter.jit.utils.chip_info")
        chip.get_gfx = lambda: "gfx950"
        sys.modules["aiter.jit.utils.chip_info"] = chip
        shuffle = types.ModuleType("aiter.ops.shuffle")
        shuffle.shuffle_weight_a16w4 = shuffle.shuffle_scale_a16w4 = None    # weights here are random bytes
        sys.modules["aiter.ops.shuffle"] = shuffle
        import flydsl.runtime.device as dev
        dev.get_rocm_arch = lambda *a, **k: "gfx950"

    def module(self, name):
        import importlib
        return importlib.import_module(name)

    # ----- compile -----
    @functools.lru_cache(maxsize=None)
    def decode_kernel(self, max_blocks, next_n, heads, block_k=256, page=64, warps=4):
        m = self.module("aiter.ops.flydsl.kernels.mqa_logits.pa_mqa_logits_fp4")
        launcher, threads = m.compile_pa_mqa_logits_fp4(block_k=block_k, kv_block_size=page,
                                                       max_blocks_per_seq=max_blocks, num_warps=warps,
                                                       next_n=next_n, heads=heads, head_dim=128)
        return launcher, threads

    @functools.lru_cache(maxsize=None)
    def prefill_kernel(self, max_blocks, heads, block_k=256, page=64, warps=4):
        m = self.module("aiter.ops.flydsl.kernels.mqa_logits.pa_mqa_logits_fp4_prefill")
        return m.compile_pa_mqa_logits_fp4_prefill(block_k=block_k, kv_block_size=page, max_blocks_per_seq=max_blocks,
                                                   num_warps=warps, heads=heads, head_dim=128)

    def gemm_config(self, m, n, k):
        host = self.module("aiter.ops.flydsl.gemm_a16wfp4")
        return host._select_gemm_config(m, n, k)

    @functools.lru_cache(maxsize=None)
    def gemm_kernel(self, n, k, cfg):
        kern = self.module("aiter.ops.flydsl.kernels.gemm_a16wfp4")
        return kern.compile_gemm_a16wfp4(N=n, K=k, BM=cfg.block_m, TILE_N=cfg.tile_n, TILE_K=cfg.tile_k,
                                         k_wave=cfg.k_wave, waves_per_eu=cfg.waves_per_eu)


def compile_with(launcher, args):
    """(code object, KernelInfo) of `launcher` traced with `args` (tensors give shapes and strides)."""
    import flydsl.compiler as flyc
    from flydsl._mlir import ir
    from flydsl._mlir.dialects import gpu
    from flydsl.compiler.jit_function import _create_mlir_context
    flyc.compile(launcher, *args)
    _, art = launcher._last_compiled
    bins = []

    def visit(op):
        if op.name == "gpu.binary":
            bins.append(bytes(gpu.ObjectAttr(ir.ArrayAttr(op.attributes["objects"])[0]).object))
        return ir.WalkResult.ADVANCE
    with _create_mlir_context():
        ir.Module.parse(art.ir).operation.walk(visit)
    code = bins[0]
    return code, codeobject.parse(code).kernels[0]


def pack_kernarg(kernel, values) -> bytes:
    """The kernarg segment for `values` in kernel order. A torch tensor fills a global_buffer argument
    and the by-value layout struct after it (its shape as i32s, then its strides but the last as i64s,
    in elements: FlyDSL's dynamic tensor layout); ints fill 4-byte (i32) and floats f32 arguments."""
    buf = bytearray(kernel.kernarg_size)
    args = [a for a in kernel.args if not a.value_kind.startswith("hidden_")]
    k = 0
    for v in values:
        a = args[k]
        if isinstance(v, torch.Tensor):
            struct.pack_into("<Q", buf, a.offset, v.data_ptr())
            k += 1
            lay = args[k] if k < len(args) and args[k].value_kind == "by_value" else None
            if lay is not None and lay.size == 4 * v.dim() + 8 * (v.dim() - 1):
                struct.pack_into(f"<{v.dim()}i", buf, lay.offset, *v.shape)
                struct.pack_into(f"<{v.dim() - 1}q", buf, lay.offset + 4 * v.dim(), *v.stride()[:-1])
                k += 1
            continue
        if isinstance(v, float):
            struct.pack_into("<f", buf, a.offset, v)
        elif a.size == 8:
            struct.pack_into("<q", buf, a.offset, int(v))
        else:
            struct.pack_into("<i", buf, a.offset, int(v))
        k += 1
    return bytes(buf)


def padded(t: torch.Tensor, extra_bytes: int = 1 << 16) -> torch.Tensor:
    """`t` copied to the front of a larger zeroed storage: the upstream kernels prefetch past the ends
    of their inputs (through buffer descriptors whose range is larger than the tensor), which the
    hardware serves from whatever memory follows; here it is zeros inside the registered storage."""
    t = t.contiguous()
    n = t.numel() + -(-extra_bytes // t.element_size())
    return torch.zeros(n, dtype=t.dtype)[:t.numel()].copy_(t.reshape(-1)).view(t.shape)


def launch(code, kernel, grid, block, kernarg: bytes, tensors):
    """A machine.Launch of the kernel over CPU tensors (the caller runs or times it)."""
    mem = Memory()
    for t in tensors:
        mem.register_tensor(t)
        # the whole storage is one region: a padded input's prefetches past its end stay inside it
        mem.register_tensor(torch.empty(0, dtype=torch.uint8).set_(t.untyped_storage()))
    prep = Prepared.of(Program.from_code_object(code, kernel.name))
    ka = _with_hidden_args(kernel, kernarg, grid, block)
    return Launch(prep, grid, block, ka, mem)


def gemm_launch(up, n: int, k: int, m: int, a: torch.Tensor):
    """(Launch, config note) of upstream's A16WFP4 kernel on activations `a` [m, k] with its own config
    choice, against random packed weights and unit scales."""
    cfg = up.gemm_config(m, n, k)
    launcher = up.gemm_kernel(n, k, cfg)
    g = torch.Generator().manual_seed(1)
    wq = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, generator=g)
    ws = torch.full((n, k // 32), 127, dtype=torch.uint8)
    out = torch.empty(m, n, dtype=torch.bfloat16)
    vals = [a.data_ptr(), wq.data_ptr(), ws.data_ptr(), out.data_ptr(), m]
    code, kern = compile_with(launcher, vals + [None])
    grid = (-(-m // cfg.block_m), n // cfg.tile_n, 1)
    return (launch(code, kern, grid, (256, 1, 1), pack_kernarg(kern, vals), [a, wq, ws, out]),
            f"bm{cfg.block_m} tn{cfg.tile_n} tk{cfg.tile_k} kw{cfg.k_wave}")
