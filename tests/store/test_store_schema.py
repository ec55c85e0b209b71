"""One manifest schema (formats/manifest.validate), checked on every read: the runtime's reader
(package store, FLYAOT_PREBUILT_PATH stores, the user cache), both `verify` commands and `merge`
refuse the same manifests with the same message, naming the file and the field, and a refused store
is left out alone while the others keep serving. The writer refuses them before writing anything."""
import json

import pytest
import torch
from store_helpers import PROBE64, cache_store, config, copy_store, read_manifest

from flyaot.build_tools import __main__ as build_cli
from flyaot.formats.manifest import MANIFEST_NAME, pretty_json
from flyaot.kernel_defs.probe import plan as probe
from flyaot.runtime.dispatch import Runtime
from flyaot.runtime.errors import MissingSpecError
from flyaot.store import verify
from flyaot.store.errors import StoreError
from flyaot.store.index import Index, Location, Store
from flyaot.store.merge import merge
from flyaot.store.write import write_store


def _sid(m, key=PROBE64):
    return next(sid for sid, e in m["specs"].items() if e["key"] == key)


def _entry(m):
    return m["specs"][_sid(m)]


def _arg(m, i=0):
    return _entry(m)["args"][i]


def _drop(d, name):
    del d[name]


def _same_key_other_id(m):
    """A second id holding the genuine entry's key: the bogus one would hide the genuine one."""
    # an id that sorts after every real one: the validator names the later of the two
    e = dict(_entry(m), id="zzbogus000000000000000000", file="zzbogus000000000000000000.co")
    m["specs"]["zzbogus000000000000000000"] = e


def _rename_spec(m, new):
    sid = _sid(m)
    m["specs"][new] = m["specs"].pop(sid)


