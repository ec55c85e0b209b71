"""Kernel families: FlyDSL kernels (kernel.py), their spec sets (specs.py), launch plans (plan.py)
and torch reference math (reference.py), one subpackage per family.

Only kernel.py imports flydsl; everything else here is importable by the runtime.
"""
