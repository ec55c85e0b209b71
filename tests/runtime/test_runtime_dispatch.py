"""Dispatch: miss diagnostics and records, arch mismatch, and launches on the emulator through the
exact runtime path (store -> integrity -> metadata cross-check -> packing -> emu driver)."""
import threading

import pytest
import torch
from runtime_helpers import PROBE64, PROBE128, copy_store, make_config, read_manifest, write_manifest

from flyaot.build_tools.spec_list import specs_from_misses
from flyaot.formats.manifest import Spec
from flyaot.kernel_defs.probe import plan as probe
from flyaot.runtime import jit
from flyaot.runtime.dispatch import Runtime
from flyaot.runtime.errors import ArchMismatchError, IntegrityError, MissingSpecError
from flyaot.store.misses import line as miss_line
from tests.support import miss_records

# Valid for the family (the build's miss reader checks axes) but not prebuilt.
MISSING = Spec.make("probe", {"block": 128, "behavior": "raise"}, "gfx950")


def test_miss_names_spec_nearest_specs_and_the_build_command(probe_store, tmp_path):
    rt = Runtime(make_config(tmp_path, extra=(probe_store,)))
    with pytest.raises(MissingSpecError) as e:
        rt.find(MISSING, -1)
    msg = str(e.value)
    assert MISSING.key in msg
    assert f"Nearest prebuilt specs: {PROBE128}, {PROBE64}" in msg
    assert "FLYAOT_DISABLE_JIT is set" in msg
    assert "python -m flyaot.build_tools build --from-misses flyaot-misses.jsonl --out DIR" in msg
    assert str(probe_store) in msg
    # The suggested echo line is a record the build's own reader turns back into the same spec.
    line = next(ln for ln in msg.splitlines() if ln.strip().startswith("echo "))
    (tmp_path / "m.jsonl").write_text(line.strip()[len("echo '"):line.strip().index("' >>")] + "\n")
    assert [s.key for s in specs_from_misses(tmp_path / "m.jsonl")] == [MISSING.key]


def test_unknown_family_lists_the_families_there_are(probe_store, tmp_path):
    rt = Runtime(make_config(tmp_path, extra=(probe_store,)))
    with pytest.raises(MissingSpecError, match="No nosuch spec exists for gfx950; families available: probe"):
        rt.find(Spec.make("nosuch", {"a": 1}, "gfx950"), -1)


def test_record_misses_appends_each_miss_once(probe_store, tmp_path):
    record = tmp_path / "misses.jsonl"
    rt = Runtime(make_config(tmp_path, extra=(probe_store,), record_misses=str(record)))
    other = Spec.make("probe", {"block": 64, "behavior": "raise"}, "gfx950")
    for spec in (MISSING, MISSING, other):
        with pytest.raises(MissingSpecError, match=f"recorded in {record}"):
            rt.find(spec, -1)
    assert [r["key"] for r in miss_records(record)] == [MISSING.key, other.key]
    assert sorted(s.key for s in specs_from_misses(record)) == sorted([MISSING.key, other.key])


@pytest.mark.parametrize("where", ["/dev/full", "no-such-dir/misses.jsonl", "."])
def test_an_unwritable_misses_file_is_a_warning_and_the_miss_error_wins(probe_store, tmp_path, caplog, where):
    record = where if where.startswith("/") else str(tmp_path / where)
    rt = Runtime(make_config(tmp_path, extra=(probe_store,), record_misses=record))
    with caplog.at_level("WARNING", logger="flyaot.runtime"), pytest.raises(MissingSpecError) as e:
        rt.find(MISSING, -1)
    message = str(e.value)
    assert f"no code object for {MISSING.key}" in message and "Nearest prebuilt specs" in message
    assert f"Recording it in {record} (FLYAOT_RECORD_MISSES) failed" in message
    assert f"echo '{miss_line(MISSING).strip()}' >> flyaot-misses.jsonl" in message   # the build hint stands
    assert f"cannot record miss {MISSING.key} in {record} (FLYAOT_RECORD_MISSES)" in caplog.text


def test_spec_built_for_another_arch_is_an_arch_mismatch_naming_both(probe_store, tmp_path):
    rt = Runtime(make_config(tmp_path, extra=(probe_store,), disable_jit=False))
    with pytest.raises(ArchMismatchError, match="have it for gfx950, but the current device is gfx942"):
        rt.find(Spec.make("probe", {"block": 64, "behavior": "ok"}, "gfx942"), 0)


def test_jit_unavailable_reasons(tmp_path, monkeypatch):
    cfg = make_config(tmp_path, disable_jit=False)
    assert jit.unavailable_reason(cfg, "sm_90").startswith("the JIT compiles for gfx950 only")
    assert jit.unavailable_reason(make_config(tmp_path), "gfx950") == "FLYAOT_DISABLE_JIT is set"
    assert jit.unavailable_reason(cfg, "gfx950") == ""          # flydsl 0.5.0 is installed here
    monkeypatch.setattr(jit, "EXPECTED_FLYDSL", "9.9.9")
    assert "FlyDSL 0.5.0 is installed" in jit.unavailable_reason(cfg, "gfx950")


# --- launches on the emulator ---------------------------------------------------------------------

