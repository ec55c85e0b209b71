"""Kernel ABI layouts of the FP4 paged MQA logits kernels (docs/families/mqa_decode.md#formats), and test-data makers.

Q values   q_fp4[..., H, D/2]                         natural, nibble-packed
Q scales   q_scale[..., KT, 4, 16, QS_PAD]            byte (kt, g, r, mi) = scale of head 16*mi + r, group 4*kt + g
KV values  kv_cache[page, KT, 4, P, 16]               byte (kt, c, o, j) = byte j of token o's 32-element chunk 4*kt + c
KV scales  kv_scale[page, KT, 4, P]                   byte (kt, c, s(o)),  s(o) = (o % (P/4)) * 4 + o // (P/4)

KT = D / 128. The scale slot s(o) puts the bytes of tokens {x, x + P/4, x + 2P/4, x + 3P/4} into one
aligned dword. This is the formula of the upstream test writer (a (4, P/4) -> (P/4, 4) transpose), which
equals the P=64 reader and makes a P=128 page four equal token groups
(docs/families/mqa_decode.md#decision-page-128-scales).
"""
from dataclasses import dataclass

import torch

from .fp4 import SCALE_GROUP, dequant_mxfp4, quant_mxfp4

K_TILE = 128          # elements per MFMA K step (one "k-tile")
CHUNK_BYTES = 16      # one lane load: 32 FP4 = one 32-element scale group


def k_tiles(head_dim: int) -> int:
    if head_dim % K_TILE:
        raise ValueError(f"head_dim={head_dim} is not a multiple of {K_TILE}")
    return head_dim // K_TILE


