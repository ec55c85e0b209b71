"""The random wave schedule (FLYAOT_EMU_SCHEDULE=random:SEED): every family's kernels give
bit-identical results under any interleaving of their waves, and the schedule does interleave (a
kernel whose barriers are gone stops giving the in-turn result under it)."""
import pytest

from flyaot.emu.machine import parse_schedule

import sanitizer_cases as C

SEEDS = (1, 2, 3)


@pytest.fixture(autouse=True)
def _plain(monkeypatch):
    monkeypatch.delenv("FLYAOT_EMU_SANITIZE", raising=False)


@pytest.mark.parametrize("run", [c for _, c in C.ALL], ids=[n for n, _ in C.ALL])
def test_random_schedules_give_identical_results(run, monkeypatch):
    monkeypatch.setenv("FLYAOT_EMU_SCHEDULE", "turn")
    ok, detail, want = run()
    assert ok, detail
    for seed in SEEDS:
        monkeypatch.setenv("FLYAOT_EMU_SCHEDULE", f"random:{seed}")
        assert C.same_bits(run()[2], want), f"seed {seed}"


def test_random_schedule_interleaves_waves(monkeypatch):
    C.patching(monkeypatch, C.GEMM_TILE_SYMBOL, lambda i: i.op == "s_barrier")
    monkeypatch.setenv("FLYAOT_EMU_SCHEDULE", "turn")
    want = C.gemm_tile()[2]
    got = []
    for seed in SEEDS:
        monkeypatch.setenv("FLYAOT_EMU_SCHEDULE", f"random:{seed}")
        got.append(C.gemm_tile()[2])
    assert not all(C.same_bits(g, want) for g in got)
    monkeypatch.setenv("FLYAOT_EMU_SCHEDULE", f"random:{SEEDS[0]}")
    assert C.same_bits(C.gemm_tile()[2], got[0]), "a seed must give the same interleaving each time"


@pytest.mark.parametrize("text", ["random", "random:x", "shuffle:1", "random:1.5"])
def test_bad_schedule_names_the_variable(text):
    with pytest.raises(ValueError, match="FLYAOT_EMU_SCHEDULE"):
        parse_schedule(text)


def test_schedule_values():
    assert parse_schedule("") is None and parse_schedule("turn") is None
    assert parse_schedule("random:7") == 7 and parse_schedule(" Random:-3 ") == -3


def test_emulator_arguments_are_checked():
    from flyaot.emu.driver import Emulator
    with pytest.raises(TypeError, match=r"Emulator\(sanitize=...\)"):
        Emulator(sanitize="yes")
    with pytest.raises(TypeError, match=r"Emulator\(schedule=...\)"):
        Emulator(schedule=True)
    with pytest.raises(ValueError, match=r"Emulator\(schedule=...\)='random:x'"):
        Emulator(schedule="random:x")
    assert Emulator(schedule="random:5").schedule == 5 and Emulator(schedule="turn").schedule is None
