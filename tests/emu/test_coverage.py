"""Every opcode of every shipped code object has emulator semantics (else CI fails, naming them)."""
import json
import pathlib

import pytest

from flyaot.emu.program import code_object_mnemonics
from flyaot.emu.semantics import HANDLERS

STORE = pathlib.Path(__file__).resolve().parents[2] / "prebuilt" / "gfx950"     # the default target's store


@pytest.mark.skipif(not (STORE / "manifest.json").exists(), reason="no prebuilt store: run `make prebuilt`")
def test_every_prebuilt_opcode_has_semantics():
    manifest = json.loads((STORE / "manifest.json").read_text())
    missing = {}
    for entry in manifest["specs"].values():
        for mnemonic in code_object_mnemonics((STORE / entry["file"]).read_bytes()):
            if mnemonic not in HANDLERS:
                missing.setdefault(mnemonic, entry["key"])
    assert not missing, "opcodes without emulator semantics (first spec using each): " + ", ".join(
        f"{m} ({k})" for m, k in sorted(missing.items()))
