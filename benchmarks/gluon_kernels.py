"""aiter's Gluon FP8 MQA logits kernels (deepgemm_fp8_paged_mqa_logits and its varctx schedule, and the
ragged fp8_mqa_logits), compiled for gfx950 on the CPU by triton and launched on the emulator: the peer
of the mqa_fp8 family in mqa_fp8_model.py.

Nothing of aiter is copied here. Its kernel files (and, for the ragged op, its host wrapper) are
imported from the checkout the user names, as modules of placeholder packages (aiter's package
__init__ files need a ROCm build); the only aiter imports stubbed are the two that ask a GPU: the CDNA
generation (4 on gfx950) and the arch. For the paged op, what aiter's host wrapper decides is restated
from its call: the argument order, types and attributes, the grids (SplitKV for the split grid,
TotalCuCount * WavePerEU slots for varctx), num_warps 4, and the dynamic LDS size triton reports. The
ragged wrapper runs itself, its kernel object swapped for a recorder (ragged_launch).

triton >= 3.5 (Gluon) must be importable; it is not a flyaot dependency (docs/families/mqa_fp8.md
says how to install it beside the venv).
"""
import functools
import importlib.util
import pathlib
import struct
import sys
import types

import torch

from aiter_kernels import padded
from flyaot.emu import timing
from flyaot.emu.driver import _with_hidden_args
from flyaot.emu.machine import Launch, Prepared
from flyaot.emu.memory import Memory
from flyaot.emu.program import Program
from flyaot.formats import codeobject
from flyaot.ops import modeled

KERNEL_FILE = "aiter/ops/triton/gluon/pa_mqa_logits.py"
SCHEDULE_FILE = "aiter/ops/triton/_triton_kernels/attention/pa_mqa_logits.py"
RAGGED_FILE = "aiter/ops/triton/attention/fp8_mqa_logits.py"      # fp8_mqa_logits, the host wrapper
RAGGED_DEPS = ("aiter.ops.triton.utils.common_utils", "aiter.ops.triton._triton_kernels.attention.fp8_mqa_logits",
               "aiter.ops.triton._gluon_kernels.gfx950.attention.fp8_mqa_logits")
CDNA4 = 4           # gfx950's CDNA generation, what aiter's get_cdna_version answers there
CUS = 256           # MI355X's CU count (aiter's TotalCuCount default on it)
NUM_WARPS = 4       # what aiter's wrapper compiles every gfx950 variant with

# aiter's wrapper signature, in argument order; the last one is SplitKV (split grid) or the varctx
# schedule's pointer
_SIGNATURE = (("batch_size", "i32"), ("next_n", "i32"), ("heads_num", "i32"), ("Q_buffer", "*fp8e4nv"),
              ("stride_q_batch", "i32"), ("stride_q_next_n", "i32"), ("stride_q_heads", "i32"),
              ("KV_buffer", "*fp8e4nv"), ("stride_k_seq", "i32"), ("scale_buffer", "*fp32"),
              ("stride_scale_seq", "i32"), ("context_len_ptr", "*i32"), ("kv_indices", "*i32"),
              ("weights", "*fp32"), ("stride_w_batch", "i32"), ("OutLogits_buffer", "*fp32"),
              ("stride_out_batch", "i64"), ("max_model_len", "i32"), ("max_block_len", "i32"),
              ("num_block", "i32"))
_DIV16 = ["tt.divisibility", 16]
_RANGE32 = ["tt.pointer_range", 32]


def triton_missing() -> str | None:
    """Why the peer cannot compile here (None when triton with Gluon is importable)."""
    try:
        from triton.experimental.gluon._runtime import GluonASTSource    # noqa: F401
    except ImportError as e:
        return f"triton with Gluon (>= 3.5) is not importable ({e})"
    return None


