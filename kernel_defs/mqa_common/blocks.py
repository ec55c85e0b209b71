"""FlyDSL building blocks of the FP4 MQA logits kernels (imports flydsl: use only from kernel.py files).

Thin, explicit wrappers over the ROCDL/LLVM dialects so the kernels say exactly which instruction they
want: buffer resources rebased with a 64-bit byte offset (page and row bases), raw buffer loads/stores
with a byte voffset, LDS loads/stores at byte offsets, the scaled FP4 MFMA with byte-select scales,
and lane exchange. Values cross these helpers as raw MLIR values or FlyDSL numerics; `ir_of` unwraps.
"""
import flydsl.expr as fx
from flydsl._mlir import ir
from flydsl._mlir.dialects import llvm
from flydsl._mlir.dialects import rocdl as rocdl_ods
from flydsl.expr import rocdl
from flydsl.expr.typing import Int32, Int64

FP4_FORMAT = 4          # cbsz / blgp value selecting E2M1 operands


def ir_of(v):
    """Raw MLIR value of a FlyDSL numeric/vector or a Python int (materialized as i32)."""
    if isinstance(v, int):
        return Int32(v).ir_value()
    if isinstance(v, ir.Value):
        return v
    return v.ir_value()


def i32_type():
    return ir.IntegerType.get_signless(32)


def vec_type(n: int, elem=None):
    return ir.VectorType.get([n], elem if elem is not None else i32_type())


def _dword_type(dwords: int):
    return i32_type() if dwords == 1 else vec_type(dwords)


# ------------------------------------------------------------------------------------------ global memory

def buffer_rsrc(ptr, byte_offset=None, num_records=None):
    """Buffer resource over global `ptr` + `byte_offset` (Int64, 64-bit arithmetic; must be wave-uniform).

    `num_records` bytes bound the accesses (out-of-range loads return 0 and stores are dropped);
    None means the full 32-bit range. A bound of 0 turns every access off without a branch.
    """
    base = ptr if byte_offset is None else fx.add_offset(ptr, byte_offset)
    if num_records is not None and not isinstance(num_records, Int64):
        num_records = Int64(num_records)
    return rocdl.get_buffer_rsrc(rocdl.make_buffer_ptr(base, num_records_bytes=num_records))


def buffer_load(rsrc, voffset, dwords: int, soffset=0):
    """`dwords` (1, 2 or 4) consecutive dwords at byte offset voffset + soffset: buffer_load_dword{,x2,x4}."""
    return rocdl.raw_ptr_buffer_load(_dword_type(dwords), rsrc, ir_of(voffset), ir_of(soffset), 0)


def buffer_store(value, rsrc, voffset, soffset=0):
    rocdl_ods.raw_ptr_buffer_store(ir_of(value), rsrc, ir_of(voffset), ir_of(soffset),
                                   aux=ir.IntegerAttr.get(i32_type(), 0))


# -------------------------------------------------------------------------------------------------- LDS

def lds_alloc(nbytes: int):
    """One static LDS block of `nbytes` (16-byte aligned) as an !llvm.ptr<3>."""
    return fx.to_llvm_ptr(fx.SharedAllocator().allocate(nbytes)._ptr)


def _lds_at(base, byte_offset):
    i8 = ir.IntegerType.get_signless(8)
    return llvm.getelementptr(base.type, base, [ir_of(byte_offset)], [-2147483648], i8, None)


def lds_load(base, byte_offset, dwords: int):
    """ds_read_b{32,64,128} of `dwords` at `byte_offset` (aligned to the access size)."""
    return llvm.load(_dword_type(dwords), _lds_at(base, byte_offset), alignment=4 * dwords)


def lds_store(base, byte_offset, value, dwords: int):
    llvm.store(ir_of(value), _lds_at(base, byte_offset), alignment=4 * dwords)


# ------------------------------------------------------------------------------------------------ compute

def mfma_fp4(acc, a, b, scale_a, opsel_a: int, scale_b, opsel_b: int):
    """v_mfma_scale_f32_16x16x128_f8f6f4 with FP4 A and B: acc (v4f32) += A(16x128) * B(128x16).

    a, b: v4i32 (32 FP4 per lane); scale_a/scale_b: i32 whose byte `opsel_*` is the lane's E8M0 scale.
    """
    f32 = ir.F32Type.get()
    return rocdl.mfma_scale_f32_16x16x128_f8f6f4(
        vec_type(4, f32), [ir_of(a), ir_of(b), ir_of(acc), FP4_FORMAT, FP4_FORMAT,
                           opsel_a, ir_of(scale_a), opsel_b, ir_of(scale_b)])


