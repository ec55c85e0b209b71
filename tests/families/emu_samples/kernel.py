"""Small FlyDSL kernels that exercise the instruction kinds the gfx950 emulator must execute.

Each kernel is tiny and its math is fixed by reference.py, so the emulator's end-to-end tests can
compare against torch. Flat ABI only (raw pointers and i32 scalars). The kernels:

  mfma_bf16_16x16x32  C[16, 32] = A[16, 64] @ B[32, 64]^T with v_mfma_f32_16x16x32_bf16, 2 waves
  mfma_bf16_32x32x16  C[32, 32] = A[32, 32] @ B[32, 32]^T with v_mfma_f32_32x32x16_bf16, 1 wave
  lane_ops            ds_bpermute, readlane, permlane16/32 swaps, DPP row_shr, a butterfly sum
  lds_waves           LDS write, s_barrier, LDS read of the other wave's data (2 waves)
  buffer_oob          buffer loads / stores whose tail is outside the resource's range
  mfma_fp4_scaled     C[16, 16] = (A*sA)[16, 128] @ (B*sB)[16, 128]^T, FP4 E2M1 with E8M0 scales
  cvt_fp4_bf16        v_cvt_scalef32_pk_bf16_fp4 (8 FP4 -> bf16 per lane) and v_cvt_pk_bf16_f32
"""
import flydsl.compiler as flyc
import flydsl.expr as fx
from flydsl._mlir import ir
from flydsl._mlir.dialects import llvm as _llvm
from flydsl._mlir.dialects import rocdl as _rocdl_ods
from flydsl.expr import gpu, range_constexpr, rocdl
from flydsl.expr.typing import Int32, T, Vector


from .geometry import BLOCKS, block


def _ptr(p, ty, align):
    return fx.recast_iter(fx.PointerType.get(ty, fx.AddressSpace.Global, align), p)


def _ir(v):
    return v.ir_value() if hasattr(v, "ir_value") else v


def _struct_pair(res):
    return (Int32(_llvm.extractvalue(T.i32, res, [0])), Int32(_llvm.extractvalue(T.i32, res, [1])))


# --- bf16 MFMA GEMM tiles ---------------------------------------------------------------------------

