"""Small decode / prefill / GEMM inputs the guard tests share (CPU tensors: the emulator)."""
import torch

from flyaot.kernel_defs.gemm_a16wfp4.reference import random_weight
from flyaot.kernel_defs.mqa_common import layouts
from flyaot.kernel_defs.mqa_prefill import reference as R
from flyaot.ops import _gemm_a16wfp4 as gemm
from flyaot.ops import _mqa_decode as decode
from flyaot.ops import _mqa_prefill as prefill

MSL = 160


def decode_inputs(ctx=(130, 70), heads=64, next_n=1):
    g = torch.Generator().manual_seed(1)
    kv = layouts.make_paged_kv(list(ctx), 128, 64, g)
    q, qs = layouts.make_q((len(ctx), next_n), heads, 128, g)
    w = torch.randn(len(ctx) * next_n, heads, generator=g).to(torch.bfloat16)
    return dict(q_fp4=q, q_scale=qs, kv_cache=kv.kv_cache, kv_scale=kv.kv_scale, block_tables=kv.block_tables,
                weights=w, context_lens=torch.tensor(ctx, dtype=torch.int32))


def run_decode(a, **kw):
    return decode.pa_mqa_logits_fp4(a["q_fp4"], a["q_scale"], a["kv_cache"], a["kv_scale"], a["block_tables"],
                                    a["weights"], a["context_lens"], MSL, **kw)


def prefill_inputs(rows=3, ctx=(130, 70)):
    c = R.make_case(rows, list(ctx), heads=64, page_size=64, max_seq_len=MSL)
    return dict(q_fp4=c.q_fp4, q_scale=c.q_scale, kv_cache=c.kv_cache, kv_scale=c.kv_scale,
                block_tables=c.block_tables, weights=c.weights, row_to_batch=torch.tensor([0, 0, 1][:rows], dtype=torch.int32),
                local_starts=torch.zeros(rows, dtype=torch.int32), local_ends=torch.full((rows,), 60, dtype=torch.int32))


def run_prefill(a, **kw):
    return prefill.pa_mqa_logits_fp4_prefill(a["q_fp4"], a["q_scale"], a["kv_cache"], a["kv_scale"],
                                             a["block_tables"], a["weights"], a["row_to_batch"], a["local_starts"],
                                             a["local_ends"], MSL, **kw)


def prepared_weight(n=256, k=256):
    w, s = random_weight(n, k, generator=torch.Generator().manual_seed(n + k))
    return gemm.prepare_mxfp4_weight(w, s)
