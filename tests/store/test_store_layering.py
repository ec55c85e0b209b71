"""The store package is a leaf above formats: it imports formats, targets, the package's version
constants and the standard library, nothing else (never runtime, build_tools, kernel_defs or torch)."""
import ast
import pathlib
import sys

import flyaot.store

STORE = pathlib.Path(flyaot.store.__file__).parent
ROOT_NAMES = {"targets", "__version__", "FLYDSL_VERSION"}


def _imports(path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from ((0, a.name, None) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            yield from ((node.level, node.module, a.name) for a in node.names)


def test_store_imports_only_formats_targets_and_the_standard_library():
    bad = []
    for path in sorted(STORE.glob("*.py")):
        for level, module, name in _imports(path):
            ok = ((level == 0 and module.split(".")[0] in sys.stdlib_module_names) or level == 1
                  or (level == 2 and module is None and name in ROOT_NAMES)
                  or (level == 2 and module.split(".")[0] in ("formats", "targets")))
            if not ok:
                bad.append(f"{path.name}: {'.' * level}{module or ''} import {name}")
    assert not bad, bad
