"""Packaging: the repository root is the `flyaot` package; prebuilt code objects ride along as data."""
import pathlib

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

ROOT = pathlib.Path(__file__).parent
SUBPACKAGES = ["formats", "kernel_defs", "build_tools", "prebuilt", "runtime", "emu", "ops", "compat"]
# Top-level modules of the repository that are not part of the installed package.
NOT_SHIPPED = {"setup", "conftest"}


def find_packages():
    pkgs = ["flyaot"]
    for sub in SUBPACKAGES:
        for init in sorted((ROOT / sub).rglob("__init__.py")):
            rel = init.parent.relative_to(ROOT).parts
            pkgs.append(".".join(("flyaot",) + rel))
    return pkgs


class BuildPy(build_py):
    def find_package_modules(self, package, package_dir):
        mods = super().find_package_modules(package, package_dir)
        if package == "flyaot":
            mods = [m for m in mods if m[1] not in NOT_SHIPPED]
        return mods


def version():
    for line in (ROOT / "__init__.py").read_text().splitlines():
        if line.startswith("__version__"):
            return line.split("=")[1].strip().strip('"')
    raise RuntimeError("no __version__ in __init__.py")


setup(
    name="flyaot",
    version=version(),
    description="Ahead-of-time compiled FlyDSL kernels for AMD gfx950 (MI355X)",
    packages=find_packages(),
    package_dir={"flyaot": "."},
    package_data={"flyaot.prebuilt": ["manifest.json", "gfx950/*.co"]},
    python_requires=">=3.10",
    install_requires=["torch>=2.4"],
    extras_require={"jit": ["flydsl==0.5.0", "ziglang"]},
    # The C launch path (stable ABI, one build for CPython >= 3.10); optional: without a C compiler the
    # package still installs and launches through Python.
    ext_modules=[Extension("flyaot.runtime._launch", ["runtime/_launch.c"], optional=True, py_limited_api=True)],
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
    cmdclass={"build_py": BuildPy},
    zip_safe=False,
)
