"""Find an ld.lld that links our targets' code objects and prepare the private toolkit folder FlyDSL compiles with.

FlyDSL looks for `$ROCM_PATH/llvm/bin/ld.lld`. We never point it at a system ROCm: we make our own
folder whose `llvm/bin/ld.lld` is a small script running the linker we found, in this order:
FLYAOT_LLD, $ROCM_PATH/llvm/bin/ld.lld, /opt/rocm/llvm/bin/ld.lld, ld.lld or ld.lld-NN on PATH,
the PyPI `ziglang` package (`python -m ziglang ld.lld`).
"""
import logging
import hashlib
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass

from .. import FLYDSL_VERSION, targets
from ..formats import env

log = logging.getLogger("flyaot.build")


# First line after the shebang of the wrapper we write: a candidate carrying it is one of our own
# toolkit folders (say ROCM_PATH was inherited from a process that ran setup_process_env), and
# choosing it would make the wrapper exec itself forever.
WRAPPER_MARK = "# flyaot toolkit wrapper"


class ToolchainError(RuntimeError):
    pass


@dataclass(frozen=True)
class Linker:
    command: tuple           # argv prefix that runs ld.lld
    origin: str              # where it was found, for messages
    version: str             # e.g. "LLD 22.1.8"


def _lld_version(cmd) -> str:
    try:
        out = subprocess.run([*cmd, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    m = re.search(r"LLD (\d+)\.(\d+)\.(\d+)", out.stdout + out.stderr)
    return f"LLD {m.group(1)}.{m.group(2)}.{m.group(3)}" if m and out.returncode == 0 else ""


def _candidates():
    explicit = env.value("FLYAOT_LLD")
    if explicit is not None:      # an explicit choice: the only candidate (see find_linker)
        yield "FLYAOT_LLD", explicit
        return
    rocm = env.value("ROCM_PATH")
    if rocm:
        yield "$ROCM_PATH", (str(pathlib.Path(rocm) / "llvm" / "bin" / "ld.lld"),)
    yield "/opt/rocm", ("/opt/rocm/llvm/bin/ld.lld",)
    found = shutil.which("ld.lld")
    if found:
        yield "PATH", (found,)
    versioned = set()
    for d in os.environ.get("PATH", "").split(os.pathsep):
        try:
            versioned.update(p for p in os.listdir(d) if re.fullmatch(r"ld\.lld-\d+", p))
        except OSError:
            continue
    for name in sorted(versioned, key=lambda n: -int(n.split("-")[1])):
        yield "PATH", (shutil.which(name),)
    try:
        import ziglang  # noqa: F401  (only to see whether the package is installed)
        yield "ziglang", (sys.executable, "-m", "ziglang", "ld.lld")
    except ImportError:
        pass


def _is_our_wrapper(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(256).split(b"\n")[1:2] == [WRAPPER_MARK.encode()]
    except OSError:
        return False


def _explicit_linker(cmd) -> Linker:
    """FLYAOT_LLD is set: use it or fail naming it; never fall back to another linker silently."""
    shown = repr(shlex.join(cmd))
    if not os.access(cmd[0], os.X_OK) and not shutil.which(cmd[0]):
        raise ToolchainError(f"FLYAOT_LLD={shown}: {cmd[0]} is not an executable file")
    if _is_our_wrapper(shutil.which(cmd[0]) or cmd[0]):
        raise ToolchainError(f"FLYAOT_LLD={shown} is a flyaot toolkit wrapper, not a linker")
    version = _lld_version(cmd)
    major = int(version.split()[1].split(".")[0]) if version else 0
    if major < 17:
        raise ToolchainError(f"FLYAOT_LLD={shown}: `{' '.join(cmd)} --version` "
                             f"{'reports ' + version if version else 'did not run or is not LLD'}; "
                             "gfx950 needs LLD 17 or newer")
    return Linker(tuple(cmd), "FLYAOT_LLD", version)


def find_linker() -> Linker:
    """The first candidate that runs and is LLD >= 17 (the oldest that links every target in targets.py);
    else one clear error. A set FLYAOT_LLD is the only candidate: unusable, it is an error naming it."""
    tried = []
    for origin, cmd in _candidates():
        if origin == "FLYAOT_LLD":
            return _explicit_linker(cmd)
        if origin != "ziglang" and not (cmd[0] and os.access(cmd[0], os.X_OK)):
            tried.append(f"{origin}: {cmd[0]} (not found)")
            continue
        if origin != "ziglang" and _is_our_wrapper(cmd[0]):
            continue
        version = _lld_version(cmd)
        major = int(version.split()[1].split(".")[0]) if version else 0
        if major >= 17:
            return Linker(tuple(cmd), origin, version)
        tried.append(f"{origin}: {' '.join(cmd)} ({version or 'did not run'})")
    raise ToolchainError(
        "no ld.lld that can link AMDGPU code objects was found. Install one with "
        "`python -m pip install ziglang` (ships LLD 22), or Debian's `apt-get install lld-22`, "
        "or set FLYAOT_LLD to an ld.lld (LLVM 17 or newer). Tried: " + "; ".join(tried or ["nothing"])
    )


def user_cache_home() -> pathlib.Path:
    return pathlib.Path(env.value("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache")


def default_toolkit_dir() -> pathlib.Path:
    base = env.value("FLYAOT_TOOLKIT_DIR")
    return pathlib.Path(base) if base else user_cache_home() / "flyaot" / "toolkit"


def prepare_toolkit(linker: Linker, root: pathlib.Path = None) -> pathlib.Path:
    """Write `<root>/<linker digest>/llvm/bin/ld.lld` running `linker`; return that folder (FlyDSL's
    ROCM_PATH). One folder per linker, so processes that link with different linkers at the same time
    (an explicit FLYAOT_LLD beside the default) never rewrite each other's wrapper."""
    script = (f"#!/bin/sh\n{WRAPPER_MARK}\nexec " + " ".join(shlex.quote(c) for c in linker.command)
              + ' "$@"\n')
    root = pathlib.Path(root or default_toolkit_dir()) / hashlib.sha256(script.encode()).hexdigest()[:16]
    bindir = root / "llvm" / "bin"
    bindir.mkdir(parents=True, exist_ok=True)
    target = bindir / "ld.lld"
    if not target.exists() or target.read_text() != script:
        tmp = bindir / f".ld.lld.{os.getpid()}"
        tmp.write_text(script)
        tmp.chmod(0o755)
        os.replace(tmp, target)
    return root


def flydsl_env(toolkit: pathlib.Path, arch: str = targets.DEFAULT_TARGET) -> dict:
    """Environment for a compiling process: compile-only, for `arch`, our toolkit, no FlyDSL disk cache
    (FlyDSL's cache stores pickles; flyaot keeps its own content-addressed store). `arch` is a row's
    name, checked by the process that chose it (a compile worker gets the name, not the table)."""
    return {
        "COMPILE_ONLY": "1",
        "ARCH": arch,
        "FLYDSL_GPU_ARCH": arch,
        "ROCM_PATH": str(toolkit),
        "FLYDSL_RUNTIME_ENABLE_CACHE": "0",
    }


def setup_process_env(toolkit_root=None, arch: str = targets.DEFAULT_TARGET) -> Linker:
    """Find the linker, prepare the toolkit and export the FlyDSL variables for `arch` into os.environ."""
    linker = find_linker()
    root = prepare_toolkit(linker, toolkit_root)
    os.environ.update(flydsl_env(root, arch))
    return linker


def flydsl_version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("flydsl")
    except PackageNotFoundError:
        raise ToolchainError(f"FlyDSL is not installed: `python -m pip install 'flyaot[jit]'` installs FlyDSL "
                             f"{FLYDSL_VERSION} with the linker (ziglang) and numpy a build needs (in a checkout: "
                             "`python -m pip install -r requirements/build.txt`)") from None