def readlane(value, lane):
    """v_readlane_b32: the i32 `value` of lane `lane` (wave-uniform) as a scalar."""
    return rocdl.readlane(i32_type(), value, lane)


def readfirstlane(value):
    return rocdl.readfirstlane(i32_type(), value)


def lane_xor_add_f32(value, lane_id, mask: int):
    """value + value of lane (lane_id ^ mask), via ds_bpermute_b32 (f32 in and out)."""
    v = fx.Float32(value) if not isinstance(value, fx.Float32) else value
    peer = (lane_id ^ Int32(mask)) * Int32(4)
    got = rocdl.ds_bpermute(i32_type(), ir_of(peer), v.bitcast(Int32).ir_value())
    return v + Int32(got).bitcast(fx.Float32)


def _permlane_swap(op, a, b):
    i32 = i32_type()
    pair = op(llvm.StructType.get_literal([i32, i32]), ir_of(a), ir_of(b), False, False)
    return Int32(llvm.extractvalue(i32, pair, [0])), Int32(llvm.extractvalue(i32, pair, [1]))


def permlane32_swap(a, b):
    """v_permlane32_swap_b32 on i32 values: returns (a', b') = ([a_lo, b_lo], [a_hi, b_hi]) in 32-lane halves."""
    return _permlane_swap(rocdl_ods.permlane32_swap, a, b)


def permlane16_swap(a, b):
    """v_permlane16_swap_b32 on i32 values: with rows of 16 lanes, a' = [a0, b0, a2, b2], b' = [a1, b1, a3, b3]."""
    return _permlane_swap(rocdl_ods.permlane16_swap, a, b)


def sum_over_lane_groups(parts):
    """Sum each f32 register of `parts` (2 or 4) over the four 16-lane groups (rows) of the wave.

    Returns one f32 in which lane (row g, r) holds the total of parts[g * len(parts) // 4] at r: two
    permlane swaps per pair of registers replace four lane-exchange reductions (VALU only, no LDS pipe).
    """
    def add_swapped(swap, a, b):
        x, y = swap(fx.Float32(a).bitcast(Int32), fx.Float32(b).bitcast(Int32))
        return x.bitcast(fx.Float32) + y.bitcast(fx.Float32)

    if len(parts) == 2:
        t = add_swapped(permlane32_swap, parts[0], parts[1])     # rows 0,1: parts[0]; rows 2,3: parts[1]
        return add_swapped(permlane16_swap, t, t)
    if len(parts) == 4:
        t = add_swapped(permlane32_swap, parts[0], parts[2])     # rows 0,1: parts[0]; rows 2,3: parts[2]
        u = add_swapped(permlane32_swap, parts[1], parts[3])
        return add_swapped(permlane16_swap, t, u)
    raise ValueError(f"sum_over_lane_groups: {len(parts)} registers (2 or 4 supported)")


def scalar_load(ptr, dword_index, count: int, byte_offset=None, num_records=None):
    """s_buffer_load_dword{,x4} of wave-uniform data at dword `dword_index` of global `ptr` + `byte_offset`
    (Int64, wave-uniform; folded into the descriptor base in 64-bit arithmetic). `num_records` bytes
    bound the access as in buffer_rsrc (out-of-range dwords read 0).

    Returns a list of `count` Int32 scalars.
    """
    base = ptr if byte_offset is None else fx.add_offset(ptr, byte_offset)
    if num_records is not None and not isinstance(num_records, Int64):
        num_records = Int64(num_records)
    v = rocdl.s_buffer_load(rocdl.make_buffer_ptr(base, num_records_bytes=num_records), dword_index, count=count)
    return [v] if count == 1 else [Int32(fx.Vector(v)[i]) for i in range(count)]


def bf16x2_to_f32(dword):
    """The two bf16 halves of an i32 as (low, high) f32 (a bf16 is the top half of its f32)."""
    d = Int32(dword)
    return (d << Int32(16)).bitcast(fx.Float32), (d & Int32(-65536)).bitcast(fx.Float32)
