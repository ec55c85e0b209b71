"""FLYAOT_LOG_LEVEL sets the library's `flyaot` logger, which otherwise gets no handler of its own."""
import json
import os
import subprocess
import sys

PROBE = ("import json, logging, flyaot; lg = logging.getLogger('flyaot'); "
         "logging.getLogger('flyaot.runtime.probe').debug('debug line'); "
         "print(json.dumps([lg.level, len(lg.handlers), lg.propagate]))")


def _run(**env):
    base = {k: v for k, v in os.environ.items() if k != "FLYAOT_LOG_LEVEL"}
    return subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env={**base, **env},
                          check=True)


def test_unset_attaches_nothing():
    out = _run()
    assert json.loads(out.stdout) == [0, 0, True]
    assert "debug line" not in out.stderr


def test_set_gives_the_library_logger_its_level_and_one_handler():
    out = _run(FLYAOT_LOG_LEVEL="debug")
    assert json.loads(out.stdout) == [10, 1, False]
    assert "DEBUG flyaot.runtime.probe: debug line" in out.stderr


def test_a_bad_level_is_reported_and_ignored():
    out = _run(FLYAOT_LOG_LEVEL="loud")
    assert json.loads(out.stdout) == [0, 0, True]
    assert "FLYAOT_LOG_LEVEL='loud': expected a logging level" in out.stderr
