"""Host-side pieces of the A16WFP4 GEMM that need no emulator: layout, reference, configs, plan, op fallback."""
import logging

import pytest
import torch

from flyaot import targets
from flyaot.kernel_defs.gemm_a16wfp4 import configs, geometry, layout, plan, reference
from flyaot.kernel_defs.registry import get_family
from flyaot.ops import gemm_a16wfp4, prepare_mxfp4_weight


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


def test_weight_shuffle_matches_the_documented_formula():
    n, k = 64, 512
    w = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, generator=_gen())
    ws = layout.shuffle_weight(w).flatten()
    for row in (0, 5, 17, 63):
        for kb in (0, 15, 16, 100, 255):
            dst = (row // 16) * (16 * k // 2) + (kb // 16) * 256 + (row % 16) * 16 + (kb % 16)
            assert ws[dst] == w[row, kb]


def test_scale_shuffle_matches_the_documented_formula():
    n, k = 64, 1024
    s = torch.randint(0, 256, (n, k // 32), dtype=torch.uint8, generator=_gen(1))
    ss = layout.shuffle_scales(s).flatten()
    for row in (0, 3, 16, 31, 32, 50):
        for grp in range(k // 32):
            dst = ((row // 32) * k + (grp // 8) * 256 + (grp % 4) * 64 + (row % 16) * 4
                   + ((grp // 4) % 2) * 2 + (row // 16) % 2)
            assert ss[dst] == s[row, grp]


def test_preparation_round_trips_and_stores_only_packed_and_scales():
    w, s = reference.random_weight(256, 512, generator=_gen(2))
    prep = prepare_mxfp4_weight(w, s)
    assert prep.fused
    w2, s2 = prep.natural()
    assert torch.equal(w2, w) and torch.equal(s2, s)
    assert prep.weight.dtype == torch.uint8 and prep.scales.dtype == torch.uint8
    assert prep.storage_bytes() == w.numel() + s.numel()        # no BF16 copy
    assert prep.storage_bytes() < 256 * 512 * 2 * 0.27            # >= 73% smaller than BF16


def test_reference_decode_of_all_codes_and_scale_edges():
    codes = torch.arange(32, dtype=torch.uint8) % 16                     # every E2M1 code twice
    packed = (codes[0::2] | (codes[1::2] << 4)).reshape(1, 16)
    mags = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    vals = torch.tensor(mags + [-v for v in mags] + mags + [-v for v in mags])
    for e, factor in ((127, 1.0), (130, 8.0), (0, 2.0 ** -127), (0xFE, 2.0 ** 127)):
        got = reference.decode_weight(packed, torch.tensor([[e]], dtype=torch.uint8))
        want = (vals.double() * factor).float().to(torch.bfloat16)      # inf where 6 * 2^127 overflows
        assert torch.equal(got.view(torch.int16), want.reshape(1, 32).view(torch.int16)), e
    nan = reference.decode_weight(packed, torch.tensor([[0xFF]], dtype=torch.uint8))
    assert torch.isnan(nan.float()).all()
    assert torch.signbit(reference.decode_weight(packed, torch.tensor([[127]], dtype=torch.uint8))[0, 8].float())


def test_every_config_is_a_valid_spec_and_every_bucket_dispatches():
    fam = get_family("gemm_a16wfp4")
    row = targets.get(fam.targets[0])
    all_specs = fam.specs(row)
    assert 8 <= len(all_specs) <= 60
    for p in all_specs:
        fam.validate_params(p)
        t = geometry.tile(p)
        assert fam.budget(p, row).exact_lds == t.lds_bytes
    keys = {geometry.symbol(p) for p in all_specs}
    assert len(keys) == len(all_specs)
    for (n, k), table in configs.TUNED.items():
        for b in configs.BUCKETS:
            t = geometry.tile(table[b])
            assert k % t.kstep == 0 and n % t.bn == 0
            assert geometry.symbol(table[b]) in keys
    for b in configs.BUCKETS:
        assert geometry.tile(configs.GENERIC[b]).kstep in (128, 256)     # serves every K % 256 == 0


def test_decode_budgets():
    fam = get_family("gemm_a16wfp4")
    for b in ("d16", "d32"):
        p = configs.TUNED[(8448, 7168)][b]
        assert p["order"] == "decode" and p["sk"] > 1
        assert fam.budget(p, targets.get(fam.targets[0])).max_vgpr_plus_agpr == 256
        q = configs.TUNED[(1536, 7168)][b]
        assert q["order"] == "decode" and q["sk"] == 1


def test_plan_geometry_and_arguments():
    w, s = reference.random_weight(512, 1024, generator=_gen(3))
    prep = prepare_mxfp4_weight(w, s)
    base = torch.zeros(40, 1032, dtype=torch.bfloat16)
    x = base[:33, :1024]                                     # row stride 1032
    out = torch.empty(33, 512, dtype=torch.bfloat16)
    p = plan.plan(x, prep, out)
    t = geometry.tile(p.params)
    assert p.params == configs.GENERIC["mid"]
    assert p.grid == (1, 512 // t.bn, 1) and p.block == (256, 1, 1)
    assert p.args["stride_x"] == 1032 and p.args["stride_out"] == 512
    assert p.args["m"] == 33 and p.args["n"] == 512 and p.args["k"] == 1024
    assert p.args["w"] is prep.weight and p.args["out"] is out


def test_plan_picks_64_row_tiles_for_the_large_m_rows_of_3584x512():
    prep = prepare_mxfp4_weight(*reference.random_weight(3584, 512, generator=_gen(5)))
    for m, kb, mfma in ((512, 2, 32), (4096, 1, 16)):
        x = torch.zeros(m, 512, dtype=torch.bfloat16)
        p = plan.plan(x, prep, torch.empty(m, 3584, dtype=torch.bfloat16))
        assert p.params["order"] == "prefill" and p.params["bm"] == 64 and p.params["kb"] == kb
        assert p.params["mfma"] == mfma
        assert p.grid == (m // 64, 3584 // p.params["bn"], 1)


@pytest.mark.parametrize("bad, err", [
    (lambda x, o: (x.float(), o), TypeError),
    (lambda x, o: (x[:, :512], o), ValueError),
    (lambda x, o: (x, o[:, :256]), ValueError),
    (lambda x, o: (torch.zeros(4, 2000, dtype=torch.bfloat16)[:, 3:1027], o), ValueError),
])
def test_plan_rejects_bad_inputs(bad, err):
    w, s = reference.random_weight(512, 1024, generator=_gen(4))
    prep = prepare_mxfp4_weight(w, s)
    x, o = bad(torch.zeros(4, 1024, dtype=torch.bfloat16), torch.empty(4, 512, dtype=torch.bfloat16))
    with pytest.raises(err):
        plan.plan(x, prep, o)


def test_unaligned_shape_falls_back_once_or_refuses(caplog):
    w, s = reference.random_weight(96, 320, generator=_gen(5))       # N, K not multiples of 256
    with pytest.raises(ValueError, match="allow_fallback"):
        prepare_mxfp4_weight(w, s)
    prep = prepare_mxfp4_weight(w, s, allow_fallback=True)
    assert not prep.fused
    x = torch.randn(3, 320, generator=_gen(6)).to(torch.bfloat16)
    with pytest.raises(ValueError, match="fused_only"):
        gemm_a16wfp4(x, prep, fused_only=True)
    with caplog.at_level(logging.WARNING):
        y1 = gemm_a16wfp4(x, prep)
        cache = prep.bf16_cache
        out = torch.empty(3, 96, dtype=torch.bfloat16)
        y2 = gemm_a16wfp4(x, prep, out=out)
    assert sum("cached BF16" in r.message for r in caplog.records) == 1
    assert prep.bf16_cache is cache and y2 is out
    ref = reference.gemm_reference(x, w, s)
    for y in (y1, y2):
        err = (y.float() - ref.float()).norm() / ref.float().norm()
        assert err < 1e-2


def test_prepare_rejects_mismatched_scales():
    w = torch.zeros(256, 256, dtype=torch.uint8)
    with pytest.raises(ValueError, match="scales"):
        prepare_mxfp4_weight(w, torch.zeros(256, 8, dtype=torch.uint8))
    with pytest.raises(TypeError, match="w_packed"):
        prepare_mxfp4_weight(w.float(), torch.zeros(256, 16, dtype=torch.uint8))