def qs_pad(heads: int) -> int:
    """Bytes per (kt, g, r) in the swizzled Q scales: H/16 m-tiles rounded up to whole dwords."""
    if heads % 16:
        raise ValueError(f"heads={heads} is not a multiple of 16")
    return 4 * -(-(heads // 16) // 4)


def swizzle_q_scale(scales: torch.Tensor) -> torch.Tensor:
    """[..., H, D/32] natural E8M0 -> [..., KT, 4, 16, QS_PAD] kernel layout (padding bytes are 0)."""
    *lead, h, groups = scales.shape
    kt, mt, pad = groups // 4, h // 16, qs_pad(h)
    if groups % 4:
        raise ValueError(f"swizzle_q_scale: {groups} scale groups is not a multiple of 4 (D % 128 != 0)")
    s = scales.reshape(*lead, mt, 16, kt, 4)
    n = len(lead)
    s = s.permute(*range(n), n + 2, n + 3, n + 1, n)                    # [..., kt, g, r, mi]
    out = torch.zeros(*lead, kt, 4, 16, pad, dtype=torch.uint8, device=scales.device)
    out[..., :mt] = s
    return out


def unswizzle_q_scale(swizzled: torch.Tensor, heads: int) -> torch.Tensor:
    """Inverse of swizzle_q_scale: [..., KT, 4, 16, QS_PAD] -> [..., H, D/32]."""
    *lead, kt, four, sixteen, pad = swizzled.shape
    mt = heads // 16
    if (four, sixteen, pad) != (4, 16, qs_pad(heads)):
        raise ValueError(f"unswizzle_q_scale: shape {tuple(swizzled.shape)} is not a swizzle for H={heads}")
    s = swizzled[..., :mt]
    n = len(lead)
    s = s.permute(*range(n), n + 3, n + 2, n, n + 1)                    # [..., mi, r, kt, g]
    return s.reshape(*lead, heads, kt * 4).contiguous()


def kv_scale_slot(o, page_size: int):
    """Byte position of token slot o's scale inside its (page, kt, c) row of page_size bytes."""
    q = page_size // 4
    return (o % q) * 4 + o // q


def pack_kv_pages(values: torch.Tensor, scales: torch.Tensor):
    """Natural pages -> kernel layout.

    values [N, P, D/2], scales [N, P, D/32] -> (kv_cache [N, KT, 4, P, 16], kv_scale [N, KT, 4, P]).
    """
    n, p, half = values.shape
    kt = k_tiles(2 * half)
    if p % 4 or scales.shape != (n, p, half // 16):
        raise ValueError(f"pack_kv_pages: values {tuple(values.shape)} / scales {tuple(scales.shape)} mismatch")
    cache = values.reshape(n, p, kt, 4, CHUNK_BYTES).permute(0, 2, 3, 1, 4).contiguous()
    s = scales.reshape(n, p, kt, 4).permute(0, 2, 3, 1)                 # [N, kt, c, o]
    s = s.reshape(n, kt, 4, 4, p // 4).transpose(-1, -2)               # o = q*(P/4) + x  ->  slot x*4 + q
    return cache, s.reshape(n, kt, 4, p).contiguous()


def unpack_kv_pages(kv_cache: torch.Tensor, kv_scale: torch.Tensor):
    """Inverse of pack_kv_pages (accepts strided page views): -> (values [N, P, D/2], scales [N, P, D/32])."""
    n, kt, four, p, sixteen = kv_cache.shape
    values = kv_cache.permute(0, 3, 1, 2, 4).reshape(n, p, kt * 4 * CHUNK_BYTES)
    slot = kv_scale_slot(torch.arange(p, device=kv_scale.device), p)
    scales = kv_scale[..., slot].permute(0, 3, 1, 2).reshape(n, p, kt * 4)
    return values, scales


def token_pages(table_row, n_tokens: int, page_size: int, num_pages: int):
    """(page id, valid) per logical page of a sequence's first n_tokens tokens: a logical page is valid
    when it is a column of the table row and its entry names one of the num_pages pages (the kernels
    score the tokens of an invalid page -inf and never read it). Invalid pages get id 0."""
    n_pg = max(0, -(-n_tokens // page_size))
    width = table_row.shape[0]
    entry = torch.zeros(n_pg, dtype=torch.long)
    entry[: min(width, n_pg)] = table_row[:n_pg].cpu().long()
    ok = (torch.arange(n_pg) < width) & (entry >= 0) & (entry < num_pages)
    return torch.where(ok, entry, torch.zeros_like(entry)), ok


def valid_tokens(table_row, n_tokens: int, page_size: int, num_pages: int) -> torch.Tensor:
    """bool [n_tokens]: the tokens whose page is valid (token_pages)."""
    _, ok = token_pages(table_row, n_tokens, page_size, num_pages)
    return ok.repeat_interleave(page_size)[:max(n_tokens, 0)]


def gather_tokens(kv_cache, kv_scale, table_row, n_tokens: int) -> torch.Tensor:
    """Float32 keys [n_tokens, D] of one sequence: logical token t lives in page table_row[t // P], slot t % P
    (zero keys for the tokens of an invalid page, see token_pages)."""
    p = kv_cache.shape[3]
    d = kv_cache.shape[1] * K_TILE
    if n_tokens <= 0:
        return torch.zeros(0, d, dtype=torch.float32, device=kv_cache.device)
    pages, ok = token_pages(table_row, n_tokens, p, kv_cache.shape[0])
    keys = torch.zeros(pages.shape[0], p, d, dtype=torch.float32)
    if ok.any():
        sel = pages[ok].to(kv_cache.device)
        values, scales = unpack_kv_pages(kv_cache[sel], kv_scale[sel])
        keys[ok] = dequant_mxfp4(values, scales).reshape(-1, p, d).cpu()
    return keys.reshape(-1, d)[:n_tokens].to(kv_cache.device)


def dequant_q(q_fp4: torch.Tensor, q_scale: torch.Tensor) -> torch.Tensor:
    """Float32 Q [..., H, D] from packed values and swizzled scales."""
    return dequant_mxfp4(q_fp4, unswizzle_q_scale(q_scale, q_fp4.shape[-2]))


# ----------------------------------------------------------------------------------------------- test data

def _mx_source(shape, generator, device="cpu") -> torch.Tensor:
    """Random values whose 32-groups span a few binades (so scales differ), with some exact zeros."""
    x = torch.randn(*shape, generator=generator)
    groups = x.reshape(*shape[:-1], shape[-1] // SCALE_GROUP, SCALE_GROUP)
    gain = torch.exp2(torch.randint(-3, 3, groups.shape[:-1] + (1,), generator=generator).float())
    x = (groups * gain).reshape(shape)
    x[torch.rand(*shape, generator=generator) < 0.05] = 0.0
    return x.to(device)


def make_q(lead: tuple, heads: int, head_dim: int, generator: torch.Generator):
    """Quantized Q: (q_fp4 [*lead, H, D/2], q_scale swizzled [*lead, KT, 4, 16, QS_PAD])."""
    values, scales = quant_mxfp4(_mx_source((*lead, heads, head_dim), generator))
    return values, swizzle_q_scale(scales)


def strided_pages(pages: torch.Tensor, page_stride: int, offset: int = 0, pool: torch.Tensor = None):
    """Place contiguous uint8 pages [N, ...] into a byte pool with page stride `page_stride` bytes starting
    at `offset`, returning the strided view (what a shared-pool cache hands the kernel)."""
    n = pages.shape[0]
    page_bytes = pages[0].numel()
    if page_stride < page_bytes:
        raise ValueError(f"strided_pages: page stride {page_stride} < page bytes {page_bytes}")
    if pool is None:
        pool = torch.randint(0, 256, (offset + n * page_stride,), dtype=torch.uint8)
    inner = pages.contiguous().stride()[1:]
    view = pool.as_strided(pages.shape, (page_stride,) + inner, offset)
    view.copy_(pages)
    return view


def shared_pool(kv_cache: torch.Tensor, kv_scale: torch.Tensor, gap: int = 0):
    """Values and scales as two views into one allocation: per page [values | scales | gap bytes]
    (the vLLM zero-copy value/scale layout). Returns (kv_cache_view, kv_scale_view)."""
    n = kv_cache.shape[0]
    v_bytes, s_bytes = kv_cache[0].numel(), kv_scale[0].numel()
    stride = v_bytes + s_bytes + gap
    pool = torch.randint(0, 256, (n * stride,), dtype=torch.uint8)
    return (strided_pages(kv_cache, stride, 0, pool), strided_pages(kv_scale, stride, v_bytes, pool))


@dataclass
class PagedKV:
    kv_cache: torch.Tensor       # [num_pages, KT, 4, P, 16] uint8 (possibly a strided view)
    kv_scale: torch.Tensor       # [num_pages, KT, 4, P] uint8 (possibly a strided view)
    block_tables: torch.Tensor   # [B, width] int32; entries past a sequence's last page hold `pad_value`


def make_paged_kv(context_lens, head_dim: int, page_size: int, generator: torch.Generator, *,
                  table_width: int = None, spare_pages: int = 3, pad_value: int = 0x7FFFFFFF) -> PagedKV:
    """Random paged FP4 KV for the given context lengths: every sequence gets ceil(ctx/P) distinct pages
    in a shuffled pool (plus spare pages nobody owns); slots past ctx in a last page hold random data.
    Table entries past a sequence's last page are `pad_value` so an unclamped read is caught."""
    ctx = [int(c) for c in context_lens]
    need = [-(-c // page_size) for c in ctx]
    width = table_width if table_width is not None else max(1, max(need, default=1))
    if width < max(need, default=0):
        raise ValueError(f"make_paged_kv: table width {width} < pages needed {max(need)}")
    num_pages = sum(need) + spare_pages
    values, scales = quant_mxfp4(_mx_source((num_pages, page_size, head_dim), generator))
    kv_cache, kv_scale = pack_kv_pages(values, scales)
    perm = torch.randperm(num_pages, generator=generator)
    tables = torch.full((len(ctx), width), pad_value, dtype=torch.int32)
    used = 0
    for b, k in enumerate(need):
        tables[b, :k] = perm[used:used + k].to(torch.int32)
        used += k
    return PagedKV(kv_cache, kv_scale, tables)
