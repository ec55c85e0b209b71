"""The runtime's commands of `flyaot` / `python -m flyaot` (env, alias collect-env; list, verify,
clear-cache); flyaot.cli adds the ops' ones."""
import argparse
import json
import logging
import platform
import sys


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


def _device_info(config) -> dict:
    import torch

    from . import drivers
    if not torch.cuda.is_available():
        try:
            target = drivers.get("emu").target(-1)
        except ImportError as e:     # no numpy: say so, the report is still wanted
            return {"driver": "emu", "device": f"cpu (emulator unavailable: {e})", "target": None}
        return {"driver": "emu", "device": f"cpu ({target} emulator)", "target": target}
    name = drivers.name_for(0, config.device)
    info = {"driver": name, "device": torch.cuda.get_device_name(0), "count": torch.cuda.device_count()}
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
    from .launchers import c_launcher_status
    variables = report()
    env = {
        "versions": _versions(),
        "device": _device_info(config),
        "c_launcher": c_launcher_status(),
        "stores": [{"kind": k, "path": str(r), "target": s.target if s else None,
                    "specs": len(s.by_key) if s else None, "error": err}
                   for k, r, s, err in _open_stores(config)],
        "env": {var.name: raw for var, raw, _ in variables},
        "env_invalid": {var.name: err for var, _, err in variables if err},
    }
    if a.json:
        print(json.dumps(env, indent=1))
        return 0
    for section, body in env.items():
        if section == "env_invalid":
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


def cmd_list(a, config) -> int:
    rows = []
    where = dict(w.split("=", 1) for w in a.where or [])
    for kind, root, store, err in _open_stores(config):
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
        print(json.dumps(rows, indent=1))
    else:
        for r in rows:
            print(f"{r['key']:60} {r['store']:8} {r['id']} {r['size']:7} B  vgpr {r['vgpr']} agpr {r['agpr']} "
                  f"sgpr {r['sgpr']} lds {r['lds']}")
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
    for line in report.problems:
        print(line)
    print(report.line(f", {report.loaded} loaded on {gpu.name} device 0" if gpu else " (no GPU load)"))
    return 1 if report.problems else 0


def cmd_clear_cache(a, config) -> int:
    from ..store.errors import StoreError
    from ..store.write import clear_cache
    root = config.cache_dir
    if not (root.exists() or root.is_symlink()):
        print(f"{root}: nothing to clear")
        return 0
    try:
        removed = clear_cache(root, timeout=config.jit_timeout)
    except StoreError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{root}: removed {removed} files")
    return 0


def main(argv=None, extra_commands=()) -> int:
    """The runtime's commands plus `extra_commands` [(name, help, configure(parser), fn(args, config))]
    that the rooms above it add (flyaot.cli passes the ops' selftest and bench)."""
    p = argparse.ArgumentParser(prog="flyaot", description="flyaot runtime tools")
    sub = p.add_subparsers(dest="cmd", required=True)
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
    v.set_defaults(fn=cmd_verify)
    for name, what, configure, fn in extra_commands:
        configure(sub.add_parser(name, help=what))
        sub.choices[name].set_defaults(fn=fn)
    c = sub.add_parser("clear-cache", help="delete the user cache's code objects and manifest")
    c.set_defaults(fn=cmd_clear_cache)
    a = p.parse_args(argv)
    from ..formats import env
    from .config import Config
    reporting = a.fn is cmd_env      # env lists unusable variables instead of stopping at one
    try:
        config = Config.from_env(lenient=reporting)
        level = env.value("FLYAOT_LOG_LEVEL")
    except env.EnvError as e:
        if not reporting:
            print(f"error: {e}", file=sys.stderr)
            return 2
        level = None
    logging.basicConfig(level=level or "WARNING", format="%(levelname)s %(name)s: %(message)s")
    return a.fn(a, config)
