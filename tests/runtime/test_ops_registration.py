"""`import flyaot.ops` registers every torch.ops.flyaot.* op (registration only: no FlyDSL, MLIR or build
tools imported, no store read), and each op's schema is derived from its public function."""
import inspect
import json
import subprocess
import sys
import textwrap

import torch

# The public surface: every op and its `_out` variant.
OPS = ["compute_prefill_schedule", "compute_varqlen_windows", "fp8_mqa_logits", "fp8_paged_mqa_logits",
       "gemm_a16wfp4", "pa_mqa_logits_fp4",
       "pa_mqa_logits_fp4_prefill", "pa_mqa_logits_fp4_varqlen"]

SCRIPT = textwrap.dedent("""
    import json, sys
    import torch
    before = {n for n in torch._C._dispatch_get_all_op_names() if n.startswith("flyaot::")}
    import flyaot.ops
    after = sorted(n for n in torch._C._dispatch_get_all_op_names() if n.startswith("flyaot::"))
    heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("flydsl", "mlir", "_mlir")
                   or m.startswith("flyaot.build_tools") or m.startswith("flyaot.emu"))
    print(json.dumps({"before": sorted(before), "after": after, "heavy": heavy}))
""")


def test_import_flyaot_ops_registers_every_op_and_imports_no_compiler():
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout)
    assert r["before"] == [] and r["heavy"] == []
    assert r["after"] == sorted(f"flyaot::{op}{suffix}" for op in OPS for suffix in ("", "_out"))


def test_every_op_schema_is_its_public_signature():
    """Schema = the public parameters in order, less `stream`, the output parameter (the `_out` op's last,
    written, arguments) and a route-only parameter; a prepared weight travels as its tensors and sizes."""
    import flyaot.ops as ops
    cases = ((ops.pa_mqa_logits_fp4, {}, ["out"]), (ops.pa_mqa_logits_fp4_prefill, {}, ["out"]),
             (ops.pa_mqa_logits_fp4_varqlen, {"windows": []}, ["out"]),
             (ops.compute_prefill_schedule, {"cta_info_out": []}, ["cta_info_out"]),
             (ops.compute_varqlen_windows, {}, ["row_to_batch", "local_starts", "local_ends"]),
             (ops.gemm_a16wfp4, {"weight": ["weight", "scales", "n", "k"], "fused_only": []}, ["out"]))
    for fn, replaced, outs in cases:
        public = [q for p in inspect.signature(fn).parameters if p not in ("out", "stream")
                  for q in replaced.get(p, [p])]
        schema = getattr(torch.ops.flyaot, fn.__name__).default._schema
        assert [a.name for a in schema.arguments] == public, fn.__name__
        out_schema = getattr(torch.ops.flyaot, fn.__name__ + "_out").default._schema
        assert [a.name for a in out_schema.arguments] == public + outs, fn.__name__
        assert [bool(a.alias_info and a.alias_info.is_write) for a in out_schema.arguments] == \
            [False] * len(public) + [True] * len(outs)
