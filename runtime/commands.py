"""The runtime's commands of `flyaot` / `python -m flyaot` (env, alias collect-env; list, verify,
clear-cache); flyaot.cli adds the ops' ones.

No command shows a user a traceback: a bad argument or setting is one `flyaot <verb>: error: ...` line
(exit 2), a failure of the work one such line naming the exception (exit 1; FLYAOT_LOG_LEVEL=DEBUG logs
the traceback), a closed output pipe (`flyaot env --json | head`) ends the command quietly."""
import argparse
import json
import logging
import os
import pathlib
import platform
import sys

log = logging.getLogger(__name__)


class UsageError(Exception):
    """A bad argument or setting: printed as one line, exit status 2 (as argparse's own)."""


def emit_json(obj) -> None:
    print(json.dumps(obj, indent=1))


def _versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    from .. import __version__
    out = {"flyaot": __version__, "python": platform.python_version()}
    for dist in ("torch", "flydsl", "triton"):
        try:
            out[dist] = version(dist)     # metadata only: never imports flydsl
        except PackageNotFoundError:
            out[dist] = None
    return out


def _torch_info() -> dict:
    """torch's build flavour: which GPU runtime (if any) this torch was compiled for."""
    try:
        import torch
    except ImportError as e:
        return {"build": f"not importable ({e})"}
    hip, cuda = getattr(torch.version, "hip", None), getattr(torch.version, "cuda", None)
    build = f"ROCm/HIP {hip}" if hip else f"CUDA {cuda}" if cuda else "CPU only"
    return {"version": torch.__version__, "build": build, "hip": hip, "cuda": cuda,
            "gpu_visible": bool(torch.cuda.is_available())}


def _hip_runtime_version():
    """The HIP runtime's own version (hipRuntimeGetVersion of the library a ROCm torch loads: its own copy
    first, else the system's), else None. Only asked of a ROCm torch."""
    import ctypes

    import torch
    if not getattr(torch.version, "hip", None):
        return None
    bundled = sorted(str(p) for p in (pathlib.Path(torch.__file__).parent / "lib").glob("libamdhip64.so*"))
    for name in bundled + ["libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6"]:
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        v = ctypes.c_int()
        if lib.hipRuntimeGetVersion(ctypes.byref(v)) == 0:
            # HIP_VERSION encoding: major * 10**7 + minor * 10**5 + patch
            return f"{v.value // 10**7}.{v.value // 10**5 % 100}.{v.value % 10**5}"
    return None


def _rocm_install_version():
    from ..formats import env
    for root in filter(None, (env.value("ROCM_PATH"), "/opt/rocm")):
        info = pathlib.Path(root) / ".info" / "version"
        if info.is_file():
            return f"{info.read_text().strip()} ({root})"
    return None


def machine_gpu_targets() -> list:
    """The AMD GPU targets the kernel driver (KFD) reports, whatever torch was built for: gfx_target_version
    90500 is gfx950 (major * 10000 + minor * 100 + stepping, the last two printed in hex)."""
    out = []
    for props in sorted(pathlib.Path("/sys/class/kfd/kfd/topology/nodes").glob("*/properties")):
        try:
            fields = dict(line.split(None, 1) for line in props.read_text().splitlines() if " " in line)
            v = int(fields.get("gfx_target_version", "0"))
        except (OSError, ValueError):
            continue
        if v:
            out.append(f"gfx{v // 10000}{v // 100 % 100:x}{v % 100:x}")
    return out


def torch_build_warnings(torch_info: dict, machine_targets: list, store_targets: list) -> list:
    """Why this torch cannot run the stores' code objects here, if it cannot (empty list otherwise)."""
    amd = sorted(set(machine_targets) & set(store_targets))
    if not amd or torch_info.get("hip"):
        return []
    what = f"a CUDA build (CUDA {torch_info['cuda']})" if torch_info.get("cuda") else "a CPU-only build"
    return [f"torch {torch_info.get('version')} is {what}, but this machine has {', '.join(amd)} GPUs, which the "
            "stores target: install torch's ROCm build first (README, Installing), else only the emulator runs"]


