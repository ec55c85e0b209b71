"""One build: specs -> (cache hit | compile in workers) -> gates -> store."""
import logging
import pathlib
import re
import time
from dataclasses import dataclass, field

from .. import FLYDSL_VERSION, __version__, targets
from ..formats import codeobject, env
from ..formats.manifest import empty_manifest
from ..kernel_defs import registry
from .flydsl_compile import KernelBuild
from ..kernel_defs.registry import family_source_hash
from . import gates, pool, toolchain
from ..store.write import write_store
from .build_cache import BuildCache, make_entry

log = logging.getLogger("flyaot.build")


@dataclass
class BuildReport:
    built: int = 0
    cached: int = 0
    failures: dict = field(default_factory=dict)     # spec key -> reason
    entries: dict = field(default_factory=dict)      # spec id -> manifest entry
    blobs: dict = field(default_factory=dict)        # spec id -> code object bytes
    toolchain: dict = None
    seconds: float = 0.0

    @property
    def summary(self) -> str:
        return f"{self.built} built, {self.cached} cached, {len(self.failures)} failed"


def default_build_cache_dir() -> pathlib.Path:
    chosen = env.value("FLYAOT_BUILD_CACHE")
    return pathlib.Path(chosen) if chosen else toolchain.user_cache_home() / "flyaot" / "build-cache"


def spec_ids(specs, flydsl_version: str) -> dict:
    return {s.key: s.content_id(family_source_hash(s.family), flydsl_version) for s in specs}


def finish_entry(spec, spec_id: str, kb: KernelBuild):
    """Gate one compiled (or cached) spec; return (entry, None) or (None, reason)."""
    fam = registry.get_family(spec.family)
    params = spec.param_dict
    try:
        co = codeobject.parse(kb.code_object)
    except codeobject.CodeObjectError as e:
        return None, str(e)
    declared = tuple(fam.abi(params))
    if tuple(zip(kb.arg_names, kb.arg_ctypes)) != declared:
        return None, (f"the launcher's signature {list(zip(kb.arg_names, kb.arg_ctypes))} differs from the "
                      f"kernel ABI the family declares {list(declared)}")
    row = targets.get(spec.target)
    problems = gates.check(co, target=row, symbol=fam.symbol(params), block=tuple(fam.block(params, row)),
                           traced_block=tuple(kb.block), arg_ctypes=tuple(kb.arg_ctypes), budget=fam.budget(params, row))
    if problems:
        return None, "refused by gates: " + "; ".join(problems)
    return make_entry(spec, spec_id, kb, co), None


def compile_specs(specs, *, cache_dir=None, jobs=None, timeout=120.0) -> BuildReport:
    """Every spec from the content-addressed cache or a compile worker, each gated; never raises for a
    failing spec (its reason lands in report.failures)."""
    t0 = time.monotonic()
    fv = toolchain.flydsl_version()
    if fv != FLYDSL_VERSION:
        raise toolchain.ToolchainError(f"FlyDSL {fv} is installed; flyaot {__version__} is built and tested "
                                       f"with FlyDSL {FLYDSL_VERSION} (`python -m pip install flydsl=={FLYDSL_VERSION}`)")
    linker = toolchain.find_linker()
    toolkit_base = toolchain.default_toolkit_dir()
    toolchain.prepare_toolkit(linker, toolkit_base)
    ids = spec_ids(specs, fv)
    # The linker is not part of a spec's content id (the runtime cannot know it), so it keys the cache.
    cache = BuildCache(pathlib.Path(cache_dir or default_build_cache_dir()) / re.sub(r"\W+", "-", linker.version))
    report = BuildReport(toolchain={"flydsl": fv, "lld": linker.version})

    def accept(spec, kb):
        sid = ids[spec.key]
        entry, reason = finish_entry(spec, sid, kb)
        if reason:
            report.failures[spec.key] = reason
            return False
        report.entries[sid], report.blobs[sid] = entry, kb.code_object
        return True

    todo = []
    for s in specs:
        hit = cache.get(ids[s.key])
        if hit and accept(s, KernelBuild.from_entry(*hit)):   # cached objects pass today's gates too
            report.cached += 1
        elif not hit:
            todo.append(s)
    jobs = jobs or pool.default_jobs()
    log.info("%d specs: %d cached, %d to compile with %d workers (linker: %s, %s)",
             len(specs), report.cached, len(todo), min(jobs, max(len(todo), 1)), linker.origin, linker.version)

    def on_result(outcome):
        if not outcome.ok:
            report.failures[outcome.spec.key] = outcome.error.strip()
        elif accept(outcome.spec, KernelBuild(**outcome.build)):
            cache.put(report.entries[ids[outcome.spec.key]], outcome.build["code_object"])
            report.built += 1

    pool.compile_all(todo, jobs=jobs, timeout=timeout, toolkit_root=str(toolkit_base), on_result=on_result)
    report.seconds = time.monotonic() - t0
    return report


def build(specs, *, out, target=targets.DEFAULT_TARGET, cache_dir=None, jobs=None, timeout=120.0,
          shard=None) -> BuildReport:
    """Compile `specs` (all for `target`) and, if none failed, make `out` a store of exactly them.
    `shard` ("i/n") is recorded in the manifest so a merge can tell which shards it lacks."""
    arch = targets.get(target).arch
    others = sorted({s.key for s in specs if s.target != arch})
    if others:
        raise ValueError(f"a store holds one target ({arch}); these specs are for others: {others[:3]}")
    report = compile_specs(specs, cache_dir=cache_dir, jobs=jobs, timeout=timeout)
    if not report.failures:
        manifest = empty_manifest(flyaot_version=__version__, toolchain=report.toolchain, target=arch)
        if shard:
            manifest["shard"] = shard
        manifest["specs"] = dict(sorted(report.entries.items()))
        write_store(out, manifest, report.blobs)
    return report
