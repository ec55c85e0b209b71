"""`flyaot model`: the modeled MI355X time of an op, through the real prebuilt
store, the emulator and its timing model."""
import os
import re
import subprocess
import sys

import pytest

from flyaot.emu.isa.gfx950 import timing as T


def test_modeled_time_of_a_gemm_says_it_is_a_model(tmp_path):
    pytest.importorskip("flydsl")
    p = subprocess.run([sys.executable, "-m", "flyaot", "model", "gemm", "1024", "3584", "1",
                        "--samples", "4"], capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, FLYAOT_CACHE_DIR=str(tmp_path), FLYAOT_DISABLE_JIT="1"))
    assert p.returncode == 0, p.stderr
    assert "MODEL estimate, not a measurement" in p.stdout
    assert "N=1024, K=3584, M=1" in p.stdout
    total = float(re.search(r"modeled MI355X time ([\d.]+) us", p.stdout).group(1))
    kernels = [float(x) for x in re.findall(r"\+ kernel \S+: ([\d.]+) us", p.stdout)]
    terms = [float(x) for x in re.findall(r"^  \+ .*: ([\d.]+) us", p.stdout, re.M)]
    launch = float(re.search(r"\+ launch overhead: ([\d.]+) us", p.stdout).group(1))
    assert kernels and all(k > 0 for k in kernels)
    assert launch == pytest.approx(T.LAUNCH_US, abs=0.005)
    assert total == pytest.approx(sum(terms), abs=0.02)       # every term of the total is printed
