"""Bit-exact numeric formats of gfx950, vectorised with numpy.

Formats (codes are unsigned integer arrays, values float32 unless said otherwise):
- bf16: the upper half of an f32; f32 -> bf16 rounds to nearest even, a NaN stays a NaN with
  its quiet bit set (the ISA's f32_to_bf16).
- f16: IEEE binary16 (numpy's float16 conversion is round-to-nearest-even with subnormals).
- FP8 E4M3 (OCP "E4M3FN", gfx950): bias 7, max 448, NaN = S.1111.111, no infinity.
- BF8 E5M2 (OCP): bias 15, max 57344, inf = S.11111.00, NaN = S.11111.{01,10,11}.
- FP6 E2M3: bias 1, max 7.5; BF6 E3M2: bias 3, max 28; FP4 E2M1: bias 1, max 6
  (values 0 0.5 1 1.5 2 3 4 6); none of the three has inf or NaN.
- E8M0 scale byte e: 2^(e-127); e = 0xFF is NaN.

Narrowing conversions (`encode`) round to nearest even on the format's grid. `saturate=True`
clamps finite overflow and infinities to +-max (what the v_cvt_scalef32_* instructions do, and
v_cvt_pk_fp8/bf8_f32 with the clamp bit); without it an overflow becomes inf (E5M2) or NaN
(E4M3). A NaN input becomes the format's NaN (sign kept), or +max for the formats without NaN.
Scaled conversions work in float64, where multiplying an f32 by 2^(+-254) is exact, so the
only rounding is the final one (a flushed-f32-denormal input is not modelled).

Packing helpers: FP4 puts element 2i in the low nibble of byte i; FP6 packs element i in bits
[6i, 6i+6) of a little-endian bit string (32 elements in 6 dwords).
"""
import numpy as np


class MiniFloat:
    """A narrow binary float format with a 256-entry (or smaller) code table."""

    def __init__(self, name: str, ebits: int, mbits: int, bias: int, inf: bool, nan: str):
        # nan: 'none' (no NaN), 'allones' (S.1..1.1..1 only, E4M3FN), 'ieee' (exp all ones, m != 0)
        self.name, self.ebits, self.mbits, self.bias = name, ebits, mbits, bias
        self.bits = 1 + ebits + mbits
        self.bits_mask = (1 << self.bits) - 1
        self.sign_bit = 1 << (ebits + mbits)
        codes = np.arange(1 << self.bits, dtype=np.int64)
        mag = codes & (self.sign_bit - 1)
        e = mag >> mbits
        m = mag & ((1 << mbits) - 1)
        vals = np.where(e == 0, m * 2.0 ** (1 - bias - mbits),
                        (1 + m / (1 << mbits)) * 2.0 ** (e - bias))
        top = (1 << ebits) - 1
        is_nan = np.zeros_like(codes, dtype=bool)
        is_inf = np.zeros_like(codes, dtype=bool)
        if nan == "allones":
            is_nan = mag == self.sign_bit - 1
        elif nan == "ieee":
            is_nan = (e == top) & (m != 0)
            if inf:
                is_inf = (e == top) & (m == 0)
        vals = np.where(is_inf, np.inf, vals)
        vals = np.where(is_nan, np.nan, vals)
        vals = np.where(codes & self.sign_bit, -vals, vals)
        self.table = vals.astype(np.float64)                  # code -> value (float64, exact)
        self.table32 = self.table.astype(np.float32)
        finite = ~(is_nan | is_inf) & (codes < self.sign_bit)
        self.pos = self.table[finite]                           # non-negative finite values, by code
        self.max = float(self.pos[-1])
        self._bounds = np.append((self.pos[1:] + self.pos[:-1]) / 2,
                                 self.pos[-1] + (self.pos[-1] - self.pos[-2]) / 2)
        self.has_inf, self.has_nan = inf, nan != "none"
        self.nan_code = (self.sign_bit - 1) if nan == "allones" else \
            ((top << mbits) | (1 << (mbits - 1))) if nan == "ieee" else None
        self.inf_code = (top << mbits) if inf else None

    def decode(self, codes) -> np.ndarray:
        """Codes (any unsigned int array) -> float32 values (exact)."""
        return np.take(self.table32, np.bitwise_and(codes, self.bits_mask))

    def decode64(self, codes) -> np.ndarray:
        return np.take(self.table, np.bitwise_and(codes, self.bits_mask))

    def encode(self, x, saturate: bool) -> np.ndarray:
        """Values (float32/float64) -> codes (uint8), round to nearest even."""
        x = np.asarray(x, dtype=np.float64)
        a = np.abs(x)
        # bounds[i] is the midpoint between codes i and i+1; the last one is max + half an ulp,
        # beyond which round-to-nearest-even overflows (n = number of finite magnitudes)
        lo = np.searchsorted(self._bounds, a, side="left")
        hi = np.searchsorted(self._bounds, a, side="right")
        code = np.where(lo == hi, lo, lo + (lo & 1))          # exact midpoint: the even code
        n = len(self.pos)
        if saturate or not self.has_nan:                      # formats without inf/NaN saturate
            code = np.minimum(code, n - 1)
        else:
            code = np.where(code >= n, self.inf_code if self.has_inf else self.nan_code, code)
        code = code | np.where(np.signbit(x), self.sign_bit, 0)
        nan = np.isnan(x)
        if nan.any():
            nan_code = self.nan_code if self.has_nan else n - 1   # no NaN code: +max
            sign = np.where(np.signbit(x), self.sign_bit, 0) if self.has_nan else 0
            code = np.where(nan, nan_code | sign, code)
        return code.astype(np.uint8)


