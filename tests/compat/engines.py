"""The serving engines' inputs, rebuilt from their descriptions (our own code): SGLang's FP4 indexer
row-expanded layout and its one-row-per-CTA prefill table builder, as plain Python."""
import torch

from flyaot.kernel_defs.mqa_common import layouts

HEADS, HEAD_DIM, PAGE = 64, 128, 64


def indexer_problem(seed, c4_seq_lens, *, table_width=None):
    """SGLang's decode/prefill indexer inputs: one row per query token, each with its own page-table
    row. The table is padded with zero entries to max(4, a multiple of 4) pages, as SGLang pads it;
    returns (args, logical_width) where args holds the tensors in the op's positional order."""
    g = torch.Generator().manual_seed(seed)
    rows = len(c4_seq_lens)
    kv = layouts.make_paged_kv(c4_seq_lens, HEAD_DIM, PAGE, g, table_width=table_width)
    q, qs = layouts.make_q((rows,), HEADS, HEAD_DIM, g)
    w = (torch.randn(rows, HEADS, generator=g) * 0.5).to(torch.bfloat16)
    logical = kv.block_tables.shape[1]
    padded = max(4, -(-logical // 4) * 4)
    table = torch.zeros(rows, padded, dtype=torch.int32)
    table[:, :logical] = torch.where(kv.block_tables == 0x7FFFFFFF, 0, kv.block_tables)
    return dict(q=q, qs=qs, kv=kv.kv_cache, ks=kv.kv_scale, table=table, w=w,
                lens=torch.tensor(c4_seq_lens, dtype=torch.int32)), logical


def row_table(local_ends, block_k, slots, max_seq_len):
    """SGLang's prefill schedule (identity row_to_batch, zero local starts) in upstream's 6-int format:
    row r has ceil(le / block_k) chunks; the smallest run length s whose total run count fits the slots
    (else the longest row's chunk count); runs in row order, one slot each; idle slots (0,0,0,1,0,0)."""
    le = [int(x) for x in local_ends]
    chunks = [max(x, 0) // block_k + (max(x, 0) % block_k > 0) for x in le]
    s_max = max(1, -(-max_seq_len // block_k))
    fits = [s for s in range(1, s_max + 1) if sum(-(-c // s) for c in chunks) <= slots]
    safe = fits[0] if fits else max(max(chunks), 1)
    table = []
    for r, c in enumerate(chunks):
        for start in range(0, c, safe):
            table.append([r, r, start, min(safe, c - start), 0, le[r]])
    table = table[:slots] + [[0, 0, 0, 1, 0, 0]] * (slots - len(table))
    return torch.tensor(table, dtype=torch.int32)


def varctx_table(context_lens, block_k, units, max_seq_len, next_n):
    """Upstream's decode schedule as its builder writes it: chunks = ceil(ctx / block_k) over the whole
    context (not clipped to max_seq_len), the smallest run length s in [1, ceil(max_seq_len / block_k)]
    with next_n * sum ceil(chunks / s) <= units (else the longest chunk count), runs in batch order, each
    run on next_n consecutive slots (row b * next_n + n, start, count, ctx); idle slots (0, 0, 1, 0)."""
    ctx = [int(c) for c in context_lens]
    chunks = [-(-c // block_k) for c in ctx]
    s_max = max(1, -(-max_seq_len // block_k))
    fits = [s for s in range(1, s_max + 1) if next_n * sum(-(-c // s) for c in chunks) <= units]
    safe = fits[0] if fits else max(max(chunks), 1)
    table = []
    for b, c in enumerate(chunks):
        for start in range(0, c, safe):
            table += [[b * next_n + n, start, min(safe, c - start), ctx[b]] for n in range(next_n)]
    table = table[:units] + [[0, 0, 1, 0]] * (units - len(table))
    return torch.tensor(table, dtype=torch.int32)
