"""docs/architecture.md claims only what the code does (as tests/test_import_graph.py does for imports):

- every module the room tables and the store table name exists where they say, and every module of
  build_tools/, runtime/ and store/ is named there;
- the family contract lists exactly the fields of `registry.Family`;
- inside kernel_defs (and tests/families), the modules that import flydsl are exactly each family's
  kernel module and the family modules it imports (the invariant "flydsl only in the kernel modules");
- the driver list is `runtime.drivers.DRIVERS`.
"""
import ast
import dataclasses
import pathlib
import re

from flyaot.kernel_defs import registry
from flyaot.runtime import drivers

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
NAMED_IN_FULL = ("build_tools", "runtime", "store")     # rooms whose every module the tables name


def section(title: str) -> str:
    text = DOC.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


def table_rows(text: str) -> dict:
    """First cell's backticked name -> the backticked names of the other cells, per table row."""
    rows = {}
    for line in text.splitlines():
        cells = line.split("|")[1:-1]
        m = re.fullmatch(r"\s*`([^`]+)`\s*", cells[0]) if cells else None
        if m:
            rows[m.group(1)] = re.findall(r"`([^`]+)`", "|".join(cells[1:]))
    return rows


def named_modules(room: str, names: list) -> set:
    """The .py files of `room` that `names` mention: bare, as a path from the root or inside the room,
    or (kernel_defs) a file of the family folders, which stands for each family's file of that name."""
    out = set()
    for n in names:
        if n.endswith(".py") and "<" not in n:         # `_<family>.py` is a pattern, not a module
            candidates = [ROOT / room / n, ROOT / n] + sorted((ROOT / room).glob(f"*/{n}"))
            out.add(next((c for c in candidates if c.is_file()), ROOT / room / n))
    return out


def test_every_module_a_table_names_exists_and_the_full_rooms_are_named_whole():
    rooms = table_rows(section("Rooms"))
    rooms["store/"] = list(table_rows(section("Stores")))
    assert {"kernel_defs/", "build_tools/", "runtime/", "store/", "emu/"} <= set(rooms)
    missing, unnamed = [], []
    for room, names in rooms.items():
        if not room.endswith("/"):
            continue
        named = named_modules(room.rstrip("/"), names)
        missing += [p.relative_to(ROOT).as_posix() for p in named if not p.is_file()]
        if room.rstrip("/") in NAMED_IN_FULL:
            for p in sorted((ROOT / room).glob("*.py")):
                if p.name != "__init__.py" and p not in named:
                    unnamed.append(p.relative_to(ROOT).as_posix())
    assert missing == [] and unnamed == []


def test_the_family_contract_lists_exactly_the_family_fields():
    listed = re.findall(r"^- `(\w+)", section("Family contract"), re.M)
    assert listed, "no field bullets found"
    extra = {"axes"} if "axes" not in listed else set()          # stated with `name` on one bullet
    assert set(listed) | extra == {f.name for f in dataclasses.fields(registry.Family)}


def _flydsl_and_family_imports(path: pathlib.Path):
    """(imports flydsl?, the own-family module names it imports)."""
    tree = ast.parse(path.read_text(), str(path))
    flydsl, own = False, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            flydsl |= any(a.name.split(".")[0] == "flydsl" for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and (node.module or "").split(".")[0] == "flydsl":
                flydsl = True
            elif node.level == 1:
                own |= {node.module.split(".")[0]} if node.module else {a.name for a in node.names}
            elif node.level == 2 and node.module:
                own |= {"../" + node.module.split(".")[0] + "/" + a.name for a in node.names}
                own |= {"../" + node.module.replace(".", "/")}
    return flydsl, own


def test_flydsl_is_imported_only_by_kernel_modules_and_what_they_import():
    bases = (ROOT / "kernel_defs", ROOT / "tests" / "families")
    importing = {p for base in bases for p in base.rglob("*.py")
                 if "__pycache__" not in p.parts and _flydsl_and_family_imports(p)[0]}
    allowed = set()
    for base in bases:
        for specs in base.glob("*/specs.py"):
            todo = [specs.parent / f"{registry.Family.kernel}.py"]
            while todo:
                path = todo.pop()
                if path in allowed or not path.is_file():
                    continue
                allowed.add(path)
                for name in _flydsl_and_family_imports(path)[1]:
                    if name.startswith("../"):
                        todo += [base / (name[3:] + ".py")]
                    else:
                        todo.append(path.parent / f"{name}.py")
    assert importing, "the walk found no flydsl import at all"
    assert sorted(p.relative_to(ROOT).as_posix() for p in importing - allowed) == []


def test_the_driver_list_is_the_driver_table():
    listed = re.findall(r"^- `(\w+)`: `(\w+)`", section("Drivers"), re.M)
    assert {name: cls for name, cls in listed} == {name: where.split(":")[1] for name, where in drivers.DRIVERS.items()}
