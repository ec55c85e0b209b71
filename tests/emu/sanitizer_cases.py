"""Shipped kernels on small problems for the sanitizer's tests, and the code-object patching that
plants a defect in one of them.

`patching(monkeypatch, symbol, pick, words)` makes every emulator launch of `symbol` run its code
object with each instruction `pick(ins)` selects overwritten by `words(ins)` (little-endian 32-bit
words filling the instruction's size), so the defect is in the machine code the emulator runs.
"""
import struct

import torch

from flyaot.emu import driver as emu_driver
from flyaot.emu.machine import Prepared
from flyaot.emu.program import Program

S_NOP_0 = 0xBF800000            # SOPP s_nop 0 (gfx9 encoding)


def nops(ins):
    """s_nop 0 words covering an instruction."""
    return [S_NOP_0] * (ins.size // 4)


def patch_code_object(data: bytes, symbol: str, pick, words) -> tuple[bytes, list]:
    """(patched bytes, the patched instructions) of `symbol`'s code object."""
    prog = Program.from_code_object(data, symbol)
    elf = prog.code_object.elf
    out = bytearray(data)
    hit = []
    for ins in prog.instrs:
        if not pick(ins):
            continue
        sec = next(s for s in elf.sections if s.addr and s.addr <= ins.addr < s.addr + s.size)
        off = sec.offset + ins.addr - sec.addr
        w = words(ins)
        assert 4 * len(w) == ins.size, (ins.text, w)
        out[off:off + ins.size] = struct.pack(f"<{len(w)}I", *w)
        hit.append(ins)
    return bytes(out), hit


def patching(monkeypatch, symbol: str, pick, words=nops) -> list:
    """Launches of `symbol` run the patched code; returns the list the patched instructions are put
    in (filled at the first launch)."""
    real = emu_driver.Emulator.launch
    patched = []

    def launch(self, function, *args, **kw):
        if function.name == symbol:
            data, hit = patch_code_object(function.prepared.program.code_object.data, symbol, pick, words)
            patched[:] = hit
            prep = Prepared.of(Program.from_code_object(data, symbol))
            function = emu_driver.EmuFunction(function.name, prep, function.kernel)
        return real(self, function, *args, **kw)
    monkeypatch.setattr(emu_driver.Emulator, "launch", launch)
    return patched


def same_bits(a, b) -> bool:
    return a.shape == b.shape and torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


# ----- the kernels (the families' selftest problems, smallest first) -----
PREFILL_SYMBOL = "mqa_prefill_fp4_h64_d128_p64"
GEMM_TILE_SYMBOL = "gemm_a16wfp4_prefill_m64_n128_s1_k1"
DIRECT_DECODE_SYMBOL = "mqa_decode_direct_h64_d128_p64_bk32_w2"


# Each returns (ok, detail, output) with ok/detail against the family's torch reference.
def prefill():
    """Explicit windows on H64 D128 page 64 (4 waves share each LDS-staged KV chunk; the op also runs
    the mqa_prefill_meta kernels)."""
    from flyaot.ops import pa_mqa_logits_fp4_prefill
    from flyaot.ops._mqa_prefill import _hook_case, _hook_metrics
    i32 = lambda v: torch.tensor(v, dtype=torch.int32)      # noqa: E731
    rb, ls, le = i32([0, 0, 0, 1, 0]), i32([0, 10, 70, 0, 5]), i32([150, 120, 70, 90, 149])
    case, dev = _hook_case(5, [150, 90], 64, 160, 128, "cpu")
    out = pa_mqa_logits_fp4_prefill(*dev, rb, ls, le, 160, weight_scale=1.5)
    return (*_hook_metrics(out, case, rb, ls, le, 1.5), out)


def gemm_tile():
    """The 64x128 A16WFP4 GEMM tile (LDS-DMA double buffer) at M40 N256 K256."""
    from flyaot.kernel_defs.gemm_a16wfp4.reference import gemm_reference, random_weight
    from flyaot.ops import gemm_a16wfp4, prepare_mxfp4_weight
    g = torch.Generator().manual_seed(552)
    w, s = random_weight(256, 256, generator=g)
    x = torch.randn(40, 256, generator=g).to(torch.bfloat16)
    y = gemm_a16wfp4(x, prepare_mxfp4_weight(w, s))
    ref = gemm_reference(x, w, s)
    rel = ((y.float() - ref.float()).norm() / ref.float().norm()).item()
    return rel <= 1e-4, f"rel L2 {rel:.3g}", y


def split_k_gemm():
    """A split-K decode GEMM config (M7 N256 K512: waves of a workgroup sum their partials in LDS)."""
    from flyaot.kernel_defs.gemm_a16wfp4.reference import gemm_reference, random_weight
    from flyaot.ops import gemm_a16wfp4, prepare_mxfp4_weight
    g = torch.Generator().manual_seed(775)
    w, s = random_weight(256, 512, generator=g)
    x = torch.randn(7, 512, generator=g).to(torch.bfloat16)
    y = gemm_a16wfp4(x, prepare_mxfp4_weight(w, s))
    ref = gemm_reference(x, w, s)
    rel = ((y.float() - ref.float()).norm() / ref.float().norm()).item()
    return rel <= 1e-4, f"rel L2 {rel:.3g}", y


def staged_decode():
    """The staged-LDS decode kernel (H16 D128 page 64) with its internal schedule (the
    mqa_runs_schedule kernel), next_n 2."""
    return _decode(1, [100, 0, 37], 2, 16, 128)


def direct_decode():
    """The direct decode kernel (H64 D128 page 64, 32-token blocks, 2 waves), next_n 3."""
    return _decode(7, [70, 0, 130], 3, 64, 160)


def _decode(seed, ctx, next_n, heads, msl):
    from flyaot.kernel_defs.mqa_common.reference import compare, passes
    from flyaot.kernel_defs.mqa_decode.reference import pa_mqa_logits_reference, visible_mask
    from flyaot.ops import pa_mqa_logits_fp4
    from flyaot.ops._mqa_decode import _hook_problem
    cpu, dev = _hook_problem(seed, ctx, next_n, heads, "cpu", head_dim=128, page=64)
    out = pa_mqa_logits_fp4(*dev, msl, next_n=next_n, weight_scale=1.5, kv_block_size=64)
    ref = pa_mqa_logits_reference(*cpu, msl, weight_scale=1.5, next_n=next_n)
    m = compare(out, ref, visible_mask(cpu[-1], next_n, msl))
    return passes(m), m, out


def fp8_paged():
    """The FP8 paged kernel (H64 D128, preshuffled 64-token pages, tiles grid), next_n 2."""
    from flyaot.kernel_defs.mqa_fp8 import reference as R
    from flyaot.ops import fp8_paged_mqa_logits
    g = torch.Generator().manual_seed(64)
    ctx, next_n, msl, page = [100, 0, 37], 2, 128, 64
    n = sum(-(-c // page) for c in ctx) + 1
    cache = R.preshuffle_cache(R.write_paged_cache(torch.randn(n, page, 1, 128, generator=g)))
    bt = torch.randint(0, n, (3, -(-msl // page)), generator=g, dtype=torch.int32)
    q = torch.randn(3, next_n, 64, 128, generator=g).to(R.FP8)
    w = torch.randn(3 * next_n, 64, generator=g)
    cl = torch.tensor(ctx, dtype=torch.int32)
    out = fp8_paged_mqa_logits(q, cache, w, cl, bt, msl, kv_block_size=page, preshuffle=True)
    ref = R.paged_logits_reference(q, R.dequant_pages(cache, True), w, cl, bt, msl)
    live = ref != float("-inf")
    err = ((out[live] - ref[live]).abs().max() / ref[live].abs().max()).item()
    return bool(torch.equal(out == float("-inf"), ~live)) and err <= 1e-5, f"max rel err {err:.3g}", out


# every family's kernels, through the public ops: (name, case)
ALL = (("gemm_tile", gemm_tile), ("split_k_gemm", split_k_gemm), ("staged_decode", staged_decode),
       ("direct_decode", direct_decode), ("prefill", prefill), ("fp8_paged", fp8_paged))