# (name, edit of the manifest dict, field the message names ({sid}: the edited spec), what it says)
DICT_CASES = [
    # top level: required, typed, known, valued
    *[(f"top-missing-{f}", lambda m, f=f: _drop(m, f), f, "missing")
      for f in ("schema", "flyaot", "toolchain", "target", "specs")],
    ("top-schema-type", lambda m: m.update(schema="1"), "schema", "is a string, not an integer"),
    ("top-schema-bool", lambda m: m.update(schema=True), "schema", "is a bool, not an integer"),
    ("top-schema-version", lambda m: m.update(schema=3), "schema", "this flyaot reads schema 2"),
    ("top-schema-old-layout", lambda m: m.update(schema=1), "schema", "the layout of <target>/<id>.co"),
    ("top-flyaot-type", lambda m: m.update(flyaot=1), "flyaot", "is an integer, not a string"),
    ("top-toolchain-type", lambda m: m.update(toolchain="0.5.0"), "toolchain", "is a string, not an object"),
    ("top-toolchain-value", lambda m: m["toolchain"].update(lld=22), "toolchain.lld", "not a string"),
    ("top-target-type", lambda m: m.update(target=["gfx950"]), "target", "is a list, not a string"),
    ("top-target-name", lambda m: m.update(target="../gfx950"), "target", "is not an architecture name"),
    ("top-specs-type", lambda m: m.update(specs=list(m["specs"].values())), "specs", "is a list, not an object"),
    ("top-shard-type", lambda m: m.update(shard=1), "shard", "is an integer, not a string"),
    ("top-shard-form", lambda m: m.update(shard="2/2"), "shard", "is not i/n"),
    ("top-unknown", lambda m: m.update(built_at="today"), "built_at", "unknown field"),
    # an entry: required, typed, known
    ("entry-not-object", lambda m: m["specs"].update({_sid(m): "x"}), "specs.{sid}", "is a string, not an object"),
    *[(f"entry-missing-{f}", lambda m, f=f: _drop(_entry(m), f), "specs.{sid}." + f, "missing")
      for f in ("family", "params", "key", "file", "size", "sha256", "symbol", "block", "kernarg_size", "args",
                "resources")],
    ("entry-size-type", lambda m: _entry(m).update(size="12"), "specs.{sid}.size", "is a string, not an integer"),
    ("entry-size-bool", lambda m: _entry(m).update(size=True), "specs.{sid}.size", "is a bool, not an integer"),
    ("entry-params-type", lambda m: _entry(m).update(params=[1]), "specs.{sid}.params", "is a list, not an object"),
    ("entry-block-type", lambda m: _entry(m).update(block=7), "specs.{sid}.block", "is an integer, not a list"),
    ("entry-args-type", lambda m: _entry(m).update(args={}), "specs.{sid}.args", "is an object, not a list"),
    ("entry-resources-type", lambda m: _entry(m).update(resources=[]), "specs.{sid}.resources",
     "is a list, not an object"),
    ("entry-align-type", lambda m: _entry(m).update(kernarg_align="8"), "specs.{sid}.kernarg_align",
     "is a string, not an integer"),
    ("entry-unknown", lambda m: _entry(m).update(path="/etc/passwd"), "specs.{sid}.path", "unknown field"),
    # an entry: values
    ("entry-id-name", lambda m: _rename_spec(m, "../evil"), "specs.../evil", "not a plain name"),
    ("entry-id-differs", lambda m: _entry(m).update(id="other"), "specs.{sid}.id", "differs from the entry's name"),
    ("entry-key", lambda m: _entry(m).update(key="probe[behavior=ok,block=128]@gfx950"), "specs.{sid}.key",
     "does not match its family/params/target"),
    ("entry-param-value", lambda m: _entry(m)["params"].update(block=[64]), "specs.{sid}.params",
     "must be int, bool or str"),
    ("entry-file", lambda m: _entry(m).update(file="../x.co"), "specs.{sid}.file", "must be "),
    ("entry-size-negative", lambda m: _entry(m).update(size=-1), "specs.{sid}.size", "is negative"),
    ("entry-sha256", lambda m: _entry(m).update(sha256="ABC"), "specs.{sid}.sha256", "64 lowercase hex digits"),
    ("entry-resource-value", lambda m: _entry(m)["resources"].update(vgpr=-3), "specs.{sid}.resources.vgpr",
     "is not a count or a bool"),
    ("entry-block-shape", lambda m: _entry(m).update(block=[64, 1]), "specs.{sid}.block", "three positive ints"),
    ("entry-block-zero", lambda m: _entry(m).update(block=[0, 1, 1]), "specs.{sid}.block", "three positive ints"),
    # argument slots
    ("arg-not-object", lambda m: _entry(m)["args"].__setitem__(0, "x"), "specs.{sid}.args[0]",
     "is a string, not an object"),
    *[(f"arg-missing-{f}", lambda m, f=f: _drop(_arg(m), f), "specs.{sid}.args[0]." + f, "missing")
      for f in ("name", "ctype", "kind", "offset", "size")],
    ("arg-offset-type", lambda m: _arg(m).update(offset=0.0), "specs.{sid}.args[0].offset",
     "is a number, not an integer"),
    ("arg-unknown", lambda m: _arg(m).update(align=8), "specs.{sid}.args[0].align", "unknown field"),
    ("arg-ctype", lambda m: _arg(m).update(ctype="double"), "specs.{sid}.args[0].ctype", "is not one of"),
    ("arg-kind", lambda m: _arg(m).update(kind="by_value"), "specs.{sid}.args[0]", "must be kind 'global_buffer'"),
    ("arg-overlap", lambda m: _arg(m, 1).update(offset=_arg(m, 0)["offset"]), "specs.{sid}.args[1].offset",
     "overlaps the previous slot"),
    ("arg-name-duplicate", lambda m: _arg(m, 1).update(name=_arg(m, 0)["name"]), "specs.{sid}.args[1].name",
     "duplicate argument name"),
    ("arg-kernarg-size", lambda m: _entry(m).update(kernarg_size=4), "specs.{sid}.kernarg_size",
     "smaller than the arguments"),
    # one entry per spec key
    ("two-ids-one-key", _same_key_other_id, "specs.zzbogus000000000000000000", "is also the key of spec {sid}"),
]


