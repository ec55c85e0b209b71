"""Against an aiter checkout (AITER_DIR; skipped without one): its own FP4 MQA logits op tests, unedited,
pass through flyaot.compat.aiter on the emulator, and the signatures and defaults that
test_aiter_knob_rules restates are the checkout's.

    AITER_DIR=/path/to/aiter python -m pytest -q tests/compat/test_aiter_upstream.py
"""
import ast
import os
import pathlib

import pytest

import aiter_shim
from test_aiter_knob_rules import UPSTREAM_DEFAULTS

AITER_DIR = os.environ.get("AITER_DIR")
pytestmark = pytest.mark.skipif(not AITER_DIR, reason="AITER_DIR does not name an aiter checkout")
ROOT = pathlib.Path(AITER_DIR or ".")
KERNELS = ROOT / "aiter/ops/flydsl/kernels/mqa_logits"
DECODE_TEST = ROOT / "op_tests/test_flydsl_pa_mqa_logits_fp4.py"
PREFILL_TEST = ROOT / "op_tests/test_flydsl_pa_mqa_logits_fp4_prefill.py"


def _upstream_signature(name):
    """(positional names, keyword-only defaults) of `name` in the checkout's kernel sources, read as text."""
    for path in KERNELS.glob("pa_mqa_logits_fp4*.py"):
        body = ast.parse(path.read_text()).body
        # module constants a default may name (DEFAULT_NUM_WARPS = 4)
        consts = {t.id: ast.literal_eval(n.value) for n in body if isinstance(n, ast.Assign)
                  for t in n.targets if isinstance(t, ast.Name) and isinstance(n.value, ast.Constant)}
        for node in body:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                a = node.args
                value = lambda d: consts[d.id] if isinstance(d, ast.Name) else ast.literal_eval(d)
                return [p.arg for p in a.args], {p.arg: value(d) for p, d in zip(a.kwonlyargs, a.kw_defaults)}
    raise AssertionError(f"{name} not found under {KERNELS}")


@pytest.mark.parametrize("name", sorted(UPSTREAM_DEFAULTS))
def test_restated_defaults_are_the_checkouts(name):
    import inspect
    from flyaot.compat import aiter
    positional, keywords = _upstream_signature(name)
    assert keywords == UPSTREAM_DEFAULTS[name]
    ours = inspect.signature(getattr(aiter, name)).parameters.values()
    assert [p.name for p in ours if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD] == positional


# (batch, max_ctx, knobs): the decode test's default sweep (its main()), then one case per knob its
# command line offers (--parallel_unit_num, --next_n, --heads, --head_dim, --kv_block_size, --block_k
# with --num_warps), each at the upstream-accepted values.
DECODE_CASES = [
    (2, 512, {}), (3, 1024, {}), (2, 512, {"next_n": 2}), (2, 768, {"heads": 128}), (4, 2048, {}),
    (2, 512, {"parallel_unit_num": 8}), (3, 1024, {"parallel_unit_num": 64}),
    (2, 512, {"next_n": 3}), (2, 300, {"next_n": 4, "heads": 32}),
    (2, 512, {"heads": 16}), (2, 512, {"heads": 112}), (2, 512, {"head_dim": 256}),
    (2, 512, {"kv_block_size": 128}),
    (2, 512, {"block_k": 128, "num_warps": 2}), (2, 512, {"block_k": 512, "num_warps": 8}),
    (2, 512, {"block_k": 64, "num_warps": 1}), (2, 384, {"block_k": 192, "num_warps": 3}),
]


@pytest.mark.parametrize("batch,max_ctx,knobs", DECODE_CASES, ids=[f"{b}x{c}-{k}" for b, c, k in DECODE_CASES])
def test_upstream_decode_op_test(monkeypatch, batch, max_ctx, knobs):
    mod = aiter_shim.load(monkeypatch, DECODE_TEST)
    mod.test_pa_mqa_logits_fp4_qfp4_kvfp4(batch=batch, max_ctx=max_ctx, num_iters=1, num_warmup=0, **knobs)


@pytest.mark.slow
def test_upstream_prefill_op_test(monkeypatch):
    """The prefill test's main() correctness sweep (its explicit-window cases and variable-qlen cases)."""
    mod = aiter_shim.load(monkeypatch, PREFILL_TEST)
    monkeypatch.setattr("sys.argv", ["test_flydsl_pa_mqa_logits_fp4_prefill.py", "--iters", "1", "--warmup", "0"])
    mod.main()