@flyc.kernel(name="emu_mfma_bf16_16x16x32")
def mfma16_kernel(a: fx.Pointer, b: fx.Pointer, c: fx.Pointer, k: Int32):
    # one 16x16 output tile per wave; lane l holds A[l % 16, 8*(l // 16) .. +8] of each 32-wide K step
    lane = gpu.thread_idx.x % 64
    col = (gpu.thread_idx.x // 64) * 16 + lane % 16
    pa, pb, pc = _ptr(a, T.bf16, 16), _ptr(b, T.bf16, 16), _ptr(c, T.f32, 4)
    kq = (lane // 16) * 8
    acc = Vector.filled([4], 0.0, fx.Float32)
    for step in range_constexpr(2):
        va = fx.ptr_load(fx.add_offset(pa, (lane % 16) * k + kq + step * 32), T.vec(8, T.bf16))
        vb = fx.ptr_load(fx.add_offset(pb, col * k + kq + step * 32), T.vec(8, T.bf16))
        acc = rocdl.mfma_f32_16x16x32_bf16(T.vec(4, T.f32), [va, vb, acc])
    acc = Vector(acc)
    for i in range_constexpr(4):
        fx.ptr_store(acc[i], fx.add_offset(pc, ((lane // 16) * 4 + i) * 32 + col))


@flyc.jit
def mfma16_launch(a: fx.Pointer, b: fx.Pointer, c: fx.Pointer, k: Int32, stream: fx.Stream = fx.Stream(None)):
    mfma16_kernel(a, b, c, k).launch(grid=(1, 1, 1), block=BLOCKS["mfma_bf16_16x16x32"], stream=stream)


@flyc.kernel(name="emu_mfma_bf16_32x32x16")
def mfma32_kernel(a: fx.Pointer, b: fx.Pointer, c: fx.Pointer, k: Int32):
    # lane l holds A[l % 32, 8*(l // 32) .. +8] of each 16-wide K step; accumulator j of lane l is
    # C[8*(j // 4) + 4*(l // 32) + j % 4, l % 32]
    lane = gpu.thread_idx.x
    pa, pb, pc = _ptr(a, T.bf16, 16), _ptr(b, T.bf16, 16), _ptr(c, T.f32, 4)
    kq = (lane // 32) * 8
    acc = Vector.filled([16], 0.0, fx.Float32)
    for step in range_constexpr(2):
        va = fx.ptr_load(fx.add_offset(pa, (lane % 32) * k + kq + step * 16), T.vec(8, T.bf16))
        vb = fx.ptr_load(fx.add_offset(pb, (lane % 32) * k + kq + step * 16), T.vec(8, T.bf16))
        acc = rocdl.mfma_f32_32x32x16_bf16(T.vec(16, T.f32), [va, vb, acc])
    acc = Vector(acc)
    for j in range_constexpr(16):
        row = (j // 4) * 8 + (lane // 32) * 4 + j % 4
        fx.ptr_store(acc[j], fx.add_offset(pc, row * 32 + lane % 32))


@flyc.jit
def mfma32_launch(a: fx.Pointer, b: fx.Pointer, c: fx.Pointer, k: Int32, stream: fx.Stream = fx.Stream(None)):
    mfma32_kernel(a, b, c, k).launch(grid=(1, 1, 1), block=BLOCKS["mfma_bf16_32x32x16"], stream=stream)


# --- cross-lane operations -----------------------------------------------------------------------

@flyc.kernel(name="emu_lane_ops")
def lane_ops_kernel(x: fx.Pointer, out: fx.Pointer):
    lane = gpu.thread_idx.x
    px, po = _ptr(x, T.i32, 4), _ptr(out, T.i32, 4)
    v = Int32(fx.ptr_load(fx.add_offset(px, lane)))
    w = v + 1000
    i32 = T.i32
    pair = ir.Type.parse("!llvm.struct<(i32, i32)>")
    results = [
        Int32(_rocdl_ods.ds_bpermute(i32, _ir((lane ^ 5) * 4), _ir(v))),
        Int32(_rocdl_ods.readlane(i32, _ir(v), _ir(Int32(7)))),
        *_struct_pair(_rocdl_ods.permlane32_swap(pair, _ir(v), _ir(w), False, False)),
        *_struct_pair(_rocdl_ods.permlane16_swap(pair, _ir(v), _ir(w), False, False)),
        Int32(_rocdl_ods.update_dpp(i32, _ir(Int32(0)), _ir(v), 0x111, 0xF, 0xF, True)),
    ]
    total = v
    for m in (32, 16, 8, 4, 2, 1):
        total = total + Int32(_rocdl_ods.ds_bpermute(i32, _ir((lane ^ m) * 4), _ir(total)))
    results.append(total)
    for i, r in enumerate(results):
        fx.ptr_store(r, fx.add_offset(po, i * 64 + lane))


@flyc.jit
def lane_ops_launch(x: fx.Pointer, out: fx.Pointer, stream: fx.Stream = fx.Stream(None)):
    lane_ops_kernel(x, out).launch(grid=(1, 1, 1), block=BLOCKS["lane_ops"], stream=stream)


# --- LDS across waves ------------------------------------------------------------------------------

LDS_THREADS = 128


@flyc.kernel(name="emu_lds_waves")
def lds_kernel(x: fx.Pointer, out: fx.Pointer):
    t = gpu.thread_idx.x
    base = gpu.block_idx.x * LDS_THREADS
    px, po = _ptr(x, T.f32, 4), _ptr(out, T.f32, 4)
    lds = fx.SharedAllocator().allocate(fx.Array[fx.Float32, LDS_THREADS]).peek().ptr
    fx.ptr_store(fx.ptr_load(fx.add_offset(px, base + t)), fx.add_offset(lds, t))
    gpu.barrier()
    # each thread reads the value its mirror thread (in the other wave) wrote
    mirrored = fx.ptr_load(fx.add_offset(lds, (LDS_THREADS - 1) - t))
    fx.ptr_store(mirrored * 2.0, fx.add_offset(po, base + t))


@flyc.jit
def lds_launch(x: fx.Pointer, out: fx.Pointer, stream: fx.Stream = fx.Stream(None)):
    # the grid here only traces the launch; plan.py sets the real one (one workgroup per 128 values)
    lds_kernel(x, out).launch(grid=(1, 1, 1), block=BLOCKS["lds_waves"], stream=stream)


# --- buffer loads/stores with an out-of-range tail -----------------------------------------------

@flyc.kernel(name="emu_buffer_oob")
def buffer_kernel(x: fx.Pointer, out: fx.Pointer, n_in: Int32, n_out: Int32):
    # every thread reads x[t] and writes out[t]; past n_in the loads return 0, past n_out the
    # stores are dropped, both by the buffer resource's range check
    t = gpu.thread_idx.x
    bx = rocdl.make_buffer_ptr(_ptr(x, T.f32, 4), num_records_bytes=n_in * 4)
    bo = rocdl.make_buffer_ptr(_ptr(out, T.f32, 4), num_records_bytes=n_out * 4)
    rx = rocdl.get_buffer_rsrc(bx)
    ro = rocdl.get_buffer_rsrc(bo)
    zero = _ir(Int32(0))
    val = rocdl.raw_ptr_buffer_load(T.f32, rx, _ir(t * 4), zero, 0)
    val = fx.Float32(val) * 2.0 + 1.0
    _rocdl_ods.raw_ptr_buffer_store(_ir(val), ro, _ir(t * 4), zero)


@flyc.jit
def buffer_launch(x: fx.Pointer, out: fx.Pointer, n_in: Int32, n_out: Int32,
                  stream: fx.Stream = fx.Stream(None)):
    buffer_kernel(x, out, n_in, n_out).launch(grid=(1, 1, 1), block=BLOCKS["buffer_oob"], stream=stream)


# --- scaled FP4 MFMA ----------------------------------------------------------------------------

FP4_K = 128


@flyc.kernel(name="emu_mfma_fp4_scaled")
def fp4_kernel(a: fx.Pointer, b: fx.Pointer, sa: fx.Pointer, sb: fx.Pointer, c: fx.Pointer):
    # lane l holds FP4 A[l % 16, 32*(l // 16) .. +32] (16 bytes) and that block's E8M0 scale; B likewise
    # for column l % 16. The scale bytes sit in byte 1 (A) and byte 2 (B) of their dword, picked by op_sel.
    lane = gpu.thread_idx.x
    row, blk = lane % 16, lane // 16
    pa, pb = _ptr(a, T.i32, 16), _ptr(b, T.i32, 16)
    psa, psb = _ptr(sa, T.i8, 1), _ptr(sb, T.i8, 1)
    pc = _ptr(c, T.f32, 4)
    row_dwords = FP4_K // 8
    va = Vector(fx.ptr_load(fx.add_offset(pa, row * row_dwords + blk * 4), T.vec(4, T.i32)))
    vb = Vector(fx.ptr_load(fx.add_offset(pb, row * row_dwords + blk * 4), T.vec(4, T.i32)))
    zero = Int32(0)
    a8 = Vector.from_elements([va[0], va[1], va[2], va[3], zero, zero, zero, zero], fx.Int32)
    b8 = Vector.from_elements([vb[0], vb[1], vb[2], vb[3], zero, zero, zero, zero], fx.Int32)
    scale_a = Int32(fx.ptr_load(fx.add_offset(psa, row * 4 + blk))) & 0xFF
    scale_b = Int32(fx.ptr_load(fx.add_offset(psb, row * 4 + blk))) & 0xFF
    acc = Vector.filled([4], 0.0, fx.Float32)
    acc = rocdl.mfma_scale_f32_16x16x128_f8f6f4(
        T.vec(4, T.f32), [a8, b8, acc, 4, 4, 1, scale_a << 8, 2, scale_b << 16])
    acc = Vector(acc)
    for i in range_constexpr(4):
        fx.ptr_store(acc[i], fx.add_offset(pc, (blk * 4 + i) * 16 + row))


@flyc.jit
def fp4_launch(a: fx.Pointer, b: fx.Pointer, sa: fx.Pointer, sb: fx.Pointer, c: fx.Pointer,
               stream: fx.Stream = fx.Stream(None)):
    fp4_kernel(a, b, sa, sb, c).launch(grid=(1, 1, 1), block=BLOCKS["mfma_fp4_scaled"], stream=stream)


# --- conversions -------------------------------------------------------------------------------------

@flyc.kernel(name="emu_cvt_fp4_bf16")
def cvt_kernel(packed: fx.Pointer, scales: fx.Pointer, x: fx.Pointer, y: fx.Pointer,
               out_fp4: fx.Pointer, out_pk: fx.Pointer):
    # out_fp4[8t .. 8t+8] = bf16(fp4 nibbles of packed[t] * scales[t]);  out_pk[2t], [2t+1] = bf16(x[t]), bf16(y[t])
    t = gpu.thread_idx.x
    word = Int32(fx.ptr_load(fx.add_offset(_ptr(packed, T.i32, 4), t)))
    scale = fx.Float32(fx.ptr_load(fx.add_offset(_ptr(scales, T.f32, 4), t)))
    po = _ptr(out_fp4, T.i32, 4)
    for sel in range_constexpr(4):
        pair = _rocdl_ods.cvt_scalef32_pk_bf16_fp4(T.vec(2, T.bf16), _ir(word), _ir(scale), sel)
        fx.ptr_store(Int32(_llvm.BitcastOp(T.i32, pair).result), fx.add_offset(po, t * 4 + sel))
    xv = fx.Float32(fx.ptr_load(fx.add_offset(_ptr(x, T.f32, 4), t)))
    yv = fx.Float32(fx.ptr_load(fx.add_offset(_ptr(y, T.f32, 4), t)))
    both = Vector.from_elements([xv, yv], fx.Float32)
    pk = fx.arith.trunc_f(T.vec(2, T.bf16), _ir(both))
    fx.ptr_store(Int32(_llvm.BitcastOp(T.i32, pk).result), fx.add_offset(_ptr(out_pk, T.i32, 4), t))


@flyc.jit
def cvt_launch(packed: fx.Pointer, scales: fx.Pointer, x: fx.Pointer, y: fx.Pointer, out_fp4: fx.Pointer,
               out_pk: fx.Pointer, stream: fx.Stream = fx.Stream(None)):
    cvt_kernel(packed, scales, x, y, out_fp4, out_pk).launch(grid=(1, 1, 1), block=BLOCKS["cvt_fp4_bf16"],
                                                             stream=stream)


_LAUNCHERS = {
    "mfma_bf16_16x16x32": (mfma16_launch, "emu_mfma_bf16_16x16x32"),
    "mfma_bf16_32x32x16": (mfma32_launch, "emu_mfma_bf16_32x32x16"),
    "lane_ops": (lane_ops_launch, "emu_lane_ops"),
    "lds_waves": (lds_launch, "emu_lds_waves"),
    "buffer_oob": (buffer_launch, "emu_buffer_oob"),
    "mfma_fp4_scaled": (fp4_launch, "emu_mfma_fp4_scaled"),
    "cvt_fp4_bf16": (cvt_launch, "emu_cvt_fp4_bf16"),
}


def launcher(params, target):
    block(params, target)
    return _LAUNCHERS[params["kernel"]][0]
