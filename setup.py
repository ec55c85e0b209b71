"""Packaging: the repository root is the `flyaot` package; prebuilt code objects ride along as data."""
import pathlib
import shutil

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

ROOT = pathlib.Path(__file__).parent
SUBPACKAGES = ["formats", "store", "kernel_defs", "build_tools", "prebuilt", "runtime", "emu", "ops", "compat"]
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
    def run(self):
        # Start from an empty build/lib/flyaot: modules a previous build copied there (since moved or
        # deleted) and code objects of an older store would otherwise ride along in the next wheel.
        shutil.rmtree(pathlib.Path(self.build_lib) / "flyaot", ignore_errors=True)
        super().run()

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
    description="Ahead-of-time compiled FlyDSL kernels for AMD Instinct GPUs (MI355X)",
    long_description=(ROOT / "README.md").read_text(),
    long_description_content_type="text/markdown",
    # No license has been granted yet: all rights reserved until the maintainers choose one.
    license="Proprietary (no license granted)",
    project_urls={"FlyDSL (the kernel compiler)": "https://github.com/ROCm/FlyDSL",
                  "ROCm build of PyTorch (install it first)": "https://pytorch.org/get-started/locally/"},
    classifiers=[
        "Development Status :: 3 - Alpha",
        "Environment :: GPU",
        "Intended Audience :: Developers",
        "Intended Audience :: Science/Research",
        "License :: Other/Proprietary License",
        "Operating System :: POSIX :: Linux",
        "Programming Language :: Python :: 3",
        "Programming Language :: Python :: 3 :: Only",
        "Programming Language :: Python :: 3.10",
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: 3.12",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
    keywords=["gfx950", "MI355X", "ROCm", "FlyDSL", "AOT", "kernels", "MXFP4"],
    packages=find_packages(),
    package_dir={"flyaot": "."},
    package_data={"flyaot.prebuilt": ["*/manifest.json", "*/*.co"]},   # one store per target directory
    python_requires=">=3.10",
    # The lowest torch a run has proven (see README, "Tested versions").
    install_requires=["torch>=2.11"],
    extras_require={
        # The emulator (CPU tensors, FLYAOT_DEVICE=emu) computes with numpy.
        "emu": ["numpy>=1.26"],
        # JIT fallback for specs that were not prebuilt; FlyDSL imports numpy without declaring it.
        "jit": ["flydsl==0.5.0", "ziglang>=0.13", "numpy>=1.26"],
        # benchmarks/ only (gfx950_model.py --plot); nothing in the package imports it.
        "bench": ["matplotlib>=3.8"],
    },
    entry_points={"console_scripts": ["flyaot = flyaot.cli:main"]},
    # The C launch path (stable ABI, one build for CPython >= 3.10); optional: without a C compiler the
    # package still installs and launches through Python.
    ext_modules=[Extension("flyaot.runtime._launch", ["runtime/_launch.c"], optional=True, py_limited_api=True)],
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
    cmdclass={"build_py": BuildPy},
    zip_safe=False,
)