@pytest.mark.parametrize("py_launch", [False, True])
def test_plan_launches_on_the_emulator_with_exact_values(probe_store, tmp_path, py_launch):
    rt = Runtime(make_config(tmp_path, extra=(probe_store,), py_launch=py_launch))
    out = torch.full((150,), -9.0)
    rt.launch(probe.plan(out[:130], 2.5))
    assert torch.equal(out[:130], torch.full((130,), 3.5)) and torch.equal(out[130:], torch.full((20,), -9.0))
    small = torch.zeros(70)
    rt.launch(probe.plan(small, 1e-8, block_size=128))
    assert torch.equal(small, torch.full((70,), torch.tensor(1e-8, dtype=torch.float32).item() + 1.0))


def test_first_load_checks_the_hash(probe_store, tmp_path):
    store = copy_store(probe_store, tmp_path / "s", keys={PROBE64})
    co = next(store.glob("*.co"))
    data = bytearray(co.read_bytes())
    data[100] ^= 0xFF
    co.write_bytes(bytes(data))
    rt = Runtime(make_config(tmp_path, extra=(store,)))
    with pytest.raises(IntegrityError, match="sha256"):
        rt.launch(probe.plan(torch.zeros(4), 1.0))


def test_first_load_cross_checks_metadata(probe_store, tmp_path):
    store = copy_store(probe_store, tmp_path / "s", keys={PROBE64})
    m = read_manifest(store)
    entry = next(iter(m["specs"].values()))
    entry["args"][1], entry["args"][2] = (dict(entry["args"][1], name="value"), dict(entry["args"][2], name="n"))
    write_manifest(store, m)
    rt = Runtime(make_config(tmp_path, extra=(store,)))
    # Names swapped but offsets/kinds still agree with the metadata: caught as a type error, not run.
    with pytest.raises(TypeError, match="'value' \\(int32_t\\)"):
        rt.launch(probe.plan(torch.zeros(4), 1.5))
    entry["args"][2]["kind"] = "global_buffer"
    entry["args"][2]["ctype"] = "void*"
    entry["args"][2]["offset"] = 16
    entry["args"][2]["size"] = 8
    entry["kernarg_size"] = 24
    write_manifest(store, m)
    rt = Runtime(make_config(tmp_path, extra=(store,)))
    with pytest.raises(IntegrityError, match="differ from the code object's metadata"):
        rt.launch(probe.plan(torch.zeros(4), 1.5))


def test_threads_racing_the_first_load_load_once_and_all_launch(probe_store, tmp_path):
    rt = Runtime(make_config(tmp_path, extra=(probe_store,)))
    outs = [torch.zeros(64) for _ in range(6)]
    barrier, errors = threading.Barrier(len(outs)), []

    def go(i):
        try:
            barrier.wait()
            rt.launch(probe.plan(outs[i], float(i)))
        except Exception as e:     # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(outs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert all(torch.equal(o, torch.full((64,), i + 1.0)) for i, o in enumerate(outs))
    assert len(rt._loaded) == 1


def test_one_module_per_code_object_whatever_the_params_order(probe_store, tmp_path):
    rt = Runtime(make_config(tmp_path, extra=(probe_store,)))
    a = rt.kernel("probe", {"block": 64, "behavior": "ok"})
    b = rt.kernel("probe", {"behavior": "ok", "block": 64})
    assert a is not b and a.loaded(-1) is b.loaded(-1)


def test_global_launch_reads_the_environment(probe_store, tmp_path, monkeypatch):
    import flyaot.runtime as runtime
    monkeypatch.setenv("FLYAOT_PREBUILT_PATH", str(probe_store))
    monkeypatch.setenv("FLYAOT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("FLYAOT_DISABLE_JIT", "1")
    runtime.reset()
    try:
        out = torch.zeros(10)
        runtime.launch(probe.plan(out, 4.0))
        assert torch.equal(out, torch.full((10,), 5.0))
        with pytest.raises(MissingSpecError):
            runtime.launch(probe.plan(out, 4.0, block_size=32))
    finally:
        runtime.reset()


def test_forced_driver_must_match_the_tensors(probe_store, tmp_path):
    rt = Runtime(make_config(tmp_path, extra=(probe_store,), device="cuda"))
    with pytest.raises(ValueError, match="FLYAOT_DEVICE=cuda needs GPU tensors"):
        rt.launch(probe.plan(torch.zeros(4), 1.0))


def test_launch_all_finds_every_code_object_before_the_first_launch(probe_store, tmp_path, monkeypatch):
    """A missing second kernel fails the call before the first one runs, and both misses are recorded."""
    from flyaot import runtime
    record = tmp_path / "misses.jsonl"
    rt = Runtime(make_config(tmp_path, extra=(probe_store,), record_misses=str(record)))
    monkeypatch.setattr(runtime, "_runtime", rt)
    first, second = torch.zeros(4), torch.zeros(4)
    missing = probe.plan(second, 1.0)._replace(params={"block": 128, "behavior": "raise"})
    other = probe.plan(second, 1.0)._replace(params={"block": 64, "behavior": "hang"})
    with pytest.raises(MissingSpecError):
        runtime.launch_all((probe.plan(first, 1.0), missing, other))
    assert torch.equal(first, torch.zeros(4))                      # nothing ran
    assert sorted(r["params"]["behavior"] for r in miss_records(record)) == ["hang", "raise"]
    runtime.launch_all((probe.plan(first, 1.0), probe.plan(second, 2.0, block_size=128)))
    assert torch.equal(first, torch.full((4,), 2.0)) and torch.equal(second, torch.full((4,), 3.0))
