"""Kernel families, one subpackage per family: sizes (geometry.py), the declaration (specs.py), input
checks (inputs.py), launch plans (plan.py), FlyDSL kernels (kernel.py) and torch reference math
(reference.py); the contract is in registry.py.

flydsl is imported only by a family's kernel module and the modules it imports (mqa_decode/direct.py,
mqa_common/blocks.py); everything else here is importable by the runtime.

FLYAOT_EXTRA_FAMILIES (folders separated by os.pathsep) adds folders whose subpackages are families
too, imported as `flyaot.kernel_defs.<name>`: the repository's test-only families live in
tests/families and are found this way, so the wheel never holds them.
"""
from ..formats import env

__path__ += list(env.value("FLYAOT_EXTRA_FAMILIES"))  # noqa: F821