def _platform_info() -> dict:
    libc, libc_version = platform.libc_ver()
    return {"executable": sys.executable, "os": platform.platform(),
            "libc": f"{libc} {libc_version}" if libc else None, "hip_runtime": _hip_runtime_version(),
            "rocm": _rocm_install_version(), "amd_gpus (kfd)": ", ".join(machine_gpu_targets()) or None}


def _device_info(config) -> dict:
    import torch

    from . import drivers
    if not torch.cuda.is_available():
        try:
            target = drivers.get("emu").target(-1)
        except ImportError as e:     # no numpy: say so, the report is still wanted
            return {"driver": "emu", "device": f"cpu (emulator unavailable: {e})", "target": None}
        return {"driver": "emu", "device": f"cpu ({target} emulator)", "target": target}
    try:
        name = drivers.name_for(0, config.device)
    except ValueError as e:      # a FLYAOT_DEVICE that does not fit this machine
        name = f"- ({e})"
    info = {"driver": name, "device": torch.cuda.get_device_name(0), "count": torch.cuda.device_count()}
    if name.startswith("-"):
        return info
    try:
        info["target"] = drivers.get(name).target(0)
    except Exception as e:       # report, do not die: env is the command people run when things are broken
        info["target"] = f"unknown ({e})"
    return info


def _open_stores(config) -> list:
    """[(kind, root, Store or None, error or None)] for every store location, in precedence order."""
    from ..store.errors import StoreError
    from ..store.index import locations, open_location
    rows = []
    for loc in locations(config):
        try:
            rows.append((loc.kind, loc.root, open_location(loc), None))
        except StoreError as e:
            rows.append((loc.kind, loc.root, None, str(e)))
    return rows


def cmd_env(a, config) -> int:
    from ..formats.env import report
    from .config import Config
    from .launchers import c_launcher_status
    config = Config.from_env(lenient=True)        # an unusable variable is reported below, never fatal
    variables = report()
    stores = [{"kind": k, "path": str(r), "target": s.target if s else None,
               "specs": len(s.by_key) if s else None, "error": err}
              for k, r, s, err in _open_stores(config)]
    if not any(s["kind"] == "cache" for s in stores):     # none yet: where the JIT would put one per target
        from .. import __version__
        stores.append({"kind": "cache", "path": str(config.cache_dir / __version__ / "<arch>"), "target": None,
                       "specs": 0, "error": None})
    torch_info = _torch_info()
    env = {
        "versions": _versions(),
        "torch": torch_info,
        "platform": _platform_info(),
        "device": _device_info(config),
        "c_launcher": c_launcher_status(),
        "stores": stores,
        "env": {var.name: raw for var, raw, _ in variables},
        "env_invalid": {var.name: err for var, _, err in variables if err},
        "warnings": torch_build_warnings(torch_info, machine_gpu_targets(),
                                         [s["target"] for s in stores if s["target"]]),
    }
    if a.json:
        emit_json(env)
        return 0
    for section, body in env.items():
        if section == "env_invalid":
            continue
        if section == "warnings":
            for line in body:
                print(f"warning: {line}")
            continue
        if section == "env":      # every variable of the table; an unusable value marked, never fatal
            print("env:")
            for var, raw, err in variables:
                shown = f"- (default {var.default_text})" if raw is None else repr(raw)
                print(f"  {var.name:26} {shown}" + (f"  INVALID: {err}" if err else ""))
            continue
        if isinstance(body, list):
            print(f"{section}:")
            for row in body:
                state = (f"REFUSED: {row['error']}" if row["error"]
                         else f"{row['specs']} specs, target {row['target'] or '-'}")
                print(f"  {row['kind']:8} {row['path']}  ({state})")
        elif isinstance(body, dict):
            print(f"{section}:")
            for k, v in body.items():
                print(f"  {k:22} {v if v is not None else '-'}")
        else:
            print(f"{section}: {body}")
    return 0