FP8 = MiniFloat("fp8_e4m3", 4, 3, 7, inf=False, nan="allones")
BF8 = MiniFloat("bf8_e5m2", 5, 2, 15, inf=True, nan="ieee")
FP6 = MiniFloat("fp6_e2m3", 2, 3, 1, inf=False, nan="none")
BF6 = MiniFloat("bf6_e3m2", 3, 2, 3, inf=False, nan="none")
FP4 = MiniFloat("fp4_e2m1", 2, 1, 1, inf=False, nan="none")

# MFMA f8f6f4 operand formats, by cbsz (A) / blgp (B) value
F8F6F4 = {0: FP8, 1: BF8, 2: FP6, 3: BF6, 4: FP4}


# ----- bf16 / f16 / f32 bit views -----
def f32_bits(x) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(x, dtype=np.float32)).view(np.uint32)


def bits_f32(u) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(u, dtype=np.uint32)).view(np.float32)


def bf16_to_f32(b) -> np.ndarray:
    return bits_f32(np.asarray(b).astype(np.uint32) << np.uint32(16))


def f32_to_bf16(x) -> np.ndarray:
    """float32 -> bf16 bits (uint16), round to nearest even; NaN -> quiet NaN, sign kept."""
    u = f32_bits(x)
    out = (u + (np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1)))) >> np.uint32(16)
    nan = (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    if nan.any():
        out = np.where(nan, (u >> np.uint32(16)) | np.uint32(0x0040), out)
    return out.astype(np.uint16)


def f16_to_f32(h) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(h).astype(np.uint16)).view(np.float16).astype(np.float32)


def f32_to_f16(x) -> np.ndarray:
    """float32/float64 -> f16 bits (uint16), round to nearest even; overflow gives +-inf."""
    with np.errstate(over="ignore"):
        return np.asarray(x).astype(np.float16).view(np.uint16)


# ----- E8M0 -----
def e8m0_to_f32(e) -> np.ndarray:
    """Scale bytes -> 2^(e-127) as float32 (e=0 is the f32 denormal 2^-127, 0xFF is NaN)."""
    e = np.asarray(e).astype(np.int64) & 0xFF
    v = np.ldexp(1.0, e - 127)
    return np.where(e == 0xFF, np.nan, v).astype(np.float32)


