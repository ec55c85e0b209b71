"""Kernel families: FlyDSL kernels (kernel.py), their spec sets (specs.py), launch plans (plan.py)
and torch reference math (reference.py), one subpackage per family.

Only kernel.py imports flydsl; everything else here is importable by the runtime.

FLYAOT_EXTRA_FAMILIES (folders separated by os.pathsep) adds folders whose subpackages are families
too, imported as `flyaot.kernel_defs.<name>`: the repository's test-only families live in
tests/families and are found this way, so the wheel never holds them.
"""
from ..formats import env

__path__ += list(env.value("FLYAOT_EXTRA_FAMILIES"))  # noqa: F821