LIST_COLUMNS = (("key", "<"), ("store", "<"), ("id", "<"), ("size", ">"), ("vgpr", ">"), ("agpr", ">"),
                ("sgpr", ">"), ("lds", ">"))


def cmd_list(a, config) -> int:
    rows = []
    bad = [w for w in a.where or [] if "=" not in w or not w.split("=", 1)[0]]
    if bad:
        raise UsageError(f"--where {bad[0]!r}: expected PARAM=VALUE (e.g. --where heads=64)")
    where = dict(w.split("=", 1) for w in a.where or [])
    opened = _open_stores(config)
    known = sorted({e["family"] for _, _, s, _ in opened if s for _, e in s.by_key.values()})
    for f in a.family or []:
        if f not in known:
            raise UsageError(f"unknown family {f!r} (families in the stores: {', '.join(known) or 'none'})")
    for kind, root, store, err in opened:
        if err:
            print(f"warning: {kind} store {root} refused: {err}", file=sys.stderr)
            continue
        if a.store and kind != a.store:
            continue
        for key, (sid, e) in sorted(store.by_key.items()):
            if a.family and e["family"] not in a.family:
                continue
            if any(str(e["params"].get(k)).lower() != v.lower() for k, v in where.items()):
                continue
            r = e["resources"]
            rows.append({"key": key, "id": sid, "store": kind, "size": e["size"], "vgpr": r.get("vgpr"),
                         "agpr": r.get("agpr"), "sgpr": r.get("sgpr"), "lds": r.get("lds")})
    if a.json:
        emit_json(rows)
        return 0
    names = [("size (B)" if c == "size" else c) for c, _ in LIST_COLUMNS]
    cells = [[("-" if r[c] is None else str(r[c])) for c, _ in LIST_COLUMNS] for r in rows]
    widths = [max(len(x) for x in col) for col in zip(names, *cells)]
    for line in [names] + cells:
        print("  ".join(f"{x:{al}{w}}" for x, w, (_, al) in zip(line, widths, LIST_COLUMNS)).rstrip())
    print(f"{len(rows)} specs")
    return 0


def cmd_verify(a, config) -> int:
    """The store checker over every store; with a GPU of a store's target, also load each code object."""
    from ..store import verify
    from ..store.index import locations
    from . import drivers, loader
    gpu = None
    if not a.no_load:
        import torch
        if torch.cuda.is_available():
            gpu = drivers.get(drivers.name_for(0, ""))

    def load(store, entry, data, layout) -> bool:
        if gpu.target(0) != store.target:
            return False
        gpu.unload(loader.load_checked(gpu, 0, store, entry, data, layout, prefer_c=False).module)
        return True

    report = verify.verify(locations(config), load=load if gpu else None)
    summary = report.line(f", {report.loaded} loaded on {gpu.name} device 0" if gpu else " (no GPU load)")
    if a.json:
        emit_json({"problems": list(report.problems), "loaded": report.loaded if gpu else None,
                   "summary": summary})
    else:
        for line in report.problems:
            print(line)
        print(summary)
    return 1 if report.problems else 0


