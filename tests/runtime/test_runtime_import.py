"""`import flyaot` (and the runtime and ops namespaces) must not import a compiler or read code objects."""
import json
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import json, sys
    opened = []
    sys.addaudithook(lambda event, args: opened.append(str(args[0])) if event == "open" else None)
    import flyaot, flyaot.runtime, flyaot.ops, flyaot.kernel_defs.tensor_checks
    mods = sorted(m for m in sys.modules if m.split(".")[0] in ("flydsl", "mlir", "_mlir")
                  or m.startswith("flyaot.build_tools") or "_mlir" in m)
    print(json.dumps({"mods": mods, "opened": [p for p in opened if p.endswith((".co", "manifest.json"))]}))
""")


def test_import_flyaot_imports_no_compiler_and_reads_no_store():
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result == {"mods": [], "opened": []}


def test_op_names_resolve_to_the_ops_whatever_was_imported_first():
    # Importing a family's op module (as `selftest` does) must not shadow an op named like the family.
    import flyaot.ops
    from flyaot.ops import family_module
    family_module("gemm_a16wfp4")
    assert callable(flyaot.ops.gemm_a16wfp4) and flyaot.ops.gemm_a16wfp4.__name__ == "gemm_a16wfp4"
    assert flyaot.ops.pa_mqa_logits_fp4.__name__ == "pa_mqa_logits_fp4"
