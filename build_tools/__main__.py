"""`python -m flyaot.build_tools`: build, merge, verify and list prebuilt stores."""
import argparse
import logging
import pathlib
import sys

from .. import prebuilt, targets
from ..formats import env

PACKAGE_DIR = pathlib.Path(prebuilt.__file__).parent     # one store per target: PACKAGE_DIR/<arch>/


def _cmd_build(a) -> int:
    from ..store.errors import StoreError
    from . import spec_list as sp
    from .build import build
    from .toolchain import ToolchainError
    try:
        arch = targets.get(a.target).arch
    except targets.UnknownTargetError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    a.out = a.out or str(PACKAGE_DIR / arch)
    out = pathlib.Path(a.out).resolve()
    if out == PACKAGE_DIR.resolve() or (out.parent == PACKAGE_DIR.resolve() and out.name != arch):
        print(f"error: --out {a.out}: the package keeps one store per target, in {PACKAGE_DIR / arch} for "
              f"{arch}", file=sys.stderr)
        return 2
    if (a.family or a.shard or a.from_misses) and out.parent == PACKAGE_DIR.resolve():
        print("error: a partial build (--family, --shard, --from-misses) would replace the package's full "
              f"prebuilt store of {arch}; give --out DIR", file=sys.stderr)
        return 2
    if pathlib.Path(a.out).exists() and not pathlib.Path(a.out).is_dir():
        print(f"error: --out {a.out} is not a directory; a store is written into a directory", file=sys.stderr)
        return 2
    try:
        if a.from_misses:
            specs = sp.specs_from_misses(a.from_misses, target=a.target)
        else:
            specs = sp.enumerate_specs(a.family or None, include_unshipped=a.include_unshipped, target=a.target)
        if a.shard:
            i, n = sp.parse_shard(a.shard)
            specs = sp.shard(specs, i, n)
        jobs = a.jobs if a.jobs is not None else env.value("FLYAOT_BUILD_JOBS")
        timeout = a.timeout if a.timeout is not None else env.value("FLYAOT_BUILD_TIMEOUT")
        report = build(specs, out=a.out, target=a.target, cache_dir=a.cache, jobs=jobs, timeout=timeout,
                       shard=f"{i}/{n}" if a.shard else None)
    except (ToolchainError, StoreError, ValueError, KeyError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for key, reason in sorted(report.failures.items()):
        print(f"FAILED {key}:\n  " + reason.replace("\n", "\n  "), file=sys.stderr)
    where = f" -> {a.out}" if not report.failures else " (store not written)"
    print(f"{report.summary} in {report.seconds:.1f}s{where}")
    return 1 if report.failures else 0


def _cmd_merge(a) -> int:
    from ..store.errors import StoreError
    from ..store.merge import merge
    try:
        m = merge(a.shards, a.out, force=a.force)
    except StoreError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"merged {len(a.shards)} shards: {len(m['specs'])} specs -> {a.out}")
    return 0


def _cmd_relayout(a) -> int:
    from ..store.errors import StoreError
    from ..store.write import relayout
    try:
        new = relayout(a.store)
    except StoreError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{a.store} -> {new}")
    return 0


def _cmd_verify(a) -> int:
    from ..store.index import target_dirs
    from .regate import verify
    stores = a.store or target_dirs(PACKAGE_DIR)
    if not stores:
        print(f"error: {PACKAGE_DIR} holds no store (one per target: <arch>/manifest.json); build it first",
              file=sys.stderr)
        return 2
    bad = 0
    for store in stores:
        problems = verify(store)
        for p in problems:
            print(p, file=sys.stderr)
        print(f"{store}: {'OK' if not problems else f'{len(problems)} problems'}")
        bad += bool(problems)
    return 1 if bad else 0


def _cmd_list(a) -> int:
    from . import spec_list as sp
    try:
        specs = sp.enumerate_specs(a.family or None, include_unshipped=a.include_unshipped, target=a.target)
    except (ValueError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for s in specs:
        print(s.key)
    return 0


def _cmd_matrix(a) -> int:
    from . import matrix
    if a.update:
        changed = matrix.update_readme(a.update)
        print(f"{a.update}: {'updated' if changed else 'already current'}")
    else:
        print(matrix.render())
    return 0


def main(argv=None) -> int:
    try:
        level = env.value("FLYAOT_LOG_LEVEL") or "INFO"
    except env.EnvError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    p = argparse.ArgumentParser(prog="python -m flyaot.build_tools", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="compile specs into a store (default: the package's prebuilt store)")
    b.add_argument("--family", action="append", help="only this family (repeatable); default: all shipped")
    b.add_argument("--include-unshipped", action="store_true", help="also test-only families")
    b.add_argument("--from-misses", metavar="FILE", help="build the specs a FLYAOT_RECORD_MISSES file names")
    b.add_argument("--target", default=targets.DEFAULT_TARGET, help=f"GPU target (default {targets.DEFAULT_TARGET}; "
                   f"known: {', '.join(sorted(targets.TARGETS))})")
    b.add_argument("--jobs", type=int, default=None, help="compile workers (default $FLYAOT_BUILD_JOBS, else one "
                   "per CPU core)")
    b.add_argument("--shard", metavar="i/n")
    b.add_argument("--out", default=None, help="store to write (default: the package's own for the target, "
                   "prebuilt/<arch>/, which only a full build may replace)")
    b.add_argument("--cache", default=None, help="build cache dir (default $FLYAOT_BUILD_CACHE or ~/.cache/flyaot)")
    b.add_argument("--timeout", type=float, default=None, help="seconds per spec (default $FLYAOT_BUILD_TIMEOUT, "
                   "else 120)")
    b.set_defaults(fn=_cmd_build)
    m = sub.add_parser("merge", help="join shard stores into one")
    m.add_argument("shards", nargs="+")
    m.add_argument("--out", required=True)
    m.add_argument("--force", action="store_true", help="replace a store holding specs the merge lacks, or "
                   "merge without all shards")
    m.set_defaults(fn=_cmd_merge)
    v = sub.add_parser("verify", help="re-hash and re-check stores (default: the package's, one per target)")
    v.add_argument("store", nargs="*")
    v.set_defaults(fn=_cmd_verify)
    r = sub.add_parser("relayout", help="turn a store of the schema-1 layout (DIR/manifest.json, DIR/<arch>/*.co) "
                       "into the store DIR/<arch>/ (same code objects and ids)")
    r.add_argument("store", nargs="?", default=str(PACKAGE_DIR))
    r.set_defaults(fn=_cmd_relayout)
    ls = sub.add_parser("list", help="list the specs a build would compile")
    ls.add_argument("--family", action="append")
    ls.add_argument("--include-unshipped", action="store_true")
    ls.add_argument("--target", default=targets.DEFAULT_TARGET)
    ls.set_defaults(fn=_cmd_list)
    mx = sub.add_parser("matrix", help="print (or --update README.md with) the supported matrix")
    mx.add_argument("--update", metavar="README")
    mx.set_defaults(fn=_cmd_matrix)
    a = p.parse_args(argv)
    return a.fn(a)


if __name__ == "__main__":
    sys.exit(main())
