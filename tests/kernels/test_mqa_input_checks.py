"""Both MQA logits families run the same memory checks before anything is launched: a base pointer or a
row / page stride that the kernels' loads cannot take (16 bytes for Q and KV values, 4 for every
dword-read argument: mqa_common.inputs) or overlapping KV pages raise a ValueError naming the argument,
and the same tensors at aligned offsets and strides are accepted (the plan passes them unchanged)."""
import pytest
import torch

from flyaot.kernel_defs.mqa_common import layouts
from flyaot.kernel_defs.mqa_decode import plan as decode_plan
from flyaot.kernel_defs.mqa_prefill import reference as R
from flyaot.ops import _mqa_decode as mqa_decode
from flyaot.ops import _mqa_prefill as mqa_prefill

HEADS, HEAD_DIM, PAGE = 64, 128, 64
PAGE_VALUE_BYTES, PAGE_SCALE_BYTES = PAGE * HEAD_DIM // 2, PAGE * HEAD_DIM // 32
CTX = [130, 70]
ALIGN = {"q_fp4": 16, "kv_cache": 16, "q_scale": 4, "kv_scale": 4, "weights": 4}
SLOT = {"q_fp4": "q"}                 # the plans' kernel-argument name where it differs
PAGE_STRIDE_SLOT = {"decode": {"kv_cache": "stride_kv", "kv_scale": "stride_ks"},
                    "prefill": {"kv_cache": "stride_kv_page", "kv_scale": "stride_kvs_page"}}


@pytest.fixture
def launched(monkeypatch):
    plans = []
    for module in (mqa_decode, mqa_prefill):
        monkeypatch.setattr(module.runtime, "launch", lambda plan, stream=None: plans.append(plan))
    return plans


def _decode_inputs():
    g = torch.Generator().manual_seed(0)
    kv = layouts.make_paged_kv(CTX, HEAD_DIM, PAGE, g)
    q, qs = layouts.make_q((len(CTX), 1), HEADS, HEAD_DIM, g)
    w = torch.randn(len(CTX), HEADS, generator=g).to(torch.bfloat16)
    return dict(q_fp4=q, q_scale=qs, kv_cache=kv.kv_cache, kv_scale=kv.kv_scale, block_tables=kv.block_tables,
                weights=w)


def _decode_call(a):
    return mqa_decode.pa_mqa_logits_fp4(a["q_fp4"], a["q_scale"], a["kv_cache"], a["kv_scale"], a["block_tables"],
                                        a["weights"], torch.tensor(CTX, dtype=torch.int32), 140, kv_block_size=PAGE)


def _prefill_inputs():
    case = R.make_case(3, CTX, heads=HEADS, head_dim=HEAD_DIM, page_size=PAGE, max_seq_len=140)
    return dict(q_fp4=case.q_fp4, q_scale=case.q_scale, kv_cache=case.kv_cache, kv_scale=case.kv_scale,
                block_tables=case.block_tables, weights=case.weights)


def _prefill_call(a):
    rb = torch.tensor([0, 0, 1], dtype=torch.int32)
    ls, le = torch.zeros(3, dtype=torch.int32), torch.full((3,), 60, dtype=torch.int32)
    return mqa_prefill.pa_mqa_logits_fp4_prefill(a["q_fp4"], a["q_scale"], a["kv_cache"], a["kv_scale"],
                                                 a["block_tables"], a["weights"], rb, ls, le, 140)


FAMILIES = {"decode": (_decode_inputs, _decode_call), "prefill": (_prefill_inputs, _prefill_call)}


def _at_byte_offset(t, offset):
    """A copy of t with t's shape and strides whose data starts `offset` bytes into a fresh buffer."""
    span = 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
    buf = torch.zeros(offset + span * t.element_size(), dtype=torch.uint8)
    assert buf.data_ptr() % 64 == 0                     # torch's CPU allocator: the offset is the misalignment
    view = buf[offset:].view(t.dtype).as_strided(t.shape, t.stride())
    view.copy_(t)
    return view


def _padded_rows(t, extra):
    """A copy of t whose rows (dim 0) are `extra` elements further apart than t's."""
    rows, n = t.shape[0], t[0].numel()
    wide = torch.zeros(rows, n + extra, dtype=t.dtype)
    wide[:, :n] = t.reshape(rows, n)
    return wide[:, :n].unflatten(1, t.shape[1:])