class GluonPeer:
    def __init__(self, aiter_dir):
        self.root = pathlib.Path(aiter_dir).resolve()
        for rel in (KERNEL_FILE, SCHEDULE_FILE, RAGGED_FILE):
            if not (self.root / rel).is_file():
                raise SystemExit(f"{self.root}: not an aiter checkout with {rel}")
        why = triton_missing()
        if why:
            raise SystemExit(f"the Gluon peer needs triton: {why}")
        # the two aiter imports that need a GPU to answer, answered for gfx950
        self._stub("aiter.ops.triton.gluon.pa_decode_gluon", get_cdna_version=lambda: CDNA4)
        self._stub("aiter.ops.triton.utils._triton.arch_info", get_arch=lambda: "gfx950")
        self.kernels = self._load("aiter.ops.triton.gluon.pa_mqa_logits", KERNEL_FILE)
        self.schedule_kernels = self._load("aiter.ops.triton._triton_kernels.attention.pa_mqa_logits", SCHEDULE_FILE)
        for name in RAGGED_DEPS:
            self._load(name, name.replace(".", "/") + ".py")
        self.ragged = self._load(RAGGED_FILE[:-3].replace("/", "."), RAGGED_FILE)

    @staticmethod
    def _parents(name):
        parts = name.split(".")
        for k in range(1, len(parts)):
            pkg = ".".join(parts[:k])
            if pkg not in sys.modules:
                mod = types.ModuleType(pkg)
                mod.__path__ = []
                sys.modules[pkg] = mod

    def _load(self, name, rel):
        """Module `name` executed from the checkout's file `rel`; its parent packages are placeholders."""
        if name in sys.modules:
            return sys.modules[name]
        self._parents(name)
        spec = importlib.util.spec_from_file_location(name, self.root / rel)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod          # triton resolves the kernels' globals through the module
        spec.loader.exec_module(mod)
        return mod

    def _stub(self, name, **attrs):
        self._parents(name)
        mod = types.ModuleType(name)
        mod.__dict__.update(attrs)
        sys.modules.setdefault(name, mod)

    # ----- compile -----
    @functools.lru_cache(maxsize=None)
    def paged_kernel(self, heads, chunk_k, page, preshuffle, varctx, wave_per_eu, padded_rows):
        """(code object bytes, KernelInfo, dynamic LDS bytes) of the variant aiter's wrapper compiles for
        these arguments (its attributes included: 16-divisible strides and 32-bit pointer ranges)."""
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.experimental.gluon._runtime import GluonASTSource
        name = ("_gluon_deepgemm_fp8_paged_mqa_logits" + ("_preshuffle" if preshuffle else "")
                + ("_varctx" if varctx else ""))
        sig = dict(_SIGNATURE)
        sig["safe_chunks_per_cta_ptr" if varctx else "SplitKV"] = "*i32" if varctx else "i32"
        const = {"ChunkQ": heads, "ChunkK": chunk_k, "KVBlockSize": page, "HiddenDim": 128,
                 "CDNA_VERSION": CDNA4, "ARCH": "gfx950"}
        sig.update({k: "constexpr" for k in const})
        kv = [_DIV16] if padded_rows else []
        attrs = {(2,): [_DIV16], (3,): [_DIV16, _RANGE32], (4,): [_DIV16], (5,): [_DIV16], (6,): [_DIV16],
                 (7,): kv, (8,): kv, (9,): kv, (10,): kv, (11,): [_RANGE32], (12,): [_RANGE32],
                 (13,): [_DIV16, _RANGE32], (14,): [_DIV16]}
        src = GluonASTSource(fn=getattr(self.kernels, name), signature=sig, constexprs=const, attrs=attrs)
        # enable_fp_fusion: triton 3.9's default, stated to silence its notice about a future default
        k = triton.compile(src, target=GPUTarget("hip", "gfx950", 64),
                           options={"num_warps": NUM_WARPS, "waves_per_eu": wave_per_eu, "num_stages": 2,
                                    "num_ctas": 1, "arch": "gfx950", "backend_name": "hip", "warp_size": 64,
                                    "enable_fp_fusion": True, "name": name})
        return _code(k)

    # ----- launches -----
    def schedule_launch(self, context_lens, next_n, max_model_len, chunk_k=256, wave_per_eu=2, cus=CUS):
        """(Launch, out) of deepgemm_fp8_paged_mqa_logits_schedule: out [1] int32 receives the chunks
        per slot once the launch has run every workgroup."""
        batch = context_lens.numel()
        if batch >= cus * wave_per_eu // next_n:
            raise ValueError(f"batch {batch}: the varctx schedule needs fewer than {cus * wave_per_eu // next_n} "
                             f"sequences")
        grid = cus * 4                       # the schedule kernel's waves_per_eu 4, one CTA per slot
        chunks = -(-max_model_len // chunk_k)
        cl = padded(context_lens.to(torch.int32))
        out = padded(torch.zeros(1, dtype=torch.int32))
        kwargs = {"batch_size": batch, "context_len_ptr": cl, "safe_chunks_per_cta_ptr": out,
                  "parallel_unit_num": cus * wave_per_eu // next_n, "ChunkK": chunk_k,
                  "AlignedBatchSize": 1 << (batch - 1).bit_length(), "TryCount": -(-chunks // grid), "waves_per_eu": 4}
        code, kern, lds, values = _jit_compile(self.schedule_kernels._deepgemm_fp8_paged_mqa_logits_varctx_schedule,
                                               kwargs)
        return _launch(code, kern, lds, (grid, 1, 1), values, [cl, out]), out

    def paged_launch(self, q, kv_cache, weights, out, context_lens, kv_indices, max_model_len, *,
                     preshuffle, chunk_k, wave_per_eu, schedule=None, cus=CUS):
        """Launch of deepgemm_fp8_paged_mqa_logits(q, kv_cache, weights, out, context_lens, kv_indices,
        max_model_len, Preshuffle, KVBlockSize = the cache's page, ChunkK, TotalCuCount = cus, WavePerEU,
        VarCtxSchedule = schedule) on gfx950, as aiter's wrapper launches it. Tensors are CPU tensors the
        kernel reads in place (out is written in place)."""
        batch, next_n, heads, dim = q.shape
        _, page, _, row = kv_cache.shape
        if dim != 128 or row != dim + 4:
            raise ValueError(f"q {tuple(q.shape)}, kv_cache {tuple(kv_cache.shape)}: D must be 128, rows D + 4")
        if chunk_k % page and page % chunk_k:
            raise ValueError(f"ChunkK {chunk_k} and KVBlockSize {page}: one must divide the other")
        if preshuffle and page % 16:
            raise ValueError(f"KVBlockSize {page}: Preshuffle needs a multiple of 16")
        pages = kv_cache.reshape(-1, page * row)
        values, scales = pages[:, :page * dim], pages[:, page * dim:].view(torch.float32)
        tiles = batch * next_n
        split = (max(1, cus // tiles) + 4) // 5 * 5 * wave_per_eu
        grid = cus * wave_per_eu if schedule is not None else tiles * split
        code, kern, lds = self.paged_kernel(heads, chunk_k, page, preshuffle, schedule is not None, wave_per_eu,
                                            values.stride(0) % 16 == 0)
        base = (kv_cache.data_ptr(), kv_cache.data_ptr() + page * dim)
        vals = [batch, next_n, heads, q, q.stride(0), q.stride(1), q.stride(2), base[0], values.stride(0),
                base[1], scales.stride(0), context_lens, kv_indices, weights, weights.stride(0), out, out.stride(0),
                max_model_len, kv_indices.shape[1], pages.shape[0], schedule if schedule is not None else split]
        tensors = [q, kv_cache, context_lens, kv_indices, weights, out] + ([schedule] if schedule is not None else [])
        return _launch(code, kern, lds, (grid, 1, 1), vals, tensors)


def _code(compiled):
    md = compiled.metadata
    if md.global_scratch_size or md.profile_scratch_size:
        raise RuntimeError(f"{md.name}: needs triton's global or profile scratch buffer, which is not provided here")
    code = compiled.asm["hsaco"]
    return code, codeobject.parse(code).kernels[0], int(compiled.metadata.shared)


def _launch(code, kern, lds, grid, values, tensors, num_warps=NUM_WARPS):
    """A machine.Launch of a triton kernel: `values` fill its declared arguments in order (tensors and
    ints given as addresses are pointers, ints by their declared size); the arguments triton appends
    (its global and profile scratch pointers, unused at size 0: _code checks) stay null."""
    args = [a for a in kern.args if not a.value_kind.startswith("hidden_")]
    if len(args) != len(values) + 2:
        raise ValueError(f"{kern.name}: {len(values)} values for {len(args)} arguments (2 of them triton's)")
    buf = bytearray(kern.kernarg_size)
    for a, v in zip(args, values):
        if isinstance(v, torch.Tensor):
            v = v.data_ptr()
        struct.pack_into("<q" if a.size == 8 else "<i", buf, a.offset, int(v))
    mem = Memory()
    for t in tensors:
        mem.register_tensor(t)
        # the whole storage is one region: a padded input's prefetches past its end stay inside it
        mem.register_tensor(torch.empty(0, dtype=torch.uint8).set_(t.untyped_storage()))
    block = (num_warps * 64, 1, 1)
    prep = Prepared.of(Program.from_code_object(code, kern.name))
    return Launch(prep, grid, block, _with_hidden_args(kern, bytes(buf), grid, block), mem, lds_bytes=lds)


def modeled_launches(launches, fill_bytes: int, samples: int, functional: bool = False) -> dict:
    """modeled.modeled_call's result for (name, Launch) pairs run one after another with a -inf fill of
    fill_bytes, on the same shipped parameters; functional=True runs every workgroup (for a launch whose
    output a later one reads), else only the sampled ones."""
    params = timing.Params()
    kernels = []
    for name, launch in launches:
        t = timing.time_launch(launch, samples=samples, functional=functional, params=params)
        kernels.append((name, t.kernel_us, t.sampling_error))
    fill = modeled.modeled_call(lambda: None, fill_bytes, samples)["fill_us"]     # the fill term, priced once
    device = sum(k[1] for k in kernels) + fill
    return {"us": device + params.launch_us, "kernels": kernels, "fill_us": fill, "launch_us": params.launch_us,
            "device_us": device}


def decode(peer, q, kv_cache, weights, context_lens, block_table, max_model_len, samples) -> dict:
    """The peer's modeled results at one decode row (inputs as the flyaot row's: plain bytes, the values'
    order does not change the time): 'gluon_split' (Preshuffle, the SplitKV grid, no schedule) and
    'gluon_varctx' (vLLM's call: Preshuffle, ChunkK 256, WavePerEU 2, the varctx grid), each with the
    -inf fill its caller needs (neither kernel writes the cells past a context's last chunk), and
    'gluon_schedule' (deepgemm_fp8_paged_mqa_logits_schedule, once per step)."""
    q, kv_cache, weights, cl, bt = (padded(t) for t in (q, kv_cache, weights, context_lens, block_table))
    next_n = q.shape[1]
    out = torch.empty(q.shape[0] * next_n, max_model_len)
    fill = out.numel() * 4
    kw = {"preshuffle": True, "chunk_k": 256, "wave_per_eu": 2}
    split = modeled_launches([("gluon_split", peer.paged_launch(q, kv_cache, weights, out, cl, bt, max_model_len,
                                                                **kw))], fill, samples)
    sl, sched = peer.schedule_launch(context_lens, next_n, max_model_len)
    build = modeled_launches([("gluon_schedule", sl)], 0, samples, functional=True)
    if int(sched[0]) < 1:
        raise RuntimeError(f"the Gluon varctx schedule kernel wrote {int(sched[0])} chunks per slot")
    varctx = modeled_launches([("gluon_varctx", peer.paged_launch(q, kv_cache, weights, out, cl, bt, max_model_len,
                                                                  schedule=sched, **kw))], fill, samples)
    return {"gluon_split": split, "gluon_varctx": varctx, "gluon_schedule": build,
            "gluon_chunks_per_slot": int(sched[0])}


def check(peer, cus: int = CUS) -> str:
    """Run both peer variants on every workgroup at a small shape (B 2, next_n 2, H 64, page 64, ragged
    contexts, a shuffled block table) against the float64 torch reference on the dequantized inputs;
    raises RuntimeError unless every visible cell is within f32 rounding and every hidden cell is -inf.
    Returns a one-line summary."""
    from flyaot.kernel_defs.mqa_fp8 import reference as R
    g = torch.Generator().manual_seed(0)
    b, next_n, heads, page, msl = 2, 2, 64, 64, 768
    ctx = torch.tensor([300, 700], dtype=torch.int32)
    width = msl // page
    pages = b * width + 3
    cache = R.preshuffle_cache(R.write_paged_cache(torch.randn(pages, page, 1, 128, generator=g)))
    bt = torch.randperm(pages, generator=g)[:b * width].reshape(b, width).to(torch.int32)
    q = (torch.randn(b, next_n, heads, 128, generator=g) * 2).to(R.FP8)
    w = torch.randn(b * next_n, heads, generator=g)
    ref = R.paged_logits_reference(q, R.dequant_pages(cache, preshuffled=True), w, ctx, bt, msl)
    visible = R.visible_mask(ctx, next_n, msl)
    qq, cc, ww, cl, bb = (padded(t) for t in (q.view(torch.uint8), cache, w, ctx, bt))
    notes = []
    for variant in ("split", "varctx"):
        out = torch.full((b * next_n, msl), float("-inf"))        # the caller's fill
        sched = None
        if variant == "varctx":
            sl, sched = peer.schedule_launch(ctx, next_n, msl, cus=cus)
            sl.run()
        peer.paged_launch(qq, cc, ww, out, cl, bb, msl, preshuffle=True, chunk_k=256, wave_per_eu=2,
                          schedule=sched, cus=cus).run()
        err = float((out[visible] - ref[visible]).abs().max() / ref[visible].abs().max())
        misplaced = int(((out == float("-inf")) != ~visible).sum())
        if not err <= 1e-5 or misplaced:
            raise RuntimeError(f"the Gluon {variant} kernel disagrees with the reference: max error {err:.3g} of "
                               f"max |ref|, {misplaced} cells with -inf misplaced")
        notes.append(f"{variant} max error {err:.2g} of max |ref|")
    s, s_kv = 40, 200
    q = (torch.randn(s, heads, 128, generator=g) * 2).to(R.FP8)
    kv = (torch.randn(s_kv, 128, generator=g) * 2).to(R.FP8)
    scales = torch.rand(s_kv, generator=g) + 0.5
    w = torch.randn(s, heads, generator=g)
    ends = torch.arange(s_kv - s + 1, s_kv + 1, dtype=torch.int32)
    starts = torch.randint(0, 100, (s,), generator=g, dtype=torch.int32)
    ref = R.ragged_logits_reference(q, kv.double() * scales.double()[:, None], w, starts, ends)
    tensors = [_fp8_padded(t) for t in (q, kv)] + [padded(t) for t in (scales, w, starts, ends)]
    launch, out, _ = ragged_launch(peer, *tensors)
    launch.run()
    visible = ref != float("-inf")
    err = float((out[visible] - ref[visible]).abs().max() / ref[visible].abs().max())
    misplaced = int(((out == float("-inf")) != ~visible).sum())
    if not err <= 1e-5 or misplaced:
        raise RuntimeError(f"the Gluon fp8_mqa_logits kernel disagrees with the reference: max error {err:.3g} of "
                           f"max |ref|, {misplaced} cells with -inf misplaced")
    notes.append(f"ragged (40x200, causal, ragged starts) max error {err:.2g}")
    return "Gluon peer checked against the torch reference (paged 2x2x768, H64, page 64): " + ", ".join(notes)


def _fp8_padded(t):
    """padded() of an E4M3 tensor, still E4M3 (the dtype picks the kernel triton's JIT compiles)."""
    import flyaot.kernel_defs.mqa_fp8.reference as R
    return padded(t.view(torch.uint8)).view(R.FP8)


def prefill(peer, q, kv, kv_scales, weights, cu_starts, cu_ends, samples) -> dict:
    """The peer's modeled fp8_mqa_logits (clean_logits) at one prefill row: 'gluon' with the -inf fill
    of the logits buffer aiter's wrapper allocates (rows padded to 256 keys). q, kv: E4M3 bytes."""
    import flyaot.kernel_defs.mqa_fp8.reference as R
    launch, _, fill = ragged_launch(peer, *(_fp8_padded(t.view(R.FP8)) for t in (q, kv)),
                                    *(padded(t) for t in (kv_scales, weights, cu_starts, cu_ends)))
    return {"gluon": modeled_launches([("gluon_fp8_mqa_logits", launch)], fill, samples)}


# ----------------------------------------------------------------------------------------- ragged prefill
class _Capture:
    """Stands in for a triton kernel object: `kernel[grid](**kwargs)` records the launch instead."""
    def __init__(self):
        self.calls = []

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.calls.append((tuple(grid), args, kwargs))


def _jit_compile(fn, kwargs):
    """(code, KernelInfo, dynamic LDS bytes, argument values in kernel order) of what triton's JIT would
    compile for the launch `fn[grid](**kwargs)` on gfx950: its own binder specializes the arguments
    (ints equal to 1 become constants, 16-divisible ints and pointers are marked) without a device."""
    from triton import knobs
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, compile, make_backend
    from triton.experimental.gluon._runtime import GluonASTSource
    from triton.runtime.jit import create_function_from_signature
    target = GPUTarget("hip", "gfx950", 64)
    backend = make_backend(target)
    kwargs = dict(kwargs, debug=kwargs.get("debug", fn.debug) or knobs.runtime.debug,
                  instrumentation_mode=knobs.compilation.instrumentation_mode,
                  fpsan_homomorphic_casts=knobs.compilation.fpsan_homomorphic_casts)
    kwargs.setdefault("enable_fp_fusion", True)       # as in paged_kernel
    bound, spec, opts = create_function_from_signature(fn.signature, fn.params, backend)(**kwargs)
    options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound, spec, opts)
    src = (GluonASTSource if fn.is_gluon() else ASTSource)(fn, signature, constexprs, attrs)
    code, kern, lds = _code(compile(src, target=target, options=options.__dict__))
    values = [v for v, (kind, _) in zip(bound.values(), spec) if kind != "constexpr"]
    return code, kern, lds, values


def ragged_launch(peer, q, kv, kv_scales, weights, cu_starts, cu_ends, clean_logits=True):
    """(Launch, logits, fill bytes) of aiter's fp8_mqa_logits(q, kv, kv_scales, weights, cu_starts,
    cu_ends, clean_logits) on gfx950: aiter's own wrapper runs (allocating and -inf filling the logits
    on the CPU, choosing the kernel and its configuration) with its kernel object swapped for a
    recorder; the recorded launch is compiled as triton's JIT would and handed to the emulator."""
    mod = peer.ragged
    if mod._gluon_fp8_mqa_logits_kernel is None:
        raise RuntimeError("aiter's fp8_mqa_logits found no Gluon kernel for gfx950 with this triton")
    kernel, cap = mod._gluon_fp8_mqa_logits_kernel, _Capture()
    mod._gluon_fp8_mqa_logits_kernel = cap
    try:
        logits = mod.fp8_mqa_logits(q, kv, kv_scales, weights, cu_starts, cu_ends, clean_logits=clean_logits)
    finally:
        mod._gluon_fp8_mqa_logits_kernel = kernel
    (grid, args, kwargs), = cap.calls
    if args:
        raise RuntimeError("aiter's fp8_mqa_logits launched its kernel with positional arguments")
    code, kern, lds, values = _jit_compile(kernel, kwargs)
    grid = tuple(grid) + (1,) * (3 - len(grid))
    tensors = [v for v in kwargs.values() if isinstance(v, torch.Tensor)]
    fill = logits.untyped_storage().nbytes() if clean_logits else 0
    return _launch(code, kern, lds, grid, values, tensors, kwargs.get("num_warps", NUM_WARPS)), logits, fill