_E8M0_F64 = np.append(np.ldexp(1.0, np.arange(255) - 127), np.nan)


def e8m0_to_f64(e) -> np.ndarray:
    return np.take(_E8M0_F64, np.bitwise_and(e, 0xFF))


def f32_exponent(x_bits) -> np.ndarray:
    """The biased exponent field of f32 bit patterns: the E8M0 scale the v_cvt_scalef32_*
    instructions take from their f32 scale operand (ISA: scale = exponent(S.f32))."""
    return (np.asarray(x_bits, dtype=np.uint32) >> np.uint32(23)) & np.uint32(0xFF)


# ----- scaled conversions (v_cvt_scalef32_*) -----
def scaled_decode(fmt: MiniFloat, codes, scale_e) -> np.ndarray:
    """fmt codes * 2^(scale-127) as float64 (exact); scale 0xFF gives NaN."""
    return fmt.decode64(codes) * e8m0_to_f64(scale_e)


def scaled_encode(fmt: MiniFloat, x, scale_e) -> np.ndarray:
    """x / 2^(scale-127) rounded to fmt (RNE, saturating). A NaN scale gives the format's NaN
    (+max for the formats without one)."""
    return fmt.encode(np.asarray(x, dtype=np.float64) / e8m0_to_f64(scale_e), saturate=True)


def to_f32(x64) -> np.ndarray:
    """float64 -> float32, round to nearest even; beyond the f32 range gives +-inf."""
    with np.errstate(over="ignore"):
        return np.asarray(x64, dtype=np.float64).astype(np.float32)


def to_bf16(x64) -> np.ndarray:
    """float64 values (exact products of a narrow code and a power of two) -> bf16 bits."""
    return f32_to_bf16(to_f32(x64))


def to_f16(x64) -> np.ndarray:
    return f32_to_f16(np.asarray(x64, dtype=np.float64))


# ----- packing -----
def fp4_unpack(byts) -> np.ndarray:
    """uint8 [..., n] -> codes [..., 2n]: element 2i = low nibble of byte i."""
    b = np.asarray(byts, dtype=np.uint8)
    out = np.empty(b.shape[:-1] + (2 * b.shape[-1],), dtype=np.uint8)
    out[..., 0::2] = b & 0xF
    out[..., 1::2] = b >> 4
    return out


def fp4_pack(codes) -> np.ndarray:
    c = np.asarray(codes, dtype=np.uint8)
    return (c[..., 0::2] & 0xF) | ((c[..., 1::2] & 0xF) << 4)


_SIX = (1 << np.arange(6, dtype=np.uint8)).astype(np.uint8)


def fp6_unpack(byts) -> np.ndarray:
    """uint8 [..., 3n] (little-endian bit string) -> 6-bit codes [..., 4n]."""
    b = np.asarray(byts, dtype=np.uint8)
    bits = np.unpackbits(b, axis=-1, bitorder="little")
    bits = bits.reshape(bits.shape[:-1] + (bits.shape[-1] // 6, 6))
    return (bits * _SIX).sum(axis=-1, dtype=np.uint8)


def fp6_pack(codes) -> np.ndarray:
    """6-bit codes [..., 4n] -> uint8 [..., 3n] (element i at bits [6i, 6i+6))."""
    c = np.asarray(codes, dtype=np.uint8)
    bits = np.unpackbits(c[..., None], axis=-1, bitorder="little")[..., :6]
    bits = bits.reshape(c.shape[:-1] + (c.shape[-1] * 6,))
    return np.packbits(bits, axis=-1, bitorder="little")


def dwords_to_bytes(regs) -> np.ndarray:
    """uint32 [d, 64] register rows -> uint8 [64, 4d]: each lane's little-endian byte string."""
    r = np.ascontiguousarray(np.asarray(regs, dtype=np.uint32).T)
    return r.view(np.uint8).reshape(r.shape[0], -1)