class _Raw(str):
    """JSON text already written."""


def _pairs_json(pairs) -> _Raw:
    """A JSON object written from (name, value) pairs, so a name can repeat (json.dumps cannot)."""
    return _Raw("{" + ", ".join(f"{json.dumps(k)}: {v if isinstance(v, _Raw) else json.dumps(v)}"
                                for k, v in pairs) + "}")


def _duplicate_spec_id(m) -> str:
    sid = _sid(m)
    specs = _pairs_json([(s, e) for s, e in m["specs"].items()] + [(sid, m["specs"][sid])])
    return _pairs_json([(k, specs if k == "specs" else v) for k, v in m.items()])


def _duplicate_specs(m) -> str:
    """A second top-level `specs`: last-one-wins would empty the store while verify reports nothing."""
    return _pairs_json(list(m.items()) + [("specs", {})])


TEXT_CASES = [
    ("json-duplicate-spec-id", _duplicate_spec_id, "", "duplicate key '{sid}'"),
    ("json-duplicate-specs", _duplicate_specs, "", "duplicate key 'specs'"),
]
CASES = DICT_CASES + TEXT_CASES


def _broken_store(src, root, edit):
    """A copy of a real store whose manifest is edited (a dict edit, or a text built from the dict)."""
    root = copy_store(src, root)
    m = read_manifest(root)
    sid = _sid(m)
    out = edit(m)
    (root / MANIFEST_NAME).write_bytes(out.encode() if isinstance(out, str) else pretty_json(m))
    return root, sid


def _expected(root, field, says, sid):
    path = root / MANIFEST_NAME
    return (f"{path}: {field.format(sid=sid)}: " if field else f"{path}: "), says.format(sid=sid)


@pytest.mark.parametrize("name, edit, field, says", CASES, ids=[c[0] for c in CASES])
def test_schema_violation_is_refused_alike_by_reader_verify_and_merge(probe_store, tmp_path, name, edit, field,
                                                                      says, caplog):
    root, sid = _broken_store(probe_store, tmp_path / "broken", edit)
    where, what = _expected(root, field, says, sid)
    # The reader: a StoreError naming the store, the file and the field.
    with pytest.raises(StoreError) as opened:
        Store.open(root, "extra", missing_ok=False)
    message = str(opened.value)
    assert message.startswith(f"extra store {root} refused: {where}") and what in message, message
    # The runtime leaves that store out alone, with a warning naming it; a sound store keeps serving.
    with caplog.at_level("WARNING", logger="flyaot.store"):
        index = Index.open(config(tmp_path, extra=(root, probe_store)))
    assert [(loc.root, why) for loc, why in index.refused if loc.kind == "extra"] == [(root, message)]
    assert message in caplog.text
    assert index.lookup(PROBE64)[0].root == probe_store
    # Both verify commands run the one checker: the same message, one problem.
    assert verify.verify([Location("extra", root, True)]).problems == [f"FAIL {message}"]
    assert build_cli.main(["verify", str(root)]) == 1
    # merge refuses the same shard with the same reason and writes nothing.
    with pytest.raises(StoreError) as merged:
        merge([root], tmp_path / "out")
    assert str(merged.value) == message.replace("extra store", "shard store")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name, edit, field, says", DICT_CASES, ids=[c[0] for c in DICT_CASES])
def test_schema_violation_is_never_written(probe_store, tmp_path, name, edit, field, says):
    m = read_manifest(probe_store)
    sid = _sid(m)
    blobs = {s: (probe_store / e["file"]).read_bytes() for s, e in m["specs"].items()}
    edit(m)
    if isinstance(m.get("specs"), dict):
        blobs.update({s: b"x" for s in m["specs"] if s not in blobs})
    with pytest.raises(StoreError) as e:
        write_store(tmp_path / "out", m, blobs)
    assert str(e.value).startswith(f"refusing to write {tmp_path / 'out' / MANIFEST_NAME}: {field.format(sid=sid)}: ")
    assert says.format(sid=sid) in str(e.value)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("kind", ["package", "cache"])
