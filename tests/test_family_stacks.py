"""Every family folder is a one-way stack (kernel_defs/registry.py states the contract):

  geometry.py  sizes, symbol, block, tile tables: imports no module of its own family
  specs.py     FAMILY: never the plan, the kernel or the input checks
  plan.py      imports FAMILY from .specs at module level (no lazy lookup of the declaration)
and no import cycle inside a folder, counting imports inside functions; a family reaches another
family only through that family's plan.py. Walks the AST of kernel_defs/*/ and tests/families/*/.
"""
import ast
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
UPPER = {"plan", "kernel", "inputs"}       # what specs.py may never import


def family_dirs(repo=None) -> list:
    repo = repo or REPO
    return sorted(p.parent for base in (repo / "kernel_defs", repo / "tests" / "families")
                  for p in base.glob("*/specs.py"))


def imports(path: pathlib.Path, family: str, families: set):
    """(own module or None, other family or None, other family's module, at module level?, line) for
    every import of `path` that lands in kernel_defs, a family module being flyaot.kernel_defs.<family>.<stem>."""
    package = ["flyaot", "kernel_defs", family]
    out = []

    def visit(node, top):
        for child in ast.iter_child_nodes(node):
            inner_top = top and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                                      ast.ClassDef))
            names = []
            if isinstance(child, ast.Import):
                names = [a.name.split(".") for a in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = package[:len(package) - child.level + 1] if child.level else []
                mod = base + (child.module.split(".") if child.module else [])
                names = [mod + [a.name] for a in child.names]
            for t in names:
                if t[:2] != ["flyaot", "kernel_defs"] or len(t) < 4:
                    continue
                if t[2] == family:
                    out.append((t[3], None, None, inner_top, child.lineno))
                elif t[2] in families:
                    out.append((None, t[2], t[3], inner_top, child.lineno))
            visit(child, inner_top)

    visit(ast.parse(path.read_text(), str(path)), True)
    return out


def stack_problems(repo=None) -> list:
    dirs = family_dirs(repo)
    families = {d.name for d in dirs}
    bad = []
    for d in dirs:
        modules = {p.stem: p for p in d.glob("*.py")}
        graph = {m: set() for m in modules}
        for stem, path in modules.items():
            where = path.relative_to(repo or REPO).as_posix()
            tree = ast.parse(path.read_text(), str(path))
            if any(isinstance(n, ast.FunctionDef) and n.name == "_family" for n in ast.walk(tree)):
                bad.append(f"{where}: a lazy _family() lookup")
            found = imports(path, d.name, families)
            for own, other, other_mod, top, line in found:
                if other is not None and other_mod != "plan":
                    bad.append(f"{where}:{line} reaches {other}.{other_mod} (only {other}.plan is public)")
                if own is None or own not in modules or own == stem:
                    continue
                graph[stem].add(own)
                if stem == "geometry":
                    bad.append(f"{where}:{line} imports its family's {own} (geometry is the bottom)")
                if stem == "specs" and own in UPPER:
                    bad.append(f"{where}:{line} imports {own} (specs never imports the layer above it)")
            if stem == "plan" and not any(own == "specs" and top for own, _, _, top, _ in found):
                bad.append(f"{where}: does not import FAMILY from .specs at module level")
        bad += [f"{d.relative_to(repo or REPO).as_posix()}: import cycle {' -> '.join(c)}" for c in cycles(graph)]
    return bad


def cycles(graph: dict) -> list:
    """One cycle per strongly connected part of more than one module (or a module importing itself)."""
    out, state = [], {}

    def walk(node, path):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                out.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                walk(nxt, path + [nxt])
        state[node] = "done"

    for n in sorted(graph):
        if n not in state:
            walk(n, [n])
    return out


def test_every_family_folder_is_a_one_way_stack():
    assert len(family_dirs()) >= 7
    assert stack_problems() == []


def _plant(tmp_path, files: dict) -> pathlib.Path:
    repo = tmp_path / "repo"
    for name, other in (("fam", "plan"), ("other", "plan")):
        d = repo / "kernel_defs" / name
        d.mkdir(parents=True)
        (d / "geometry.py").write_text("")
        (d / "specs.py").write_text("from . import geometry\n")
        (d / "plan.py").write_text("from .specs import FAMILY\n")
    (repo / "tests" / "families").mkdir(parents=True)
    for rel, text in files.items():
        (repo / "kernel_defs" / rel).write_text(text)
    return repo


@pytest.mark.parametrize("files, expected", [
    ({"fam/specs.py": "from . import plan\n"}, "imports plan"),
    ({"fam/geometry.py": "def f():\n    from .specs import FAMILY\n"}, "geometry is the bottom"),
    ({"fam/kernel.py": "from . import plan\n", "fam/plan.py": "from .specs import FAMILY\n"
      "def g():\n    from . import kernel\n"}, "import cycle"),
    ({"fam/plan.py": "def _family():\n    from .specs import FAMILY\n    return FAMILY\n"}, "lazy _family"),
    ({"fam/plan.py": "from .specs import FAMILY\nfrom ..other import geometry\n"}, "only other.plan is public"),
    ({"fam/plan.py": "def f():\n    from .specs import FAMILY\n"}, "at module level"),
])
def test_a_broken_stack_is_caught(tmp_path, files, expected):
    """Each rule sees a planted violation (so the test above can fail)."""
    repo = _plant(tmp_path, {})
    assert stack_problems(repo) == []
    for rel, text in files.items():
        (repo / "kernel_defs" / rel).write_text(text)
    assert any(expected in p for p in stack_problems(repo)), stack_problems(repo)
