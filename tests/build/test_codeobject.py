"""The pure-Python code-object reader against real FlyDSL-compiled gfx950 objects."""
import re
import shutil
import subprocess

import pytest

from flyaot.formats import codeobject, msgpack


def _objects(probe_store):
    m = probe_store["manifest"]
    return [(e, (probe_store["out"] / e["file"]).read_bytes()) for e in m["specs"].values()]


def test_parses_real_objects(probe_store):
    for entry, data in _objects(probe_store):
        co = codeobject.parse(data)
        assert co.mach == "gfx950" and co.target.endswith("gfx950")
        k = co.kernel(entry["symbol"])
        assert [a.value_kind for a in k.args][:3] == ["global_buffer", "by_value", "by_value"]
        assert [(a.offset, a.size) for a in k.args][:3] == [(0, 8), (8, 4), (12, 4)]
        assert k.reqd_workgroup_size == tuple(entry["block"])
        kd = co.descriptor(entry["symbol"])
        assert kd.kernarg_size == k.kernarg_size
        assert kd.group_segment_fixed_size == k.resources.lds


@pytest.mark.skipif(not shutil.which("llvm-readelf-22"), reason="llvm-readelf-22 not installed (Debian llvm-22)")
def test_metadata_matches_llvm_readelf(probe_store):
    for entry, data in _objects(probe_store):
        path = probe_store["out"] / entry["file"]
        text = subprocess.run(["llvm-readelf-22", "--notes", str(path)], capture_output=True, text=True,
                              check=True).stdout
        k = codeobject.parse(data).kernel(entry["symbol"])

        def field(name):
            return int(re.search(rf"\.{name}:\s+(\d+)", text).group(1))

        assert field("kernarg_segment_size") == k.kernarg_size
        assert field("vgpr_count") == k.resources.vgpr
        assert field("sgpr_count") == k.resources.sgpr
        assert field("group_segment_fixed_size") == k.resources.lds
        assert field("private_segment_fixed_size") == k.resources.scratch
        assert field("max_flat_workgroup_size") == k.resources.max_workgroup_size
        offsets = [int(x) for x in re.findall(r"\.offset:\s+(\d+)", text)]
        assert offsets == [a.offset for a in k.args]
        assert re.search(r"amdhsa\.target:\s+(\S+)", text).group(1) == codeobject.parse(data).target


def test_msgpack_decoder_covers_wire_types():
    # Hand-assembled msgpack: {"a": [1, -1, 300, -200, 70000, 1.5, true, None, "xy"], "b": bin8(2)}
    blob = bytes([0x82, 0xA1, ord("a"), 0x99, 0x01, 0xFF, 0xCD, 0x01, 0x2C, 0xD1, 0xFF, 0x38,
                  0xCE, 0x00, 0x01, 0x11, 0x70, 0xCB, 0x3F, 0xF8, 0, 0, 0, 0, 0, 0, 0xC3, 0xC0,
                  0xA2, ord("x"), ord("y"), 0xA1, ord("b"), 0xC4, 0x02, 0x10, 0x20])
    assert msgpack.unpackb(blob) == {"a": [1, -1, 300, -200, 70000, 1.5, True, None, "xy"], "b": b"\x10\x20"}
    with pytest.raises(msgpack.MsgpackError):
        msgpack.unpackb(blob[:-1])


def test_rejects_non_code_objects():
    with pytest.raises(codeobject.CodeObjectError):
        codeobject.parse(b"not an elf at all")


def test_malformed_metadata_is_a_code_object_error(probe_store):
    entry = next(iter(probe_store["manifest"]["specs"].values()))
    data = (probe_store["out"] / entry["file"]).read_bytes()
    key = b"\xa5.name"                      # the kernel's ".name" key in the metadata map
    assert data.count(key) == 1
    with pytest.raises(codeobject.CodeObjectError, match="malformed AMDGPU metadata"):
        codeobject.parse(data.replace(key, b"\xa5.nbme"))