# Compiles upstream's kernels (FlyDSL builder and tracer; nothing runs) in a fresh process, with
# benchmarks/aiter_kernels.py's placeholder packages, and prints each tile's verdict.
_COMPILE = r'''
import json, sys, torch
sys.path.insert(0, "benchmarks")
import aiter_kernels as AK
from flyaot.kernel_defs.mqa_common import layouts
from flyaot.kernel_defs.mqa_prefill import reference as R
up = AK.Upstream(sys.argv[1])
dec = up.module("aiter.ops.flydsl.kernels.mqa_logits.pa_mqa_logits_fp4")
pre = up.module("aiter.ops.flydsl.kernels.mqa_logits.pa_mqa_logits_fp4_prefill")
verdicts = []
for kind, bk, nw, page in json.loads(sys.argv[2]):
    try:
        if kind == "decode":
            g = torch.Generator().manual_seed(0)
            kv = layouts.make_paged_kv([200, 90], 128, page, g, table_width=1024 // page)
            q, qs = layouts.make_q((2, 1), 64, 128, g)
            launcher, _ = dec.compile_pa_mqa_logits_fp4(block_k=bk, kv_block_size=page, num_warps=nw, next_n=1,
                                                        heads=64, head_dim=128,
                                                        max_blocks_per_seq=kv.block_tables.shape[1])
            t = (q, qs, kv.kv_cache, kv.kv_scale, kv.block_tables, torch.zeros(2, 64, dtype=torch.bfloat16))
            cta = torch.zeros(4, 4, dtype=torch.int32)
        else:
            c = R.make_case(3, [200, 90], heads=64, page_size=page, max_seq_len=256)
            launcher, _ = pre.compile_pa_mqa_logits_fp4_prefill(block_k=bk, kv_block_size=page, num_warps=nw,
                                                                heads=64, head_dim=128,
                                                                max_blocks_per_seq=c.block_tables.shape[1])
            t = (c.q_fp4, c.q_scale, c.kv_cache, c.kv_scale, c.block_tables, c.weights)
            cta = torch.zeros(4, 6, dtype=torch.int32)
        out = torch.empty(t[0].shape[0], 256)
        AK.compile_with(launcher, [out, *t, cta, out.stride(0), 1.0, 4, None])
        verdicts.append(None)
    except Exception as e:
        verdicts.append(type(e).__name__)
print("VERDICTS", json.dumps(verdicts))
'''

TILES = [(256, 4, 64), (128, 2, 64), (512, 4, 64), (256, 8, 64), (128, 4, 64), (512, 4, 128), (256, 4, 128)]


def _compile(cases):
    import json
    import subprocess
    import sys
    repo = pathlib.Path(__file__).resolve().parents[2]
    run = subprocess.run([sys.executable, "-c", _COMPILE, str(ROOT), json.dumps(cases)], cwd=repo,
                         capture_output=True, text=True, timeout=1500)
    line = [ln for ln in run.stdout.splitlines() if ln.startswith("VERDICTS ")]
    return (json.loads(line[0].split(" ", 1)[1]) if line else None), run


@pytest.mark.slow
def test_tile_rule_is_what_upstreams_kernels_compile():
    """Upstream's decode and prefill kernels compiled (not launched) for tiles on both sides of the rule:
    the verdict of its builder and tracer is test_aiter_knob_rules.tile_verdict's. Where a wave would get
    more than four tiles upstream's prefill kernel aborts the whole process inside MLIR (no exception to
    match); compat refuses those with the decode kernel's verdict."""
    from test_aiter_knob_rules import tile_verdict
    cases = [(kind, *t) for kind in ("decode", "prefill") for t in TILES]
    aborts = [c for c in cases if c[0] == "prefill" and c[1] // 16 // c[2] > 4]
    compiled = [c for c in cases if c not in aborts]
    got, run = _compile(compiled)
    assert got is not None, run.stdout[-2000:] + run.stderr[-4000:]
    want = [None if tile_verdict(*c[1:]) is None else tile_verdict(*c[1:]).__name__ for c in compiled]
    assert list(zip(compiled, got)) == list(zip(compiled, want))
    for case in aborts:
        assert tile_verdict(*case[1:]) is not None
        got, run = _compile([case])
        assert got is None and run.returncode != 0 and "opselB" in run.stdout + run.stderr, case
