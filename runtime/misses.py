"""What happens when no store has a spec: record it (FLYAOT_RECORD_MISSES, in `store.misses`' line
format), and say exactly how to get it built.
"""
import logging
import os
import threading

from ..store.misses import line as miss_line
from .errors import ArchMismatchError, MissingSpecError

log = logging.getLogger("flyaot.runtime")

BUILD_COMMAND = "python -m flyaot.build_tools build --from-misses {file} --out {out}"

_recorded = set()
_recorded_lock = threading.Lock()


def record(path: str, spec) -> bool:
    """Append the miss once per process; one O_APPEND write per line keeps lines whole across processes.
    False if the file cannot take it: a warning, never an error, so the miss's own error (and its build
    hint) is what the caller sees."""
    with _recorded_lock:
        if (path, spec.key) in _recorded:
            return True
    line = miss_line(spec).encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            if os.write(fd, line) != len(line):
                raise OSError(f"short write of {len(line)} bytes")
        finally:
            os.close(fd)
    except OSError as e:
        log.warning("flyaot: cannot record miss %s in %s (FLYAOT_RECORD_MISSES): %s", spec.key, path, e.strerror or e)
        return False
    with _recorded_lock:
        _recorded.add((path, spec.key))
    log.info("flyaot: recorded miss %s in %s", spec.key, path)
    return True


def missing_error(spec, index, reason: str, record_file: str, recorded: bool = True) -> MissingSpecError:
    """One error naming the spec, where we looked, the nearest prebuilt specs and the build command."""
    lines = [f"flyaot: no code object for {spec.key}."]
    searched = "; ".join(f"{s.label} ({len(s.by_key)} specs)" for s in index.stores)
    lines.append(f"  Searched: {searched}.")
    for loc, why in index.refused:
        lines.append(f"  Refused: {why}")
    other = index.same_spec_other_target(spec.family, spec.param_dict, spec.target)
    if other:
        lines.append(f"  The stores have it for {', '.join(other)}, but the current device is {spec.target}.")
    near = index.nearest(spec.family, spec.param_dict, spec.target)
    if near:
        lines.append(f"  Nearest prebuilt specs: {', '.join(near)}.")
    else:
        fams = index.families(spec.target)
        lines.append(f"  No {spec.family} spec exists for {spec.target}; families available: "
                     f"{', '.join(fams) if fams else 'none'}.")
    lines.append(f"  JIT fallback not taken: {reason}.")
    if record_file and recorded:
        lines.append(f"  It was recorded in {record_file} (FLYAOT_RECORD_MISSES). Build an add-on pack with:")
        lines.append("    " + BUILD_COMMAND.format(file=record_file, out="DIR"))
    else:
        if record_file:
            lines.append(f"  Recording it in {record_file} (FLYAOT_RECORD_MISSES) failed (see the warning).")
        lines.append("  Build an add-on pack with:")
        lines.append(f"    echo '{miss_line(spec).strip()}' >> flyaot-misses.jsonl")
        lines.append("    " + BUILD_COMMAND.format(file="flyaot-misses.jsonl", out="DIR"))
    lines.append("  then run with FLYAOT_PREBUILT_PATH=DIR.")
    return (ArchMismatchError if other else MissingSpecError)("\n".join(lines))
