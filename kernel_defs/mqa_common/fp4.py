"""MXFP4 numerics (docs/families/mxfp4.md), written from the format definition.

E2M1 code c = s e1 e0 m; E8M0 byte e means 2^(e-127) (0xFF is NaN); one scale per 32 consecutive
elements along the reduction axis; element 2i in the low nibble of byte i.
"""
import torch

SCALE_GROUP = 32

# Magnitudes of the 8 non-negative codes; bit 3 negates.
_MAGNITUDES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
E2M1_VALUES = torch.tensor(list(_MAGNITUDES) + [-m for m in _MAGNITUDES], dtype=torch.float32)
E2M1_MAX = 6.0


def e2m1_decode(codes: torch.Tensor) -> torch.Tensor:
    """Float32 value of each 4-bit code (low nibble of a uint8 tensor)."""
    return E2M1_VALUES.to(codes.device)[(codes & 0xF).long()]


def e8m0_to_f32(e: torch.Tensor) -> torch.Tensor:
    """2^(e-127) exactly in float32 (e=0 is the denormal 2^-127), NaN for 0xFF."""
    out = torch.ldexp(torch.ones(e.shape, dtype=torch.float64, device=e.device), e.long() - 127)
    out = out.to(torch.float32)
    return torch.where(e == 0xFF, torch.full_like(out, float("nan")), out)


def unpack_nibbles(packed: torch.Tensor) -> torch.Tensor:
    """[..., n] uint8 -> [..., 2n] codes; element 2i from the low nibble of byte i."""
    lo = packed & 0xF
    hi = packed >> 4
    return torch.stack((lo, hi), dim=-1).flatten(-2)


def pack_nibbles(codes: torch.Tensor) -> torch.Tensor:
    """[..., 2n] codes -> [..., n] uint8 (inverse of unpack_nibbles)."""
    if codes.shape[-1] % 2:
        raise ValueError(f"pack_nibbles: last dim {codes.shape[-1]} is odd")
    c = codes.to(torch.uint8) & 0xF
    return (c[..., 0::2] | (c[..., 1::2] << 4)).contiguous()


def dequant_mxfp4(packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """Exact float32 values of [..., D/2] packed codes with [..., D/32] E8M0 scales."""
    vals = e2m1_decode(unpack_nibbles(packed))
    d = vals.shape[-1]
    if scales.shape[-1] * SCALE_GROUP != d or scales.shape[:-1] != packed.shape[:-1]:
        raise ValueError(f"dequant_mxfp4: scales {tuple(scales.shape)} do not match values {tuple(packed.shape)}")
    grouped = vals.reshape(*vals.shape[:-1], d // SCALE_GROUP, SCALE_GROUP)
    return (grouped * e8m0_to_f32(scales).unsqueeze(-1)).reshape(vals.shape)


def _nearest_code(x: torch.Tensor) -> torch.Tensor:
    """Code of the E2M1 value nearest to x (x already scaled into [-6, 6]); ties to the smaller magnitude."""
    mags = torch.tensor(_MAGNITUDES, dtype=torch.float32, device=x.device)
    idx = (x.abs().unsqueeze(-1) - mags).abs().argmin(dim=-1)   # argmin keeps the first (smaller) on ties
    sign = (x < 0) & (idx > 0)                                   # no -0 codes: zero is always 0x0
    return (idx | (sign.long() << 3)).to(torch.uint8)


def quant_mxfp4(x: torch.Tensor):
    """MX quantizer (docs/families/mxfp4.md#quantizer): per 32-group e = clamp(ceil(log2(amax/6)) + 127, 0, 254),
    values rounded to the nearest E2M1 grid point. Returns (packed [..., D/2] uint8, scales [..., D/32] uint8)."""
    d = x.shape[-1]
    if d % SCALE_GROUP:
        raise ValueError(f"quant_mxfp4: last dim {d} is not a multiple of {SCALE_GROUP}")
    g = x.float().reshape(*x.shape[:-1], d // SCALE_GROUP, SCALE_GROUP)
    amax = g.abs().amax(dim=-1, keepdim=True).clamp(min=1e-8)
    e = (torch.ceil(torch.log2(amax / E2M1_MAX)) + 127).clamp(0, 254)
    scaled = g / torch.ldexp(torch.ones_like(e, dtype=torch.float64), e.long() - 127).float()
    codes = _nearest_code(scaled).reshape(x.shape)
    return pack_nibbles(codes), e.squeeze(-1).to(torch.uint8).contiguous()
