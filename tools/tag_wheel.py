"""Give a freshly built wheel its manylinux platform tag, after auditwheel confirms it holds.

`pip wheel` tags a wheel with the build machine's bare `linux_x86_64`, which package indexes refuse.
The only host code in the wheel is the C launcher (libc and CPython's stable ABI), so the wheel can
carry a manylinux tag. The tag is manylinux_2_28: the policy torch's own Linux wheels carry, so no
machine that can install flyaot's one dependency is excluded by it. auditwheel reads the launcher's
symbol versions; the wheel is retagged only if its lowest policy is at or below the tag, and checked
again afterwards.

    python -m tools.tag_wheel dist/        # every flyaot-*-linux_*.whl in dist/
"""
import argparse
import pathlib
import re
import subprocess
import sys

PLATFORM_TAG = "manylinux_2_28_x86_64"

_POLICY = re.compile(r'consistent with the\s+following platform tag:\s+"(manylinux_(\d+)_(\d+)_x86_64)"')


def _glibc(tag: str) -> tuple:
    m = re.fullmatch(r"manylinux_(\d+)_(\d+)_x86_64", tag)
    if not m:
        raise ValueError(f"not a manylinux x86_64 tag: {tag}")
    return int(m.group(1)), int(m.group(2))


def lowest_policy(wheel: pathlib.Path) -> str:
    """The lowest manylinux policy auditwheel finds the wheel consistent with."""
    out = subprocess.run([sys.executable, "-m", "auditwheel", "show", str(wheel)],
                         capture_output=True, text=True)
    text = " ".join((out.stdout + out.stderr).split())
    m = _POLICY.search(text)
    if out.returncode != 0 or not m:
        raise SystemExit(f"auditwheel show {wheel.name} gave no manylinux policy:\n{out.stdout}{out.stderr}")
    return m.group(1)


def tag(wheel: pathlib.Path, platform_tag: str = PLATFORM_TAG) -> pathlib.Path:
    found = lowest_policy(wheel)
    if _glibc(found) > _glibc(platform_tag):
        raise SystemExit(f"{wheel.name} needs {found}, newer than the {platform_tag} it would be tagged with")
    subprocess.run([sys.executable, "-m", "wheel", "tags", "--platform-tag", platform_tag, "--remove", str(wheel)],
                   check=True, capture_output=True)
    new = wheel.with_name(wheel.name[:-len(".whl")].rsplit("-", 1)[0] + f"-{platform_tag}.whl")
    if not new.exists():
        raise SystemExit(f"`wheel tags` did not write {new.name}")
    lowest_policy(new)          # still consistent after retagging
    print(f"{new.name}: launcher satisfies {found}; tagged {platform_tag}")
    return new


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dist", type=pathlib.Path)
    a = ap.parse_args(argv)
    wheels = sorted(a.dist.glob("flyaot-*-linux_*.whl"))
    if not wheels:
        raise SystemExit(f"no flyaot-*-linux_*.whl in {a.dist}")
    for w in wheels:
        tag(w)
    return 0


if __name__ == "__main__":
    sys.exit(main())
