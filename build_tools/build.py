"""One build: specs -> (cache hit | compile in workers) -> gates -> store."""
import logging
import pathlib
import time
from dataclasses import dataclass, field

from .. import TARGET, __version__
from ..formats import codeobject
from ..formats.manifest import empty_manifest
from ..kernel_defs import registry
from ..kernel_defs.registry import family_source_hash
from . import gates, pool, toolchain
from .store import BuildCache, make_entry, write_store

log = logging.getLogger("flyaot.build")


@dataclass
class BuildReport:
    built: int = 0
    cached: int = 0
    failures: dict = field(default_factory=dict)     # spec key -> reason
    seconds: float = 0.0
    manifest: dict = None

    @property
    def summary(self) -> str:
        return f"{self.built} built, {self.cached} cached, {len(self.failures)} failed"


def default_cache_dir() -> pathlib.Path:
    import os
    env = os.environ.get("FLYAOT_BUILD_CACHE")
    if env:
        return pathlib.Path(env)
    base = pathlib.Path(os.environ.get("XDG_CACHE_HOME", pathlib.Path.home() / ".cache"))
    return base / "flyaot" / "build-cache"


def spec_ids(specs, flydsl_version: str) -> dict:
    return {s.key: s.content_id(family_source_hash(s.family), flydsl_version) for s in specs}


def finish_entry(spec, spec_id: str, build: dict):
    """Gate one compiled spec; return (entry, None) or (None, reason)."""
    fam = registry.get_family(spec.family)
    params = spec.param_dict
    try:
        co = codeobject.parse(build["code_object"])
    except codeobject.CodeObjectError as e:
        return None, str(e)
    problems = gates.check(co, symbol=fam.symbol(params), block=tuple(fam.block(params)),
                           traced_block=tuple(build["block"]), arg_ctypes=tuple(build["arg_ctypes"]),
                           budget=fam.budget(params))
    if problems:
        return None, "refused by gates: " + "; ".join(problems)
    return make_entry(spec, spec_id, build, co), None


def build(specs, *, out, cache_dir=None, jobs=None, timeout=120.0) -> BuildReport:
    t0 = time.monotonic()
    linker = toolchain.find_linker()
    toolkit = toolchain.prepare_toolkit(linker)
    fv = toolchain.flydsl_version()
    ids = spec_ids(specs, fv)
    cache = BuildCache(cache_dir or default_cache_dir())
    report = BuildReport()
    entries, blobs, todo = {}, {}, []
    for s in specs:
        hit = cache.get(ids[s.key])
        if hit:
            entries[ids[s.key]], blobs[ids[s.key]] = hit
            report.cached += 1
        else:
            todo.append(s)
    log.info("%d specs: %d cached, %d to compile with %d workers (linker: %s, %s)",
             len(specs), report.cached, len(todo), jobs or pool.default_jobs(), linker.origin, linker.version)

    def on_result(outcome):
        sid = ids[outcome.spec.key]
        if not outcome.ok:
            report.failures[outcome.spec.key] = outcome.error.strip()
            return
        entry, reason = finish_entry(outcome.spec, sid, outcome.build)
        if reason:
            report.failures[outcome.spec.key] = reason
            return
        cache.put(entry, outcome.build["code_object"])
        entries[sid], blobs[sid] = entry, outcome.build["code_object"]
        report.built += 1

    pool.compile_all(todo, jobs=jobs or pool.default_jobs(), timeout=timeout, toolkit_root=str(toolkit),
                     on_result=on_result)
    if not report.failures:
        manifest = empty_manifest(flyaot_version=__version__, toolchain={"flydsl": fv, "lld": linker.version},
                                  target=TARGET)
        manifest["specs"] = dict(sorted(entries.items()))
        write_store(out, manifest, blobs)
        report.manifest = manifest
    report.seconds = time.monotonic() - t0
    return report