def cmd_clear_cache(a, config) -> int:
    """Empty the user cache store of every target (and a cache of the schema-1 layout at its root)."""
    from ..store.errors import StoreError
    from ..store.index import old_cache_layout, target_dirs
    from ..store.write import clear_cache
    from .. import __version__
    if config.cache_dir.exists() and not config.cache_dir.is_dir():
        raise UsageError(f"the user cache {config.cache_dir} (FLYAOT_CACHE_DIR) is not a directory; nothing deleted")
    roots = target_dirs(config.cache_dir / __version__)
    if old_cache_layout(config.cache_dir):
        roots.insert(0, config.cache_dir)
    if not roots:
        if a.json:
            emit_json({"path": str(config.cache_dir), "removed": 0, "stores": []})
        else:
            print(f"{config.cache_dir}: nothing to clear")
        return 0
    done = []
    try:
        for root in roots:
            done.append({"path": str(root), "removed": clear_cache(root, timeout=config.jit_timeout)})
    except StoreError as e:
        raise UsageError(str(e)) from None
    if a.json:
        emit_json({"path": str(config.cache_dir), "removed": sum(d["removed"] for d in done), "stores": done})
    else:
        for d in done:
            print(f"{d['path']}: removed {d['removed']} files")
    return 0


def _quiet_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null so the interpreter's final flush stays silent."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def main(argv=None, extra_commands=()) -> int:
    """The runtime's commands plus `extra_commands` [(name, help, configure(parser), fn(args, config))]
    that the rooms above it add (flyaot.cli passes the ops' selftest, bench and model). A command's
    `fn` may raise UsageError for a bad argument; any other exception is reported in one line."""
    from .. import FLYDSL_VERSION, __version__
    p = argparse.ArgumentParser(prog="flyaot", description="flyaot runtime tools")
    p.add_argument("--version", action="version",
                   version=f"flyaot {__version__} (kernels compiled with FlyDSL {FLYDSL_VERSION})")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    # collect-env: the name bug-report templates ask for.
    e = sub.add_parser("env", aliases=["collect-env"], help="versions, device, target, stores, environment")
    e.add_argument("--json", action="store_true")
    e.set_defaults(fn=cmd_env)
    ls = sub.add_parser("list", help="specs in the stores")
    ls.add_argument("--family", action="append")
    ls.add_argument("--store", choices=("package", "extra", "pack", "cache"))
    ls.add_argument("--where", action="append", metavar="PARAM=VALUE", help="filter on a parameter (repeatable)")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(fn=cmd_list)
    v = sub.add_parser("verify", help="hash and cross-check every code object (and load it, with a GPU)")
    v.add_argument("--no-load", action="store_true", help="do not load code objects on the GPU")
    v.add_argument("--json", action="store_true")
    v.set_defaults(fn=cmd_verify)
    for name, what, configure, fn in extra_commands:
        configure(sub.add_parser(name, help=what))
        sub.choices[name].set_defaults(fn=fn)
    c = sub.add_parser("clear-cache", help="delete the user cache's code objects and manifest")
    c.add_argument("--json", action="store_true")
    c.set_defaults(fn=cmd_clear_cache)
    a = p.parse_args(argv)
    verb = f"flyaot {a.cmd}"
    from ..formats import env
    reporting = a.fn is cmd_env          # env lists unusable variables instead of stopping at one
    try:
        level = env.value("FLYAOT_LOG_LEVEL")
    except env.EnvError as err:
        if not reporting:
            print(f"{verb}: error: {err}", file=sys.stderr)
            return 2
        level = None
    logging.basicConfig(level=level or "WARNING", format="%(levelname)s %(name)s: %(message)s")
    try:
        if reporting:
            return cmd_env(a, None)          # reads its own settings, reporting the invalid ones
        from .config import Config
        try:
            config = Config.from_env()
        except env.EnvError as err:
            raise UsageError(str(err)) from None
        return a.fn(a, config)
    except UsageError as err:
        print(f"{verb}: error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        _quiet_stdout()
        return 141            # 128 + SIGPIPE, what a shell reports for a command its reader left
    except KeyboardInterrupt:
        print(f"{verb}: interrupted", file=sys.stderr)
        return 130
    except Exception as err:      # never a traceback at a user: one line, the traceback at DEBUG
        log.debug("%s failed", verb, exc_info=True)
        print(f"{verb}: error: {type(err).__name__}: {err} (FLYAOT_LOG_LEVEL=DEBUG logs the traceback)",
              file=sys.stderr)
        return 1
