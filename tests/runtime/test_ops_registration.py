"""`import flyaot.ops` registers every torch.ops.flyaot.* op (registration only: no FlyDSL, MLIR or build
tools imported, no store read), and each op's schema is derived from its public function."""
import inspect
import json
import subprocess
import sys
import textwrap

import torch

# The public surface: every op and its `_out` variant.
OPS = ["compute_prefill_schedule", "compute_varqlen_windows", "gemm_a16wfp4", "pa_mqa_logits_fp4",
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


def test_decorated_op_schema_is_the_public_signature():
    import flyaot.ops as ops
    for fn in (ops.pa_mqa_logits_fp4, ops.pa_mqa_logits_fp4_prefill):
        public = [p for p in inspect.signature(fn).parameters if p not in ("out", "stream")]
        schema = getattr(torch.ops.flyaot, fn.__name__).default._schema
        assert [a.name for a in schema.arguments] == public
        out_schema = getattr(torch.ops.flyaot, fn.__name__ + "_out").default._schema
        assert [a.name for a in out_schema.arguments] == public + ["out"]
        assert out_schema.arguments[-1].alias_info.is_write