def _expect(call, a, launched, ok, match):
    if ok:
        call(a)
        *metadata, plan = launched          # the op's kernel, after the metadata kernel building its schedule
        assert [p.family for p in metadata] in ([], ["mqa_prefill_meta"])
        return plan
    with pytest.raises(ValueError, match=match):
        call(a)
    assert launched == []


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("name,offset,ok", [
    ("q_fp4", 1, False), ("q_fp4", 4, False), ("q_fp4", 8, False), ("q_fp4", 16, True),
    ("q_scale", 1, False), ("q_scale", 2, False), ("q_scale", 4, True),
    ("kv_cache", 1, False), ("kv_cache", 4, False), ("kv_cache", 16, True),
    ("kv_scale", 1, False), ("kv_scale", 2, False), ("kv_scale", 4, True),
    ("weights", 2, False), ("weights", 4, True),
])
def test_base_pointer_alignment(launched, family, name, offset, ok):
    inputs, call = FAMILIES[family]
    a = inputs()
    a[name] = _at_byte_offset(a[name], offset)
    plan = _expect(call, a, launched, ok, f"^{name}: data pointer must be {ALIGN[name]}-byte aligned")
    if ok:
        assert plan.args[SLOT.get(name, name)].data_ptr() == a[name].data_ptr()


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("name,page_stride,ok", [
    ("kv_cache", PAGE_VALUE_BYTES + 4, False), ("kv_cache", PAGE_VALUE_BYTES + 8, False),
    ("kv_cache", PAGE_VALUE_BYTES + 16, True),
    ("kv_scale", PAGE_SCALE_BYTES + 1, False), ("kv_scale", PAGE_SCALE_BYTES + 2, False),
    ("kv_scale", PAGE_SCALE_BYTES + 4, True),
])
def test_page_stride_alignment(launched, family, name, page_stride, ok):
    inputs, call = FAMILIES[family]
    a = inputs()
    a[name] = layouts.strided_pages(a[name], page_stride)
    plan = _expect(call, a, launched, ok, rf"^{name}: stride\[0\] must be a multiple of {ALIGN[name]} bytes")
    if ok:
        assert plan.args[PAGE_STRIDE_SLOT[family][name]] == page_stride


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("name,page_bytes", [("kv_cache", PAGE_VALUE_BYTES), ("kv_scale", PAGE_SCALE_BYTES)])
def test_overlapping_pages_are_refused(launched, family, name, page_bytes):
    inputs, call = FAMILIES[family]
    a = inputs()
    t = a[name]
    a[name] = t.as_strided(t.shape, (page_bytes - 16,) + t.stride()[1:])      # aligned, but pages overlap
    _expect(call, a, launched, False, f"^{name}: page stride {page_bytes - 16} B is below the page size")


@pytest.mark.parametrize("name,extra,ok", [
    ("q_fp4", 8, False), ("q_fp4", 16, True), ("q_scale", 2, False), ("q_scale", 4, True),
    ("weights", 1, False), ("weights", 2, True),
])
def test_prefill_row_stride_alignment(launched, name, extra, ok):
    """Prefill takes Q, Q-scale and weight rows at any stride the loads allow (decode needs them contiguous)."""
    a = _prefill_inputs()
    a[name] = _padded_rows(a[name], extra)
    plan = _expect(_prefill_call, a, launched, ok, rf"^{name}: stride\[0\] must be a multiple of {ALIGN[name]} bytes")
    if ok:
        assert plan.args[SLOT.get(name, name)].stride(0) == a[name].stride(0)


def test_decode_direct_plan_needs_int32_context_lens():
    """The direct kernel reads context_lens as scalar dwords: the plan refuses any other dtype or layout."""
    a = _decode_inputs()
    cl = torch.tensor(CTX, dtype=torch.int32)
    s = decode_plan.check_inputs(*a.values(), cl, 140, 1, PAGE, 1.0)
    kw = dict(out=torch.empty(2, 140), weight_scale=1.0, **{k: v for k, v in a.items()})
    assert decode_plan.direct_plan(s, 140, context_lens=cl, **kw).args["context_lens"] is cl
    with pytest.raises(TypeError, match="^context_lens"):
        decode_plan.direct_plan(s, 140, context_lens=cl.long(), **kw)
    with pytest.raises(ValueError, match="^context_lens"):
        decode_plan.direct_plan(s, 140, context_lens=torch.tensor(CTX * 2, dtype=torch.int32)[::2], **kw)
