"""The decode op's quick checks (one metadata pass: accepts_inputs, check_out, check_schedule, the direct
plan's context check) accept only what the checks of record accept: across hundreds of hostile variants
of valid inputs (dtypes, ranks, shapes, strides, offsets, devices, non-tensors, scalar types and ranges),
whenever the quick pass accepts, explain_inputs accepts with the same Shapes; and the quick pass does
accept the ordinary inputs (else the eager op would always pay for the slow explanation)."""
import itertools

import numpy as np
import pytest
import torch

from flyaot.kernel_defs.mqa_common import layouts
from flyaot.kernel_defs.mqa_decode import inputs as P
from flyaot.kernel_defs.tensor_checks import check_tensor

NAMES = ("q_fp4", "q_scale", "kv_cache", "kv_scale", "block_tables", "weights", "context_lens")
CONFIGS = [dict(heads=64, head_dim=128, page=64, next_n=1, ctx=(130, 70)),
           dict(heads=16, head_dim=256, page=128, next_n=3, ctx=(5,)),
           dict(heads=128, head_dim=128, page=128, next_n=16, ctx=(0, 300, 1)),
           dict(heads=48, head_dim=128, page=64, next_n=2, ctx=(64,))]   # one page: its stride is free


def _inputs(heads, head_dim, page, next_n, ctx):
    g = torch.Generator().manual_seed(len(ctx) * 7 + next_n)
    kv = layouts.make_paged_kv(list(ctx), head_dim, page, g)
    q, qs = layouts.make_q((len(ctx), next_n), heads, head_dim, g)
    w = torch.randn(len(ctx) * next_n, heads, generator=g).to(torch.bfloat16)
    tensors = dict(q_fp4=q, q_scale=qs, kv_cache=kv.kv_cache, kv_scale=kv.kv_scale, block_tables=kv.block_tables,
                   weights=w, context_lens=torch.tensor(ctx, dtype=torch.int32))
    return tensors, dict(max_seq_len=256, next_n=next_n, kv_block_size=page, weight_scale=1.0)


def _shifted(t, elements):
    """Same shape, dtype and strides as `t`, its data `elements` further into a larger buffer."""
    span = 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride())) if t.numel() else 0
    flat = torch.zeros(span + elements + 64, dtype=t.dtype)
    return flat.as_strided(t.shape, t.stride(), elements)


def _restrided(t, strides):
    span = 1 + sum((n - 1) * abs(s) for n, s in zip(t.shape, strides)) if t.numel() else 0
    return torch.zeros(span + 64, dtype=t.dtype).as_strided(t.shape, strides)


def _tensor_variants(t):
    yield "float", t.float()
    for dt in (torch.uint8, torch.int8, torch.int32, torch.int64, torch.bfloat16, torch.float16, torch.bool):
        if dt != t.dtype:
            yield f"as {dt}", t.to(dt)
    if t.dtype == torch.uint8:
        yield "e8m0", t.view(torch.float8_e8m0fnu)
    yield "meta", t.to("meta")
    yield "list", t.tolist()
    yield "numpy", t.float().numpy()
    yield "unsqueeze", t.unsqueeze(0)
    yield "flat", t.reshape(-1)
    if t.dim():
        yield "drop dim", t[0]
        yield "expand", t[:1].expand(2, *t.shape[1:]) if t.shape[0] else t.unsqueeze(0)
    for d in range(t.dim()):
        for delta in (-1, 1):
            shape = list(t.shape)
            shape[d] = max(0, shape[d] + delta)
            yield f"dim {d} {delta:+d}", torch.zeros(shape, dtype=t.dtype)
    for e in (1, 2, 3, 4, 8, 16):
        yield f"shifted {e}", _shifted(t, e)
    if t.dim() >= 2:
        yield "transposed", t.transpose(-1, -2).contiguous().transpose(-1, -2)
    for d in range(t.dim()):
        if t.shape[d] == 1:          # a size-1 dim's stride is never stepped but still an int32 argument
            yield f"stride {d}=2**31", t.as_strided(t.shape, t.stride()[:d] + (2 ** 31,) + t.stride()[d + 1:])
        for s in (0, 1, 2, t.stride(d) + 1, 2 * t.stride(d), t.stride(d) - 16, t.stride(d) + 16):
            if s >= 0 and s != t.stride(d):
                yield f"stride {d}={s}", _restrided(t, t.stride()[:d] + (s,) + t.stride()[d + 1:])


