"""The one table of environment variables (formats/env.py) is complete and is what everything reads:

- every FLYAOT_* name in shipped code, the docs or the README is a row of the table;
- every row's readers pass its name to the table, and no shipped module reads a variable of the table
  from os.environ around it;
- docs/environment.md's table is the generated one; `flyaot env` lists every row, unusable ones marked.
"""
import ast
import json
import pathlib
import re

import pytest

from flyaot.formats import env
from flyaot.runtime import drivers
from tests.test_import_graph import REPO, shipped_modules
from tools import env_doc

NAME = re.compile(r"_?FLYAOT_[A-Z0-9_]*[A-Z0-9]")
TABLE = env.BY_NAME
ENV_MODULE = REPO / "formats" / "env.py"


def _named(paths) -> dict:
    """FLYAOT_* name -> files naming it."""
    out = {}
    for path in paths:
        for name in set(NAME.findall(path.read_text())):
            out.setdefault(name, []).append(path.relative_to(REPO).as_posix())
    return out


def test_every_flyaot_variable_named_in_shipped_code_is_in_the_table():
    named = _named(shipped_modules())
    assert {n: f for n, f in named.items() if n not in TABLE} == {}
    assert len([n for n in named if n in TABLE]) >= 18


def test_every_flyaot_variable_the_docs_name_is_in_the_table():
    named = _named([REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))])
    assert {n: f for n, f in named.items() if n not in TABLE} == {}


def _constants(tree) -> dict:
    """Module-level NAME = "text" assignments."""
    return {t.id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
            for t in node.targets if isinstance(t, ast.Name)}


def _text(node, consts):
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return consts.get(node.id)
    return None


def _is_environ(node) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ"


def _reads(path: pathlib.Path):
    """(names passed as a first argument to a call, names read from os.environ / os.getenv directly)."""
    tree = ast.parse(path.read_text())
    consts = _constants(tree)
    passed, direct = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            name = _text(node.args[0], consts)
            if name in TABLE:
                passed.add(name)
                func = node.func
                if isinstance(func, ast.Attribute) and (
                        (func.attr in ("get", "pop", "setdefault") and _is_environ(func.value)) or func.attr == "getenv"):
                    direct.add(name)
        elif isinstance(node, ast.Subscript) and _is_environ(node.value) and isinstance(node.ctx, ast.Load):
            if _text(node.slice, consts) in TABLE:
                direct.add(_text(node.slice, consts))
        elif isinstance(node, ast.Compare) and any(_is_environ(c) for c in node.comparators):
            if _text(node.left, consts) in TABLE:
                direct.add(_text(node.left, consts))
    return passed, direct


def test_shipped_code_reads_the_variables_through_the_table_only():
    direct = {p.relative_to(REPO).as_posix(): sorted(_reads(p)[1]) for p in shipped_modules() if p != ENV_MODULE}
    assert {f: names for f, names in direct.items() if names} == {}


def test_each_row_names_the_modules_that_read_it():
    readers = {}
    for p in shipped_modules():
        for name in _reads(p)[0]:
            readers.setdefault(name, set()).add(p.relative_to(REPO).as_posix())
    for var in env.VARIABLES:
        assert set(var.readers) <= readers.get(var.name, set()), (var.name, readers.get(var.name))


def test_the_device_choices_are_the_driver_table():
    assert TABLE["FLYAOT_DEVICE"].choices == drivers.NAMES


def test_the_docs_table_is_generated_from_the_table():
    page = REPO / "docs" / "environment.md"
    assert env_doc.current(page.read_text()) == env_doc.render(), \
        "run `PYTHONPATH=<dir holding flyaot> python3 tools/env_doc.py docs/environment.md`"


@pytest.fixture
def run_env(monkeypatch, capsys, tmp_path):
    from flyaot import cli

    def go(*args, **variables):
        for var in env.VARIABLES:
            monkeypatch.delenv(var.name, raising=False)
        monkeypatch.setenv("FLYAOT_CACHE_DIR", str(tmp_path))
        for k, v in variables.items():
            monkeypatch.setenv(k, v)
        rc = cli.main(["env", *args])
        return rc, capsys.readouterr().out
    return go


def test_flyaot_env_lists_every_variable_and_marks_unusable_values(run_env, tmp_path):
    bad = {"FLYAOT_JIT_TIMEOUT": "nan", "FLYAOT_DEVICE": "gpu", "FLYAOT_LOG_LEVEL": "loud",
           "FLYAOT_EMU_TIMING_SAMPLES": "few", "FLYAOT_BUILD_JOBS": ""}
    rc, out = run_env("--json", **bad)
    assert rc == 0
    report = json.loads(out)
    assert list(report["env"]) == [v.name for v in env.VARIABLES]
    assert report["env"]["FLYAOT_CACHE_DIR"] == str(tmp_path) and report["env"]["FLYAOT_BUILD_JOBS"] == ""
    assert report["env"]["FLYAOT_CHECK"] is None
    assert sorted(report["env_invalid"]) == sorted(n for n, v in bad.items() if v)
    assert report["env_invalid"]["FLYAOT_JIT_TIMEOUT"].startswith("FLYAOT_JIT_TIMEOUT='nan': expected")
    # the stores are still reported (with the unusable variables at their defaults)
    assert [s["kind"] for s in report["stores"]][-1] == "cache"
    rc, out = run_env(**bad)
    lines = {ln.split()[0]: ln for ln in out.split("env:\n", 1)[1].splitlines()}
    assert list(lines) == [v.name for v in env.VARIABLES]
    assert "INVALID: FLYAOT_DEVICE='gpu': expected one of emu, hip, cuda" in lines["FLYAOT_DEVICE"]
    assert "INVALID" not in lines["FLYAOT_CACHE_DIR"] and str(tmp_path) in lines["FLYAOT_CACHE_DIR"]
    assert "default 900.0" in run_env()[1].split("env:\n", 1)[1]