def test_a_package_store_or_user_cache_with_a_repeated_key_is_refused_alone(probe_store, tmp_path, caplog, kind):
    """Every location reads through the one schema: a repeated JSON key in the package store or the
    user cache refuses that store alone; the spec is then served by the sound one."""
    home = tmp_path / "broken"          # the package's stores, or the user cache: one store per target below
    where = home / "gfx950" if kind == "package" else cache_store(home, "gfx950")
    root, sid = _broken_store(probe_store, where, _duplicate_specs)
    places = dict(package=home, extra=(probe_store,)) if kind == "package" else dict(cache=home, extra=(probe_store,))
    with caplog.at_level("WARNING", logger="flyaot.store"):
        rt = Runtime(config(tmp_path, **places))
        out = torch.zeros(4)
        rt.launch(probe.plan(out, 1.0))
    assert torch.equal(out, torch.full((4,), 2.0))
    assert f"{kind} store {root} refused: {root / MANIFEST_NAME}: cannot read manifest: duplicate key 'specs'" \
        in caplog.text
    assert [loc.kind for loc, _ in rt.index.refused if loc.root == root] == [kind]


def test_a_bogus_entry_cannot_hide_the_genuine_one(probe_store, tmp_path):
    """Two ids with one key: the store is refused (never served half), and the miss names it."""
    root, _ = _broken_store(probe_store, tmp_path / "broken", _same_key_other_id)
    with pytest.raises(MissingSpecError, match=f"Refused: extra store {root} refused: .*is also the key of spec"):
        Runtime(config(tmp_path, extra=(root,))).launch(probe.plan(torch.zeros(4), 1.0))


def test_merge_refuses_two_shards_holding_one_key_under_different_ids(probe_shards, tmp_path):
    """Each shard is sound alone; together they would hold two entries for one key."""
    s0 = copy_store(probe_shards[0], tmp_path / "s0")
    s1 = copy_store(probe_shards[1], tmp_path / "s1")
    m0, m1 = read_manifest(s0), read_manifest(s1)
    (sid0, e0), = m0["specs"].items()
    # shard 1 also holds shard 0's key, under another id (as a build from other sources would)
    other = "other0000000000000000000a"
    m1["specs"][other] = dict(e0, id=other, file=f"{other}.co")
    (s1 / f"{other}.co").write_bytes((s0 / e0["file"]).read_bytes())
    (s1 / MANIFEST_NAME).write_bytes(pretty_json(m1))
    with pytest.raises(StoreError, match=f"refusing to write {tmp_path / 'out' / MANIFEST_NAME}: specs.(other|{sid0})"
                                         ".*is also the key of spec"):
        merge([s0, s1], tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("edit, says", [(_duplicate_specs, "duplicate key 'specs'"),
                                        (_same_key_other_id, "is also the key of spec")])
def test_flyaot_verify_reports_a_repeated_key_as_a_refused_store(probe_store, tmp_path, monkeypatch, capsys, edit,
                                                                 says):
    """What a second `specs` or a second id of one key did: `flyaot verify` said 0 problems."""
    from flyaot.runtime import commands as cli
    root, _ = _broken_store(probe_store, tmp_path / "broken", edit)
    monkeypatch.setenv("FLYAOT_PREBUILT_PATH", str(root))
    monkeypatch.setenv("FLYAOT_CACHE_DIR", str(tmp_path / "cache"))
    rc = cli.main(["verify", "--no-load"])
    out = capsys.readouterr().out
    assert rc == 1 and f"FAIL extra store {root} refused: {root / MANIFEST_NAME}: " in out and says in out, out
    assert out.splitlines()[-1].endswith("; 1 problems")
