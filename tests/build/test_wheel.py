"""The wheel installs offline into a fresh venv that has torch but no flydsl, and lists every spec."""
import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import venv
import zipfile

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
STORE = REPO / "prebuilt" / "manifest.json"
# torch and the modules `import torch` pulls in; flydsl is deliberately absent.
TORCH_MODULES = ["torch", "torchgen", "functorch", "typing_extensions", "numpy", "sympy", "mpmath", "networkx",
                 "jinja2", "markupsafe", "filelock", "fsspec", "certifi"]


def _link_torch_only(dest: pathlib.Path) -> None:
    dest.mkdir()
    for name in TORCH_MODULES:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            continue
        src = pathlib.Path(spec.origin)
        src = src.parent if src.name == "__init__.py" else src
        (dest / src.name).symlink_to(src)
        if name == "numpy":     # numpy's vendored shared libraries live beside the package
            for libs in src.parent.glob("numpy.libs"):
                (dest / libs.name).symlink_to(libs)


@pytest.mark.slow
@pytest.mark.skipif(not STORE.exists(), reason="no prebuilt store: run `make prebuilt` (make test does)")
def test_offline_install_without_flydsl(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(dist), str(REPO)], check=True, timeout=600, cwd=tmp_path)
    wheels = list(dist.glob("flyaot-*.whl"))
    assert len(wheels) == 1
    with zipfile.ZipFile(wheels[0]) as whl:
        names = whl.namelist()
    # Developer tools and test-only families never ship; the emulator's ISA tables and the families do.
    assert [n for n in names if n.startswith("flyaot/tools/") or "gen_opcodes" in n] == []
    assert [n for n in names if "/probe/" in n or "emu_samples" in n or n.startswith("flyaot/tests/")] == []
    assert "flyaot/emu/isa/gfx950/opcodes.py" in names and "flyaot/kernel_defs/mqa_decode/kernel.py" in names

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    site = next((env_dir / "lib").glob("python3*/site-packages"))
    torch_only = tmp_path / "torch_only"
    _link_torch_only(torch_only)
    (site / "torch_only.pth").write_text(str(torch_only) + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-index", "--no-deps", "-q",
                    str(wheels[0])], check=True, timeout=600)

    clean_env = {k: v for k, v in os.environ.items() if not k.startswith(("FLYAOT_", "PYTHON"))}
    probe = subprocess.run([str(py), "-c", "import importlib.util as u; print(u.find_spec('flydsl'))"],
                           capture_output=True, text=True, env=clean_env, cwd=tmp_path, check=True)
    assert probe.stdout.strip() == "None"
    out = subprocess.run([str(py), "-m", "flyaot", "list"], capture_output=True, text=True, env=clean_env,
                         cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr
    manifest = json.loads(STORE.read_text())
    for entry in manifest["specs"].values():
        assert entry["key"] in out.stdout
