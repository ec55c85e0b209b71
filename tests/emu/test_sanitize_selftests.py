"""The sanitizer's clean bill in CI: every family's selftest problems (a representative spec per
family and variant: the GEMM's decode split-K and prefill tiles, the staged and direct decode kernels
with their schedule kernel, the prefill kernel at two head counts and pages with its metadata
kernels) run on the emulator under FLYAOT_EMU_SANITIZE=1 without a finding. `make sanitize` runs
the families' whole test suites so."""
from flyaot.ops import hooks


def test_every_selftest_runs_clean_under_the_sanitizer(monkeypatch):
    monkeypatch.setenv("FLYAOT_EMU_SANITIZE", "1")
    monkeypatch.delenv("FLYAOT_EMU_SCHEDULE", raising=False)
    rows = hooks.run("selftest", "cpu", None)
    families = {r[0] for r in rows}
    assert {"gemm_a16wfp4", "mqa_decode", "mqa_prefill"} <= families, families
    bad = [f"{family} {case}: {detail}" for family, case, ok, detail in rows if not ok]
    assert not bad, "\n".join(bad)


def test_selftest_sanitize_needs_the_emulator(capsys):
    from flyaot import cli
    rc = cli.main(["selftest", "--sanitize", "--device", "cuda", "--family", "mqa_decode"])
    assert rc == 2
    assert "--sanitize runs on the emulator" in capsys.readouterr().err