def _scalar_variants(name, v):
    for x in (True, False, 0, -1, 1, 2, 3, 16, 17, 32, 64, 128, 256, 2 ** 31 - 1, 2 ** 31, 10 ** 400,
              1.0, 64.0, float("nan"), float("inf"), -float("inf"), 1e308 * 10, np.int64(64), np.float64(1.5),
              np.float32(2.0), None, "64", -0.0):
        yield f"{name}={x!r}", x


def _outcome(fn, *args):
    try:
        return fn(*args)
    except (TypeError, ValueError, OverflowError) as e:
        return e


def _cases():
    for cfg in CONFIGS:
        tensors, scalars = _inputs(**cfg)
        yield "valid", tensors, scalars
        for name in NAMES:
            for label, v in _tensor_variants(tensors[name]):
                yield f"{name} {label}", dict(tensors, **{name: v}), scalars
        for name in scalars:
            for label, v in _scalar_variants(name, scalars[name]):
                yield label, tensors, dict(scalars, **{name: v})
        for a, b in itertools.combinations(NAMES, 2):          # two tensors moved off the device together
            yield f"{a}+{b} meta", dict(tensors, **{a: tensors[a].to("meta"), b: tensors[b].to("meta")}), scalars


def _args(tensors, scalars):
    return (*[tensors[n] for n in NAMES], scalars["max_seq_len"], scalars["next_n"], scalars["kv_block_size"],
            scalars["weight_scale"])


def test_quick_pass_accepts_only_what_the_checks_of_record_accept():
    accepted = refused = 0
    for label, tensors, scalars in _cases():
        args = _args(tensors, scalars)
        quick = P.accepts_inputs(*args)
        ruled = _outcome(P.explain_inputs, *args)
        if isinstance(ruled, Exception):
            assert quick is None, f"{label}: the quick pass accepts what explain_inputs refuses: {ruled}"
            refused += 1
        else:
            assert quick is None or quick == ruled, label
            accepted += quick is not None
        assert type(_outcome(P.check_inputs, *args)) is type(ruled), label
    assert refused > 500 and accepted >= len(CONFIGS)


@pytest.mark.parametrize("cfg", CONFIGS)
def test_quick_pass_accepts_ordinary_inputs(cfg):
    tensors, scalars = _inputs(**cfg)
    s = P.accepts_inputs(*_args(tensors, scalars))
    assert s == P.explain_inputs(*_args(tensors, scalars))
    assert (s.batch, s.next_n, s.heads, s.head_dim, s.page_size) == (
        len(cfg["ctx"]), cfg["next_n"], cfg["heads"], cfg["head_dim"], cfg["page"])
    # shared KV pools: pages at a wider aligned stride are the ordinary case too
    wide = _restrided(tensors["kv_cache"], (tensors["kv_cache"].stride(0) + 256,) + tensors["kv_cache"].stride()[1:])
    pooled = _args(dict(tensors, kv_cache=wide), scalars)
    assert P.accepts_inputs(*pooled) == P.explain_inputs(*pooled) == s._replace(stride_kv=wide.stride(0))


def _out_record(out, rows, msl, like):
    check_tensor("out", out, dtype=torch.float32, shape=(rows, msl), stride=(None, 1), align=4)
    from flyaot.kernel_defs.tensor_checks import check_rows_disjoint, check_same_device
    check_rows_disjoint("out", out)
    check_same_device(out=out, q_fp4=like)


def test_out_and_schedule_quick_checks_refuse_what_the_generic_checks_refuse():
    like = torch.zeros(4, dtype=torch.uint8)
    good_out = torch.full((4, 96), float("-inf"))
    good_info = torch.zeros(8, 4, dtype=torch.int32)
    for label, out in [("valid", good_out), ("wide rows", torch.zeros(4, 128)[:, :96])] + list(_tensor_variants(good_out)):
        want = _outcome(_out_record, out, 4, 96, like)
        got = _outcome(P.check_out, out, 4, 96, like)
        assert type(got) is type(want), label
    for label, info in [("valid", good_info)] + list(_tensor_variants(good_info)):
        for total in (1, 8, 9, 0, True, 8.0, 2 ** 31):
            def record(i, n):
                check_tensor("cta_info", i, dtype=torch.int32, shape=(None, 4), contiguous=True, align=4)
                from flyaot.kernel_defs.tensor_checks import check_int, check_same_device
                check_int("total_ctas", n, lo=1, hi=i.shape[0])
                check_same_device(cta_info=i, q_fp4=like)
                return n
            assert type(_outcome(P.check_schedule, info, total, like)) is type(_outcome(record, info, total)), \
                (label, total)
