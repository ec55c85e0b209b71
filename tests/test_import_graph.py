"""Imports only run down: walk the AST of every module the wheel ships and fail on an upward import.

Rooms (top-level names inside flyaot) and what each may import from flyaot:
  targets   nothing             formats   nothing            emu    formats only
  kernel_defs   formats and targets only (FlyDSL's compile back end lives in build_tools)
  inputs    (inputs.py, the public input builders) kernel_defs, formats and targets only
  build_tools   anything but runtime, ops and emu
  runtime   anything but ops, and build_tools / kernel_defs only from inside a function of the
            modules that take the JIT path (the lazy compile call and the staleness check it needs)
A module-level import and an import inside a function both count; only the JIT exception is lazy.
"""
import ast
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
SHIPPED_ROOMS = ("formats", "kernel_defs", "build_tools", "prebuilt", "runtime", "emu", "ops")
TOP_LEVEL = ("targets.py", "inputs.py", "__init__.py", "__main__.py")

FORBIDDEN = {
    "targets": lambda room, lazy, where: True,
    "formats": lambda room, lazy, where: True,
    "emu": lambda room, lazy, where: room != "formats",
    "kernel_defs": lambda room, lazy, where: room not in ("formats", "targets"),
    # the public input builders: layout code of the kernel definitions, nothing that loads or launches
    "inputs": lambda room, lazy, where: room not in ("kernel_defs", "formats", "targets"),
    "build_tools": lambda room, lazy, where: room in ("runtime", "ops", "emu"),
    "runtime": lambda room, lazy, where: room == "ops" or (
        room in ("build_tools", "kernel_defs") and not (lazy and where in JIT_MODULES)),
}
# The runtime reaches below itself only lazily: the JIT fallback (build tools) and the content-id check
# that tells a stale stored entry from a current one (the kernel sources' hash).
JIT_MODULES = {"runtime/jit.py", "runtime/dispatch.py"}


def shipped_modules():
    files = [REPO / f for f in TOP_LEVEL]
    for room in SHIPPED_ROOMS:
        files += sorted(p for p in (REPO / room).rglob("*.py") if "__pycache__" not in p.parts)
    return files


def _module_parts(path: pathlib.Path) -> list:
    rel = path.relative_to(REPO).with_suffix("")
    parts = ["flyaot", *rel.parts]
    return parts[:-1] if parts[-1] == "__init__" else parts


def flyaot_imports(path: pathlib.Path):
    """(imported flyaot room or '' for flyaot itself, inside a function?, line) for every import."""
    tree = ast.parse(path.read_text(), str(path))
    package = _module_parts(path)
    if path.name != "__init__.py":
        package = package[:-1]
    out = []

    def visit(node, lazy):
        for child in ast.iter_child_nodes(node):
            inner = lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            targets = []
            if isinstance(child, ast.Import):
                targets = [a.name.split(".") for a in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = package[:len(package) - child.level + 1] if child.level else []
                mod = base + (child.module.split(".") if child.module else [])
                targets = [mod + [a.name] if not child.module else mod for a in child.names]
            for t in targets:
                if t and t[0] == "flyaot":
                    room = t[1] if len(t) > 1 else ""
                    room = room[:-3] if room.endswith(".py") else room
                    out.append((room, inner, child.lineno))
            visit(child, inner)

    visit(tree, False)
    return out


def room_of(path: pathlib.Path) -> str:
    rel = path.relative_to(REPO)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def upward_imports() -> list:
    bad = []
    for path in shipped_modules():
        rule = FORBIDDEN.get(room_of(path))
        if rule is None:
            continue
        where = path.relative_to(REPO).as_posix()
        for room, lazy, line in flyaot_imports(path):
            if room == room_of(path) or room in ("__version__", "FLYDSL_VERSION"):
                continue
            if rule(room, lazy, where):
                bad.append(f"{where}:{line} imports flyaot.{room}")
    return bad


def test_no_shipped_module_imports_upward():
    assert upward_imports() == []


@pytest.mark.parametrize("source, room, expected", [
    ("from ..ops import gemm_a16wfp4\n", "runtime", "imports flyaot.ops"),
    ("from ..build_tools import toolchain\n", "runtime", "imports flyaot.build_tools"),
    ("def f():\n    from ..kernel_defs import registry\n", "runtime", "imports flyaot.kernel_defs"),
    ("from ..runtime import errors\n", "emu", "imports flyaot.runtime"),
    ("import flyaot.targets\n", "formats", "imports flyaot.targets"),
    ("from . import formats\n", "targets", "imports flyaot.formats"),
    ("from ..build_tools.flydsl_compile import compile_launcher\n", "kernel_defs", "imports flyaot.build_tools"),
    ("from ..runtime import launch\n", "build_tools", "imports flyaot.runtime"),
    ("from .ops import gemm_a16wfp4\n", "inputs", "imports flyaot.ops"),
])
def test_an_upward_import_is_caught(tmp_path, monkeypatch, source, room, expected):
    """The walker sees a planted upward import in each ruled room (so the test above can fail)."""
    fake = tmp_path / "repo"
    for r in SHIPPED_ROOMS:
        (fake / r).mkdir(parents=True)
    for f in TOP_LEVEL:
        (fake / f).write_text("")
    path = fake / (f"{room}.py" if room in ("targets", "inputs") else f"{room}/planted.py")
    path.write_text(source)
    monkeypatch.setitem(globals(), "REPO", fake)
    assert any(expected in b for b in upward_imports()), upward_imports()
