"""The worked add-on pack example (tests/packs/example): built into a wheel with the store inside,
installed with pip, found through its `flyaot.stores` entry point and serving launches."""
import os
import shutil
import subprocess
import sys

import pytest
from store_helpers import PROBE64, copy_store

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "packs", "example")

pytestmark = pytest.mark.slow


def test_the_example_pack_builds_installs_and_serves(probe_store, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(EXAMPLE, src)
    # what `build --family probe --out flyaot_pack_example` leaves beside the package's __init__.py
    shutil.copytree(copy_store(probe_store, tmp_path / "store"), src / "flyaot_pack_example", dirs_exist_ok=True)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(pip + ["wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "dist"), str(src)],
                   check=True, timeout=600, cwd=tmp_path)
    wheel, = (tmp_path / "dist").glob("flyaot_pack_example-1.0-*.whl")
    site = tmp_path / "site"
    subprocess.run(pip + ["install", "--no-deps", "--target", str(site), str(wheel)], check=True, timeout=600)
    assert (site / "flyaot_pack_example" / "manifest.json").is_file()

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
               FLYAOT_CACHE_DIR=str(tmp_path / "cache"), FLYAOT_DISABLE_JIT="1", FLYAOT_LOG_LEVEL="INFO")
    listed = subprocess.run([sys.executable, "-m", "flyaot", "list", "--store", "pack"], capture_output=True,
                            text=True, env=env, timeout=300)
    assert listed.returncode == 0 and PROBE64 in listed.stdout and listed.stdout.endswith("2 specs\n"), listed.stderr
    code = ("import torch\nfrom flyaot import runtime\nfrom flyaot.kernel_defs.probe import plan\n"
            "out = torch.zeros(6)\nruntime.launch(plan.plan(out, 4.0))\nassert out.tolist() == [5.0] * 6\n"
            "import sys; assert 'flyaot_pack_example' not in sys.modules\n")
    served = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert served.returncode == 0, served.stderr
    assert f"served by the pack store {site / 'flyaot_pack_example'}" in served.stderr, served.stderr
