"""gfx950 (CDNA4, MI355X) timing constants for the emulator's timing model.

Every number's source (public spec, ISA guide, or "assumption"/"fitted") is listed in
docs/timing-model.md; the names here are the ones that document uses. Cycles are shader-clock cycles.
"""

# ----- the part -----
CLOCK_HZ = 2.4e9            # MI355X peak engine clock
XCDS = 8
CUS_PER_XCD = 32
CUS = XCDS * CUS_PER_XCD
SIMDS_PER_CU = 4
MAX_WAVES_PER_SIMD = 8
VGPRS_PER_SIMD_LANE = 512   # unified ArchVGPR + AccVGPR file, registers per lane
VGPR_GRANULE = 8
SGPRS_PER_SIMD = 800
SGPR_GRANULE = 16
LDS_BYTES_PER_CU = 160 * 1024
HBM_BYTES_PER_S = 8.0e12
L2_BYTES_PER_CLK_PER_CU = 64       # one CU's L1 <-> L2 request path (2048 B/clk per XCD / 32 CUs)
L1_BYTES_PER_CLK_PER_CU = 64       # vector L1 data return per CU
L1_BYTES_PER_CU = 32 * 1024        # vector L1 per CU
L2_BYTES_PER_XCD = 4 * 1024 * 1024
MALL_BYTES = 256 * 1024 * 1024     # Infinity Cache (memory-attached last level), shared by all XCDs
MALL_BYTES_PER_S = 17.2e12         # its peak bandwidth (the CDNA 3 figure, assumed for CDNA 4)

# ----- issue -----
ISSUE_CYCLES = 4            # a SIMD offers each wave an issue slot once per 4 cycles
WAIT_STATE_CYCLES = 4       # one s_nop wait state = one issue slot
VALU_CYCLES = 4             # wave64 over a 16-lane SIMD: 4 passes of 16 lanes
PACKED_F32_PER_LANE = 2     # f32 results per lane of a packed VALU op (v_pk_fma_f32, v_pk_mul_f32) at that rate
VALU_TRANS_CYCLES = 8       # transcendentals (CDNA4 doubled the CDNA3 quarter rate)
VALU_QUARTER_CYCLES = 16    # 32-bit integer multiplies, 64-bit integer multiply-add
VALU_64BIT_CYCLES = 8       # 64-bit integer shifts/adds (two dword passes)
VALU_CROSSLANE_CYCLES = 8   # v_permlane*_swap, DPP row broadcasts
SALU_CYCLES = 4
BRANCH_TAKEN_CYCLES = 16    # instruction-buffer refill after a taken branch
BARRIER_CYCLES = 16         # release of a workgroup barrier once the last wave arrives

# ----- MFMA: peak dense FLOPs per clock per SIMD, by operand format -----
MFMA_FLOPS_PER_CLK_PER_SIMD = {
    "fp4": 4096, "fp6": 4096, "fp8": 2048, "i8": 2048,
    "bf16": 1024, "f16": 1024, "f32": 64, "f64": 32, "xf32": 256,
}
MFMA_MIN_CYCLES = 4         # one pass
MFMA_F8F6F4_FORMATS = {0: "fp8", 1: "fp8", 2: "fp6", 3: "fp6", 4: "fp4"}   # cbsz / blgp codes

# ----- memory -----
SMEM_HIT_CYCLES = 48        # scalar L1 hit
L1_HIT_CYCLES = 120         # vector load that hits the CU's L1
L2_HIT_CYCLES = 300         # vector load that hits its XCD's L2
MALL_CYCLES = 500           # vector load that misses L2 and hits the Infinity Cache
HBM_CYCLES = 800            # vector load that misses to HBM
STORE_ACK_CYCLES = 300      # vmcnt release of a store (L2 write acknowledge)
CACHE_LINE_BYTES = 128
LDS_BANKS = 32
LDS_BANK_BYTES = 4
LDS_CYCLES = 64             # LDS access latency with no conflict
LDS_MIN_CYCLES = 2          # LDS pipe time of a conflict-free wave64 dword access (2 x 32 lanes)

# ----- fitted global parameters (benchmarks/gfx950_model.py, fit half of the seed rows) -----
LAUNCH_US = 1.2             # fixed cost per op call (dispatch, ramp-up, end of kernel, auxiliary kernels)
MEM_LATENCY_SCALE = 0.5     # multiplies the L1 / L2 / MALL / HBM / store latencies
BANDWIDTH_EFFICIENCY = 0.9  # achieved share of every level's peak bandwidth
VALU_SCALE = 1.0            # multiplies the VALU cycle table
SCALED_CVT_CYCLES = 16      # VALU cycles of one v_cvt_scalef32_* (MX block-scaled conversion), not scaled
EAGER_HOST_US = 5.5         # not part of the model: the host cost of an eager launch in the GEMM seed table
WORKGROUP_DISPATCH_CYCLES = 100   # a CU starts the next workgroup this long after a slot frees

# ----- validation (benchmarks/gfx950_model.py, held-out half of the seed rows) -----
# family -> (geometric-mean |error|, max |error|) of the modeled upstream kernels against MI355X
VALIDATION = {'decode': (0.053, 0.098), 'prefill': (0.125, 0.257), 'gemm': (0.145, 0.201)}
