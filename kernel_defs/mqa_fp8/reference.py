"""Torch references of the FP8 MQA logits ops and the paged-cache writer (docs/families/mqa_fp8.md#operation).

The cache layout is aiter's: page j of kv_cache [N, P, 1, D + 4] uint8 holds P*D E4M3 values (token-major,
or in the preshuffled layout) and then P f32 scales, one per token; a token's key is values * scale.
Scores: L[r, t] = sum_h w[r, h] * relu(q[r, h] . k[t]), computed in float64.
"""
import torch

FP8 = torch.float8_e4m3fn
FP8_MAX_USED = 240.0        # the writer scales each token's amax to this (aiter's test writer)


def write_paged_cache(keys: torch.Tensor) -> torch.Tensor:
    """keys [N, P, 1, D] float -> kv_cache [N, P, 1, D + 4] uint8: per-token scale amax / 240, values
    keys / scale in E4M3, then the P scales as f32 bytes after the page's values."""
    n, p, one, d = keys.shape
    if one != 1:
        raise ValueError("keys: dim 2 must be 1 (one KV head)")
    scale = keys.abs().float().amax(dim=3, keepdim=True).clamp(1e-4) / FP8_MAX_USED
    values = (keys.float() / scale).to(FP8)
    page = torch.empty((n, p * (d + 4)), dtype=torch.uint8)
    page[:, :p * d] = values.reshape(n, p * d).view(torch.uint8)
    page[:, p * d:] = scale.reshape(n, p).contiguous().view(torch.uint8)
    return page.view(n, p, 1, d + 4)


def shuffle_values(values: torch.Tensor) -> torch.Tensor:
    """aiter's shuffle_weight, layout (16, 16), of one-byte values [..., P, D]: each 16-token x 32-byte
    block becomes [2][16 tokens][16 bytes], i.e. a 16-token tile is stored [D / 16][token][D % 16]."""
    *lead, p, d = values.shape
    x = values.reshape(-1, p // 16, 16, d // 32, 2, 16).permute(0, 1, 3, 4, 2, 5)
    return x.contiguous().reshape(*lead, p, d)


def unshuffle_values(values: torch.Tensor) -> torch.Tensor:
    *lead, p, d = values.shape
    x = values.reshape(-1, p // 16, d // 32, 2, 16, 16).permute(0, 1, 4, 2, 3, 5)
    return x.contiguous().reshape(*lead, p, d)


def preshuffle_cache(kv_cache: torch.Tensor) -> torch.Tensor:
    """A copy of a plain cache with each page's values preshuffled (aiter's test does this in place)."""
    n, p, _, dd = kv_cache.shape
    d = dd - 4
    page = kv_cache.reshape(n, p * dd).clone()
    page[:, :p * d] = shuffle_values(page[:, :p * d].reshape(n, p, d)).reshape(n, p * d)
    return page.view(n, p, 1, dd)


def dequant_pages(kv_cache: torch.Tensor, preshuffled: bool = False) -> torch.Tensor:
    """kv_cache [N, P, 1, D + 4] -> float64 keys [N, P, D] (values * per-token scale)."""
    n, p, _, dd = kv_cache.shape
    d = dd - 4
    page = kv_cache.contiguous().view(torch.uint8).reshape(n, p * dd)
    values = page[:, :p * d].reshape(n, p, d)
    if preshuffled:
        values = unshuffle_values(values)
    scale = page[:, p * d:].contiguous().view(torch.float32).reshape(n, p, 1)
    return values.view(FP8).double() * scale.double()


def visible_mask(context_lens, next_n: int, max_model_len: int) -> torch.Tensor:
    """Bool [B*next_n, max_model_len]: row b*next_n + i sees t <= context_lens[b] - next_n + i."""
    ctx = torch.as_tensor(context_lens).long().cpu()
    limit = (ctx.unsqueeze(1) - next_n + 1 + torch.arange(next_n)).reshape(-1)
    return torch.arange(max_model_len).unsqueeze(0) < limit.unsqueeze(1)


def paged_logits_reference(q, keys, weights, context_lens, block_tables, max_model_len: int) -> torch.Tensor:
    """q [B, next_n, H, D] (any float dtype, FP8 included), keys [N, P, D] float (dequant_pages, or the
    unquantized keys), weights [B*next_n, H] -> float32 [B*next_n, max_model_len]; hidden cells and
    visible tokens of invalid pages (past the table width, an entry outside [0, N)) are -inf."""
    batch, next_n = q.shape[:2]
    num_pages, p, _ = keys.shape
    out = torch.full((batch * next_n, max_model_len), float("-inf"), dtype=torch.float32)
    mask = visible_mask(context_lens, next_n, max_model_len)
    ctx = torch.as_tensor(context_lens).tolist()
    bt = block_tables.cpu().long()
    for b in range(batch):
        n_tok = min(int(ctx[b]), max_model_len)
        if n_tok <= 0:
            continue
        t = torch.arange(n_tok)
        col = t // p
        in_table = col < bt.shape[1]
        page = torch.where(in_table, bt[b, col.clamp_max(bt.shape[1] - 1)] if bt.shape[1] else col, 0)
        ok = in_table & (page >= 0) & (page < num_pages)
        k = keys[page.clamp(0, max(num_pages - 1, 0)), t % p].double() if num_pages else torch.zeros(n_tok, q.shape[-1])
        rows = slice(b * next_n, (b + 1) * next_n)
        s = torch.einsum("nhd,td->nht", q[b].double(), k.double())
        logits = (s.clamp_min(0) * weights[rows].double().unsqueeze(-1)).sum(dim=1).float()
        out[rows, :n_tok] = logits.masked_fill(~ok, float("-inf"))
    return out.masked_fill(~mask, float("-inf"))


def diff(x: torch.Tensor, y: torch.Tensor, visible: torch.Tensor) -> float:
    """DeepGEMM's metric over visible cells: 1 - 2 sum(xy) / sum(x^2 + y^2) (hidden cells zeroed)."""
    x = x.double().masked_fill(~visible, 0)
    y = y.double().masked_fill(~visible, 0)
    den = (x * x + y * y).sum()
    return 0.0 if den == 0 else float(1 - 2 * (x * y).sum() / den)


def ragged_logits_reference(q, keys, weights, cu_starts, cu_ends) -> torch.Tensor:
    """q [S, H, D] float, keys [S_kv, D] float (KV * kv_scales, or unquantized), weights [S, H] -> float32
    [S, S_kv]: row i scores t in [cu_starts[i], cu_ends[i]), -inf elsewhere."""
    s = torch.einsum("shd,td->sht", q.double(), keys.double())
    logits = (s.clamp_min(0) * weights.double().unsqueeze(-1)).sum(dim=1).float()
    t = torch.arange(keys.shape[0])
    window = (t >= cu_starts.long().unsqueeze(1)) & (t < cu_ends.long().unsqueeze(1))
    return logits.masked_fill(~window, float("-inf"))
